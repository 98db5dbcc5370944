/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The AH service: the poll thread's miss path (pending queue bounds,
 * timeouts, flush in order, drops by errno), the application API with
 * ibv_create_ah(3)/ibv_destroy_ah(3) errno semantics, batches (the AH
 * storm), eviction keeping the dest_cache in step with the registry, and
 * the reply path (one creation per new sender, then cache hits).
 */
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_launch.h>

#include "eal_env.h"
#include "rdgram/ah_service.h"

using namespace rdgram;
using namespace rdgram::test;

namespace {

/* A soft pair with an AH service and a client on each side. The test
 * thread plays both poll threads (it goes online on the QSBR variable only
 * while it polls, so the control thread's grace periods never wait for it
 * while it is blocked in an application call). */
struct svc_pair : soft_pair {
	ah_service svc[2];
	ah_client cl[2];
	bool up = false;

	explicit svc_pair(uint32_t capacity = 1024, ah_client_config cc = {}, bool v6 = false)
		: soft_pair(v6, 4096, 65536)
	{
		if (!ok)
			return;
		for (int i = 0; i < 2; i++) {
			ah_service_config sc;
			sc.capacity = capacity;
			sc.qsbr = g_rt->qsbr();
			sc.app_timeout_us = 500000;
			if (svc[i].start(dev[i], g_rt->ctl(), sc) != 0)
				return;
			cc.mp = dev[i].mempool();
			if (svc[i].add_client(cl[i], cc) != 0)
				return;
		}
		up = true;
	}
	~svc_pair()
	{
		for (int i = 0; i < 2; i++) {
			svc[i].remove_client(cl[i]);
			cl[i].fini();
			svc[i].stop();
		}
	}

	ah_key key_to_peer(int i, uint32_t flow = 0) const
	{
		ibv_ah_attr a = attr_to(addr[1 - i]);
		a.grh.flow_label = flow;
		return ah_key::of(a);
	}
	send_wr wr_inline(int i, const void *p, uint32_t len) const
	{
		return send_wr{ah_null, qpn[1 - i], qkey, nullptr, p, len, 0, send_inline};
	}
	send_wr wr_mbuf(int i, uint32_t tag)
	{
		rte_mbuf *m = rte_pktmbuf_alloc(dev[i].mempool());
		EXPECT_NE(m, nullptr);
		memcpy(rte_pktmbuf_append(m, 4), &tag, 4);
		return send_wr{ah_null, qpn[1 - i], qkey, m, nullptr, 0, 0, 0};
	}

	/* Polls both sides for up to ms milliseconds or until done() says so;
	 * collects what side 1 (and side 0) receives. */
	template <class F> void pump(unsigned ms, F done, std::vector<uint32_t> *got1 = nullptr,
				     std::vector<recv_wc> *keep0 = nullptr)
	{
		const unsigned tid = rte_lcore_id();
		poll_thread_online(g_rt->qsbr(), tid);
		const uint64_t end = rte_get_tsc_cycles() + uint64_t(ms) * rte_get_tsc_hz() / 1000;
		while (rte_get_tsc_cycles() < end && !done()) {
			const uint64_t now = rte_get_tsc_cycles();
			for (int i = 0; i < 2; i++) {
				cl[i].poll(q[i], now);
				q[i].tx_flush();
			}
			recv_wc wc[32];
			uint16_t n = q[1].rx_burst(wc, 32);
			for (uint16_t k = 0; k < n; k++) {
				if (got1 != nullptr) {
					uint32_t tag;
					memcpy(&tag, rte_pktmbuf_mtod_offset(wc[k].mbuf, void *, 40), 4);
					got1->push_back(tag);
				}
				rte_pktmbuf_free(wc[k].mbuf);
			}
			n = q[0].rx_burst(wc, 32);
			for (uint16_t k = 0; k < n; k++) {
				if (keep0 != nullptr)
					keep0->push_back(wc[k]);
				else
					rte_pktmbuf_free(wc[k].mbuf);
			}
			rte_rcu_qsbr_quiescent(g_rt->qsbr(), tid);
		}
		poll_thread_offline(g_rt->qsbr(), tid);
	}
	uint16_t send(int i, const ah_key *keys, send_wr *w, uint16_t n)
	{
		return cl[i].send_burst(q[i], keys, w, n, rte_get_tsc_cycles());
	}
};

} // namespace

