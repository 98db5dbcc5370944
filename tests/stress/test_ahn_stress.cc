/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * ahn attribution under churn: 10,000 peers (2,500 sender addresses x 4
 * QPNs, the same 4 QPNs behind every address, so only the ahn tells them
 * apart) send to two poll threads (the two EAL lcores) while the control
 * thread creates, evicts and re-creates the senders' AHs without pause:
 *
 *  - the AH registry holds 2,048 entries for 2,500 addresses, so nearly
 *    every creation for an unknown sender evicts (destroys) another
 *    sender's AH, whose slot (= ahn) the next creation reuses for a
 *    different address; and every trim_ms the registry is trimmed (every
 *    AH destroyed at once);
 *  - the peers of half of the addresses carry no connection id (only
 *    (ahn, QPN) tells them apart: a binding left on a reused ahn would be
 *    seen); the others do, and their processes "restart": a peer's connection id changes (QPN reuse), its
 *    old incarnation's late datagrams keep coming for late_us, and the
 *    control thread forgets the old one forget_us after the new binding.
 *
 * The device is a model with EFA's receive report: create_ah/destroy_ah on
 * an ah_table (QSBR-deferred slot reuse) and, for the data path, the ahn of
 * the live AH to a sender's address, or 0xFFFF (as drivers/soft computes
 * wc.slid under report_ahn). A poll thread builds each completion as the
 * device would report it at that moment, attributes it, and checks the
 * peer's cookie (made from the request's address, QPN and connection id)
 * against the datagram's true sender: a single mis-attribution fails the
 * test. Unknown datagrams are expected (before a creation, after an
 * eviction); each must be followed by attribution once the control thread
 * has caught up.
 *
 * Suite 'concurrency': ./build.sh runs it under ThreadSanitizer. Duration:
 * 3 s (4 s in a sanitizer build); RDGRAM_STRESS_SECONDS overrides it.
 */
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include "eal_env.h"
#include "rdgram/ah_table.h"
#include "rdgram/ahn_attrib.h"

/* Sanitizer builds (TSan, or ASan, whose tests run at -O0) are several
 * times slower: the control thread binds a restarted peer's new incarnation
 * later, so the timing windows below are wider there. With ASan's -O0
 * tests and the release windows, a CI run saw 273 late datagrams and none
 * attributed to a previous incarnation. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define AHN_SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define AHN_SLOW_BUILD 1
#endif
#endif
#ifndef AHN_SLOW_BUILD
#define AHN_SLOW_BUILD 0
#endif

using namespace rdgram;
using namespace rdgram::test;

namespace {

constexpr uint32_t n_addr = 2500, qpns_per_addr = 4, n_peers = n_addr * qpns_per_addr;
constexpr uint32_t reg_capacity = 2048;
constexpr uint32_t base_qpn = 0x100;
/* A restarted peer's old incarnation sends for late_us; it is forgotten
 * forget_us after the new one is bound: shorter than an address's AH
 * lives between evictions (~10 ms here: the registry thrashes by design),
 * or nothing would be forgotten; longer in a sanitizer build, whose control
 * thread binds the new incarnation later. */
constexpr uint64_t late_us = AHN_SLOW_BUILD ? 10000 : 1000, forget_us = AHN_SLOW_BUILD ? 20000 : 3000;
/* One datagram in restart_every restarts its peer's process. */
constexpr uint64_t restart_every = AHN_SLOW_BUILD ? 1024 : 4096;
constexpr unsigned burst = 32;
constexpr uint64_t max_backlog = 512; /* unanswered unknown senders */

double run_seconds()
{
	if (const char *s = getenv("RDGRAM_STRESS_SECONDS"); s != nullptr && atof(s) > 0)
		return atof(s);
	return AHN_SLOW_BUILD ? 4.0 : 3.0;
}

uint64_t xorshift(uint64_t &s)
{
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return s;
}

/* Sender address a: 10.128.0.0 + a + 1. Ours: 10.0.0.1. */
wire::gid addr_gid(uint32_t a) { return wire::gid::from_v4(rte_cpu_to_be_32(0x0a800000u + a + 1)); }
uint32_t addr_of(const wire::gid &g) { return rte_be_to_cpu_32(g.v4()) - 0x0a800000u - 1; }
const wire::gid our_gid = wire::gid::from_v4(RTE_BE32(0x0a000001));

uint64_t cookie_of(uint32_t a, uint32_t qpn, uint32_t connid)
{
	return uint64_t(a) << 44 | uint64_t(qpn & 0xfff) << 32 | connid;
}
uint64_t cookie_cb(void *, const ahn_sender &s) { return cookie_of(addr_of(s.sgid), s.qpn, s.connid); }

