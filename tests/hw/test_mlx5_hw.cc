/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Hardware suite for drivers/mlx5: needs an mlx5 device (ibv_get_device_list
 * + mlx5dv_is_supported) with an active port. Without one it exits 77,
 * which meson reports as SKIP. RDGRAM_MLX5_DEVICE=<name> picks the device.
 *
 * NEVER RUN ON HARDWARE: the machine this was written on has no RDMA
 * device. Everything below is what should hold on a ConnectX; expect the
 * first run on one to find things out.
 *
 * With a device: open it (QP and CQs through verbs, mlx5dv_init_obj), send
 * datagrams from the QP to itself through mlx5_queue (inline and mbuf
 * payloads, with an immediate), check each payload and completion field;
 * on an InfiniBand port compare build_ib_av byte for byte with the AV the
 * provider returns through mlx5dv_init_obj(MLX5DV_OBJ_AH); close and check
 * every mbuf came back.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>
#include <rte_cycles.h>

#include "eal_env.h"
#include "mlx5_device.h"

using namespace rdgram;
using namespace rdgram::mlx5;
using rdgram::test::g_rt;

namespace {

std::string wanted_device()
{
	const char *e = getenv("RDGRAM_MLX5_DEVICE");
	return e != nullptr ? e : "";
}

/* An AH to this port itself. */
bool self_attr(const mlx5_device &d, ibv_ah_attr *a)
{
	*a = ibv_ah_attr{};
	a->port_num = 1;
	a->dlid = d.port().lid;
	if (!d.port().grh_required)
		return true;
	for (size_t i = 0; i < d.port().gids.size(); i++)
		if (!d.port().gids[i].is_zero()) {
			a->is_global = 1;
			a->grh.sgid_index = uint8_t(i);
			a->grh.hop_limit = 64;
			memcpy(a->grh.dgid.raw, d.port().gids[i].raw, 16);
			return true;
		}
	return false;
}

} // namespace

TEST(Mlx5Hw, LoopbackThroughOwnQp)
{
	mlx5_device dev;
	mlx5_config c;
	c.device = wanted_device();
	c.qsbr = g_rt->qsbr();
	c.signal_last = true;
	int rc = -1;
	g_rt->ctl().call([&] { rc = dev.open(c); });
	ASSERT_EQ(rc, 0) << dev.error();
	/* What QUERY_HCA_CAP said (mlx5_caps.h): report it, first time on a
	 * device. A self-addressed AH on IB without a GRH then uses it. */
	printf("compact 16-byte AV: %s%s%s\n", dev.compact_av() ? "yes" : "no",
	       dev.compact_av_note().empty() ? "" : " -- ", dev.compact_av_note().c_str());
	{
		mlx5_queue q;
		queue_params bad;
		bad.max_inline = mlx5_device::max_inline_limit + 1;
		g_rt->ctl().call([&] { rc = dev.create_queue(bad, q); });
		EXPECT_EQ(rc, EINVAL);
		EXPECT_NE(dev.error().find("max_inline"), std::string::npos) << dev.error();
		/* Created, destroyed (every RQ buffer back), created again. */
		g_rt->ctl().call([&] { rc = dev.create_queue({}, q); });
		ASSERT_EQ(rc, 0) << dev.error();
		g_rt->ctl().call([&] { dev.destroy_queue(q); });
		EXPECT_EQ(rte_mempool_in_use_count(dev.mempool()), 0u);
		g_rt->ctl().call([&] { rc = dev.create_queue({}, q); });
		ASSERT_EQ(rc, 0) << dev.error();
		ibv_ah_attr a;
		ASSERT_TRUE(self_attr(dev, &a)) << "no usable GID";
		int err = 0;
		ah_handle h = ah_null;
		g_rt->ctl().call([&] { h = dev.create_ah(a, &err); });
		ASSERT_EQ(err, 0);

		std::vector<uint8_t> pay(48);
		for (size_t i = 0; i < pay.size(); i++)
			pay[i] = uint8_t(i * 3);
		send_wr w[3]{};
		for (auto &x : w) {
			x.ah = h;
			x.remote_qpn = q.qpn();
			x.remote_qkey = c.qkey;
		}
		w[0].flags = send_inline | send_imm;
		w[0].inline_data = pay.data();
		w[0].inline_len = uint32_t(pay.size());
		w[0].imm_data = htobe32(0x5150);
		w[1].mbuf = rte_pktmbuf_alloc(dev.mempool());
		ASSERT_NE(w[1].mbuf, nullptr);
		memcpy(rte_pktmbuf_append(w[1].mbuf, 48), pay.data(), 48);
		/* The same 48 bytes as a chain of 14, 0 and 34 bytes: two data
		 * segments (the empty one gets none), gathered by the device.
		 * (Tested only against the model so far: docs/HARDWARE.md.) */
		const uint16_t cut[3] = {14, 0, 34};
		const uint8_t *src = pay.data();
		for (uint16_t l : cut) {
			rte_mbuf *m = rte_pktmbuf_alloc(dev.mempool());
			ASSERT_NE(m, nullptr);
			memcpy(rte_pktmbuf_append(m, l), src, l);
			src += l;
			if (w[2].mbuf == nullptr)
				w[2].mbuf = m;
			else
				ASSERT_EQ(rte_pktmbuf_chain(w[2].mbuf, m), 0);
		}
		ASSERT_EQ(q.tx_burst(w, 3), 3);
		EXPECT_EQ(q.counters().tx_too_many_segs, 0u) << "QP created with too few SGEs";

		std::vector<recv_wc> got;
		const uint64_t end = rte_get_tsc_cycles() + rte_get_tsc_hz();
		recv_wc wcs[mlx5_queue::max_burst];
		while (got.size() < 3 && rte_get_tsc_cycles() < end) {
			uint16_t k = q.rx_burst(wcs, mlx5_queue::max_burst);
			got.insert(got.end(), wcs, wcs + k);
			q.tx_flush();
		}
		ASSERT_EQ(got.size(), 3u) << "rx_cqe_err " << q.counters().rx_cqe_err << " tx_cqe_err "
					  << q.counters().tx_cqe_err;
		for (auto &wc : got) {
			EXPECT_EQ(wc.byte_len, grh_len + 48);
			EXPECT_EQ(wc.src_qp, q.qpn());
			EXPECT_EQ(0, memcmp(rte_pktmbuf_mtod_offset(wc.mbuf, uint8_t *, grh_len), pay.data(), 48));
			rte_pktmbuf_free(wc.mbuf);
		}
		EXPECT_TRUE(got[0].wc_flags & wc_with_imm);
		EXPECT_EQ(got[0].imm_data, htobe32(0x5150));
		g_rt->ctl().call([&] { err = dev.destroy_ah(h); });
		EXPECT_EQ(err, 0);
		g_rt->ctl().call([&] { dev.destroy_queue(q); });
	}
	EXPECT_EQ(rte_mempool_in_use_count(dev.mempool()), 0u);
	g_rt->ctl().call([&] { dev.close(); });
}

