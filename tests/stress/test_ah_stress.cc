/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * AH churn under load. Two poll threads (the two EAL lcores, one soft_queue
 * each) send to 100,000 IPv4 multicast destinations through the dest_cache
 * while the control thread, as a control_thread poller, creates, evicts and
 * destroys AHs without pause: an ah_registry of 8,192 entries in front of
 * the soft device, so nearly every creation evicts (destroys) another AH,
 * plus a periodic trim that destroys all of them at once.
 *
 * The test must prove that no message ever leaves with a freed or recycled
 * AV. Evicted keys stay in the dest_cache for a while (erase_lag evictions)
 * so that poll threads keep looking up and sending with their stale handles
 * while the slots behind them are recycled for other destinations: exactly
 * what the AH table's generations and QSBR-deferred slot reuse must catch.
 * Every payload carries a canary (its destination index, sender and
 * sequence) and the receive side parses every frame: the Ethernet, IPv4
 * and UDP headers must be the destination's own AV (multicast MAC and group
 * address derived independently here, and byte for byte the AV the driver
 * builds for that destination), the BTH/DETH the sender's, the ICRC valid,
 * and sequences and PSNs in order with nothing lost: every gap in a
 * sender's sequence is one counted stale-AH drop. A frame built from the
 * wrong AV fails the test. On the control side, evictions arrive through
 * the registry's eviction hook and are checked against a mirror of its LRU
 * order; every evicted handle must be dead at once, every new AV its
 * destination's, and registry, device and dest_cache sizes must agree.
 *
 * Also: the "AH storm" (100,000 AH creations through the control thread in
 * batches, then destroyed) and a check that the receive-side checker itself
 * rejects a frame whose AV belongs to another destination.
 *
 * Duration: 4 s (5 s under ThreadSanitizer, whose build ./build.sh runs
 * this in: suite 'concurrency'; the registry is smaller there, see
 * reg_capacity); RDGRAM_STRESS_SECONDS overrides it.
 */
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_launch.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "accounting.h"
#include "eal_env.h"
#include "rdgram/ah_registry.h"
#include "rdgram/dest_cache.h"
#include "rdgram/tsan.h"
#include "tsan_skip.h"

#if defined(__SANITIZE_THREAD__)
#define STRESS_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STRESS_UNDER_TSAN 1
#endif
#endif
#ifndef STRESS_UNDER_TSAN
#define STRESS_UNDER_TSAN 0
#endif

using namespace rdgram;
using namespace rdgram::test;

namespace {

constexpr bool under_tsan = STRESS_UNDER_TSAN;
constexpr uint32_t n_dest = 100000;
/* ThreadSanitizer runs the control thread some 20-40x slower: a smaller
 * registry there, so that it still fills and evicts in LRU order many times
 * over (not only at the trims). */
constexpr uint32_t reg_capacity = under_tsan ? 1024 : 8192;
/* Room for the slots of destroyed AHs that wait for their grace period. A
 * poll thread the OS keeps off its CPU for long holds every slot retired
 * since; the device may then still say ENOMEM (legitimate, counted). */
constexpr uint32_t device_max_ah = 4 * reg_capacity;
/* Destinations the poll threads favour and the control thread churns: fewer
 * than the registry holds, so most of their lookups hit. The window slides
 * over all 100,000 as the control thread works. */
constexpr uint32_t window = reg_capacity * 3 / 4;
/* Evictions an evicted key stays in the dest_cache (stale handle) before the
 * control thread erases it. */
constexpr uint32_t erase_lag = reg_capacity / 8;
/* Per control-poller call: misses served, window operations. */
constexpr unsigned misses_per_call = 32, churn_per_call = 64;
/* dest_cache capacity: every live key plus the lagging stale ones (erase_lag
 * plus what one poller call evicts before it erases), and at least 4,096 so
 * that its table (8,192 buckets) is past dest_cache's small-table cut-off
 * and lookup_bulk takes its pipelined path. */
constexpr uint32_t dc_capacity = std::max(reg_capacity + erase_lag + misses_per_call + churn_per_call, 4096u);
constexpr unsigned burst = 32;
constexpr unsigned max_miss_posts = 4; /* misses a poll thread reports per burst */
constexpr uint32_t remote_qpn = 0x400;
constexpr uint32_t qkey = 0x11223344;
constexpr uint32_t local_qpn[2] = {0x300, 0x301};
constexpr uint32_t none = UINT32_MAX;

double run_seconds()
{
	if (const char *s = getenv("RDGRAM_STRESS_SECONDS"); s != nullptr && atof(s) > 0)
		return atof(s);
	return under_tsan ? 5.0 : 4.0;
}

/* Destination d: IPv4 group 239.(d >> 16).(d >> 8).d, so every destination
 * has its own address and its own multicast MAC (d < 2^23). */
wire::gid group_of(uint32_t d)
{
	const rte_be32_t a = rte_cpu_to_be_32(239u << 24 | (d & 0xffffff));
	return wire::gid::from_v4(a);
}
/* RFC 1112 6.4, written out here rather than taken from the driver. */
void group_mac(uint32_t d, uint8_t out[6])
{
	const uint8_t m[6] = {0x01, 0x00, 0x5e, uint8_t((d >> 16) & 0x7f), uint8_t(d >> 8), uint8_t(d)};
	memcpy(out, m, 6);
}
ibv_ah_attr attr_of(uint32_t d) { return soft_pair::attr_to(group_of(d)); }

/* What every payload carries: which destination the sender meant, who sent
 * it and in what order, and (for diagnostics) the handle it used. */
struct canary {
	uint32_t dest;
	uint32_t sender;
	uint64_t seq;
	uint32_t slot;
	uint32_t gen;
};
static_assert(sizeof(canary) == 24);
constexpr uint32_t frame_len = uint32_t(wire::hdr_len_v4) + sizeof(canary) + wire::icrc_len; /* 90 */
static_assert(wire::pad_for(sizeof(canary)) == 0);

uint64_t xorshift(uint64_t &s)
{
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return s;
}

/* A soft device on a net_ring port with nq queues; queue q's frames land in
 * ring tx[q], which the test drains itself. */
struct ring_port {
	rte_ring *tx[2]{};
	rte_ring *rx[2]{};
	uint16_t port = 0;
	bool have_port = false;
	soft::soft_device dev;
	bool ok = false;

