/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/soft neighbour resolution: ARP (RFC 826) for IPv4 and Neighbor
 * Discovery (RFC 4861) for IPv6, run entirely by the control thread.
 *
 * The table maps a destination GID (IPv4-mapped or IPv6) to a MAC. Static
 * entries (soft_config::neighbours) never change. Dynamic ones are created
 * by prepare_ah (a request goes out, the entry is incomplete until the
 * answer), or learned from a request aimed at one of our addresses (RFC 826:
 * the requester is about to talk to us). Every other frame only updates an
 * entry that already exists (RFC 826's merge), so unsolicited traffic cannot
 * fill the table. A reachable entry is re-resolved in the background when it
 * is neigh_ttl_ms old (UCX PRs 11772/11847: cached RoCE AHs went stale when
 * an IP moved to another MAC); meanwhile the old MAC stays in use, and when
 * the answer carries a new one every live AV using the entry is rewritten in
 * place with one atomic 8-byte store (set_av_mac): the handles stay valid.
 *
 * Frames in come from the poll threads over the device's slow-path ring;
 * frames out are allocated here (device mempool) and queued on queue 0's
 * control-TX ring, which that queue's poll thread sends. So resolution needs
 * queue 0 to be polled.
 *
 * Timers: one deadline per dynamic entry in a binary heap (lazy deletion),
 * lookups in a hash map: both O(log n) / O(1) at 100,000+ neighbours; no
 * periodic scan. (Control thread only: nothing here is thread safe.)
 */
#ifndef RDGRAM_SOFT_NEIGH_H
#define RDGRAM_SOFT_NEIGH_H

#include <cstdint>
#include <functional>
#include <queue>
#include <unordered_map>
#include <vector>

#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "rdgram/ah_table.h"
#include "rdgram/wire.h"
#include "soft_av.h"

namespace rdgram::soft {

/* A static neighbour: GID -> MAC. */
struct neighbour {
	wire::gid ip;
	rte_ether_addr mac;
};

enum class neigh_state : uint8_t {
	static_,    /* configured; never expires, never changes */
	incomplete, /* request sent, no answer yet: not usable */
	reachable,  /* answered less than neigh_ttl_ms ago */
	stale,      /* TTL expired: refresh in flight, old MAC still used */
	failed,     /* never answered; remembered for neigh_fail_hold_ms */
};
const char *neigh_state_name(neigh_state s);

/* Why a neighbour frame was refused (each counted, the mbuf freed). */
#define RDGRAM_NEIGH_BAD(X)                                                     \
	X(bad_short, "frame shorter than its headers or length fields say")      \
	X(bad_arp_header, "ARP htype/ptype/hlen/plen are not Ethernet/IPv4")     \
	X(bad_arp_op, "ARP opcode neither request (1) nor reply (2)")            \
	X(bad_sender, "sender MAC multicast or zero, or sender IP not unicast")  \
	X(bad_ip_header, "IPv6 version or next header wrong")                    \
	X(bad_hop_limit, "ND hop limit is not 255 (RFC 4861 7.1)")               \
	X(bad_checksum, "ICMPv6 checksum mismatch")                              \
	X(bad_icmp_code, "ICMPv6 code is not 0")                                 \
	X(bad_option, "ND option of length 0 or past the message end")           \
	X(bad_target, "ND target multicast, or flags/addresses RFC 4861 forbids")

struct neigh_stats {
	uint64_t requests_sent;     /* ARP requests and NS, retries included */
	uint64_t replies_sent;      /* ARP replies and NA, to requests for us */
	uint64_t requests_received; /* valid requests aimed at our addresses */
	uint64_t replies_received;  /* valid ARP replies and NA */
	uint64_t resolved;          /* incomplete/failed -> reachable */
	uint64_t timeouts;          /* incomplete -> failed: no answer */
	uint64_t mac_changes;       /* an answer moved an entry to a new MAC */
	uint64_t av_rewrites;       /* live AVs rewritten in place */
	uint64_t refresh_failures;  /* a stale entry's refresh got no answer */
	uint64_t learned;           /* entries created from requests for us */
	uint64_t ignored;           /* valid, but for nobody we know */
	uint64_t tx_failed;         /* no mbuf or control-TX ring full */
	uint64_t bad_frames;        /* sum of the reasons below */
#define X(name, desc) uint64_t name;
	RDGRAM_NEIGH_BAD(X)
#undef X

	/* Calls f(name, value) for every counter. */
	template <class F> void for_each(F &&f) const
	{
		f("requests_sent", requests_sent);
		f("replies_sent", replies_sent);
		f("requests_received", requests_received);
		f("replies_received", replies_received);
		f("resolved", resolved);
		f("timeouts", timeouts);
		f("mac_changes", mac_changes);
		f("av_rewrites", av_rewrites);
		f("refresh_failures", refresh_failures);
		f("learned", learned);
		f("ignored", ignored);
		f("tx_failed", tx_failed);
		f("bad_frames", bad_frames);
#define X(name, desc) f(#name, name);
		RDGRAM_NEIGH_BAD(X)
#undef X
	}
};

struct neigh_params {
	bool resolve = true;          /* dynamic ARP/ND; false: static only */
	uint32_t ttl_ms = 30000;      /* reachable lifetime before a refresh */
	uint32_t retry_ms = 100;      /* between requests */
	uint32_t retries = 3;         /* requests before giving up */
	uint32_t fail_hold_ms = 1000; /* a failure is remembered this long */
	/* Requests for us stop creating entries once the table holds this
	 * many (a flood of requesters cannot grow it without bound). */
	uint32_t max_learned = 1u << 20;
};

/* One entry as tests and tools see it. */
struct neigh_info {
	neigh_state state;
	rte_ether_addr mac;
	uint32_t retries_left;
	uint32_t nb_ahs; /* live AHs using this neighbour */
	/* reachable: ms until the entry goes stale and is re-resolved (0 when
	 * due); other states: 0. */
	uint64_t ttl_left_ms;
};

struct gid_hash {
	size_t operator()(const wire::gid &g) const
	{
		uint64_t a, b;
		__builtin_memcpy(&a, g.raw, 8);
		__builtin_memcpy(&b, g.raw + 8, 8);
		/* IPv4-mapped GIDs differ only in their last 4 bytes: mix both
		 * halves fully (murmur3's finalizer). */
		uint64_t h = a * 0x9e3779b97f4a7c15ull ^ b;
		h ^= h >> 33;
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 33;
		h *= 0xc4ceb9fe1a85ec53ull;
		h ^= h >> 33;
		return size_t(h);
	}
};

class neigh_table {
public:
	neigh_table() = default;
	neigh_table(const neigh_table &) = delete;
	neigh_table &operator=(const neigh_table &) = delete;

	/* own: the port's GID table (sources of requests, targets we answer
	 * for); statics: never-expiring entries; mp: where frames come from;
	 * tx: queue 0's control-TX ring; ahs: the AV table to rewrite. */
	void init(const neigh_params &p, const rte_ether_addr &own_mac, const std::vector<wire::gid> &own,
		  const std::vector<neighbour> &statics, rte_mempool *mp, rte_ring *tx, ah_table<soft_av> *ahs);
	void clear();

	/* device::prepare_ah for a unicast destination: 0, EINPROGRESS,
	 * ETIMEDOUT or EHOSTUNREACH. May create an entry and send a request. */
	int prepare(const wire::gid &ip, uint64_t now);
	/* For create_ah: 0 with the MAC and the entry id to pass to add_ah;
	 * EHOSTUNREACH (absent or incomplete), ETIMEDOUT (failed). */
	int usable(const wire::gid &ip, rte_ether_addr *mac, uint32_t *id) const;
	/* A live AV in slot now uses entry id / the AH in slot is gone. */
	void add_ah(uint32_t id, uint32_t slot);
	void remove_ah(uint32_t slot);

	/* Consumes one ARP/ND frame (frees m). */
	void input(rte_mbuf *m, uint64_t now);
	/* Runs due timers: retransmits, timeouts, TTL refreshes, expiry.
	 * Returns true when any fired. */
	bool expire(uint64_t now);

	bool info(const wire::gid &ip, neigh_info *out) const;
	const neigh_stats &stats() const { return st_; }
	size_t size() const { return map_.size(); }

private:
	struct entry {
		wire::gid ip;
		rte_ether_addr mac;
		neigh_state state;
		bool v4;
		uint32_t gen;          /* bumped when the id is freed: timer check */
		uint32_t retries_left; /* requests still to send in this round */
		uint64_t confirmed_tsc;
		uint64_t next_retry_tsc; /* the entry's timer: next action due */
		uint64_t queued_tsc;     /* deadline of its heap item; 0: none */
		std::vector<uint32_t> slots; /* live AH slots with this MAC */
	};
	struct timer {
		uint64_t when;
		uint32_t id, gen;
		bool operator>(const timer &o) const { return when > o.when; }
	};

	uint32_t create(const wire::gid &ip, neigh_state s);
	void erase(uint32_t id);
	void schedule(uint32_t id, uint64_t when);
	void fire(uint32_t id, uint64_t now);
	void start_resolution(entry &e, uint64_t now);
	/* An answer (or other proof) says ip is at mac. */
	void confirm(uint32_t id, const rte_ether_addr &mac, uint64_t now, bool override, bool solicited);
	void set_mac(entry &e, const rte_ether_addr &mac);
	entry *find(const wire::gid &ip);
	bool ours_v4(rte_be32_t a) const;
	bool ours_v6(const uint8_t *a) const;
	void bad(uint64_t neigh_stats::*reason);

	void arp_input(const uint8_t *f, uint32_t len, uint64_t now);
	void nd_input(const uint8_t *f, uint32_t len, uint64_t now);
	bool solicit(const entry &e);
	bool send_arp(uint16_t op, const rte_ether_addr &eth_dst, const rte_ether_addr &tha, rte_be32_t spa,
		      rte_be32_t tpa);
	bool send_ns(const uint8_t *target, const uint8_t *src);
	bool send_na(const uint8_t *target, const uint8_t *dst, const rte_ether_addr &eth_dst, bool solicited);
	bool send(rte_mbuf *m);

	neigh_params p_{};
	uint64_t ttl_tsc_ = 0, retry_tsc_ = 0, hold_tsc_ = 0;
	rte_ether_addr mac_{};
	std::vector<rte_be32_t> v4_;
	std::vector<wire::gid> v6_;
	rte_mempool *mp_ = nullptr;
	rte_ring *tx_ = nullptr;
	ah_table<soft_av> *ahs_ = nullptr;

	std::unordered_map<wire::gid, uint32_t, gid_hash> map_;
	std::vector<entry> ents_;
	std::vector<uint32_t> free_ids_;
	std::priority_queue<timer, std::vector<timer>, std::greater<timer>> timers_;
	/* AH slot -> (entry id, index in its slots), for O(1) removal. */
	std::vector<uint32_t> slot_id_, slot_pos_;
	neigh_stats st_{};
};

/* Ethernet and IPv6 solicited-node multicast addresses of an IPv6 target
 * (RFC 4291 2.7.1, RFC 2464 7). */
rte_ether_addr solicited_node_mac(const uint8_t *target);
void solicited_node_ip(const uint8_t *target, uint8_t *out);
/* The ICMPv6 checksum (RFC 4443 2.3) over the IPv6 pseudo-header and len
 * bytes of message; 0 when a message with a correct checksum is verified. */
uint16_t icmp6_checksum(const uint8_t *src, const uint8_t *dst, const uint8_t *msg, uint32_t len);

} // namespace rdgram::soft

#endif