/* A device with EFA's receive report. Control path on the control thread;
 * report() on poll threads. */
struct model_av {
	wire::gid dgid;
};
class ahn_device final : public device {
public:
	int open(uint32_t max_ah, rte_rcu_qsbr *qs)
	{
		attr_.max_ah = max_ah;
		attr_.gids = {our_gid};
		if (int rc = ahs_.init(max_ah, SOCKET_ID_ANY, qs); rc != 0)
			return rc;
		return by_gid_.init(max_ah, SOCKET_ID_ANY, qs);
	}
	const char *driver_name() const override { return "ahn-model"; }
	const port_attr &port() const override { return attr_; }
	ah_handle create_ah(const ibv_ah_attr &a, int *err) override
	{
		uint32_t slot;
		if (!ahs_.reserve(&slot)) {
			*err = ENOMEM;
			return ah_null;
		}
		memcpy(ahs_.av_at(slot).dgid.raw, a.grh.dgid.raw, 16);
		const ah_handle h = ahs_.publish(slot);
		/* The first live AH to an address is the one reported. */
		ah_key k;
		ahn_attrib_client::gid_key(ahs_.av_at(slot).dgid, &k);
		by_gid_.insert(k, h);
		*err = 0;
		created++;
		return h;
	}
	int destroy_ah(ah_handle h) override
	{
		if (ahs_.lookup(h) == nullptr)
			return EINVAL;
		ah_key k;
		ahn_attrib_client::gid_key(ahs_.av_at(h.slot).dgid, &k);
		ah_handle cur;
		if (by_gid_.lookup(k, &cur) && cur == h)
			by_gid_.erase(k);
		destroyed++;
		return ahs_.retire(h);
	}
	void reclaim() override
	{
		ahs_.reclaim();
		by_gid_.reclaim();
	}
	uint32_t reclaim_pending() const override { return ahs_.retired_waiting(); }
	uint32_t live_ahs() const override { return ahs_.live(); }

	/* Data path: what a completion from g carries in wc.slid. */
	uint16_t report(const wire::gid &g) const
	{
		ah_key k;
		ahn_attrib_client::gid_key(g, &k);
		ah_handle h;
		return by_gid_.lookup(k, &h) ? uint16_t(h.slot) : ahn_map::ahn_unknown;
	}

	uint64_t created = 0, destroyed = 0;

private:
	port_attr attr_;
	ah_table<model_av> ahs_;
	dest_cache by_gid_;
};

/* The control thread's churn: drives ahn_attrib and trims the registry. */
struct churn_ctx {
	ahn_attrib *at = nullptr;
	ah_registry *reg = nullptr;
	uint64_t trim_every = 0, next_trim = 0;
	uint64_t trims = 0;
	std::atomic<unsigned> done{0};  /* poll threads that stopped attributing */
	/* Back-pressure: unknown senders asked (poll threads add) and requests
	 * answered (control thread sets). */
	std::atomic<uint64_t> asked{0}, handled{0};
	std::atomic<bool> quiet{false}; /* set once nothing more is recycled */
	static bool poll_cb(void *arg, uint64_t now) { return static_cast<churn_ctx *>(arg)->poll(now); }
	bool poll(uint64_t now)
	{
		if (quiet.load(std::memory_order_relaxed))
			return false;
		const bool finished = done.load(std::memory_order_acquire) == 2;
		bool work = at->poll(now);
		handled.store(at->stats().requests, std::memory_order_relaxed);
		if (!finished && now >= next_trim) {
			reg->trim();
			trims++;
			next_trim = now + trim_every;
			work = true;
		}
		if (finished) {
			/* Both stopped asking: answer what is left, then nothing
			 * is recycled any more. */
			while (at->poll(now))
				;
			quiet.store(true, std::memory_order_release);
		}
		return work;
	}
};

struct poll_ctx {
	ahn_device *dev = nullptr;
	ahn_attrib_client *cl = nullptr;
	churn_ctx *churn = nullptr;
	std::atomic<bool> *stop = nullptr;
	uint64_t deadline = 0; /* the main lcore's thread sets *stop at this TSC */
	unsigned parity = 0;   /* this thread's peers: index % 2 == parity */
	uint64_t seed = 1;
	/* Results, read after the join. */
	uint64_t datagrams = 0, attributed = 0, unknown = 0, previous = 0, misattributed = 0, restarts = 0;
	uint64_t late_sent = 0;
	uint32_t peers_attributed = 0; /* of this thread's n_peers / 2 */
	uint64_t first_bad = 0;
	/* The run lasts at least until deadline, then until every peer has
	 * been attributed (both threads together) or hard_deadline: on a
	 * loaded machine or under a sanitizer the control thread gets little
	 * CPU, and a fixed duration made coverage depend on load. */
	std::atomic<uint32_t> *seen_total = nullptr;
	uint32_t seen_target = 0;
	uint64_t hard_deadline = 0;
};

