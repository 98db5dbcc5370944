/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * EFA hardware suite (meson suite 'hw'): drivers/efa on a real EFA device.
 *
 * THIS SUITE HAS NEVER RUN ON HARDWARE. It was written and compiled where
 * no EFA device exists; there it exits 77 before starting anything, which
 * meson reports as SKIP. Every expectation below comes from the man pages
 * and the rdma-core 44 EFA provider, not from a run. Whoever first runs it
 * on an EFA instance: see docs/HARDWARE.md.
 *
 * With a device it checks: open (efadv_query_device caps, port 1, GIDs,
 * PD); an AH to the port's own GID and its ahn (efadv_query_ah); then for
 * a UD QP and for an SRD QP: send to itself through that AH (mbuf and
 * inline payloads, with and without immediate data), receive every
 * datagram, wc.slid == that ahn, src_qp == the QP, byte_len == 40 +
 * payload with the payload after the 40-byte GRH area, the immediate
 * data, every send completion reaped without error.
 *
 * Select a device with RDGRAM_EFA_DEVICE=<ibv name> (default: the first).
 */
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include "eal_env.h"
#include "efa_device.h"

using namespace rdgram;
using namespace rdgram::efa;

namespace {

std::string wanted_device()
{
	const char *e = getenv("RDGRAM_EFA_DEVICE");
	return e != nullptr ? e : "";
}

struct hw_fixture : ::testing::Test {
	efa_device dev;
	rte_mempool *mp = nullptr;

	/* Opens the device with its own pool of 4095 mbufs; srd: every
	 * queue SRD. */
	void open(bool srd)
	{
		efa_config cfg;
		cfg.device_name = wanted_device();
		cfg.nb_mbufs = 4095;
		cfg.srd = srd;
		ASSERT_EQ(dev.open(cfg), 0) << dev.error();
		mp = dev.mempool();
		ASSERT_NE(mp, nullptr);
		ASSERT_EQ(dev.register_mempool(mp), 0) << "registered at open already: 0";
	}
	void SetUp() override { open(false); }
	void TearDown() override
	{
		if (mp != nullptr) {
			EXPECT_EQ(rte_mempool_in_use_count(mp), 0u) << "mbufs not returned";
		}
		dev.close();
	}
	ibv_ah_attr self_attr() const
	{
		ibv_ah_attr a{};
		a.is_global = 1;
		a.port_num = 1;
		memcpy(a.grh.dgid.raw, dev.port().gids[0].raw, 16);
		return a;
	}

	/* Sends n datagrams from q to itself and checks what comes back. */
	void loopback(bool srd)
	{
		if (srd) {
			dev.close();
			open(true);
		}
		int err;
		ah_handle ah = dev.create_ah(self_attr(), &err);
		ASSERT_EQ(err, 0) << dev.error();
		const uint16_t ahn = dev.ahn_of(ah);
		ASSERT_NE(ahn, ahn_unknown);

		efa_queue q;
		queue_params bad;
		bad.signal_every = 2;
		EXPECT_EQ(dev.create_queue(bad, q), EINVAL);
		EXPECT_NE(dev.error().find("signal_every"), std::string::npos) << dev.error();
		ASSERT_EQ(dev.create_queue({}, q), 0) << dev.error();
		EXPECT_EQ(q.srd(), srd);

		constexpr unsigned n = 16;
		send_wr wrs[n];
		uint8_t inl[n][32];
		for (unsigned i = 0; i < n; i++) {
			send_wr &w = wrs[i];
			memset(&w, 0, sizeof(w));
			w.ah = ah;
			w.remote_qpn = q.qp_num();
			w.remote_qkey = q.qkey();
			const uint32_t len = 16 + i;
			if (i % 2 == 0) {
				rte_mbuf *m = rte_pktmbuf_alloc(mp);
				ASSERT_NE(m, nullptr);
				auto *p = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, uint16_t(len)));
				for (uint32_t j = 0; j < len; j++)
					p[j] = uint8_t(i * 7 + j);
				w.mbuf = m;
			} else {
				for (uint32_t j = 0; j < len; j++)
					inl[i][j] = uint8_t(i * 7 + j);
				w.inline_data = inl[i];
				w.inline_len = len;
				w.flags = send_inline;
			}
			if (i % 4 == 1) {
				w.flags |= send_imm;
				w.imm_data = htonl(0xabc000 + i);
			}
		}
		unsigned sent = 0;
		const uint64_t deadline = rte_get_tsc_cycles() + 2 * rte_get_tsc_hz();
		while (sent < n && rte_get_tsc_cycles() < deadline)
			sent += q.tx_burst(wrs + sent, uint16_t(n - sent));
		ASSERT_EQ(sent, n);

