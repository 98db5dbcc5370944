/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Neighbour resolution for the soft driver (see soft_neigh.h). Control
 * thread only. Every length in a received frame is checked against the
 * bytes actually there before it is used; every mbuf handed in is freed
 * exactly once, by input().
 */
#include "soft_neigh.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>

#include <rte_arp.h>
#include <rte_cycles.h>
#include <rte_ip.h>

#include "rdgram/log.h"
#include "rdgram/tsan.h"

namespace rdgram::soft {

namespace {

/* The entry's address as text, for the log. */
template <class E>
const char *ip_text(const E &e, char *buf, size_t n)
{
	if (e.v4)
		return inet_ntop(AF_INET, e.ip.raw + 12, buf, socklen_t(n));
	return inet_ntop(AF_INET6, e.ip.raw, buf, socklen_t(n));
}

constexpr uint32_t no_id = UINT32_MAX;
constexpr uint8_t nd_ns = 135, nd_na = 136;
constexpr uint8_t opt_slla = 1, opt_tlla = 2;
constexpr uint8_t na_solicited = 0x40, na_override = 0x20;
constexpr uint32_t l4_off = wire::eth_len + wire::ipv6_len; /* ICMPv6 message */
constexpr uint32_t nd_len = 24;                              /* NS/NA without options */
constexpr uint32_t nd_opt_len = 8;                           /* one link-layer address option */
constexpr uint32_t arp_frame_len = 60;                       /* 42, padded to Ethernet's minimum */

const uint8_t all_nodes[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};

bool is_zero16(const uint8_t *a)
{
	for (int i = 0; i < 16; i++)
		if (a[i] != 0)
			return false;
	return true;
}

/* ff02::1:ffXX:XXXX (RFC 4291 2.7.1). */
bool is_solicited_node(const uint8_t *a)
{
	static const uint8_t pfx[13] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff};
	return memcmp(a, pfx, 13) == 0;
}

/* Big-endian 16-bit one's complement sum (RFC 1071). */
uint64_t sum16(uint64_t s, const uint8_t *p, uint32_t n)
{
	uint32_t i = 0;
	for (; i + 1 < n; i += 2)
		s += uint32_t(p[i]) << 8 | p[i + 1];
	if (n & 1)
		s += uint32_t(p[n - 1]) << 8;
	return s;
}

} // namespace

const char *neigh_state_name(neigh_state s)
{
	switch (s) {
	case neigh_state::static_:
		return "static";
	case neigh_state::incomplete:
		return "incomplete";
	case neigh_state::reachable:
		return "reachable";
	case neigh_state::stale:
		return "stale";
	case neigh_state::failed:
		return "failed";
	}
	return "?";
}

rte_ether_addr solicited_node_mac(const uint8_t *t)
{
	return rte_ether_addr{{0x33, 0x33, 0xff, t[13], t[14], t[15]}};
}

void solicited_node_ip(const uint8_t *t, uint8_t *out)
{
	static const uint8_t pfx[13] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff};
	memcpy(out, pfx, 13);
	memcpy(out + 13, t + 13, 3);
}

uint16_t icmp6_checksum(const uint8_t *src, const uint8_t *dst, const uint8_t *msg, uint32_t len)
{
	/* Pseudo-header (RFC 8200 8.1): source, destination, upper-layer
	 * length (32 bits), three zero bytes, next header 58. */
	uint64_t s = sum16(0, src, 16);
	s = sum16(s, dst, 16);
	s += (len >> 16) + (len & 0xffff) + IPPROTO_ICMPV6;
	s = sum16(s, msg, len);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return uint16_t(~s);
}

void neigh_table::init(const neigh_params &p, const rte_ether_addr &own_mac, const std::vector<wire::gid> &own,
		       const std::vector<neighbour> &statics, rte_mempool *mp, rte_ring *tx,
		       ah_table<soft_av> *ahs)
{
	clear();
	p_ = p;
	const uint64_t per_ms = rte_get_tsc_hz() / 1000;
	ttl_tsc_ = per_ms * p.ttl_ms;
	retry_tsc_ = per_ms * p.retry_ms;
	hold_tsc_ = per_ms * p.fail_hold_ms;
	mac_ = own_mac;
	for (const auto &g : own) {
		if (g.is_v4_mapped())
			v4_.push_back(g.v4());
		else
			v6_.push_back(g);
	}
	mp_ = mp;
	tx_ = tx;
	ahs_ = ahs;
	map_.reserve(statics.size() + 64);
	for (const auto &n : statics) {
		uint32_t id;
		if (auto it = map_.find(n.ip); it != map_.end())
			id = it->second; /* a later line for the same address wins */
		else
			id = create(n.ip, neigh_state::static_);
		ents_[id].mac = n.mac;
	}
}