TEST(AhService, MissIsQueuedThenFlushedInOrder)
{
	svc_pair p;
	ASSERT_TRUE(p.up);
	const ah_key k = p.key_to_peer(0);
	ah_key keys[8];
	send_wr w[8];
	for (uint32_t i = 0; i < 8; i++) {
		keys[i] = k;
		w[i] = p.wr_mbuf(0, i);
	}
	/* Nothing is cached: all 8 wait; one request for the key. */
	ASSERT_EQ(p.send(0, keys, w, 8), 8);
	EXPECT_EQ(p.cl[0].counters().misses, 8u);
	EXPECT_EQ(p.cl[0].counters().requests, 1u);
	EXPECT_EQ(p.cl[0].waiting_messages(), 8u);

	std::vector<uint32_t> got;
	p.pump(2000, [&] { return got.size() == 8; }, &got);
	ASSERT_EQ(got.size(), 8u);
	for (uint32_t i = 0; i < 8; i++)
		EXPECT_EQ(got[i], i) << "flushed out of order";
	EXPECT_EQ(p.cl[0].counters().flushed, 8u);
	EXPECT_EQ(p.cl[0].waiting_messages(), 0u);
	EXPECT_EQ(p.cl[0].waiting_destinations(), 0u);

	/* Now it is cached: hits, no new request. */
	for (uint32_t i = 0; i < 8; i++)
		w[i] = p.wr_mbuf(0, 100 + i);
	ASSERT_EQ(p.send(0, keys, w, 8), 8);
	EXPECT_EQ(p.cl[0].counters().hits, 8u);
	EXPECT_EQ(p.cl[0].counters().requests, 1u);
	got.clear();
	p.pump(2000, [&] { return got.size() == 8; }, &got);
	EXPECT_EQ(got.size(), 8u);
	EXPECT_EQ(p.cl[0].counters().drops(), 0u);
	EXPECT_EQ(p.in_use(0), 0u);
	EXPECT_EQ(p.in_use(1), 0u);
}

TEST(AhService, InlinePayloadsThatWaitAreCopied)
{
	svc_pair p;
	ASSERT_TRUE(p.up);
	const ah_key k = p.key_to_peer(0);
	uint32_t tag = 7;
	send_wr w = p.wr_inline(0, &tag, 4);
	ASSERT_EQ(p.send(0, &k, &w, 1), 1);
	tag = 0xdead; /* the caller's buffer is theirs again */
	std::vector<uint32_t> got;
	p.pump(2000, [&] { return got.size() == 1; }, &got);
	ASSERT_EQ(got.size(), 1u);
	EXPECT_EQ(got[0], 7u);
	EXPECT_EQ(p.in_use(0), 0u);
}