	ring_port(uint16_t nq, uint32_t max_ah, uint32_t nb_mbufs, unsigned ring_size)
	{
		static std::atomic<unsigned> seq{0};
		const unsigned id = seq.fetch_add(1);
		char name[32];
		for (uint16_t i = 0; i < nq; i++) {
			snprintf(name, sizeof(name), "ahs%u_t%u", id, i);
			tx[i] = rte_ring_create(name, ring_size, SOCKET_ID_ANY, 0);
			snprintf(name, sizeof(name), "ahs%u_r%u", id, i);
			rx[i] = rte_ring_create(name, 64, SOCKET_ID_ANY, 0);
			if (tx[i] == nullptr || rx[i] == nullptr) {
				ADD_FAILURE() << "ring: " << rte_strerror(rte_errno);
				return;
			}
		}
		snprintf(name, sizeof(name), "net_ahs%u", id);
		int p = rte_eth_from_rings(name, rx, nq, tx, nq, 0);
		if (p < 0) {
			ADD_FAILURE() << "rte_eth_from_rings: " << rte_strerror(rte_errno);
			return;
		}
		port = uint16_t(p);
		have_port = true;
		soft::soft_config c;
		c.port_id = port;
		c.set_mac = true;
		c.mac = mac("02:00:00:00:a5:01");
		c.addresses = {ip_of("10.9.0.1")};
		c.mtu = 1024;
		c.max_ah = max_ah;
		c.nb_mbufs = nb_mbufs;
		c.nb_queues = nq;
		c.qsbr = g_rt->qsbr();
		if (dev.open(c) != 0) {
			ADD_FAILURE() << dev.error();
			return;
		}
		ok = true;
	}
	~ring_port()
	{
		dev.close();
		if (have_port)
			rte_eth_dev_close(port);
		for (int i = 0; i < 2; i++) {
			rte_ring_free(tx[i]);
			rte_ring_free(rx[i]);
		}
	}
	unsigned in_use() const { return rte_mempool_in_use_count(dev.mempool()); }
};

/* The AV the driver builds for each destination (its header template),
 * computed once: what the wire must show for a frame to destination d. */
std::vector<soft::soft_av> expected_avs(const soft::soft_device &dev)
{
	std::vector<soft::soft_av> v(n_dest);
	for (uint32_t d = 0; d < n_dest; d++) {
		int rc = dev.build_av(attr_of(d), v[d]);
		EXPECT_EQ(rc, 0) << d;
	}
	return v;
}

/* Receive side for the frames of one sender (one tx ring): parses and
 * checks every frame. Owned by one thread at a time. */
struct rx_checker {
	const std::vector<soft::soft_av> *expected = nullptr;
	uint32_t sender = 0;
	uint64_t received = 0;
	uint64_t next_seq = 0;   /* lowest sequence number not seen yet */
	uint64_t gaps = 0;       /* sequence numbers skipped: stale-AH drops */
	uint32_t next_psn = 0;
	uint64_t bad_len = 0, bad_canary = 0, bad_mac = 0, bad_ip = 0, bad_av = 0, bad_transport = 0,
		 bad_icrc = 0, out_of_order = 0;
	std::vector<uint8_t> seen; /* per destination: received at least once */
	std::string first_bad;

	rx_checker(const std::vector<soft::soft_av> *e, uint32_t s) : expected(e), sender(s), seen(n_dest, 0) {}

	uint64_t mismatches() const
	{
		return bad_len + bad_canary + bad_mac + bad_ip + bad_av + bad_transport + bad_icrc + out_of_order;
	}
	void note(const char *what, const canary &c, const uint8_t *f)
	{
		if (!first_bad.empty())
			return;
		char b[256];
		snprintf(b, sizeof(b),
			 "%s: sender %u seq %" PRIu64 " dest %u (handle %u/%u), wire dst %u.%u.%u.%u "
			 "mac %02x:%02x:%02x:%02x:%02x:%02x",
			 what, c.sender, c.seq, c.dest, c.slot, c.gen, f[30], f[31], f[32], f[33], f[0], f[1], f[2],
			 f[3], f[4], f[5]);
		first_bad = b;
	}