void neigh_table::clear()
{
	map_.clear();
	ents_.clear();
	free_ids_.clear();
	timers_ = {};
	slot_id_.clear();
	slot_pos_.clear();
	v4_.clear();
	v6_.clear();
	st_ = neigh_stats{};
}

uint32_t neigh_table::create(const wire::gid &ip, neigh_state s)
{
	uint32_t id;
	if (!free_ids_.empty()) {
		id = free_ids_.back();
		free_ids_.pop_back();
	} else {
		id = uint32_t(ents_.size());
		ents_.emplace_back();
		ents_[id].gen = 0;
	}
	entry &e = ents_[id];
	e.ip = ip;
	e.mac = rte_ether_addr{};
	e.state = s;
	e.v4 = ip.is_v4_mapped();
	e.retries_left = 0;
	e.confirmed_tsc = 0;
	e.next_retry_tsc = 0;
	e.queued_tsc = 0;
	e.slots.clear();
	map_.emplace(ip, id);
	return id;
}

void neigh_table::erase(uint32_t id)
{
	entry &e = ents_[id];
	map_.erase(e.ip);
	e.gen++; /* its heap items are dead now */
	e.queued_tsc = 0;
	e.slots.clear();
	e.slots.shrink_to_fit();
	free_ids_.push_back(id);
}

neigh_table::entry *neigh_table::find(const wire::gid &ip)
{
	auto it = map_.find(ip);
	return it == map_.end() ? nullptr : &ents_[it->second];
}

/* One deadline per entry (next_retry_tsc). The heap holds at most one live
 * item per entry plus superseded ones, which are skipped when popped: a
 * later deadline pushes nothing (the earlier item re-queues it when it
 * pops), an earlier one pushes a new item. */
void neigh_table::schedule(uint32_t id, uint64_t when)
{
	entry &e = ents_[id];
	e.next_retry_tsc = when;
	if (e.queued_tsc == 0 || when < e.queued_tsc) {
		timers_.push(timer{when, id, e.gen});
		e.queued_tsc = when;
	}
}

bool neigh_table::expire(uint64_t now)
{
	bool any = false;
	while (!timers_.empty() && timers_.top().when <= now) {
		const timer t = timers_.top();
		timers_.pop();
		entry &e = ents_[t.id];
		if (e.gen != t.gen || e.queued_tsc != t.when)
			continue; /* erased, or superseded by an earlier item */
		e.queued_tsc = 0;
		if (e.next_retry_tsc > now) {
			schedule(t.id, e.next_retry_tsc); /* deadline moved later */
			continue;
		}
		fire(t.id, now);
		any = true;
	}
	return any;
}

void neigh_table::fire(uint32_t id, uint64_t now)
{
	entry &e = ents_[id];
	switch (e.state) {
	case neigh_state::incomplete:
		if (e.retries_left > 0) {
			solicit(e);
			e.retries_left--;
			schedule(id, now + retry_tsc_);
		} else {
			e.state = neigh_state::failed;
			st_.timeouts++;
			if (telemetry::log_occurrence(st_.timeouts)) {
				char ip[INET6_ADDRSTRLEN];
				RDGRAM_LOG(soft, WARNING, "%s %s did not answer %u requests (neighbour timeouts so far: %lu)",
					   e.v4 ? "ARP:" : "ND:", ip_text(e, ip, sizeof(ip)), p_.retries + 1,
					   (unsigned long)st_.timeouts);
			}
			schedule(id, now + hold_tsc_);
		}
		break;
	case neigh_state::reachable:
		/* Nobody uses it: forget it rather than keep asking (prepare_ah
		 * resolves it again when it is wanted). */
		if (e.slots.empty()) {
			erase(id);
			break;
		}
		e.state = neigh_state::stale;
		e.retries_left = p_.retries;
		[[fallthrough]];
	case neigh_state::stale:
		if (e.slots.empty()) {
			erase(id);
		} else if (e.retries_left > 0) {
			solicit(e);
			e.retries_left--;
			schedule(id, now + retry_tsc_);
		} else {
			/* No answer: the old MAC may still be right (a busy or
			 * rate-limiting peer), and live AHs have nothing better. Keep
			 * it, try again after the hold time. */
			st_.refresh_failures++;
			if (telemetry::log_occurrence(st_.refresh_failures)) {
				char ip[INET6_ADDRSTRLEN];
				RDGRAM_LOG(soft, INFO, "%s %s stopped answering; its AHs keep the last MAC (refresh failures: %lu)",
					   e.v4 ? "ARP:" : "ND:", ip_text(e, ip, sizeof(ip)), (unsigned long)st_.refresh_failures);
			}
			e.retries_left = p_.retries;
			schedule(id, now + hold_tsc_);
		}
		break;
	case neigh_state::failed:
		erase(id); /* fail hold over: the next prepare_ah starts over */
		break;
	case neigh_state::static_:
		break;
	}
}