TEST(AhService, PerDestinationAndTotalBounds)
{
	ah_client_config cc;
	cc.max_per_dest = 4;
	cc.max_total = 10;
	cc.max_dests = 3;
	svc_pair p(1024, cc);
	ASSERT_TRUE(p.up);
	/* 6 to one key: 4 wait, 2 dropped (per destination). */
	ah_key keys[16];
	send_wr w[16];
	for (int i = 0; i < 6; i++) {
		keys[i] = p.key_to_peer(0, 1);
		w[i] = p.wr_mbuf(0, uint32_t(i));
	}
	ASSERT_EQ(p.send(0, keys, w, 6), 6);
	EXPECT_EQ(p.cl[0].counters().pend_dest_full, 2u);
	/* 8 more over two keys: 4 + 2 wait (total 10), 2 dropped (total). */
	for (int i = 0; i < 8; i++) {
		keys[i] = p.key_to_peer(0, 2 + i / 4);
		w[i] = p.wr_mbuf(0, uint32_t(10 + i));
	}
	ASSERT_EQ(p.send(0, keys, w, 8), 8);
	EXPECT_EQ(p.cl[0].counters().pend_total_full, 2u);
	EXPECT_EQ(p.cl[0].waiting_messages(), 10u);
	/* A fourth destination: no slot (max_dests 3). */
	keys[0] = p.key_to_peer(0, 9);
	w[0] = p.wr_mbuf(0, 99);
	ASSERT_EQ(p.send(0, keys, w, 1), 1);
	EXPECT_EQ(p.cl[0].counters().pend_no_dest, 1u);

	std::vector<uint32_t> got;
	p.pump(2000, [&] { return got.size() == 10; }, &got);
	EXPECT_EQ(got.size(), 10u);
	const auto &c = p.cl[0].counters();
	EXPECT_EQ(c.misses, 15u);
	EXPECT_EQ(c.flushed + c.drops(), c.misses) << "every message accounted for";
	EXPECT_EQ(p.in_use(0), 0u);
	EXPECT_EQ(p.in_use(1), 0u);
}

TEST(AhService, FailedCreationDropsByErrno)
{
	svc_pair p;
	ASSERT_TRUE(p.up);
	ibv_ah_attr a = soft_pair::attr_to(p.addr[1]);
	a.grh.sgid_index = 3; /* no such GID: EINVAL */
	ah_key keys[3] = {ah_key::of(a), ah_key::of(a), ah_key::of(a)};
	send_wr w[3] = {p.wr_mbuf(0, 1), p.wr_mbuf(0, 2), p.wr_mbuf(0, 3)};
	ASSERT_EQ(p.send(0, keys, w, 3), 3);
	p.pump(2000, [&] { return p.cl[0].counters().pend_einval == 3; });
	EXPECT_EQ(p.cl[0].counters().pend_einval, 3u);
	EXPECT_EQ(p.cl[0].waiting_destinations(), 0u);
	EXPECT_EQ(p.in_use(0), 0u);
}

TEST(AhService, DeadlinePassesWhileControlThreadStalls)
{
	ah_client_config cc;
	cc.timeout_us = 20000;
	svc_pair p(1024, cc);
	ASSERT_TRUE(p.up);
	/* Stall the control thread for 300 ms (fault: a slow operation). */
	std::atomic<bool> stalled{false};
	std::thread staller([&] {
		g_rt->ctl().call([&] {
			stalled = true;
			rte_delay_us_sleep(300000);
		});
	});
	while (!stalled)
		std::this_thread::yield();
	const ah_key k = p.key_to_peer(0, 77);
	send_wr w = p.wr_mbuf(0, 1);
	ASSERT_EQ(p.send(0, &k, &w, 1), 1);
	p.pump(150, [&] { return p.cl[0].counters().pend_timeout == 1; });
	EXPECT_EQ(p.cl[0].counters().pend_timeout, 1u);
	EXPECT_EQ(p.cl[0].waiting_messages(), 0u);
	/* The destination slot stays reserved until the late answer comes. */
	EXPECT_EQ(p.cl[0].waiting_destinations(), 1u);
	staller.join();
	p.pump(1000, [&] { return p.cl[0].waiting_destinations() == 0; });
	EXPECT_EQ(p.cl[0].waiting_destinations(), 0u);
	EXPECT_EQ(p.in_use(0), 0u);
}