		bool got[n] = {};
		unsigned nrx = 0;
		recv_wc wcs[efa_queue::max_burst];
		while (nrx < n && rte_get_tsc_cycles() < deadline) {
			const uint16_t k = q.rx_burst(wcs, efa_queue::max_burst);
			for (uint16_t r = 0; r < k; r++) {
				recv_wc &wc = wcs[r];
				EXPECT_EQ(wc.slid, ahn) << "the receiver's ahn for its own GID";
				EXPECT_EQ(wc.src_qp, q.qp_num());
				EXPECT_EQ(wc.qp_num, q.qp_num());
				ASSERT_GE(wc.byte_len, wire::grh_len + 16);
				const uint32_t len = wc.byte_len - uint32_t(wire::grh_len);
				const unsigned i = len - 16;
				ASSERT_LT(i, n);
				EXPECT_FALSE(got[i]) << "datagram " << i << " twice";
				got[i] = true;
				const uint8_t *p = rte_pktmbuf_mtod_offset(wc.mbuf, const uint8_t *, wire::grh_len);
				for (uint32_t j = 0; j < len; j++)
					ASSERT_EQ(p[j], uint8_t(i * 7 + j)) << "datagram " << i << " byte " << j;
				if (i % 4 == 1) {
					EXPECT_TRUE(wc.wc_flags & wc_with_imm);
					EXPECT_EQ(ntohl(wc.imm_data), 0xabc000 + i);
				} else {
					EXPECT_FALSE(wc.wc_flags & wc_with_imm);
				}
				rte_pktmbuf_free(wc.mbuf);
				nrx++;
			}
		}
		EXPECT_EQ(nrx, n) << "datagrams received";
		while (q.tx_pending() != 0 && rte_get_tsc_cycles() < deadline)
			q.tx_flush();
		EXPECT_EQ(q.tx_pending(), 0u);
		EXPECT_EQ(q.counters().tx_cqe_errors, 0u);
		EXPECT_EQ(q.counters().rx_cqe_errors, 0u);
		EXPECT_EQ(q.counters().tx_drops(), 0u);
		dev.destroy_queue(q);
		EXPECT_EQ(dev.destroy_ah(ah), 0);
	}
};

using EfaHw = hw_fixture;

TEST_F(EfaHw, OpenAndCaps)
{
	const efa_caps &c = dev.caps();
	EXPECT_GT(c.max_sq_wr, 0u);
	EXPECT_GT(c.max_rq_wr, 0u);
	EXPECT_GE(c.max_sq_sge, 1);
	EXPECT_FALSE(dev.port().gids.empty());
	EXPECT_GE(dev.port().active_mtu, 1024u);
	EXPECT_TRUE(dev.port().grh_required);
	printf("efa %s: max_sq_wr %u max_rq_wr %u inline %u max_rdma %u caps 0x%x (rnr_retry %d, "
	       "cq_with_sgid %d, rdma_read %d) mtu %u max_ah %u numa %d\n",
	       dev.name().c_str(), c.max_sq_wr, c.max_rq_wr, c.inline_buf_size, c.max_rdma_size,
	       c.device_caps, c.rnr_retry, c.cq_with_sgid, c.rdma_read, dev.port().active_mtu,
	       dev.port().max_ah, dev.port().numa_node);
}

TEST_F(EfaHw, AhToOwnGidHasAnAhn)
{
	int err;
	ah_handle h = dev.create_ah(self_attr(), &err);
	ASSERT_EQ(err, 0) << dev.error();
	const uint16_t ahn = dev.ahn_of(h);
	EXPECT_NE(ahn, ahn_unknown);
	/* The same answer straight from libefa, with the struct's full size. */
	uint16_t again = 0;
	EXPECT_EQ(query_ahn(verbs_ah_ops, dev.ahs().lookup(h)->ah, sizeof(efadv_ah_attr), &again), 0);
	EXPECT_EQ(again, ahn);
	EXPECT_EQ(dev.destroy_ah(h), 0);
	EXPECT_EQ(dev.destroy_ah(h), EINVAL);
}

TEST_F(EfaHw, EinvalForZeroGid)
{
	ibv_ah_attr a = self_attr();
	memset(a.grh.dgid.raw, 0, 16);
	int err;
	EXPECT_EQ(dev.create_ah(a, &err), ah_null);
	EXPECT_NE(err, 0);
	printf("zero dgid: %s (errno %d)\n", dev.error().c_str(), err);
}

TEST_F(EfaHw, UdLoopback) { loopback(false); }

TEST_F(EfaHw, SrdLoopback) { loopback(true); }

} // namespace

/* Checks for a device before anything else (no EAL, no gtest): without
 * one the suite is skipped, exit code 77. */
int main(int argc, char **argv)
{
	const std::vector<std::string> devs = efa_device::list();
	const std::string want = wanted_device();
	bool found = false;
	for (const std::string &d : devs)
		found |= want.empty() || d == want;
	if (!found) {
		if (want.empty())
			printf("SKIP: no EFA device (no ibv device answers efadv_query_device)\n");
		else
			printf("SKIP: no EFA device named %s\n", want.c_str());
		return 77;
	}
	::testing::InitGoogleTest(&argc, argv);
	::testing::AddGlobalTestEnvironment(new rdgram::test::eal_environment);
	return RUN_ALL_TESTS();
}