void neigh_table::start_resolution(entry &e, uint64_t now)
{
	e.state = neigh_state::incomplete;
	e.retries_left = p_.retries;
	solicit(e);
	e.retries_left--;
	schedule(uint32_t(&e - ents_.data()), now + retry_tsc_);
}

int neigh_table::prepare(const wire::gid &ip, uint64_t now)
{
	if (entry *e = find(ip)) {
		switch (e->state) {
		case neigh_state::static_:
		case neigh_state::reachable:
		case neigh_state::stale:
			return 0;
		case neigh_state::incomplete:
			return EINPROGRESS;
		case neigh_state::failed:
			if (now < e->next_retry_tsc)
				return ETIMEDOUT;
			start_resolution(*e, now); /* hold over: start over */
			return EINPROGRESS;
		}
	}
	if (!p_.resolve)
		return EHOSTUNREACH;
	if (ip.is_v4_mapped() ? v4_.empty() : v6_.empty())
		return EHOSTUNREACH; /* no source address to ask from */
	uint32_t id = create(ip, neigh_state::incomplete);
	start_resolution(ents_[id], now);
	return EINPROGRESS;
}

int neigh_table::usable(const wire::gid &ip, rte_ether_addr *mac, uint32_t *id) const
{
	auto it = map_.find(ip);
	if (it == map_.end())
		return EHOSTUNREACH;
	const entry &e = ents_[it->second];
	switch (e.state) {
	case neigh_state::static_:
	case neigh_state::reachable:
	case neigh_state::stale:
		*mac = e.mac;
		*id = it->second;
		return 0;
	case neigh_state::failed:
		return ETIMEDOUT;
	case neigh_state::incomplete:
		break;
	}
	return EHOSTUNREACH;
}

void neigh_table::add_ah(uint32_t id, uint32_t slot)
{
	if (slot >= slot_id_.size()) {
		size_t n = std::max<size_t>(slot + 1, ahs_ != nullptr ? ahs_->capacity() : 0);
		slot_id_.resize(n, no_id);
		slot_pos_.resize(n, 0);
	}
	entry &e = ents_[id];
	slot_id_[slot] = id;
	slot_pos_[slot] = uint32_t(e.slots.size());
	e.slots.push_back(slot);
}

void neigh_table::remove_ah(uint32_t slot)
{
	if (slot >= slot_id_.size() || slot_id_[slot] == no_id)
		return; /* multicast: no neighbour */
	entry &e = ents_[slot_id_[slot]];
	const uint32_t pos = slot_pos_[slot], last = e.slots.back();
	e.slots[pos] = last;
	slot_pos_[last] = pos;
	e.slots.pop_back();
	slot_id_[slot] = no_id;
}

bool neigh_table::info(const wire::gid &ip, neigh_info *out) const
{
	auto it = map_.find(ip);
	if (it == map_.end())
		return false;
	const entry &e = ents_[it->second];
	uint64_t left = 0;
	if (e.state == neigh_state::reachable) {
		const uint64_t due = e.confirmed_tsc + ttl_tsc_, now = rte_rdtsc();
		left = due > now ? (due - now) / (rte_get_tsc_hz() / 1000) : 0;
	}
	*out = neigh_info{e.state, e.mac, e.retries_left, uint32_t(e.slots.size()), left};
	return true;
}

