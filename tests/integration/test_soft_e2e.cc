/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * End to end between two poll threads (EAL lcores): N messages through the
 * soft driver over a net_ring pair must all arrive intact, in order, with
 * the sender's QPN and GID; every mbuf returns to its pool.
 */
#include <atomic>
#include <vector>

#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_launch.h>

#include "accounting.h"
#include "eal_env.h"

using namespace rdgram;
using namespace rdgram::test;

namespace {

struct params {
	bool v6;
	bool from_mbuf;
	bool imm;
	uint32_t size;
};

struct sender_ctx {
	soft_pair *p;
	ah_handle h;
	uint32_t n;
	params prm;
	std::atomic<bool> failed{false};
};

void fill(uint8_t *d, uint32_t size, uint32_t i)
{
	for (uint32_t k = 0; k < size; k++)
		d[k] = uint8_t(i * 31 + k);
	if (size >= 4)
		memcpy(d, &i, 4);
}

int sender_main(void *arg)
{
	auto *x = static_cast<sender_ctx *>(arg);
	soft::soft_queue &q = x->p->q[0];
	const unsigned tid = rte_lcore_id();
	poll_thread_online(g_rt->qsbr(), tid);
	std::vector<uint8_t> buf(x->prm.size);
	const uint64_t deadline = rte_rdtsc() + 20 * rte_get_tsc_hz();
	uint32_t i = 0;
	while (i < x->n && rte_rdtsc() < deadline) {
		send_wr w[8];
		unsigned k = 0;
		std::vector<std::vector<uint8_t>> keep;
		for (; k < 8 && i + k < x->n; k++) {
			w[k] = send_wr{x->h, x->p->qpn[1], x->p->qkey, nullptr, nullptr, 0, 0, 0};
			if (x->prm.imm) {
				w[k].flags |= send_imm;
				w[k].imm_data = rte_cpu_to_be_32(i + k);
			}
			if (x->prm.from_mbuf) {
				rte_mbuf *m = rte_pktmbuf_alloc(x->p->dev[0].mempool());
				if (m == nullptr)
					break;
				fill(reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, uint16_t(x->prm.size))),
				     x->prm.size, i + k);
				w[k].mbuf = m;
			} else {
				keep.emplace_back(x->prm.size);
				fill(keep.back().data(), x->prm.size, i + k);
				w[k].inline_data = keep.back().data();
				w[k].inline_len = x->prm.size;
				w[k].flags |= send_inline;
			}
		}
		uint16_t took = q.tx_burst(w, uint16_t(k));
		for (unsigned j = took; j < k; j++)
			if (w[j].mbuf != nullptr)
				rte_pktmbuf_free(w[j].mbuf);
		i += took;
		rte_rcu_qsbr_quiescent(g_rt->qsbr(), tid);
	}
	while (q.tx_pending() != 0 && rte_rdtsc() < deadline)
		q.tx_flush();
	if (i != x->n)
		x->failed = true;
	poll_thread_offline(g_rt->qsbr(), tid);
	return 0;
}

class SoftE2E : public ::testing::TestWithParam<params> {};

TEST_P(SoftE2E, AllArriveIntact)
{
	const params prm = GetParam();
	soft_pair p(prm.v6);
	ASSERT_TRUE(p.ok);
	if (rte_lcore_count() < 2)
		GTEST_SKIP() << "needs two lcores (this process may use only one CPU)";
	ah_handle h = p.ah_from(0);
	ASSERT_NE(h, ah_null);
	const uint32_t N = 20000;
	sender_ctx x{&p, h, N, prm};
	unsigned worker = rte_get_next_lcore(rte_get_main_lcore(), 1, 0);
	ASSERT_EQ(launch_on_lcore(sender_main, &x, worker), 0);

	std::vector<uint8_t> want(prm.size);
	uint32_t got = 0, bad = 0;
	const uint64_t deadline = rte_rdtsc() + 20 * rte_get_tsc_hz();
	recv_wc wc[32];
	while (got < N && rte_rdtsc() < deadline) {
		uint16_t n = p.q[1].rx_burst(wc, 32);
		for (uint16_t k = 0; k < n; k++) {
			fill(want.data(), prm.size, got);
			bool ok = wc[k].src_qp == p.qpn[0] && wc[k].qp_num == p.qpn[1] && wc[k].sgid == p.addr[0] &&
				  wc[k].dgid == p.addr[1] && wc[k].byte_len == 40 + prm.size &&
				  (prm.size == 0 ||
				   memcmp(rte_pktmbuf_mtod_offset(wc[k].mbuf, uint8_t *, 40), want.data(), prm.size) == 0) &&
				  bool(wc[k].wc_flags & wc_with_imm) == prm.imm &&
				  (!prm.imm || wc[k].imm_data == rte_cpu_to_be_32(got)) &&
				  wc[k].l3 == (prm.v6 ? l3_type::ipv6 : l3_type::ipv4);
			bad += !ok;
			got++;
			rte_pktmbuf_free(wc[k].mbuf);
		}
	}
	wait_on_lcore(worker);
	EXPECT_FALSE(x.failed.load());
	EXPECT_EQ(got, N);
	EXPECT_EQ(bad, 0u);
	EXPECT_EQ(p.q[1].counters().rx_drops(), 0u);
	EXPECT_EQ(p.q[0].counters().tx_drops(), 0u);
	EXPECT_EQ(p.q[0].counters().tx_pkts, N);
	g_rt->ctl().call([&] { EXPECT_EQ(p.dev[0].destroy_ah(h), 0); });
	EXPECT_EQ(p.in_use(0), 0u) << "sender mbufs leaked";
	EXPECT_EQ(p.in_use(1), 0u) << "receiver mbufs leaked";
	/* The accounting invariant (tests/common/accounting.h). */
	accounting a("soft_e2e " + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
	uint32_t live = 0;
	g_rt->ctl().call([&] { live = p.dev[0].live_ahs() + p.dev[1].live_ahs(); });
	a.sent(x.failed ? 0 : N);
	a.received(got);
	a.sender(p.q[0].counters());
	a.receiver(p.q[1].counters());
	a.live_ahs(live);
	a.pool(p.dev[0].mempool());
	a.pool(p.dev[1].mempool());
	a.check();
}

INSTANTIATE_TEST_SUITE_P(Variants, SoftE2E,
			 ::testing::Values(params{false, false, false, 64}, params{false, true, false, 1000},
					   params{true, false, true, 3}, params{true, true, true, 4096},
					   params{false, false, true, 0}),
			 [](const ::testing::TestParamInfo<params> &i) {
				 return std::string(i.param.v6 ? "v6" : "v4") +
					(i.param.from_mbuf ? "_mbuf" : "_inline") + (i.param.imm ? "_imm" : "") + "_" +
					std::to_string(i.param.size);
			 });

} // namespace