TEST(AhService, EvictionKeepsCacheAndRegistryInStep)
{
	svc_pair p(4);
	ASSERT_TRUE(p.up);
	/* Six destinations through a four-AH registry: two evictions. */
	for (uint32_t f = 1; f <= 6; f++) {
		const ah_key k = p.key_to_peer(0, f);
		send_wr w = p.wr_mbuf(0, f);
		ASSERT_EQ(p.send(0, &k, &w, 1), 1);
		std::vector<uint32_t> got;
		p.pump(2000, [&] { return got.size() == 1; }, &got);
		ASSERT_EQ(got.size(), 1u) << f;
	}
	size_t reg = 0, cached = 0, live = 0;
	g_rt->ctl().call([&] {
		reg = p.svc[0].registry().size();
		live = p.dev[0].live_ahs();
	});
	cached = p.svc[0].cache().size();
	EXPECT_EQ(reg, 4u);
	EXPECT_EQ(cached, 4u);
	EXPECT_EQ(live, 4u);
	/* The two oldest are gone from the cache, the newest present. */
	ah_handle h;
	EXPECT_FALSE(p.svc[0].cache().lookup(p.key_to_peer(0, 1), &h));
	EXPECT_FALSE(p.svc[0].cache().lookup(p.key_to_peer(0, 2), &h));
	EXPECT_TRUE(p.svc[0].cache().lookup(p.key_to_peer(0, 6), &h));
}

TEST(AhService, ApplicationApiErrnos)
{
	svc_pair p(2);
	ASSERT_TRUE(p.up);
	int err = 0;
	ibv_ah_attr a = soft_pair::attr_to(p.addr[1]);
	a.port_num = 2;
	EXPECT_EQ(p.svc[0].create_ah(a, &err), ah_null);
	EXPECT_EQ(err, EINVAL) << "bad port";
	a = soft_pair::attr_to(p.addr[1]);
	a.is_global = 0;
	EXPECT_EQ(p.svc[0].create_ah(a, &err), ah_null);
	EXPECT_EQ(err, EINVAL) << "RoCE port requires a GRH";
	a = soft_pair::attr_to(p.addr[1]);
	a.grh.sgid_index = 9;
	EXPECT_EQ(p.svc[0].create_ah(a, &err), ah_null);
	EXPECT_EQ(err, EINVAL) << "bad sgid_index";

	/* Two held AHs fill a capacity-2 registry: the third is ENOMEM. */
	a = soft_pair::attr_to(p.addr[1]);
	ah_handle h1 = p.svc[0].create_ah(a, &err);
	ASSERT_EQ(err, 0);
	a.grh.flow_label = 5;
	ah_handle h2 = p.svc[0].create_ah(a, &err);
	ASSERT_EQ(err, 0);
	a.grh.flow_label = 6;
	EXPECT_EQ(p.svc[0].create_ah(a, &err), ah_null);
	EXPECT_EQ(err, ENOMEM);
	/* Same attributes again: the same AH, another reference. */
	a.grh.flow_label = 5;
	EXPECT_EQ(p.svc[0].create_ah(a, &err), h2);

	EXPECT_EQ(p.svc[0].destroy_ah(h1), 0);
	EXPECT_EQ(p.svc[0].destroy_ah(h1), EINVAL) << "double destroy";
	EXPECT_EQ(p.svc[0].destroy_ah(ah_handle{12345, 7}), EINVAL) << "never created";
	EXPECT_EQ(p.svc[0].destroy_ah(h2), 0);
	EXPECT_EQ(p.svc[0].destroy_ah(h2), 0);
	EXPECT_EQ(p.svc[0].destroy_ah(h2), EINVAL);

	/* A poll thread's miss when every AH is held: dropped as ENOMEM. */
	a.grh.flow_label = 7;
	ah_handle h3 = p.svc[0].create_ah(a, &err);
	a.grh.flow_label = 8;
	ah_handle h4 = p.svc[0].create_ah(a, &err);
	ASSERT_EQ(err, 0);
	const ah_key k = p.key_to_peer(0, 99);
	send_wr w = p.wr_mbuf(0, 1);
	ASSERT_EQ(p.send(0, &k, &w, 1), 1);
	p.pump(2000, [&] { return p.cl[0].counters().pend_enomem == 1; });
	EXPECT_EQ(p.cl[0].counters().pend_enomem, 1u);
	EXPECT_EQ(p.svc[0].destroy_ah(h3), 0);
	EXPECT_EQ(p.svc[0].destroy_ah(h4), 0);
	EXPECT_EQ(p.in_use(0), 0u);
}