void neigh_table::set_mac(entry &e, const rte_ether_addr &mac)
{
	st_.mac_changes++;
	if (telemetry::log_occurrence(st_.mac_changes)) { /* a flapping MAC must not flood the log */
		char ip[INET6_ADDRSTRLEN], was[RTE_ETHER_ADDR_FMT_SIZE], now[RTE_ETHER_ADDR_FMT_SIZE];
		rte_ether_format_addr(was, sizeof(was), &e.mac);
		rte_ether_format_addr(now, sizeof(now), &mac);
		RDGRAM_LOG(soft, INFO, "%s moved from %s to %s: %zu live AH(s) rewritten (MAC changes so far: %lu)",
			   ip_text(e, ip, sizeof(ip)), was, now, e.slots.size(), (unsigned long)st_.mac_changes);
	}
	e.mac = mac;
	/* The AV is live: poll threads may be copying it right now. Only the
	 * 8-byte MAC word changes, with one atomic store (set_av_mac), so a
	 * packet carries the old MAC or the new one, never a mix; nothing else
	 * in the AV moves and the handle stays valid. */
	for (uint32_t slot : e.slots) {
		ahs_->update(slot, [&](soft_av &av) { set_av_mac(av, mac); });
		st_.av_rewrites++;
	}
}

void neigh_table::confirm(uint32_t id, const rte_ether_addr &mac, uint64_t now, bool override, bool solicited)
{
	entry &e = ents_[id];
	if (e.state == neigh_state::static_) {
		st_.ignored++; /* configured: the network does not get a say */
		return;
	}
	const bool unresolved = e.state == neigh_state::incomplete || e.state == neigh_state::failed;
	if (unresolved) {
		e.mac = mac; /* no AV uses an unresolved entry */
		st_.resolved++;
	} else if (!rte_is_same_ether_addr(&e.mac, &mac)) {
		/* RFC 4861 7.2.5: without the Override flag an advertisement does
		 * not replace a known link-layer address. */
		if (!override) {
			st_.ignored++;
			return;
		}
		set_mac(e, mac);
	}
	/* An unsolicited advertisement updates the address but proves no
	 * reachability (RFC 4861 7.2.5): the TTL keeps running. */
	if (!solicited && !unresolved)
		return;
	e.state = neigh_state::reachable;
	e.confirmed_tsc = now;
	e.retries_left = 0;
	schedule(id, now + ttl_tsc_);
}

bool neigh_table::ours_v4(rte_be32_t a) const
{
	for (rte_be32_t x : v4_)
		if (x == a)
			return true;
	return false;
}

bool neigh_table::ours_v6(const uint8_t *a) const
{
	for (const auto &g : v6_)
		if (memcmp(g.raw, a, 16) == 0)
			return true;
	return false;
}

void neigh_table::bad(uint64_t neigh_stats::*reason)
{
	st_.*reason += 1;
	st_.bad_frames++;
}

void neigh_table::input(rte_mbuf *m, uint64_t now)
{
	/* The poll thread linearized it; a chain here means it could not. */
	const uint32_t len = rte_pktmbuf_data_len(m);
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	if (m->nb_segs != 1 || len < wire::eth_len) {
		bad(&neigh_stats::bad_short);
	} else {
		const auto *eth = reinterpret_cast<const rte_ether_hdr *>(f);
		if (rte_is_same_ether_addr(&eth->src_addr, &mac_))
			st_.ignored++; /* our own frame, looped back by the port */
		else if (eth->ether_type == RTE_BE16(RTE_ETHER_TYPE_ARP))
			arp_input(f, len, now);
		else if (eth->ether_type == RTE_BE16(RTE_ETHER_TYPE_IPV6))
			nd_input(f, len, now);
		else
			bad(&neigh_stats::bad_ip_header);
	}
	rte_pktmbuf_free(m);
}