/* The syscall-free IB AV must be the provider's, byte for byte. */
TEST(Mlx5Hw, IbAvIdenticalToProvider)
{
	mlx5_device dev;
	mlx5_config c;
	c.device = wanted_device();
	int rc = -1;
	g_rt->ctl().call([&] { rc = dev.open(c); });
	ASSERT_EQ(rc, 0) << dev.error();
	if (dev.port().link != link_layer::infiniband)
		GTEST_SKIP() << "RoCE port: the AV always comes from the provider";
	for (int rate : {0, 3, 7, 16}) {
		for (int global : {0, 1}) {
			ibv_ah_attr a;
			ASSERT_TRUE(self_attr(dev, &a));
			a.static_rate = uint8_t(rate);
			a.sl = 3;
			if (global && !dev.port().gids.empty()) {
				a.is_global = 1;
				a.grh.hop_limit = 5;
				a.grh.flow_label = 0x123;
				memcpy(a.grh.dgid.raw, dev.port().gids[0].raw, 16);
			}
			mlx5_av mine, theirs;
			ASSERT_EQ(build_ib_av(a, dev.port().grh_required, &mine), 0);
			g_rt->ctl().call([&] { rc = dev.provider_av(a, &theirs); });
			ASSERT_EQ(rc, 0);
			EXPECT_EQ(0, memcmp(&mine.wqe, &theirs.wqe, sizeof(mine.wqe)))
				<< "rate " << rate << " global " << global;
		}
	}
	g_rt->ctl().call([&] { dev.close(); });
}

int main(int argc, char **argv)
{
	std::string name;
	int rc = mlx5_device::find_device(&name);
	if (rc != 0) {
		printf("SKIP: no mlx5 device (%s)\n", strerror(rc));
		return 77;
	}
	if (!wanted_device().empty())
		name = wanted_device();
	printf("mlx5 device: %s\n", name.c_str());
	::testing::InitGoogleTest(&argc, argv);
	::testing::AddGlobalTestEnvironment(new rdgram::test::eal_environment);
	return RUN_ALL_TESTS();
}