bool time_to_stop(const poll_ctx &x, uint64_t now)
{
	if (x.deadline == 0 || now < x.deadline)
		return false;
	return x.seen_total->load(std::memory_order_relaxed) >= x.seen_target || now >= x.hard_deadline;
}

int poll_main(void *arg)
{
	auto &x = *static_cast<poll_ctx *>(arg);
	rte_rcu_qsbr *qs = g_rt->qsbr();
	const unsigned tid = rte_lcore_id();
	poll_thread_online(qs, tid);
	const uint64_t hz = rte_get_tsc_hz();
	/* Ground truth for this thread's peers: current connection id, the
	 * previous one and until when it may still send. */
	std::vector<uint32_t> conn(n_peers), old(n_peers, 0);
	std::vector<uint64_t> old_until(n_peers, 0);
	std::vector<bool> seen(n_peers, false); /* attributed at least once */
	uint64_t rng = x.seed;
	uint32_t next_conn = 1 + x.parity * 0x40000000u;
	uint32_t hot = n_peers; /* the latest restarted peer (n_peers: none) */
	uint64_t asked0 = 0;
	for (uint32_t i = 0; i < n_peers; i++)
		conn[i] = next_conn++;
	recv_wc wc[burst];
	uint32_t cid[burst], peer[burst];
	ahn_attribution res[burst];
	while (!x.stop->load(std::memory_order_relaxed)) {
		uint64_t now = rte_rdtsc();
		if (time_to_stop(x, now))
			x.stop->store(true, std::memory_order_relaxed);
		/* One burst as the device reports it now. */
		for (unsigned k = 0; k < burst; k++) {
			const uint64_t r = xorshift(rng);
			uint32_t i = uint32_t((r >> 16) % (n_peers / 2)) * 2 + x.parity;
			/* A restarted process is busy: one datagram in eight comes
			 * from the latest one (new and late old incarnation), so QPN
			 * reuse is exercised at any speed. */
			if (hot != n_peers && now < old_until[hot] && (r >> 48 & 7) == 0)
				i = hot;
			/* Even addresses' peers speak a protocol without a connection
			 * id: only (ahn, QPN) tells them apart, so a binding left
			 * behind on a reused ahn would show as a wrong peer. */
			const bool with_connid = (i / qpns_per_addr) % 2 != 0;
			if (with_connid && r % restart_every == 0) { /* the process behind it restarts */
				old[i] = conn[i];
				old_until[i] = now + late_us * hz / 1000000;
				conn[i] = next_conn++;
				x.restarts++;
				hot = i;
			}
			const bool late = old[i] != 0 && now < old_until[i] && (r >> 8 & 1) == 0;
			cid[k] = !with_connid ? ahn_map::any_connid : late ? old[i] : conn[i];
			x.late_sent += late;
			peer[k] = i;
			memset(&wc[k], 0, sizeof(wc[k]));
			wc[k].sgid = addr_gid(i / qpns_per_addr);
			wc[k].dgid = our_gid;
			wc[k].src_qp = base_qpn + i % qpns_per_addr;
			wc[k].wc_flags = wc_grh;
			wc[k].l3 = l3_type::ipv4;
			wc[k].slid = x.dev->report(wc[k].sgid);
		}
		x.cl->attribute_burst(wc, cid, burst, res, now);
		for (unsigned k = 0; k < burst; k++) {
			x.datagrams++;
			if (res[k].peer == ahn_map::nil) {
				x.unknown++;
				continue;
			}
			const uint32_t i = peer[k];
			if (res[k].cookie != cookie_of(i / qpns_per_addr, base_qpn + i % qpns_per_addr, cid[k])) {
				if (x.misattributed++ == 0)
					x.first_bad = res[k].cookie;
				continue;
			}
			x.attributed++;
			x.previous += res[k].previous;
			if (!seen[i]) {
				x.peers_attributed++;
				x.seen_total->fetch_add(1, std::memory_order_relaxed);
			}
			seen[i] = true;
		}
		/* Attribution done for this burst: only now may the slots and
		 * records it read be recycled. */
		rte_rcu_qsbr_quiescent(qs, tid);
		/* The traffic follows the control thread: under TSan it runs
		 * some 100x slower, and on a loaded machine it may get little
		 * of the two cores the poll threads spin on. The test's senders
		 * wait (sleeping: a test harness, not the library's loop) while
		 * more than max_backlog unknown senders are unanswered, so the
		 * mix of first contacts, churn and attribution is the same at
		 * any speed. */
		const uint64_t a = x.churn->asked.fetch_add(x.cl->counters().asked - asked0,
							    std::memory_order_relaxed) +
				   (x.cl->counters().asked - asked0);
		asked0 = x.cl->counters().asked;
		while (a > x.churn->handled.load(std::memory_order_relaxed) + max_backlog &&
		       !x.stop->load(std::memory_order_relaxed)) {
			rte_rcu_qsbr_quiescent(qs, tid);
			rte_delay_us_sleep(50);
			if (time_to_stop(x, rte_rdtsc()))
				x.stop->store(true, std::memory_order_relaxed);
		}
	}
	/* Stay online until the control thread recycles nothing more (see
	 * test_ah_stress.cc: going offline leaves the QSBR check inside
	 * librte_rcu, where ThreadSanitizer cannot see it). */
	x.churn->done.fetch_add(1, std::memory_order_release);
	while (!x.churn->quiet.load(std::memory_order_acquire))
		rte_rcu_qsbr_quiescent(qs, tid);
	poll_thread_offline(qs, tid);
	return 0;
}

} // namespace