/* RFC 826, "Packet Reception". */
void neigh_table::arp_input(const uint8_t *f, uint32_t len, uint64_t now)
{
	if (len < wire::eth_len + sizeof(rte_arp_hdr))
		return bad(&neigh_stats::bad_short);
	const auto *a = reinterpret_cast<const rte_arp_hdr *>(f + wire::eth_len);
	if (a->arp_hardware != RTE_BE16(RTE_ARP_HRD_ETHER) || a->arp_protocol != RTE_BE16(RTE_ETHER_TYPE_IPV4) ||
	    a->arp_hlen != RTE_ETHER_ADDR_LEN || a->arp_plen != 4)
		return bad(&neigh_stats::bad_arp_header);
	const uint16_t op = rte_be_to_cpu_16(a->arp_opcode);
	if (op != RTE_ARP_OP_REQUEST && op != RTE_ARP_OP_REPLY)
		return bad(&neigh_stats::bad_arp_op);
	const rte_ether_addr sha = a->arp_data.arp_sha;
	const rte_be32_t sip = a->arp_data.arp_sip, tip = a->arp_data.arp_tip;
	const wire::gid sg = wire::gid::from_v4(sip);
	if (!rte_is_unicast_ether_addr(&sha) || rte_is_zero_ether_addr(&sha) ||
	    (sip != 0 && (sg.is_multicast() || sip == RTE_BE32(0xffffffff))))
		return bad(&neigh_stats::bad_sender);
	if (ours_v4(sip)) {
		st_.ignored++; /* someone else claims our address: never an entry */
		return;
	}

	/* Merge: whatever the opcode, an existing entry for the sender learns
	 * its MAC. Only then is the target looked at. */
	bool merged = false;
	if (sip != 0) {
		if (auto it = map_.find(sg); it != map_.end()) {
			confirm(it->second, sha, now, true, true);
			merged = true;
		}
	}
	if (op == RTE_ARP_OP_REPLY) {
		st_.replies_received++;
		if (!merged)
			st_.ignored++; /* unsolicited: creates nothing */
		return;
	}
	if (!ours_v4(tip)) {
		if (!merged)
			st_.ignored++;
		return;
	}
	st_.requests_received++;
	/* The requester is about to talk to us: learn it (RFC 826). An ARP
	 * probe (sender 0.0.0.0, RFC 5227) has nothing to learn. */
	if (!merged && sip != 0 && p_.resolve && map_.size() < p_.max_learned) {
		uint32_t id = create(sg, neigh_state::reachable);
		ents_[id].mac = sha;
		ents_[id].confirmed_tsc = now;
		schedule(id, now + ttl_tsc_);
		st_.learned++;
	}
	if (send_arp(RTE_ARP_OP_REPLY, sha, sha, tip, sip))
		st_.replies_sent++;
}