	/* Checks one frame; returns true when it is what its canary says. */
	bool check(rte_mbuf *m)
	{
		received++;
		if (m->nb_segs != 1 || rte_pktmbuf_data_len(m) != frame_len || rte_pktmbuf_pkt_len(m) != frame_len) {
			bad_len++;
			if (first_bad.empty())
				first_bad = "frame length " + std::to_string(rte_pktmbuf_pkt_len(m));
			return false;
		}
		uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
		canary c;
		memcpy(&c, f + wire::hdr_len_v4, sizeof(c));
		if (c.dest >= n_dest || c.sender != sender) {
			bad_canary++;
			note("canary", c, f);
			return false;
		}
		bool ok = true;
		/* Sequence: increasing per sender (one queue, one ring: FIFO); a gap
		 * is a WR the driver accepted and dropped as stale. */
		if (c.seq < next_seq) {
			out_of_order++;
			note("sequence went back", c, f);
			ok = false;
		} else {
			gaps += c.seq - next_seq;
			next_seq = c.seq + 1;
		}
		/* The destination's own address, derived here from the canary. */
		uint8_t want_mac[6];
		group_mac(c.dest, want_mac);
		if (memcmp(f, want_mac, 6) != 0) {
			bad_mac++;
			note("destination MAC is not the canary's group", c, f);
			ok = false;
		}
		const rte_be32_t want_ip = group_of(c.dest).v4();
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(f + wire::eth_len);
		if (ip->dst_addr != want_ip) {
			bad_ip++;
			note("destination IP is not the canary's group", c, f);
			ok = false;
		}
		/* The whole address part, byte for byte the destination's AV but
		 * for the per-packet lengths and checksum, which must be right. */
		uint8_t hdr[wire::addr_len_v4];
		memcpy(hdr, (*expected)[c.dest].hdr, sizeof(hdr));
		auto *hip = reinterpret_cast<rte_ipv4_hdr *>(hdr + wire::eth_len);
		auto *hudp = reinterpret_cast<rte_udp_hdr *>(hip + 1);
		hip->total_length = rte_cpu_to_be_16(uint16_t(frame_len - wire::eth_len));
		hip->hdr_checksum = ip->hdr_checksum;
		hudp->dgram_len = rte_cpu_to_be_16(uint16_t(frame_len - wire::eth_len - wire::ipv4_len));
		if (memcmp(f, hdr, sizeof(hdr)) != 0 || rte_ipv4_cksum(ip) != 0) {
			bad_av++;
			note("address headers are not the canary's AV", c, f);
			ok = false;
		}
		/* Transport: the sender's QP, the remote QP and Q_Key, and PSNs
		 * consecutive (a stale drop consumes no PSN). */
		auto *bth = reinterpret_cast<const wire::bth *>(f + wire::addr_len_v4);
		auto *deth = reinterpret_cast<const wire::deth *>(bth + 1);
		if (bth->opcode != wire::op_ud_send_only || wire::get24(bth->dqpn) != remote_qpn ||
		    rte_be_to_cpu_32(deth->qkey) != qkey || wire::get24(deth->sqpn) != local_qpn[sender] ||
		    wire::get24(bth->psn) != next_psn) {
			bad_transport++;
			note("BTH/DETH", c, f);
			ok = false;
		}
		next_psn = (wire::get24(bth->psn) + 1) & 0xffffff;
		if (!soft::soft_queue::icrc_ok(f, true, wire::eth_len, frame_len - wire::icrc_len)) {
			bad_icrc++;
			note("ICRC", c, f);
			ok = false;
		}
		if (ok)
			seen[c.dest] = 1;
		return ok;
	}

	/* Takes up to max frames off the ring, checks and frees them. */
	unsigned drain(rte_ring *r, unsigned max = 256)
	{
		void *objs[64];
		unsigned total = 0;
		while (total < max) {
			unsigned n = rte_ring_dequeue_burst(r, objs, 64, nullptr);
			for (unsigned i = 0; i < n; i++) {
				auto *m = static_cast<rte_mbuf *>(objs[i]);
				/* The sender released it to the ring (soft_queue's TX). */
				RDGRAM_TSAN_ACQUIRE(m);
				check(m);
				rte_pktmbuf_free(m);
			}
			total += n;
			if (n < 64)
				break;
		}
		return total;
	}
};

/* ---- the control thread's side ---- */

enum class dstate : uint8_t {
	absent,  /* no AH, not in the dest_cache */
	cached,  /* AH in the registry (unreferenced, LRU), key in the dest_cache */
	evicted, /* AH destroyed, stale handle still in the dest_cache */
};

struct dest_rec {
	ah_handle h = ah_null;
	uint32_t prev = none, next = none; /* mirror of the registry's LRU */
	uint32_t epoch = 0;                /* evictions of this destination so far */
	dstate st = dstate::absent;
};

/* Everything the churn poller owns. Only the control thread touches it while
 * the poller is registered; the test thread reads it after remove_poller
 * (control_thread::call orders the two). */
struct churn_ctx {
	soft::soft_device *dev = nullptr;
	ah_registry *reg = nullptr;
	dest_cache *dc = nullptr;
	rte_ring *misses = nullptr;
	const std::vector<ah_key> *keys = nullptr;
	const std::vector<soft::soft_av> *expected = nullptr;
	std::atomic<uint32_t> window_base{0}; /* read by the poll threads */
	const std::atomic<bool> *stop = nullptr; /* end of the run */
	std::atomic<bool> quiet{false};          /* the poller has stopped for good */
	uint64_t trim_every = 0, next_trim = 0;
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	std::vector<dest_rec> d;
	std::vector<uint32_t> slot_owner; /* destination whose AH last took the slot */
	std::vector<uint8_t> created;     /* per destination: had an AH at least once */
	uint32_t lru_head = none, lru_tail = none, n_cached = 0, n_evicted = 0;
	std::deque<std::pair<uint32_t, uint32_t>> lag; /* (destination, epoch) evicted, erase later */
	std::vector<uint32_t> just_evicted;            /* by the hook, during one registry call */

	uint64_t ops = 0, creations = 0, reuses = 0, evictions = 0, trims = 0, trimmed = 0, misses_served = 0,
		 lag_erases = 0, early_erases = 0, recycled_while_cached = 0, device_full = 0, errors = 0;
	std::string first_error;

	void fail(const std::string &what)
	{
		errors++;
		if (first_error.empty())
			first_error = what;
	}
	void lru_unlink(uint32_t x)
	{
		dest_rec &r = d[x];
		(r.prev == none ? lru_head : d[r.prev].next) = r.next;
		(r.next == none ? lru_tail : d[r.next].prev) = r.prev;
		r.prev = r.next = none;
	}
	void lru_push(uint32_t x)
	{
		d[x].prev = lru_tail;
		d[x].next = none;
		(lru_tail == none ? lru_head : d[lru_tail].next) = x;
		lru_tail = x;
	}