TEST(AhService, BatchCreatesTheMesh)
{
	svc_pair p(20000);
	ASSERT_TRUE(p.up);
	constexpr unsigned n = 10000;
	std::vector<ibv_ah_attr> attrs(n);
	for (unsigned i = 0; i < n; i++) {
		attrs[i] = soft_pair::attr_to(p.addr[1]);
		attrs[i].grh.flow_label = i + 1;
	}
	attrs[17].grh.sgid_index = 4; /* one bad entry does not spoil the rest */
	std::vector<ah_handle> out(n);
	std::vector<int> errs(n);
	EXPECT_EQ(p.svc[0].create_ah_batch(attrs.data(), n, out.data(), errs.data()), n - 1);
	EXPECT_EQ(errs[17], EINVAL);
	EXPECT_EQ(out[17], ah_null);
	EXPECT_EQ(p.svc[0].cache().size(), n - 1);
	/* Every created AH is visible to poll threads. */
	ah_handle h;
	for (unsigned i = 0; i < n; i += 997) {
		if (i == 17)
			continue;
		ASSERT_TRUE(p.svc[0].cache().lookup(ah_key::of(attrs[i]), &h));
		EXPECT_EQ(h, out[i]);
	}
	for (unsigned i = 0; i < n; i++) {
		if (i == 17)
			continue;
		ASSERT_EQ(p.svc[0].destroy_ah(out[i]), 0);
	}
}

TEST(AhService, ReplyPathCreatesOncePerSender)
{
	svc_pair p;
	ASSERT_TRUE(p.up);
	/* Side 0 sends 20 messages; side 1 answers each through the reply
	 * path: one creation for the sender, then cache hits. */
	const ah_key k = p.key_to_peer(0);
	for (uint32_t i = 0; i < 20; i++) {
		send_wr w = p.wr_mbuf(0, i);
		ASSERT_EQ(p.send(0, &k, &w, 1), 1);
	}
	std::vector<recv_wc> at0;
	unsigned answered = 0;
	const unsigned tid = rte_lcore_id();
	poll_thread_online(g_rt->qsbr(), tid);
	const uint64_t end = rte_get_tsc_cycles() + 3 * rte_get_tsc_hz();
	while (rte_get_tsc_cycles() < end && at0.size() < 20) {
		const uint64_t now = rte_get_tsc_cycles();
		p.cl[0].poll(p.q[0], now);
		p.cl[1].poll(p.q[1], now);
		recv_wc wc[32];
		uint16_t n = p.q[1].rx_burst(wc, 32);
		for (uint16_t j = 0; j < n; j++) {
			ah_key rk;
			ASSERT_EQ(p.cl[1].reply_key(wc[j], &rk), 0);
			/* ibv_init_ah_from_wc(3): hop limit 0xff, the sender's
			 * flow label; destination = the sender's GID. */
			ibv_ah_attr want = soft_pair::attr_to(p.addr[0]);
			want.grh.hop_limit = 0xff;
			want.grh.flow_label = rk.flow_label;
			EXPECT_EQ(rk, ah_key::of(want));
			uint32_t tag;
			memcpy(&tag, rte_pktmbuf_mtod_offset(wc[j].mbuf, void *, 40), 4);
			rte_pktmbuf_free(wc[j].mbuf);
			send_wr r = p.wr_mbuf(1, tag + 1000);
			r.remote_qpn = wc[j].src_qp;
			ASSERT_EQ(p.cl[1].send_burst(p.q[1], &rk, &r, 1, now), 1);
			answered++;
		}
		n = p.q[0].rx_burst(wc, 32);
		for (uint16_t j = 0; j < n; j++)
			at0.push_back(wc[j]);
		rte_rcu_qsbr_quiescent(g_rt->qsbr(), tid);
	}
	poll_thread_offline(g_rt->qsbr(), tid);
	EXPECT_EQ(answered, 20u);
	ASSERT_EQ(at0.size(), 20u);
	for (auto &wc : at0) {
		EXPECT_EQ(wc.src_qp, p.qpn[1]);
		rte_pktmbuf_free(wc.mbuf);
	}
	EXPECT_EQ(p.cl[1].counters().requests, 1u) << "one creation per sender";
	EXPECT_EQ(p.cl[1].counters().hits + p.cl[1].counters().misses, 20u);
	EXPECT_EQ(p.svc[1].stats().created, 1u);
	EXPECT_EQ(p.in_use(0), 0u);
	EXPECT_EQ(p.in_use(1), 0u);
}