/* RFC 4861 7.1 (validation), 7.2.3 (NS), 7.2.5 (NA). */
void neigh_table::nd_input(const uint8_t *f, uint32_t len, uint64_t now)
{
	if (len < l4_off)
		return bad(&neigh_stats::bad_short);
	const auto *ip = reinterpret_cast<const rte_ipv6_hdr *>(f + wire::eth_len);
	if ((f[wire::eth_len] >> 4) != 6 || ip->proto != IPPROTO_ICMPV6)
		return bad(&neigh_stats::bad_ip_header);
	const uint32_t pl = rte_be_to_cpu_16(ip->payload_len);
	if (pl < nd_len || l4_off + pl > len)
		return bad(&neigh_stats::bad_short);
	/* 255: the sender is on this link, no router forwarded it. */
	if (ip->hop_limits != 255)
		return bad(&neigh_stats::bad_hop_limit);
	const uint8_t *icmp = f + l4_off;
	if (icmp6_checksum(ip->src_addr, ip->dst_addr, icmp, pl) != 0)
		return bad(&neigh_stats::bad_checksum);
	const uint8_t type = icmp[0];
	if (icmp[1] != 0)
		return bad(&neigh_stats::bad_icmp_code);
	const uint8_t *target = icmp + 8;
	if (target[0] == 0xff)
		return bad(&neigh_stats::bad_target);
	/* Options: type, length in units of 8 bytes; 0 is invalid and one
	 * past the message end is a lie. */
	const uint8_t *lla = nullptr;
	const uint8_t want = type == nd_ns ? opt_slla : opt_tlla;
	for (uint32_t off = nd_len; off < pl;) {
		if (pl - off < 2)
			return bad(&neigh_stats::bad_option);
		const uint32_t olen = uint32_t(icmp[off + 1]) * 8;
		if (olen == 0 || olen > pl - off)
			return bad(&neigh_stats::bad_option);
		if (icmp[off] == want)
			lla = icmp + off + 2; /* olen >= 8: six bytes of MAC fit */
		off += olen;
	}
	rte_ether_addr mac{};
	if (lla != nullptr) {
		memcpy(mac.addr_bytes, lla, 6);
		if (!rte_is_unicast_ether_addr(&mac) || rte_is_zero_ether_addr(&mac))
			return bad(&neigh_stats::bad_sender);
	}
	const uint8_t *src = ip->src_addr, *dst = ip->dst_addr;
	const bool src_unspec = is_zero16(src);
	if (src[0] == 0xff)
		return bad(&neigh_stats::bad_sender);

	if (type == nd_ns) {
		/* DAD probe: to the solicited-node group, no source address
		 * option (7.1.1). */
		if (src_unspec && (!is_solicited_node(dst) || lla != nullptr))
			return bad(&neigh_stats::bad_target);
		if (!ours_v6(target)) {
			st_.ignored++;
			return;
		}
		if (ours_v6(src)) {
			st_.ignored++;
			return;
		}
		st_.requests_received++;
		if (src_unspec) {
			/* Someone's DAD for our address: defend it to all nodes. */
			static const rte_ether_addr all_nodes_mac{{0x33, 0x33, 0, 0, 0, 0x01}};
			if (send_na(target, all_nodes, all_nodes_mac, false))
				st_.replies_sent++;
			return;
		}
		rte_ether_addr to = reinterpret_cast<const rte_ether_hdr *>(f)->src_addr;
		if (lla != nullptr) {
			wire::gid sg;
			memcpy(sg.raw, src, 16);
			if (auto it = map_.find(sg); it != map_.end()) {
				confirm(it->second, mac, now, true, true);
			} else if (p_.resolve && map_.size() < p_.max_learned) {
				uint32_t id = create(sg, neigh_state::reachable);
				ents_[id].mac = mac;
				ents_[id].confirmed_tsc = now;
				schedule(id, now + ttl_tsc_);
				st_.learned++;
			}
			to = mac;
		}
		if (send_na(target, src, to, true))
			st_.replies_sent++;
		return;
	}
	if (type != nd_na) {
		bad(&neigh_stats::bad_ip_header); /* the poll thread sends only 135/136 */
		return;
	}
	const uint8_t flags = icmp[4];
	if (dst[0] == 0xff && (flags & na_solicited))
		return bad(&neigh_stats::bad_target); /* 7.1.2 */
	st_.replies_received++;
	wire::gid tg;
	memcpy(tg.raw, target, 16);
	auto it = ours_v6(target) ? map_.end() : map_.find(tg);
	if (it == map_.end()) {
		st_.ignored++; /* unsolicited, or a duplicate of our address */
		return;
	}
	const bool solicited = (flags & na_solicited) != 0;
	if (lla == nullptr) {
		/* 7.2.5: no address; it can only confirm the one we have. */
		const neigh_state s = ents_[it->second].state;
		if (solicited && (s == neigh_state::reachable || s == neigh_state::stale))
			confirm(it->second, ents_[it->second].mac, now, false, true);
		else
			st_.ignored++;
		return;
	}
	confirm(it->second, mac, now, (flags & na_override) != 0, solicited);
}

bool neigh_table::send(rte_mbuf *m)
{
	RDGRAM_TSAN_RELEASE(m);
	if (tx_ == nullptr || rte_ring_sp_enqueue(tx_, m) != 0) {
		rte_pktmbuf_free(m);
		st_.tx_failed++;
		return false;
	}
	return true;
}