	/* The registry's eviction hook, called before it destroys an entry's
	 * AH: the entry must be its least recently released one (the mirror
	 * LRU's head). The key stays in the dest_cache for erase_lag more
	 * evictions, so poll threads keep sending with its stale handle. */
	void on_evict(const ah_key &k, ah_handle h)
	{
		const uint32_t x = uint32_t(k.dgid[13]) << 16 | uint32_t(k.dgid[14]) << 8 | k.dgid[15];
		if (x >= n_dest || !(k == (*keys)[x]) || d[x].st != dstate::cached || h != d[x].h) {
			fail("the registry evicted an entry it should not hold");
			return;
		}
		if (x != lru_head)
			fail("the registry evicted destination " + std::to_string(x) + " out of LRU order");
		lru_unlink(x);
		n_cached--;
		dest_rec &r = d[x];
		r.st = dstate::evicted;
		r.epoch++;
		lag.emplace_back(x, r.epoch);
		n_evicted++;
		evictions++;
		just_evicted.push_back(x);
	}
	static void evict_cb(void *arg, const ah_key &k, ah_handle h)
	{
		static_cast<churn_ctx *>(arg)->on_evict(k, h);
	}
	/* After the registry call: every AH it evicted is dead at once (its
	 * slot is reused only after a grace period). */
	void check_evicted()
	{
		for (uint32_t x : just_evicted)
			if (dev->ahs().lookup(d[x].h) != nullptr)
				fail("evicted AH of destination " + std::to_string(x) + " still live");
		just_evicted.clear();
	}

	void erase_key(uint32_t x)
	{
		if (int rc = dc->erase((*keys)[x]); rc != 0)
			fail("dest_cache erase " + std::to_string(x) + ": " + std::to_string(rc));
		d[x].st = dstate::absent;
		n_evicted--;
	}

	/* One destination wanted: reuse its AH, or create one (evicting the
	 * least recently used), publish it in the dest_cache and release it, so
	 * it stays cached until evicted. */
	void want(uint32_t x)
	{
		ops++;
		dest_rec &r = d[x];
		int err = 0;
		const ibv_ah_attr a = attr_of(x);
		if (r.st == dstate::cached) {
			ah_handle h = reg->acquire(a, &err);
			if (err != 0 || h != r.h)
				fail("acquire of a cached destination gave another handle");
			if (err == 0 && reg->release(h) != 0)
				fail("release");
			lru_unlink(x);
			lru_push(x);
			reuses++;
			return;
		}
		if (r.st == dstate::evicted) {
			/* Wanted again before its stale key was erased. */
			erase_key(x);
			early_erases++;
		}
		ah_handle h = reg->acquire(a, &err);
		check_evicted();
		if (err == ENOMEM) {
			/* Every spare slot still in its grace period (the registry
			 * evicted one and retried): back-pressure, not an error. */
			device_full++;
			return;
		}
		if (err != 0) {
			fail("acquire " + std::to_string(x) + ": " + std::to_string(err));
			return;
		}
		const soft::soft_av *av = dev->ahs().lookup(h);
		if (av == nullptr || memcmp(av, &(*expected)[x], sizeof(*av)) != 0)
			fail("new AH's AV is not destination " + std::to_string(x) + "'s");
		/* A slot recycled while the previous occupant's handle is still in
		 * the dest_cache: poll threads may send with that stale handle. */
		const uint32_t prev = slot_owner[h.slot];
		if (prev != none && d[prev].st == dstate::evicted && d[prev].h.slot == h.slot)
			recycled_while_cached++;
		slot_owner[h.slot] = x;
		if (int rc = dc->insert((*keys)[x], h); rc != 0)
			fail("dest_cache insert " + std::to_string(x) + ": " + std::to_string(rc));
		if (reg->release(h) != 0)
			fail("release");
		r.h = h;
		r.st = dstate::cached;
		lru_push(x);
		n_cached++;
		created[x] = 1;
		creations++;
	}

	void check_invariants()
	{
		if (reg->size() != n_cached || reg->unreferenced() != n_cached || dev->live_ahs() != n_cached ||
		    dc->size() != n_cached + n_evicted || lag.size() < n_evicted)
			fail("sizes: registry " + std::to_string(reg->size()) + "/" +
			     std::to_string(reg->unreferenced()) + " device " + std::to_string(dev->live_ahs()) +
			     " dest_cache " + std::to_string(dc->size()) + ", expected " + std::to_string(n_cached) +
			     " cached + " + std::to_string(n_evicted) + " evicted");
	}