/* Two poll threads, one per side, miss on 50 new destinations each at
 * once while the control thread serves both services: every key created
 * once per side, every message delivered, nothing dropped. (TSan suite.) */
namespace {
struct racer {
	svc_pair *p;
	int side;
	unsigned sent = 0, received = 0;
};
int race_main(void *arg)
{
	auto *r = static_cast<racer *>(arg);
	svc_pair &p = *r->p;
	const int s = r->side;
	const unsigned tid = rte_lcore_id();
	poll_thread_online(g_rt->qsbr(), tid);
	const uint64_t end = rte_get_tsc_cycles() + 20 * rte_get_tsc_hz();
	unsigned i = 0;
	while (rte_get_tsc_cycles() < end && (i < 400 || p.cl[s].waiting_messages() != 0 || r->received < 400)) {
		const uint64_t now = rte_get_tsc_cycles();
		if (i < 400) {
			ah_key k[4];
			send_wr w[4];
			uint32_t tags[4];
			for (unsigned j = 0; j < 4; j++) {
				k[j] = p.key_to_peer(s, 1 + ((i + j) % 50));
				tags[j] = i + j;
				w[j] = p.wr_inline(s, &tags[j], 4);
			}
			i += p.cl[s].send_burst(p.q[s], k, w, 4, now);
		}
		p.cl[s].poll(p.q[s], now);
		p.q[s].tx_flush();
		recv_wc wc[32];
		uint16_t n = p.q[s].rx_burst(wc, 32);
		for (uint16_t j = 0; j < n; j++)
			rte_pktmbuf_free(wc[j].mbuf);
		r->received += n;
		rte_rcu_qsbr_quiescent(g_rt->qsbr(), tid);
	}
	poll_thread_offline(g_rt->qsbr(), tid);
	r->sent = i;
	return 0;
}
} // namespace

TEST(AhService, TwoPollThreadsMissAtOnce)
{
	/* Deadlines are not what this test checks: on a loaded 2-core machine
	 * (TSan, two spinning poll threads) the control thread can be starved
	 * for longer than the 1 s default. */
	ah_client_config cc;
	cc.timeout_us = 9000000;
	svc_pair p(1024, cc);
	ASSERT_TRUE(p.up);
	unsigned worker = rte_get_next_lcore(-1, 1, 0);
	ASSERT_LT(worker, unsigned(RTE_MAX_LCORE)) << "needs a worker lcore";
	racer a{&p, 0}, b{&p, 1};
	ASSERT_EQ(launch_on_lcore(race_main, &a, worker), 0);
	race_main(&b);
	wait_on_lcore(worker);
	for (racer *r : {&a, &b}) {
		EXPECT_EQ(r->sent, 400u);
		EXPECT_EQ(r->received, 400u);
		const auto &c = p.cl[r->side].counters();
		EXPECT_EQ(c.drops(), 0u) << "timeouts " << c.pend_timeout;
		EXPECT_EQ(c.hits + c.misses, 400u);
		EXPECT_EQ(c.misses, c.flushed);
		const auto &st = p.svc[r->side].stats();
		EXPECT_EQ(st.created, 50u) << "each destination created once";
		EXPECT_EQ(st.created + st.answered_cached, st.requests);
	}
	EXPECT_EQ(p.in_use(0), 0u);
	EXPECT_EQ(p.in_use(1), 0u);
}