TEST(AhnStress, TenThousandPeersUnderAhChurn)
{
	ASSERT_GE(rte_lcore_count(), 2u);
	const uint64_t hz = rte_get_tsc_hz();
	const double secs = run_seconds();
	ahn_device dev;
	ah_registry *reg = nullptr;
	ahn_attrib at;
	ahn_attrib_client cl[2];
	churn_ctx churn;
	int rc = -1;
	g_rt->ctl().call([&] {
		rc = dev.open(4096, g_rt->qsbr());
		if (rc != 0)
			return;
		reg = new ah_registry(dev, reg_capacity);
		ahn_attrib_config c;
		c.max_peers = 4 * n_peers; /* current + previous + retired waiting */
		c.max_senders = 4096;
		c.forget_after_us = forget_us;
		c.qsbr = g_rt->qsbr();
		c.cookie_of = cookie_cb;
		rc = at.init(dev, *reg, c);
		ahn_attrib_client_config cc;
		cc.ring_size = 4096;
		cc.reask_us = 200;
		for (auto &c1 : cl)
			if (rc == 0)
				rc = at.add_client(c1, cc);
	});
	ASSERT_EQ(rc, 0);
	churn.at = &at;
	churn.reg = reg;
	/* Six trims per run; two under TSan (each wipes every binding, which
	 * the slower control thread then rebuilds for 10,000 peers). */
	churn.trim_every = uint64_t(secs * double(hz) / (AHN_SLOW_BUILD ? 2.5 : 6));
	churn.next_trim = rte_rdtsc() + churn.trim_every;
	std::atomic<bool> stop{false};
	std::atomic<uint32_t> seen_total{0};
	poll_ctx p[2];
	for (unsigned i = 0; i < 2; i++) {
		p[i].dev = &dev;
		p[i].cl = &cl[i];
		p[i].churn = &churn;
		p[i].stop = &stop;
		p[i].seen_total = &seen_total;
		p[i].seen_target = AHN_SLOW_BUILD ? n_peers * 9 / 10 : n_peers;
		p[i].parity = i;
		p[i].seed = 0x9e3779b97f4a7c15ull + i;
	}
	ASSERT_EQ(g_rt->ctl().add_poller(&churn_ctx::poll_cb, &churn), 0);
	const unsigned worker = rte_get_next_lcore(rte_get_main_lcore(), 1, 0);
	ASSERT_EQ(launch_on_lcore(poll_main, &p[1], worker), 0);
	p[0].deadline = rte_rdtsc() + uint64_t(secs * double(hz));
	p[0].hard_deadline = p[0].deadline + 30 * hz;
	poll_main(&p[0]); /* this thread (the main lcore) is the other poll thread */
	EXPECT_EQ(wait_on_lcore(worker), 0);
	g_rt->ctl().remove_poller(&churn_ctx::poll_cb, &churn);

	ahn_attrib_stats st;
	ah_registry_stats rs;
	uint64_t trims = 0, dev_created = 0;
	uint32_t live_peers = 0;
	g_rt->ctl().call([&] {
		st = at.stats();
		rs = reg->stats();
		trims = churn.trims;
		dev_created = dev.created;
		live_peers = at.map().live();
	});
	uint64_t datagrams = 0, attributed = 0, unknown = 0, previous = 0, mis = 0, restarts = 0, late = 0;
	for (auto &x : p) {
		datagrams += x.datagrams;
		attributed += x.attributed;
		unknown += x.unknown;
		previous += x.previous;
		mis += x.misattributed;
		restarts += x.restarts;
		late += x.late_sent;
		EXPECT_EQ(x.misattributed, 0u) << "first wrong cookie " << std::hex << x.first_bad;
	}
	ahn_attrib_counters cc{};
	for (auto &c1 : cl) {
		const ahn_attrib_counters &c = c1.counters();
		cc.by_ahn += c.by_ahn;
		cc.by_gid += c.by_gid;
		cc.previous += c.previous;
		cc.unknown += c.unknown;
		cc.asked += c.asked;
		cc.ask_ring_full += c.ask_ring_full;
	}
	printf("  %.1f s: %" PRIu64 " datagrams from %u peers: %" PRIu64 " attributed (%" PRIu64 " by ahn, %" PRIu64
	       " by SGID, %" PRIu64 " to a previous incarnation), %" PRIu64 " unknown, %" PRIu64
	       " mis-attributed; %u peers attributed at least once\n",
	       secs, datagrams, n_peers, attributed, cc.by_ahn, cc.by_gid, cc.previous, unknown, mis,
	       p[0].peers_attributed + p[1].peers_attributed);
	printf("  control: %" PRIu64 " requests (%" PRIu64 " duplicates), %" PRIu64 " AHs created (device %" PRIu64
	       "), %" PRIu64 " evicted (%" PRIu64 " registry evictions, %" PRIu64 " trims), %" PRIu64
	       " peers bound, %" PRIu64 " unbound, %" PRIu64 " forgotten, %" PRIu64 " busy (ENOMEM), %" PRIu64
	       " failed; %" PRIu64
	       " restarts, %" PRIu64 " late datagrams sent; %u peers live at the end\n",
	       st.requests, st.duplicates, st.ahs_created, dev_created, st.evicted, rs.evicted, trims, st.bound,
	       st.unbound, st.forgotten, st.busy, st.failed, restarts, late, live_peers);

	EXPECT_EQ(mis, 0u);
	/* Every one of the 10,000 peers was attributed (after its first
	 * contact, and again after each eviction of its address's AH); under
	 * TSan a peer sends ~40 datagrams in the run while its address's AH is
	 * evicted every ~0.15 s, so a few percent may never get past first
	 * contact (measured: 96-98% attributed). */
	EXPECT_GE(p[0].peers_attributed + p[1].peers_attributed, AHN_SLOW_BUILD ? n_peers * 9 / 10 : n_peers);
	EXPECT_EQ(attributed + unknown + mis, datagrams);
	EXPECT_EQ(cc.by_ahn + cc.by_gid + cc.previous, attributed);
	EXPECT_EQ(cc.unknown, unknown);
	/* The churn happened: more creations than addresses, evictions that
	 * unbound peers, QPN reuse attributed to old incarnations and then
	 * forgotten. */
	EXPECT_GT(st.ahs_created, uint64_t(n_addr));
	EXPECT_GT(st.evicted, 0u);
	EXPECT_GT(st.unbound, 0u);
	EXPECT_GT(trims, 0u);
	EXPECT_GT(previous, 0u);
	EXPECT_GT(st.forgotten, 0u);
	/* busy (transient ENOMEM: freed slots still in their grace period
	 * when three threads share two cores) is allowed; nothing else. */
	EXPECT_EQ(st.failed, 0u);
	/* Attribution keeps up although the registry cannot hold every sender
	 * at once and evicts on nearly every creation. The share depends on
	 * how fast the control thread runs next to the traffic (measured:
	 * ~60% at -O2, ~50% under ASan and TSan, where the back-pressure
	 * keeps the mix): a loose bound, the per-peer check above is the
	 * strict one. */
	EXPECT_GT(attributed, datagrams / 5);
	EXPECT_EQ(st.requests, cc.asked);

	g_rt->ctl().call([&] {
		for (auto &c1 : cl)
			at.remove_client(c1);
		at.fini();
		delete reg;
	});
	for (auto &c1 : cl)
		c1.fini();
}