bool neigh_table::solicit(const entry &e)
{
	bool ok;
	if (e.v4) {
		/* Broadcast, even for a refresh: a neighbour whose MAC changed no
		 * longer receives frames sent to the old one. */
		static const rte_ether_addr bcast{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
		ok = !v4_.empty() && send_arp(RTE_ARP_OP_REQUEST, bcast, rte_ether_addr{}, v4_[0], e.ip.v4());
	} else {
		ok = !v6_.empty() && send_ns(e.ip.raw, v6_[0].raw);
	}
	if (ok)
		st_.requests_sent++;
	else if (e.v4 ? v4_.empty() : v6_.empty())
		st_.tx_failed++;
	return ok;
}

bool neigh_table::send_arp(uint16_t op, const rte_ether_addr &eth_dst, const rte_ether_addr &tha, rte_be32_t spa,
			   rte_be32_t tpa)
{
	rte_mbuf *m = rte_pktmbuf_alloc(mp_);
	if (m == nullptr) {
		st_.tx_failed++;
		return false;
	}
	auto *f = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, arp_frame_len));
	memset(f, 0, arp_frame_len);
	auto *eth = reinterpret_cast<rte_ether_hdr *>(f);
	eth->dst_addr = eth_dst;
	eth->src_addr = mac_;
	eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_ARP);
	auto *a = reinterpret_cast<rte_arp_hdr *>(f + wire::eth_len);
	a->arp_hardware = RTE_BE16(RTE_ARP_HRD_ETHER);
	a->arp_protocol = RTE_BE16(RTE_ETHER_TYPE_IPV4);
	a->arp_hlen = RTE_ETHER_ADDR_LEN;
	a->arp_plen = 4;
	a->arp_opcode = rte_cpu_to_be_16(op);
	a->arp_data.arp_sha = mac_;
	a->arp_data.arp_sip = spa;
	a->arp_data.arp_tha = tha;
	a->arp_data.arp_tip = tpa;
	return send(m);
}

namespace {
/* Ethernet + IPv6 header of an ND message of icmp_len bytes; returns the
 * ICMPv6 message start. */
uint8_t *nd_headers(uint8_t *f, const rte_ether_addr &eth_dst, const rte_ether_addr &eth_src, const uint8_t *src,
		    const uint8_t *dst, uint32_t icmp_len)
{
	auto *eth = reinterpret_cast<rte_ether_hdr *>(f);
	eth->dst_addr = eth_dst;
	eth->src_addr = eth_src;
	eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV6);
	auto *ip = reinterpret_cast<rte_ipv6_hdr *>(f + wire::eth_len);
	ip->vtc_flow = RTE_BE32(0x60000000);
	ip->payload_len = rte_cpu_to_be_16(uint16_t(icmp_len));
	ip->proto = IPPROTO_ICMPV6;
	ip->hop_limits = 255;
	memcpy(ip->src_addr, src, 16);
	memcpy(ip->dst_addr, dst, 16);
	return f + l4_off;
}

void nd_finish(uint8_t *icmp, const uint8_t *src, const uint8_t *dst, uint32_t len)
{
	icmp[2] = icmp[3] = 0;
	const uint16_t c = icmp6_checksum(src, dst, icmp, len);
	icmp[2] = uint8_t(c >> 8);
	icmp[3] = uint8_t(c);
}
} // namespace

bool neigh_table::send_ns(const uint8_t *target, const uint8_t *src)
{
	rte_mbuf *m = rte_pktmbuf_alloc(mp_);
	if (m == nullptr) {
		st_.tx_failed++;
		return false;
	}
	const uint32_t ilen = nd_len + nd_opt_len;
	auto *f = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, uint16_t(l4_off + ilen)));
	uint8_t dst[16];
	solicited_node_ip(target, dst);
	uint8_t *icmp = nd_headers(f, solicited_node_mac(target), mac_, src, dst, ilen);
	memset(icmp, 0, ilen);
	icmp[0] = nd_ns;
	memcpy(icmp + 8, target, 16);
	icmp[24] = opt_slla;
	icmp[25] = 1;
	memcpy(icmp + 26, mac_.addr_bytes, 6);
	nd_finish(icmp, src, dst, ilen);
	return send(m);
}

bool neigh_table::send_na(const uint8_t *target, const uint8_t *dst, const rte_ether_addr &eth_dst, bool solicited)
{
	rte_mbuf *m = rte_pktmbuf_alloc(mp_);
	if (m == nullptr) {
		st_.tx_failed++;
		return false;
	}
	const uint32_t ilen = nd_len + nd_opt_len;
	auto *f = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, uint16_t(l4_off + ilen)));
	/* Source: the address asked about (one of ours). */
	uint8_t *icmp = nd_headers(f, eth_dst, mac_, target, dst, ilen);
	memset(icmp, 0, ilen);
	icmp[0] = nd_na;
	icmp[4] = uint8_t((solicited ? na_solicited : 0) | na_override);
	memcpy(icmp + 8, target, 16);
	icmp[24] = opt_tlla;
	icmp[25] = 1;
	memcpy(icmp + 26, mac_.addr_bytes, 6);
	nd_finish(icmp, target, dst, ilen);
	return send(m);
}

} // namespace rdgram::soft