/* The control thread's idle nap (control.h): its ceiling is settable, a
 * call() from an application thread ends a nap at once, a post() (what
 * poll threads use: no syscall) is seen when the nap ends, stop() does not
 * wait for it. Misses of the AH service reach the control thread by post. */
TEST(ControlThread, NapCeilingCallWakesPostWaits)
{
	control_thread ct;
	ASSERT_EQ(ct.start("rdgram-nap-t"), 0);
	EXPECT_EQ(ct.max_nap(), control_thread::default_max_nap_ns);
	EXPECT_EQ(ct.set_max_nap(control_thread::min_nap_ns - 1), EINVAL);
	EXPECT_EQ(ct.set_max_nap(1000000001L), EINVAL);
	EXPECT_EQ(ct.max_nap(), control_thread::default_max_nap_ns);
	constexpr long ceiling_ms = 100;
	ASSERT_EQ(ct.set_max_nap(ceiling_ms * 1000000L), 0);
	EXPECT_EQ(ct.max_nap(), ceiling_ms * 1000000L);
	auto ms_since = [](std::chrono::steady_clock::time_point t0) {
		return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
	};
	/* Idle for 3x the ceiling first: the nap grows by half per idle loop
	 * from 20 us, so it is at the ceiling by then. The naps restart from
	 * 20 us with each request, so the idle time is varied by 17 ms steps
	 * to land each call() at another point of a nap: without the wake-up
	 * the five would wait ~2 to ~85 ms for the rest of it (measured: the
	 * median stays under a fifth of the ceiling only with the wake-up). */
	std::vector<double> call_ms;
	for (int i = 0; i < 5; i++) {
		std::this_thread::sleep_for(std::chrono::milliseconds(3 * ceiling_ms + 17 * i));
		const auto t0 = std::chrono::steady_clock::now();
		ct.call([] {});
		call_ms.push_back(ms_since(t0));
	}
	std::sort(call_ms.begin(), call_ms.end());
	EXPECT_LT(call_ms[2], ceiling_ms / 5.0) << "call() did not wake the napping control thread: " << call_ms[0] << " " << call_ms[2] << " " << call_ms[4] << " ms";
	/* A post() waits for the nap to end: at most the ceiling (plus
	 * scheduling slack). */
	std::this_thread::sleep_for(std::chrono::milliseconds(3 * ceiling_ms));
	ctl_request r;
	r.fn = [](ctl_request *q) { q->result = 7; };
	const auto t0 = std::chrono::steady_clock::now();
	ASSERT_TRUE(ct.post(&r));
	while (!r.done.load(std::memory_order_acquire))
		std::this_thread::sleep_for(std::chrono::microseconds(100));
	RDGRAM_TSAN_ACQUIRE(&r);
	EXPECT_EQ(r.result, 7);
	EXPECT_LT(ms_since(t0), ceiling_ms * 3.0);
	/* stop() ends the nap too (after 600 ms idle under a 1 s ceiling the
	 * nap is ~200 ms long). */
	ASSERT_EQ(ct.set_max_nap(1000000000L), 0);
	std::this_thread::sleep_for(std::chrono::milliseconds(6 * ceiling_ms));
	const auto t1 = std::chrono::steady_clock::now();
	ct.stop();
	EXPECT_LT(ms_since(t1), 50.0) << "stop() waited for the nap";
}
