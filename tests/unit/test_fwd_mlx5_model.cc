/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-fwd's poll loop (apps/rdgram-fwd/fwd_loop.h) on the mlx5 driver's
 * queue, unmodified, against the device model in tests/model: the model
 * executes the WQEs the loop's replies become and delivers them back (it
 * loops to its own QPN only), so K datagrams sent to the QP itself
 * ping-pong through reflect mode until the loop's packet budget is spent.
 * The AHs come from rdgram's AH service on the control thread, over a
 * model device that writes each AV as mlx5_create_ah would (RoCEv2).
 *
 * What it shows: the loop's template instantiates and runs on mlx5_queue
 * (reply AH from the CQE's GRH area, send from the receiving QP with its
 * own Q_Key, one doorbell per burst), the accounting closes (delivered =
 * reflected = sent), every WQE passes the model's checks, and every mbuf is
 * back in its pool at the end. What it does not: anything about a
 * ConnectX (the model is written from mlx5dv.h and rdma-core, not from a
 * device), nor the mlx5_device set-up path, which needs libmlx5 and a
 * device. The test thread plays the poll thread and drives the model
 * between passes (fwd_loop's poll_once), so no model state is shared
 * between threads.
 */
#include <cstring>
#include <map>

#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "eal_env.h"
#include "fwd_loop.h"
#include "mlx5_datapath.h"
#include "model/mlx5_model.h"
#include "rdgram/ah_service.h"

using namespace rdgram;
using namespace rdgram::test;
using rdgram::mlx5::mlx5_av;
using rdgram::mlx5::mlx5_queue;

namespace {

constexpr uint32_t lkey_base = 0x5a000;

wire::gid v4gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	const uint8_t ip[4] = {a, b, c, d};
	rte_be32_t be;
	memcpy(&be, ip, 4);
	return wire::gid::from_v4(be);
}

/* The device side of the model for the AH service: create_ah writes a
 * RoCEv2 AV as mlx5_create_ah fills it (providers/mlx5/verbs.c: UDP
 * source port in rlid, GRH fields, the destination MAC) into the table
 * the queue reads. (Control thread, as device.h says.) */
class model_device final : public device {
public:
	model_device(ah_table<mlx5_av> &t, const wire::gid &self) : ahs_(t)
	{
		attr_.link = link_layer::ethernet;
		attr_.grh_required = true;
		attr_.max_ah = 64;
		attr_.active_mtu = 4096;
		attr_.gids = {self};
	}
	const char *driver_name() const override { return "mlx5 model"; }
	const port_attr &port() const override { return attr_; }
	ah_handle create_ah(const ibv_ah_attr &a, int *err) override
	{
		uint32_t slot;
		if (!a.is_global || a.grh.sgid_index >= attr_.gids.size()) {
			*err = EINVAL;
			return ah_null;
		}
		if (!ahs_.reserve(&slot)) {
			*err = ENOMEM;
			return ah_null;
		}
		mlx5_av av{};
		av.wqe.rlid = htobe16(0xc123);
		av.wqe.hop_limit = a.grh.hop_limit;
		av.wqe.tclass = a.grh.traffic_class;
		av.wqe.grh_gid_fl = htobe32(uint32_t(a.grh.sgid_index) << 20 | a.grh.flow_label);
		memcpy(av.wqe.rgid, a.grh.dgid.raw, 16);
		const uint8_t mac[6] = {0x02, 0, 0, 0, 0x11, 0x22};
		memcpy(av.wqe.rmac, mac, 6);
		av.global = 1;
		ahs_.av_at(slot) = av;
		live_++;
		*err = 0;
		return ahs_.publish(slot);
	}
	int destroy_ah(ah_handle h) override
	{
		const int rc = ahs_.retire(h);
		if (rc == 0)
			live_--;
		return rc;
	}
	void reclaim() override { ahs_.reclaim(); }
	uint32_t live_ahs() const override { return live_; }

private:
	ah_table<mlx5_av> &ahs_;
	port_attr attr_{};
	uint32_t live_ = 0;
};

TEST(FwdLoopMlx5Model, ReflectPingPongClosesTheAccounting)
{
	constexpr unsigned k = 8;     /* datagrams in flight */
	constexpr unsigned m = 600;   /* the loop's packet budget */
	const wire::gid self = v4gid(10, 0, 0, 1);

	test::mlx5_model model;
	test::mlx5_model_config mc;
	mc.roce = true;
	mc.local_gid = self;
	ASSERT_EQ(model.init(mc), 0);
	rte_mempool *mp = rte_pktmbuf_pool_create("fwdmlx5", 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
	ASSERT_NE(mp, nullptr);
	struct mr_ctx {
		ibv::lkey_map *mrs;
		test::mlx5_model *model;
	} mctx;
	ibv::lkey_map mrs;
	mctx = {&mrs, &model};
	rte_mempool_mem_iter(
		mp,
		[](rte_mempool *, void *o, rte_mempool_memhdr *mh, unsigned i) {
			auto *c = static_cast<mr_ctx *>(o);
			c->mrs->add(uintptr_t(mh->addr), mh->len, lkey_base + i);
			c->model->add_mr(uintptr_t(mh->addr), mh->len, lkey_base + i);
		},
		&mctx);
	ah_table<mlx5_av> ahs;
	ASSERT_EQ(ahs.init(64, SOCKET_ID_ANY, g_rt->qsbr()), 0);

	auto ps = std::make_unique<fwd::port_state<mlx5_queue>>();
	mlx5::queue_config qc;
	qc.qkey = mc.qkey;
	qc.roce = true;
	qc.max_inline = mc.max_inline;
	qc.max_send_sge = mc.max_send_sge;
	ASSERT_EQ(ps->q.attach(model.rings(), qc, mp, mrs, &ahs), 0);
	ps->q.post_recvs();

	model_device dev(ahs, self);
	ah_service svc;
	ah_service_config sc;
	sc.capacity = 64;
	sc.qsbr = g_rt->qsbr();
	ASSERT_EQ(svc.start(dev, g_rt->ctl(), sc), 0);
	ah_client_config cc;
	cc.mp = mp;
	ASSERT_EQ(svc.add_client(ps->cl[0], cc), 0);
	ps->qpn[0] = mc.qpn;
	ps->qkey[0] = mc.qkey;
	ps->nqp = 1;

	fwd::shared_budget budget;
	budget.max = m;
	auto x = std::make_unique<fwd::loop_ctx<mlx5_queue>>();
	x->ports[0] = ps.get();
	x->nports = 1;
	x->reflect = true;
	x->qsbr = g_rt->qsbr();
	x->budget = &budget;

	/* K tagged datagrams from the QP to itself start the ping-pong. */
	ibv_ah_attr at{};
	at.is_global = 1;
	at.port_num = 1;
	at.grh.hop_limit = 64;
	memcpy(at.grh.dgid.raw, self.raw, 16);
	int err = 0;
	const ah_handle h = svc.create_ah(at, &err);
	ASSERT_EQ(err, 0);
	send_wr wrs[k];
	for (unsigned i = 0; i < k; i++) {
		rte_mbuf *mb = rte_pktmbuf_alloc(mp);
		ASSERT_NE(mb, nullptr);
		char *p = rte_pktmbuf_append(mb, 64);
		memset(p, 0, 64);
		snprintf(p, 64, "ping %u", i);
		wrs[i] = send_wr{h, mc.qpn, mc.qkey, mb, nullptr, 0, 0, 0};
	}
	ASSERT_EQ(ps->q.tx_burst(wrs, k), k);

	const unsigned tid = rte_lcore_id();
	poll_thread_online(g_rt->qsbr(), tid);
	const uint64_t end = rte_get_tsc_cycles() + 20 * rte_get_tsc_hz();
	std::map<std::string, unsigned> payloads;
	uint64_t wqes = 0;
	while (rte_get_tsc_cycles() < end) {
		model.doorbell();
		model.process();
		for (const auto &w : model.executed) {
			payloads[std::string(reinterpret_cast<const char *>(w.payload.data()))]++;
			EXPECT_EQ(w.dqpn, mc.qpn);
			EXPECT_EQ(w.qkey, mc.qkey);
			EXPECT_EQ(w.len, 64u);
		}
		wqes += model.executed.size();
		model.executed.clear();
		x->poll_once(rte_get_tsc_cycles(), tid);
		if (budget.spent() && x->idle_now() && wqes == k + m)
			break;
	}
	poll_thread_offline(g_rt->qsbr(), tid);

	/* The loop's counters: every completion within the budget answered. */
	const auto &q = ps->qc[0];
	EXPECT_EQ(q.rx, m);
	EXPECT_EQ(q.reflected, m);
	EXPECT_EQ(q.reply_bad_wc, 0u);
	EXPECT_EQ(q.tx_full, 0u);
	const auto &r = ps->cl[0].counters();
	EXPECT_EQ(r.hits + r.flushed, m);
	EXPECT_EQ(r.drops(), 0u);
	EXPECT_EQ(r.requests, 1u) << "one reply AH for the one sender";
	const auto &dc = ps->q.counters();
	EXPECT_EQ(dc.rx_pkts, m);
	EXPECT_EQ(dc.tx_pkts, k + m);
	EXPECT_EQ(dc.drops(), 0u);
	/* The model: every WQE executed and delivered; nothing it objects to. */
	EXPECT_EQ(wqes, k + m);
	EXPECT_EQ(model.delivered, k + m);
	EXPECT_EQ(model.drop_qpn + model.drop_qkey + model.drop_no_rwqe, 0u);
	EXPECT_TRUE(model.violations.empty()) << model.violations.front();
	/* Payloads carried unchanged: only the K tags, each bounced in turn. */
	EXPECT_EQ(payloads.size(), k);
	for (const auto &[p, n] : payloads)
		EXPECT_GE(n, (k + m) / k - 1) << p;

	svc.remove_client(ps->cl[0]);
	ps->cl[0].fini();
	EXPECT_EQ(svc.destroy_ah(h), 0);
	svc.stop();
	/* The K datagrams past the budget wait in the receive ring; detach
	 * frees them with the posted buffers: every mbuf is back. */
	ps->q.detach();
	EXPECT_EQ(rte_mempool_in_use_count(mp), 0u);
	ahs.fini();
	rte_mempool_free(mp);
}

} // namespace