	bool poll(uint64_t now)
	{
		if (quiet.load(std::memory_order_relaxed))
			return false;
		if (stop->load(std::memory_order_relaxed)) {
			quiet.store(true, std::memory_order_release);
			return false;
		}
		/* Misses the poll threads reported: create what they asked for. */
		void *m[misses_per_call];
		const unsigned n = rte_ring_sc_dequeue_burst(misses, m, misses_per_call, nullptr);
		for (unsigned i = 0; i < n; i++)
			want(uint32_t(reinterpret_cast<uintptr_t>(m[i])));
		misses_served += n;
		/* Churn in the window, sliding it forward by one destination every
		 * second operation: new destinations come in at its front and old
		 * ones age out of the registry behind it. */
		uint32_t base = window_base.load(std::memory_order_relaxed);
		for (unsigned k = 0; k < churn_per_call; k++) {
			want((base + uint32_t(xorshift(rng) % window)) % n_dest);
			if (k & 1)
				base = (base + 1) % n_dest;
		}
		window_base.store(base, std::memory_order_relaxed);
		/* Now and then, destroy every AH at once. */
		if (now >= next_trim) {
			const uint32_t before = n_cached;
			const unsigned t = reg->trim();
			check_evicted();
			if (t != before || n_cached != 0)
				fail("trim evicted " + std::to_string(t) + " of " + std::to_string(before));
			trims++;
			trimmed += t;
			next_trim = now + trim_every;
		}
		while (lag.size() > erase_lag) {
			auto [x, ep] = lag.front();
			lag.pop_front();
			if (d[x].st == dstate::evicted && d[x].epoch == ep) {
				erase_key(x);
				lag_erases++;
			}
		}
		check_invariants();
		dc->reclaim();
		dev->reclaim();
		return true;
	}
	static bool poll_cb(void *arg, uint64_t now) { return static_cast<churn_ctx *>(arg)->poll(now); }
};

/* ---- the poll threads ---- */

struct sender_ctx {
	unsigned qi = 0;
	soft::soft_queue q;
	const dest_cache *dc = nullptr;
	churn_ctx *churn = nullptr;
	const std::vector<ah_key> *keys = nullptr;
	/* This queue's frames as they reached the wire (its tx ring): the
	 * thread checks them after each burst. (Not the other thread's: the
	 * main lcore shares its CPU with the control thread, and checking the
	 * worker's frames too left it almost no time to send.) */
	rx_checker *rx = nullptr;
	rte_ring *rx_ring = nullptr;
	rte_ring *misses = nullptr;
	std::atomic<bool> *stop = nullptr;
	uint64_t deadline = 0; /* the main lcore's thread sets *stop at this TSC */
	uint64_t seed = 1;
	/* Results: this thread's, read after it is joined. */
	uint64_t loops = 0, lookups = 0, hits = 0, miss_posts = 0, accepted = 0, not_taken = 0;
	uint64_t max_gap = 0; /* TSC cycles: longest time between two quiescent reports */
};

int sender_main(void *arg)
{
	auto &x = *static_cast<sender_ctx *>(arg);
	rte_rcu_qsbr *qs = g_rt->qsbr();
	const unsigned tid = rte_lcore_id();
	poll_thread_online(qs, tid);
	uint64_t rng = x.seed;
	ah_key keys[burst];
	uint32_t idx[burst];
	ah_handle out[burst];
	send_wr wrs[burst];
	canary cn[burst];
	uint64_t seq = 0;
	uint64_t last_qs = rte_rdtsc();
	while (!x.stop->load(std::memory_order_relaxed)) {
		if (x.deadline != 0 && rte_rdtsc() >= x.deadline)
			x.stop->store(true, std::memory_order_relaxed);
		/* Three in four from the control thread's window, one from all
		 * 100,000 (mostly misses: reported, so they get created). */
		const uint32_t base = x.churn->window_base.load(std::memory_order_relaxed);
		for (unsigned k = 0; k < burst; k++) {
			const uint64_t r = xorshift(rng);
			idx[k] = (r & 3) != 0 ? (base + uint32_t((r >> 8) % window)) % n_dest
					      : uint32_t((r >> 8) % n_dest);
			keys[k] = (*x.keys)[idx[k]];
		}
		uint64_t mask;
		x.hits += x.dc->lookup_bulk(keys, burst, out, &mask);
		x.lookups += burst;
		unsigned nw = 0, nm = 0;
		void *miss[max_miss_posts];
		for (unsigned k = 0; k < burst; k++) {
			if ((mask >> k) & 1) {
				cn[nw] = canary{idx[k], x.qi, seq + nw, out[k].slot, out[k].gen};
				wrs[nw] = send_wr{out[k], remote_qpn, qkey, nullptr, &cn[nw], sizeof(canary), 0,
						  send_inline};
				nw++;
			} else if (nm < max_miss_posts) {
				miss[nm++] = reinterpret_cast<void *>(uintptr_t(idx[k]));
			}
		}
		if (nm != 0)
			x.miss_posts += rte_ring_mp_enqueue_burst(x.misses, miss, nm, nullptr);
		const uint16_t took = x.q.tx_burst(wrs, uint16_t(nw));
		/* WRs not taken were never built: their sequence numbers are used
		 * again by the next burst. */
		seq += took;
		x.not_taken += nw - took;
		x.rx->drain(x.rx_ring);
		rte_rcu_qsbr_quiescent(qs, tid);
		const uint64_t now = rte_rdtsc();
		x.max_gap = std::max(x.max_gap, now - last_qs);
		last_qs = now;
		x.loops++;
	}
	/* An orderly shutdown: stay online, reporting, until the control
	 * thread has stopped churning, so that every slot or bucket it
	 * recycles is recycled under a grace period this thread takes part in.
	 * (A thread that goes offline leaves the QSBR check through
	 * rte_rcu_qsbr_thread_unregister inside librte_rcu, which
	 * ThreadSanitizer does not see: a reuse after that would be reported
	 * against this thread's last reads.) */
	while (!x.churn->quiet.load(std::memory_order_acquire)) {
		x.q.tx_flush();
		x.rx->drain(x.rx_ring);
		rte_rcu_qsbr_quiescent(qs, tid);
	}
	/* What the port has not taken yet waits in the queue's stash: the main
	 * thread flushes it after the join (the ring may be full, and its
	 * drainer gone). */
	x.accepted = seq;
	poll_thread_offline(qs, tid);
	return 0;
}

void print_counters(const char *who, const soft::soft_counters &c)
{
	printf("  %s: tx_pkts %" PRIu64 " tx_stale_ah %" PRIu64 " tx_no_mbuf %" PRIu64 " tx_port_full %" PRIu64
	       "\n",
	       who, c.tx_pkts, c.tx_stale_ah, c.tx_no_mbuf, c.tx_port_full);
}

TEST(AhStress, TwoPollThreadsAgainstControlChurn)
{
	if (rte_lcore_count() < 2)
		GTEST_SKIP() << "needs two lcores (this process may use only one CPU)";
	ring_port p(2, device_max_ah, 8191, 4096);
	ASSERT_TRUE(p.ok);
	const std::vector<soft::soft_av> expected = expected_avs(p.dev);
	std::vector<ah_key> keys(n_dest);
	for (uint32_t d = 0; d < n_dest; d++)
		keys[d] = ah_key::of(attr_of(d));
	/* Misses the poll threads report (destination indexes) for the
	 * control thread to create. */
	std::unique_ptr<rte_ring, void (*)(rte_ring *)> miss_ring(
		rte_ring_create("ahs_misses", 4096, SOCKET_ID_ANY, RING_F_SC_DEQ), rte_ring_free);
	ASSERT_NE(miss_ring, nullptr);
	rte_ring *misses = miss_ring.get();

	ah_registry reg(p.dev, reg_capacity);
	ASSERT_EQ(reg.capacity(), reg_capacity);
	dest_cache dc;
	const double secs = run_seconds();
	const uint64_t hz = rte_get_tsc_hz();

	std::atomic<bool> stop{false};
	churn_ctx c;
	c.dev = &p.dev;
	c.reg = &reg;
	c.dc = &dc;
	c.misses = misses;
	c.stop = &stop;
	c.keys = &keys;
	c.expected = &expected;
	c.d.resize(n_dest);
	c.slot_owner.assign(device_max_ah, none);
	c.created.assign(n_dest, 0);
	c.trim_every = uint64_t(secs * double(hz) / 4);
	c.next_trim = rte_get_tsc_cycles() + c.trim_every;
	/* The dest_cache's one writer is the control thread (never online on
	 * the QSBR variable): evicted keys wait there up to erase_lag. */
	int rc = -1;
	g_rt->ctl().call([&] { rc = dc.init(dc_capacity, p.dev.port().numa_node, g_rt->qsbr()); });
	ASSERT_EQ(rc, 0);

	rx_checker rx[2] = {rx_checker(&expected, 0), rx_checker(&expected, 1)};
	sender_ctx s[2];
	for (unsigned i = 0; i < 2; i++) {
		s[i].qi = i;
		ASSERT_EQ(p.dev.create_queue({.index = uint16_t(i)}, s[i].q), 0);
		ASSERT_EQ(s[i].q.add_qp(local_qpn[i], qkey), 0);
		s[i].dc = &dc;
		s[i].churn = &c;
		s[i].keys = &keys;
		s[i].rx = &rx[i];
		s[i].rx_ring = p.tx[i];
		s[i].misses = misses;
		s[i].stop = &stop;
		s[i].seed = 0x1234567ull + i * 0x9e3779b9ull;
	}

	reg.add_evict_hook(&churn_ctx::evict_cb, &c);
	ASSERT_EQ(g_rt->ctl().add_poller(&churn_ctx::poll_cb, &c), 0);
	const auto t0 = std::chrono::steady_clock::now();
	const unsigned worker = rte_get_next_lcore(rte_get_main_lcore(), 1, 0);
	if (launch_on_lcore(sender_main, &s[1], worker) != 0) {
		g_rt->ctl().remove_poller(&churn_ctx::poll_cb, &c); /* it points into this frame */
		g_rt->ctl().call([&] {
			reg.remove_evict_hook(&churn_ctx::evict_cb, &c);
			reg.clear();
			dc.fini();
		});
		FAIL() << "cannot launch the second poll thread";
	}
	/* This thread (the main lcore) is the other poll thread; it also ends
	 * the run. */
	s[0].deadline = rte_rdtsc() + uint64_t(secs * double(hz));
	sender_main(&s[0]);
	EXPECT_EQ(wait_on_lcore(worker), 0);
	const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	/* Both poll threads are offline and joined: this thread takes over
	 * their queues, pushes what they built but the port had no room for,
	 * and checks the last frames. */
	const uint64_t flush_end = rte_rdtsc() + 5 * hz;
	bool flushed = false;
	while (!flushed && rte_rdtsc() < flush_end) {
		for (unsigned j = 0; j < 2; j++) {
			s[j].q.tx_flush();
			while (rx[j].drain(p.tx[j], 4096) != 0) {
			}
		}
		flushed = s[0].q.tx_pending() == 0 && s[1].q.tx_pending() == 0;
	}
	EXPECT_TRUE(flushed) << "built frames the port never took";
	g_rt->ctl().remove_poller(&churn_ctx::poll_cb, &c);

	/* Control side. */
	EXPECT_EQ(c.errors, 0u) << c.first_error;
	const ah_registry_stats rs = reg.stats();
	EXPECT_EQ(rs.created, c.creations);
	EXPECT_EQ(rs.evicted, c.evictions) << "evictions counted and evictions the hook saw differ";
	EXPECT_EQ(rs.failed, c.device_full) << "acquire failed for another reason than a full device";
	EXPECT_GT(c.creations, uint64_t(reg_capacity)) << "the registry never filled";
	EXPECT_GT(c.evictions - c.trimmed, 0u) << "the registry never evicted in LRU order";
	EXPECT_GT(c.trims, 0u);
	EXPECT_GT(c.recycled_while_cached, 0u) << "no slot was recycled under a stale dest_cache entry";

	/* Receive side: nothing left with another destination's AV, nothing
	 * lost, duplicated or reordered; every missing sequence number is a
	 * counted stale-AH drop. */
	uint64_t sent = 0, stale = 0, received = 0, covered = 0;
	for (unsigned j = 0; j < 2; j++) {
		const soft::soft_counters &k = s[j].q.counters();
		SCOPED_TRACE("sender " + std::to_string(j));
		EXPECT_EQ(rx[j].mismatches(), 0u) << rx[j].first_bad;
		EXPECT_EQ(rx[j].bad_mac + rx[j].bad_ip + rx[j].bad_av, 0u) << "a message left with a freed or recycled AV";
		EXPECT_EQ(rx[j].received, k.tx_pkts) << "frames sent and frames received differ";
		EXPECT_EQ(s[j].accepted, k.tx_pkts + k.tx_stale_ah) << "accepted WRs neither sent nor counted";
		EXPECT_EQ(rx[j].gaps + (s[j].accepted - rx[j].next_seq), k.tx_stale_ah)
			<< "sequence gaps are not the stale-AH drops";
		EXPECT_EQ(k.tx_drops(), k.tx_stale_ah) << "drops for another reason than a stale AH";
		EXPECT_GT(k.tx_pkts, 0u);
		sent += k.tx_pkts;
		stale += k.tx_stale_ah;
		received += rx[j].received;
	}
	EXPECT_GT(stale, 0u) << "no send ever met a stale handle: the run exercised nothing";
	uint64_t created = 0;
	for (uint32_t d = 0; d < n_dest; d++) {
		covered += rx[0].seen[d] | rx[1].seen[d];
		created += c.created[d];
	}

	/* Registry, device and dest_cache agree, then everything goes. */
	uint32_t live_before = 0, live_after = ~0u;
	size_t reg_size = 0;
	g_rt->ctl().call([&] {
		c.check_invariants();
		live_before = p.dev.live_ahs();
		reg_size = reg.size();
		reg.remove_evict_hook(&churn_ctx::evict_cb, &c);
		reg.clear();
		dc.fini();
		p.dev.reclaim();
		live_after = p.dev.live_ahs();
	});
	EXPECT_EQ(c.errors, 0u) << c.first_error;
	EXPECT_EQ(live_before, reg_size);
	EXPECT_EQ(live_after, 0u);
	EXPECT_EQ(p.in_use(), 0u) << "mbufs leaked";
	{
		/* The accounting invariant (tests/common/accounting.h): every
		 * accepted WR was received or dropped as a stale AH. */
		accounting a("ah_stress");
		for (unsigned j = 0; j < 2; j++) {
			a.sent(s[j].accepted);
			a.received(rx[j].received);
			a.sender(s[j].q.counters());
		}
		a.live_ahs(live_after);
		a.pool(p.dev.mempool());
		a.check();
	}

	printf("ah_stress%s: %.2f s, registry %u, %u destinations (%" PRIu64 " got an AH, %" PRIu64
	       " received a message)\n",
	       under_tsan ? " (TSan)" : "", run_s, reg_capacity, n_dest, created, covered);
	printf("  sent %" PRIu64 ", received and checked %" PRIu64 ", stale-AH drops %" PRIu64
	       ", mismatches %" PRIu64 "\n",
	       sent, received, stale, rx[0].mismatches() + rx[1].mismatches());
	printf("  control: %" PRIu64 " operations, %" PRIu64 " creations, %" PRIu64 " reuses, %" PRIu64
	       " evictions (%" PRIu64 " in %" PRIu64 " trims), %" PRIu64 " misses served, %" PRIu64
	       " slots recycled under a stale cached handle, %" PRIu64 " ENOMEM (slots in grace period), "
	       "dest_cache rebuilds %" PRIu64 "\n",
	       c.ops, c.creations, c.reuses, c.evictions, c.trimmed, c.trims, c.misses_served,
	       c.recycled_while_cached, c.device_full, dc.rebuilds());
	for (unsigned j = 0; j < 2; j++) {
		printf("  poll thread %u: %" PRIu64 " loops, %" PRIu64 " lookups, %" PRIu64 " hits, %" PRIu64
		       " misses reported, longest time between quiescent reports %.1f ms\n",
		       j, s[j].loops, s[j].lookups, s[j].hits, s[j].miss_posts, double(s[j].max_gap) * 1e3 / double(hz));
		print_counters(j == 0 ? "  queue 0" : "  queue 1", s[j].q.counters());
	}
}

/* The checker must be able to fail: a frame built with another
 * destination's AH (what a recycled slot would give) is rejected, and so is
 * a frame with a corrupted payload. */
TEST(AhStress, CheckerRejectsAnotherDestinationsAv)
{
	ring_port p(1, 64, 511, 64);
	ASSERT_TRUE(p.ok);
	const std::vector<soft::soft_av> expected = expected_avs(p.dev);
	const uint32_t d1 = 5, d2 = 70000;
	ah_handle h1 = ah_null, h2 = ah_null;
	int e1 = -1, e2 = -1;
	g_rt->ctl().call([&] {
		h1 = p.dev.create_ah(attr_of(d1), &e1);
		h2 = p.dev.create_ah(attr_of(d2), &e2);
	});
	ASSERT_EQ(e1, 0);
	ASSERT_EQ(e2, 0);
	soft::soft_queue q;
	ASSERT_EQ(p.dev.create_queue({.index = 0}, q), 0);
	ASSERT_EQ(q.add_qp(local_qpn[0], qkey), 0);

	rx_checker rx(&expected, 0);
	auto frame = [&](ah_handle h, uint64_t seq) {
		canary cn{d1, 0, seq, h.slot, h.gen};
		send_wr w{h, remote_qpn, qkey, nullptr, &cn, sizeof(cn), 0, send_inline};
		rte_mbuf *m = rte_pktmbuf_alloc(p.dev.mempool());
		EXPECT_NE(m, nullptr);
		EXPECT_TRUE(q.build(w, *q.qp(0), m));
		return m;
	};
	rte_mbuf *m = frame(h1, 0);
	EXPECT_TRUE(rx.check(m)) << rx.first_bad;
	rte_pktmbuf_free(m);
	EXPECT_EQ(rx.mismatches(), 0u);

	m = frame(h2, 1); /* canary says d1, AV is d2's */
	EXPECT_FALSE(rx.check(m));
	rte_pktmbuf_free(m);
	EXPECT_EQ(rx.bad_mac, 1u);
	EXPECT_EQ(rx.bad_ip, 1u);
	EXPECT_EQ(rx.bad_av, 1u);
	EXPECT_EQ(rx.bad_icrc, 0u) << "the frame itself is well formed";

	m = frame(h1, 2);
	rte_pktmbuf_mtod(m, uint8_t *)[wire::hdr_len_v4 + 12] ^= 1; /* the canary's handle slot */
	EXPECT_FALSE(rx.check(m));
	rte_pktmbuf_free(m);
	EXPECT_EQ(rx.bad_icrc, 1u);

	m = frame(h1, 2); /* sequence number seen already */
	EXPECT_FALSE(rx.check(m));
	rte_pktmbuf_free(m);
	EXPECT_EQ(rx.out_of_order, 1u);

	g_rt->ctl().call([&] {
		p.dev.destroy_ah(h1);
		p.dev.destroy_ah(h2);
	});
	EXPECT_EQ(p.dev.live_ahs(), 0u);
	EXPECT_EQ(p.in_use(), 0u);
	accounting a("ah_stress checker"); /* frames checked in place: no loopback */
	a.live_ahs(p.dev.live_ahs());
	a.pool(p.dev.mempool());
	a.check(false);
}

/* The AH storm: 100,000 distinct AHs created through the control thread in
 * batches of 4,096 (ah_registry::acquire_batch), all usable, then all
 * destroyed. */
TEST(AhStress, HundredThousandAhStorm)
{
	RDGRAM_SKIP_SINGLE_THREADED_UNDER_TSAN();
	constexpr uint32_t chunk = 4096;
	ring_port p(1, 131072, 511, 64);
	ASSERT_TRUE(p.ok);
	ah_registry reg(p.dev, n_dest);
	ASSERT_EQ(reg.capacity(), n_dest);
	std::vector<ah_handle> hs(n_dest, ah_null);
	std::vector<ibv_ah_attr> attrs(n_dest);
	std::vector<int> errs(n_dest, -1);
	for (uint32_t i = 0; i < n_dest; i++)
		attrs[i] = attr_of(i);
	uint64_t failed = 0;

	const auto t0 = std::chrono::steady_clock::now();
	for (uint32_t base = 0; base < n_dest; base += chunk) {
		const unsigned m = std::min(n_dest - base, chunk);
		g_rt->ctl().call([&] {
			failed += m - reg.acquire_batch(&attrs[base], m, &hs[base], &errs[base]);
		});
	}
	int first_err = 0;
	for (int e : errs)
		if (e != 0 && first_err == 0)
			first_err = e;
	/* Every handle is published (release store of its generation) by the
	 * time its batch returns: all are usable by poll threads now. */
	const double ready_ms =
		std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
	EXPECT_EQ(failed, 0u) << "first errno " << first_err;

	/* Each handle distinct and its AV its own destination's. */
	uint64_t bad = 0;
	std::vector<uint8_t> slot_used(131072, 0);
	uint32_t live = 0;
	g_rt->ctl().call([&] {
		for (uint32_t i = 0; i < n_dest; i++) {
			const soft::soft_av *av = p.dev.ahs().lookup(hs[i]);
			soft::soft_av want;
			if (av == nullptr || hs[i].slot >= slot_used.size() || slot_used[hs[i].slot]++ != 0 ||
			    p.dev.build_av(attr_of(i), want) != 0 || memcmp(av, &want, sizeof(want)) != 0)
				bad++;
		}
		live = p.dev.live_ahs();
	});
	EXPECT_EQ(bad, 0u);
	EXPECT_EQ(live, n_dest);
	EXPECT_EQ(reg.stats().created, uint64_t(n_dest));

	const auto t1 = std::chrono::steady_clock::now();
	uint64_t rel_bad = 0;
	unsigned trimmed = 0;
	for (uint32_t base = 0; base < n_dest; base += chunk) {
		const uint32_t end = std::min(n_dest, base + chunk);
		g_rt->ctl().call([&] {
			for (uint32_t i = base; i < end; i++)
				rel_bad += reg.release(hs[i]) != 0;
		});
	}
	g_rt->ctl().call([&] {
		trimmed = reg.trim();
		p.dev.reclaim();
		live = p.dev.live_ahs();
	});
	const double destroy_ms =
		std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
	EXPECT_EQ(rel_bad, 0u);
	EXPECT_EQ(trimmed, n_dest);
	EXPECT_EQ(live, 0u);
	uint64_t still = 0;
	g_rt->ctl().call([&] {
		for (uint32_t i = 0; i < n_dest; i++)
			still += p.dev.ahs().lookup(hs[i]) != nullptr;
	});
	EXPECT_EQ(still, 0u) << "destroyed handles must miss";
	printf("ah_storm%s: %u AHs created and ready in %.1f ms (%.2f us each, batches of %u), "
	       "destroyed in %.1f ms\n",
	       under_tsan ? " (TSan)" : "", n_dest, ready_ms, ready_ms * 1000.0 / n_dest, chunk,
	       destroy_ms);
	accounting a("ah_storm"); /* no traffic: AHs, mbufs, threads */
	a.live_ahs(live);
	a.pool(p.dev.mempool());
	a.check(false);
}

} // namespace
