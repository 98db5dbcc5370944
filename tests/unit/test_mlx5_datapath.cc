/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/mlx5's data path (mlx5_queue) run unmodified against the device
 * model in tests/model: every WQE it writes is compared byte for byte with
 * the WQE rdma-core's own inline helpers build (mlx5dv_set_ctrl_seg,
 * mlx5dv_set_dgram_seg, mlx5dv_set_data_seg; the inline segment, which has
 * no helper, from mlx5dv.h's definition), and the model executes it:
 * loopback delivery through CQE64s, requester CQEs, error CQEs.
 *
 * This is a model, not a device: it shows the driver writes what the
 * layouts in mlx5dv.h say and copes with the CQEs they describe, not that
 * a ConnectX accepts it (tests/hw/test_mlx5_hw.cc is for that).
 */
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "eal_env.h"
#include "mlx5_av.h"
#include "mlx5_datapath.h"
#include "model/mlx5_model.h"

using namespace rdgram;
using namespace rdgram::mlx5;
using namespace rdgram::test;

namespace {

constexpr uint32_t lkey_base = 0x5a000;

/* A queue on a model, with a mempool whose memory both know. */
struct rig {
	mlx5_model model;
	rte_mempool *mp = nullptr;
	ibv::lkey_map mrs;
	ah_table<mlx5_av> ahs;
	mlx5_queue q;
	queue_config qc;
	uint64_t sent = 0; /* WQEs posted since attach, for the signalling rule */
	bool ok = false;

	explicit rig(const mlx5_model_config &mc, queue_config c = {}, uint16_t room = RTE_MBUF_DEFAULT_BUF_SIZE)
	{
		static unsigned seq = 0;
		char name[32];
		snprintf(name, sizeof(name), "mlx5t%u", seq++);
		/* No per-lcore cache: the in-use count is then exact. */
		mp = rte_pktmbuf_pool_create(name, 1023, 0, 0, room, SOCKET_ID_ANY);
		if (mp == nullptr || model.init(mc) != 0)
			return;
		rte_mempool_mem_iter(
			mp,
			[](rte_mempool *, void *o, rte_mempool_memhdr *mh, unsigned i) {
				auto *r = static_cast<rig *>(o);
				r->mrs.add(uintptr_t(mh->addr), mh->len, lkey_base + i);
				r->model.add_mr(uintptr_t(mh->addr), mh->len, lkey_base + i);
			},
			this);
		if (ahs.init(64, SOCKET_ID_ANY, nullptr) != 0)
			return;
		c.qkey = mc.qkey;
		c.roce = mc.roce;
		c.max_inline = mc.max_inline;
		c.max_send_sge = mc.max_send_sge;
		c.mtu = mc.mtu < c.mtu ? mc.mtu : c.mtu;
		qc = c;
		if (q.attach(model.rings(), c, mp, mrs, &ahs) != 0)
			return;
		q.post_recvs();
		ok = true;
	}
	~rig()
	{
		q.detach();
		ahs.fini();
		rte_mempool_free(mp);
	}
	unsigned in_use() const { return rte_mempool_in_use_count(mp); }

	ah_handle add_ah(const mlx5_av &av)
	{
		uint32_t slot;
		if (!ahs.reserve(&slot))
			return ah_null;
		ahs.av_at(slot) = av;
		return ahs.publish(slot);
	}
};

/* A RoCEv2 AV as mlx5_create_ah fills it (providers/mlx5/verbs.c): UDP
 * source port in rlid, SL in stat_rate_sl 3:1, GRH fields, the MAC. */
mlx5_av roce_av(const wire::gid &dst, uint8_t sgid_index = 0)
{
	mlx5_av a{};
	a.wqe.rlid = htobe16(0xc123);
	a.wqe.stat_rate_sl = uint8_t(0 << 4 | (3 & 0x7) << 1);
	a.wqe.tclass = 0x68;
	a.wqe.hop_limit = 64;
	a.wqe.grh_gid_fl = htobe32(uint32_t(sgid_index) << 20 | 0x12345);
	memcpy(a.wqe.rgid, dst.raw, 16);
	const uint8_t mac[6] = {0x02, 0, 0, 0, 0x11, 0x22};
	memcpy(a.wqe.rmac, mac, 6);
	a.global = 1;
	return a;
}

wire::gid v4gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	const uint8_t ip[4] = {a, b, c, d};
	rte_be32_t be;
	memcpy(&be, ip, 4);
	return wire::gid::from_v4(be);
}

mlx5_model_config roce_cfg()
{
	mlx5_model_config c;
	c.roce = true;
	c.local_gid = v4gid(10, 0, 0, 1);
	return c;
}

/* The WQE's control and datagram segments as rdma-core's helpers build
 * them, at w (ds 16-byte units in all; the AV 16 or 48 bytes). */
void expected_head(uint8_t *w, uint32_t pi, uint32_t qpn, const send_wr &wr, const mlx5_av &av, bool compact,
		   uint32_t qkey, uint8_t fm_ce_se, uint8_t ds)
{
	mlx5_wqe_ctrl_seg ctrl{};
	const bool imm = wr.flags & send_imm;
	mlx5dv_set_ctrl_seg(&ctrl, uint16_t(pi), imm ? MLX5_OPCODE_SEND_IMM : MLX5_OPCODE_SEND, 0, qpn,
			    fm_ce_se, ds, 0, imm ? wr.imm_data : 0);
	memcpy(w, &ctrl, 16);

	mlx5_wqe_datagram_seg dg{};
	mlx5_wqe_av src = av.wqe;
	mlx5dv_set_dgram_seg(&dg, uint64_t(qkey) << 32, wr.remote_qpn, compact ? 0 : 1, src.stat_rate_sl,
			     src.fl_mlid, be16toh(src.rlid), src.rmac, src.tclass, src.hop_limit,
			     be32toh(src.grh_gid_fl), src.rgid);
	memcpy(w + 16, &dg, compact ? 16 : 48);
}

/* The WQE rdma-core's helpers build for one WR. */
std::vector<uint8_t> expected_wqe(uint32_t pi, uint32_t qpn, const send_wr &wr, const mlx5_av &av,
				  bool compact, uint32_t qkey, uint8_t fm_ce_se, uint32_t lkey)
{
	const bool inl = wr.flags & send_inline;
	const uint32_t len = inl ? wr.inline_len : wr.mbuf->data_len;
	const uint32_t avlen = compact ? 16 : 48;
	const uint32_t seglen = inl ? (4 + len + 15) / 16 * 16 : 16;
	const uint8_t ds = uint8_t((16 + avlen + seglen) / 16);
	std::vector<uint8_t> w(ds * 16u, 0);
	expected_head(w.data(), pi, qpn, wr, av, compact, qkey, fm_ce_se, ds);

	uint8_t *seg = w.data() + 16 + avlen;
	if (inl) {
		const uint32_t hdr = htobe32(len | MLX5_INLINE_SEG);
		memcpy(seg, &hdr, 4);
		if (len != 0)
			memcpy(seg + 4, wr.inline_data, len);
	} else {
		mlx5_wqe_data_seg d{};
		mlx5dv_set_data_seg(&d, len, lkey, rte_pktmbuf_mtod(wr.mbuf, uintptr_t));
		memcpy(seg, &d, 16);
	}
	return w;
}

std::string hexdiff(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b)
{
	std::string s;
	for (size_t i = 0; i < a.size() && i < b.size(); i++)
		if (a[i] != b[i]) {
			char t[64];
			snprintf(t, sizeof(t), " [%zu] got %02x want %02x", i, a[i], b[i]);
			s += t;
		}
	if (a.size() != b.size())
		s += " sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
	return s;
}

uint32_t lkey_of(rig &r, rte_mbuf *m)
{
	uint32_t k = 0;
	r.mrs.lookup(rte_pktmbuf_mtod(m, uintptr_t), m->data_len, &k);
	return k;
}

rte_mbuf *payload_mbuf(rte_mempool *mp, uint32_t len, uint8_t seed)
{
	rte_mbuf *m = rte_pktmbuf_alloc(mp);
	if (m == nullptr)
		return nullptr;
	auto *p = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, uint16_t(len)));
	for (uint32_t i = 0; i < len; i++)
		p[i] = uint8_t(seed + i * 7);
	return m;
}

void drain_rx(rig &r, std::vector<recv_wc> &got)
{
	recv_wc wcs[mlx5_queue::max_burst];
	for (int spin = 0; spin < 64; spin++) {
		uint16_t k = r.q.rx_burst(wcs, mlx5_queue::max_burst);
		if (k == 0)
			break;
		got.insert(got.end(), wcs, wcs + k);
	}
}

void free_wcs(std::vector<recv_wc> &got)
{
	for (auto &w : got)
		rte_pktmbuf_free(w.mbuf);
	got.clear();
}

/* The run writers' levels this CPU can run, widest first: each test that
 * runs them all forces one per queue (queue_config::isa_cap). On an
 * AVX-512 host: avx512, avx2 and the portable copy_writer. */
std::vector<cpu_isa> run_writer_levels()
{
	std::vector<cpu_isa> v;
	if (cpu_isa_max() >= cpu_isa::avx512)
		v.push_back(cpu_isa::avx512);
	if (cpu_isa_max() >= cpu_isa::avx2)
		v.push_back(cpu_isa::avx2);
	v.push_back(cpu_isa::portable);
	return v;
}

} // namespace

/* Every WQE byte equals what rdma-core's helpers build, across ring laps,
 * with inline and data segments, immediates and solicited events, and the
 * loopback delivers each payload with its metadata. */
TEST(Mlx5Datapath, WqeBytesMatchRdmaCoreHelpers)
{
	mlx5_model_config mc = roce_cfg();
	mc.sq_wqe_cnt = 16; /* small: many laps, WQEs straddling the end */
	mc.max_inline = 120;
	queue_config qc;
	qc.signal_every = 3;
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	const unsigned base = r.in_use();
	const mlx5_av av = roce_av(mc.local_gid);
	const ah_handle h = r.add_ah(av);

	unsigned straddled = 0, checked = 0;
	uint64_t k = 0;
	std::vector<recv_wc> got;
	for (int round = 0; round < 60; round++) {
		const unsigned n = 1 + round % 3;
		send_wr wrs[3]{};
		std::vector<uint8_t> inl[3];
		for (unsigned i = 0; i < n; i++) {
			send_wr &w = wrs[i];
			w.ah = h;
			w.remote_qpn = mc.qpn;
			w.remote_qkey = (round % 5 == 0) ? 0x80000000u : mc.qkey; /* "the QP's own" */
			const uint32_t len = uint32_t((round * 37 + i * 11) % 121);
			if ((round + i) % 2) {
				inl[i].resize(len);
				for (uint32_t j = 0; j < len; j++)
					inl[i][j] = uint8_t(round ^ j);
				w.flags = send_inline;
				w.inline_data = inl[i].data();
				w.inline_len = len;
			} else {
				w.mbuf = payload_mbuf(r.mp, len + 100, uint8_t(round));
				ASSERT_NE(w.mbuf, nullptr);
			}
			if (round % 4 == 1) {
				w.flags |= send_imm;
				w.imm_data = htobe32(0xabc00000u + round);
			}
			if (round % 7 == 2)
				w.flags |= send_solicited;
		}
		const uint32_t pi0 = r.q.sq_head();
		std::vector<std::vector<uint8_t>> want;
		uint32_t pi = pi0;
		for (unsigned i = 0; i < n; i++) {
			const bool sig = ++k % qc.signal_every == 0;
			const uint8_t f = uint8_t((sig ? MLX5_WQE_CTRL_CQ_UPDATE : 0) |
						  ((wrs[i].flags & send_solicited) ? MLX5_WQE_CTRL_SOLICITED : 0));
			want.push_back(expected_wqe(pi, mc.qpn, wrs[i], av, false, mc.qkey, f,
						    (wrs[i].flags & send_inline) ? 0 : lkey_of(r, wrs[i].mbuf)));
			const uint32_t bbs = uint32_t(want.back().size() + 63) / 64;
			straddled += (pi & (mc.sq_wqe_cnt - 1)) + bbs > mc.sq_wqe_cnt;
			pi += bbs;
		}
		ASSERT_EQ(r.q.tx_burst(wrs, uint16_t(n)), n);
		EXPECT_EQ(r.q.sq_head(), pi);
		const mlx5_doorbell db = r.model.doorbell();
		EXPECT_EQ(db.writes, 1u) << "round " << round;
		EXPECT_TRUE(db.matches) << "round " << round;
		r.model.executed.clear();
		EXPECT_EQ(r.model.process(), n);
		ASSERT_EQ(r.model.executed.size(), n);
		for (unsigned i = 0; i < n; i++) {
			EXPECT_EQ(r.model.executed[i].bytes, want[i])
				<< "round " << round << " wqe " << i << hexdiff(r.model.executed[i].bytes, want[i]);
			checked++;
		}
		drain_rx(r, got);
		ASSERT_EQ(got.size(), n);
		for (unsigned i = 0; i < n; i++) {
			const recv_wc &wc = got[i];
			const auto &x = r.model.executed[i];
			EXPECT_EQ(wc.byte_len, grh_len + x.len);
			EXPECT_EQ(wc.src_qp, mc.qpn);
			EXPECT_EQ(wc.qp_num, mc.qpn);
			EXPECT_EQ(bool(wc.wc_flags & wc_with_imm), bool(wrs[i].flags & send_imm));
			if (wrs[i].flags & send_imm) {
				EXPECT_EQ(wc.imm_data, wrs[i].imm_data);
			}
			EXPECT_EQ(bool(wc.wc_flags & wc_solicited), bool(wrs[i].flags & send_solicited));
			EXPECT_TRUE(wc.wc_flags & wc_grh);
			EXPECT_EQ(wc.l3, l3_type::ipv4);
			EXPECT_EQ(wc.sgid, mc.local_gid);
			EXPECT_EQ(wc.dgid, mc.local_gid);
			EXPECT_EQ(wc.sl, 0);
			ASSERT_EQ(wc.mbuf->data_len, wc.byte_len);
			if (x.len != 0) {
				EXPECT_EQ(0, memcmp(rte_pktmbuf_mtod_offset(wc.mbuf, uint8_t *, grh_len),
						    x.payload.data(), x.len));
			}
			const auto *ip = rte_pktmbuf_mtod_offset(wc.mbuf, const uint8_t *, 20);
			EXPECT_EQ(ip[0], 0x45);
			EXPECT_EQ(ip[1], av.wqe.tclass);
			EXPECT_EQ(ip[8], av.wqe.hop_limit);
		}
		free_wcs(got);
	}
	EXPECT_GT(straddled, 5u) << "the test should exercise WQEs that wrap";
	EXPECT_EQ(checked, r.model.resp_cqes);
	EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
	EXPECT_EQ(r.q.counters().tx_drops(), 0u);
	r.q.tx_flush();
	EXPECT_EQ(r.model.req_cqes, k / qc.signal_every);
	r.q.detach();
	EXPECT_GT(base, 0u);
	EXPECT_EQ(r.in_use(), 0u); /* every mbuf back in the pool */
}

/* A WQE that starts in the ring's last block continues at its start, byte
 * for byte, and BlueFlame copies it from both ends. */
TEST(Mlx5Datapath, WrapAroundAtRingEnd)
{
	mlx5_model_config mc = roce_cfg();
	mc.sq_wqe_cnt = 16;
	mc.max_inline = 180;
	mc.bf_size = 256;
	queue_config qc;
	qc.signal_every = 2;
	qc.signal_last = true;
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	const mlx5_av av = roce_av(mc.local_gid);
	const ah_handle h = r.add_ah(av);
	std::vector<uint8_t> pay(170);
	for (size_t i = 0; i < pay.size(); i++)
		pay[i] = uint8_t(i);
	send_wr w{};
	w.ah = h;
	w.remote_qpn = mc.qpn;
	w.remote_qkey = mc.qkey;
	w.flags = send_inline;
	w.inline_data = pay.data();
	/* 2-block (inline 0: 16 + 48 + 16) and 3-block (inline 100: 16 + 48
	 * + 112) WQEs until the head sits at the ring's last block. */
	send_wr small = w;
	while ((r.q.sq_head() & 15) != 15) {
		small.inline_len = (r.q.sq_head() & 1) ? 0 : 100;
		ASSERT_EQ(r.q.tx_burst(&small, 1), 1);
		r.model.doorbell();
		r.model.process();
		r.q.tx_flush();
		std::vector<recv_wc> got;
		drain_rx(r, got);
		free_wcs(got);
	}
	w.inline_len = uint32_t(pay.size()); /* 16 + 48 + 176 = 240: 4 blocks */
	const uint32_t pi = r.q.sq_head();
	const auto want = expected_wqe(pi, mc.qpn, w, av, false, mc.qkey, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	ASSERT_EQ(want.size(), 240u);
	ASSERT_EQ(r.q.tx_burst(&w, 1), 1);
	/* In the ring: block 15 holds the first 64 bytes, blocks 0..2 the rest. */
	const uint8_t *ring = r.model.rings().sq_buf;
	EXPECT_EQ(0, memcmp(ring + 15 * 64, want.data(), 64));
	EXPECT_EQ(0, memcmp(ring, want.data() + 64, want.size() - 64));
	const mlx5_doorbell db = r.model.doorbell();
	EXPECT_EQ(db.writes, 1u);
	EXPECT_TRUE(db.bf);
	EXPECT_EQ(db.bbs, 4u);
	EXPECT_TRUE(db.matches);
	r.model.executed.clear();
	ASSERT_EQ(r.model.process(), 1u);
	EXPECT_EQ(r.model.executed[0].bytes, want);
	EXPECT_EQ(r.model.executed[0].payload, pay);
	EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
}

/* One doorbell per burst: the record, then one register write (BlueFlame
 * when the last WQE fits, 8 bytes otherwise or when disabled). */
TEST(Mlx5Datapath, OneDoorbellPerBurst)
{
	for (int mode = 0; mode < 3; mode++) {
		mlx5_model_config mc = roce_cfg();
		mc.sq_wqe_cnt = 512;
		mc.bf_size = mode == 2 ? 0 : 256;
		queue_config qc;
		qc.use_bf = mode != 1;
		rig r(mc, qc);
		ASSERT_TRUE(r.ok);
		const ah_handle h = r.add_ah(roce_av(mc.local_gid));
		uint64_t bursts = 0;
		for (unsigned n = 1; n <= mlx5_queue::max_burst; n++) {
			send_wr wrs[mlx5_queue::max_burst]{};
			for (unsigned i = 0; i < n; i++) {
				wrs[i].ah = h;
				wrs[i].remote_qpn = mc.qpn;
				wrs[i].remote_qkey = mc.qkey;
				wrs[i].mbuf = payload_mbuf(r.mp, 64, uint8_t(i));
			}
			ASSERT_EQ(r.q.tx_burst(wrs, uint16_t(n)), n);
			bursts++;
			EXPECT_EQ(r.q.counters().doorbells, bursts);
			const mlx5_doorbell db = r.model.doorbell();
			EXPECT_EQ(db.writes, 1u) << "burst of " << n;
			EXPECT_TRUE(db.matches) << "burst of " << n;
			EXPECT_EQ(db.bf, mode == 0) << "burst of " << n;
			EXPECT_EQ(r.model.process(), n);
			r.q.tx_flush();
			std::vector<recv_wc> got;
			drain_rx(r, got);
			EXPECT_EQ(got.size(), n);
			free_wcs(got);
		}
		EXPECT_EQ(r.q.counters().bf_copies, mode == 0 ? bursts : 0u);
		EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
	}
}

/* CQ_UPDATE on one WQE in N (and on each burst's last with signal_last);
 * a requester CQE frees every mbuf up to its WQE. */
TEST(Mlx5Datapath, SignalOneInN)
{
	for (const uint32_t every : {1u, 3u, 8u})
	for (bool last : {false, true}) {
		SCOPED_TRACE("signal_every " + std::to_string(every) + (last ? ", signal_last" : ""));
		mlx5_model_config mc = roce_cfg();
		mc.sq_wqe_cnt = 128;
		queue_config qc;
		qc.signal_every = every;
		qc.signal_last = last;
		rig r(mc, qc);
		ASSERT_TRUE(r.ok);
		const unsigned base = r.in_use();
		const ah_handle h = r.add_ah(roce_av(mc.local_gid));
		unsigned total = 0, since = 0, want_sig = 0;
		for (unsigned b = 0; b < 20; b++) {
			const unsigned n = 1 + b % 5;
			send_wr wrs[5]{};
			for (unsigned i = 0; i < n; i++) {
				wrs[i].ah = h;
				wrs[i].remote_qpn = mc.qpn + 1; /* not looped back: TX only */
				wrs[i].remote_qkey = mc.qkey;
				wrs[i].mbuf = payload_mbuf(r.mp, 32, 0);
			}
			ASSERT_EQ(r.q.tx_burst(wrs, uint16_t(n)), n);
			r.model.executed.clear();
			r.model.doorbell();
			ASSERT_EQ(r.model.process(), n);
			for (unsigned i = 0; i < n; i++) {
				bool sig = ++since >= qc.signal_every || (last && i + 1 == n);
				if (sig)
					since = 0;
				want_sig += sig;
				EXPECT_EQ(bool(r.model.executed[i].fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE), sig)
					<< "burst " << b << " wqe " << i;
			}
			total += n;
			r.q.tx_flush();
			/* With signal_last every mbuf is back after each burst;
			 * otherwise those after the last signalled WQE wait. */
			EXPECT_EQ(r.in_use(), last ? base : base + since);
		}
		EXPECT_EQ(r.model.req_cqes, want_sig);
		EXPECT_EQ(r.q.counters().tx_cqes, want_sig);
		EXPECT_EQ(r.model.drop_qpn, total);
		EXPECT_EQ(r.q.counters().tx_pkts, total);
		EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
	}
}

/* The prebuilt WQE head (control segment + datagram segment, built once
 * per destination and burst) follows every WR: AHs, remote QPNs and Q_Keys
 * (including "the QP's own") changing from one WR to the next within a
 * burst, immediates and solicited events on some, CQ_UPDATE one in N;
 * each WQE equals the helpers' byte for byte. */
TEST(Mlx5Datapath, WqeHeadFollowsAhQpnAndQkey)
{
	mlx5_model_config mc = roce_cfg();
	mc.sq_wqe_cnt = 64;
	mc.max_inline = 64;
	queue_config qc;
	qc.signal_every = 3;
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	mlx5_av av_a = roce_av(v4gid(10, 0, 0, 7)), av_b = roce_av(v4gid(10, 0, 0, 9), 1);
	av_b.wqe.tclass = 0x20;
	av_b.wqe.rmac[5] = 0x99;
	const ah_handle ha = r.add_ah(av_a), hb = r.add_ah(av_b);
	/* Remote QPNs other than the model's own: sent, not looped back. */
	const uint32_t q1 = mc.qpn + 1, q2 = (mc.qpn + 2) | 0xff000000u; /* 31:24 ignored */
	const uint32_t k1 = 0x22222222, k2 = 0x33333333, own = 0x80000000u;
	ASSERT_NE(k1, mc.qkey);
	struct {
		bool b;
		uint32_t qpn, qkey;
		uint16_t flags;
	} pat[] = {
		{false, q1, k1, 0},        {false, q1, k1, send_imm},  {true, q1, k1, 0},
		{false, q2, k1, 0},        {false, q2, own, send_solicited}, {false, q2, own, 0},
		{true, q2, k2, send_imm},  {true, q1, k2, 0},          {false, q1, own, 0},
		{false, q1, k1, 0},        {true, q1, k1, send_imm | send_solicited},
	};
	constexpr unsigned n = sizeof(pat) / sizeof(pat[0]);
	uint8_t pay[n][40];
	uint64_t k = 0;
	for (int round = 0; round < 8; round++) {
		send_wr w[n]{};
		std::vector<std::vector<uint8_t>> want;
		uint32_t pi = r.q.sq_head();
		for (unsigned i = 0; i < n; i++) {
			const uint32_t len = (round * 7 + i * 5) % 41;
			for (uint32_t j = 0; j < len; j++)
				pay[i][j] = uint8_t(round * 16 + i + j);
			w[i].ah = pat[i].b ? hb : ha;
			w[i].remote_qpn = pat[i].qpn;
			w[i].remote_qkey = pat[i].qkey;
			w[i].flags = uint16_t(send_inline | pat[i].flags);
			w[i].imm_data = htobe32(0x1000u + i);
			w[i].inline_data = pay[i];
			w[i].inline_len = len;
			const bool sig = ++k % qc.signal_every == 0;
			const uint8_t f = uint8_t((sig ? MLX5_WQE_CTRL_CQ_UPDATE : 0) |
						  ((pat[i].flags & send_solicited) ? MLX5_WQE_CTRL_SOLICITED : 0));
			send_wr e = w[i];
			e.remote_qpn &= 0xffffff;
			want.push_back(expected_wqe(pi, mc.qpn, e, pat[i].b ? av_b : av_a, false,
						    pat[i].qkey == own ? mc.qkey : pat[i].qkey, f, 0));
			pi += uint32_t(want.back().size() + 63) / 64;
		}
		ASSERT_EQ(r.q.tx_burst(w, n), n);
		r.model.doorbell();
		r.model.executed.clear();
		ASSERT_EQ(r.model.process(), n);
		for (unsigned i = 0; i < n; i++) {
			const mlx5_model_wqe &x = r.model.executed[i];
			EXPECT_EQ(x.bytes, want[i]) << "round " << round << " wqe " << i << hexdiff(x.bytes, want[i]);
			EXPECT_EQ(x.dqpn, pat[i].qpn & 0xffffff);
			EXPECT_EQ(x.qkey, pat[i].qkey == own ? mc.qkey : pat[i].qkey);
		}
		r.q.tx_flush();
	}
	EXPECT_EQ(r.q.counters().tx_pkts, 8u * n);
	EXPECT_EQ(r.q.counters().tx_drops(), 0u);
	EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
}

/* A head is never used for an AH that is gone: the generation is checked
 * before a WR's head is looked at, and the head lives for one burst. An
 * AH destroyed and its slot re-created with another AV (a new generation)
 * sends the new AV; WRs still holding the old handle are dropped and
 * counted, also between WRs to the new one in the same burst. */
TEST(Mlx5Datapath, WqeHeadNeverOutlivesItsAh)
{
	mlx5_model_config mc = roce_cfg();
	mc.sq_wqe_cnt = 64;
	mc.max_inline = 64;
	queue_config qc;
	qc.signal_every = 4;
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	mlx5_av av_old = roce_av(v4gid(10, 0, 0, 7)), av_new = roce_av(v4gid(10, 0, 0, 8));
	av_new.wqe.rmac[5] = 0x77;
	av_new.wqe.hop_limit = 9;
	uint8_t pay[64];
	for (unsigned i = 0; i < sizeof(pay); i++)
		pay[i] = uint8_t(i);
	auto wr_to = [&](ah_handle h) {
		send_wr w{};
		w.ah = h;
		w.remote_qpn = mc.qpn + 1;
		w.remote_qkey = mc.qkey;
		w.flags = send_inline;
		w.inline_data = pay;
		w.inline_len = sizeof(pay);
		return w;
	};
	/* Sends a burst; returns the WQEs the model executed. */
	auto send = [&](std::vector<send_wr> ws) {
		EXPECT_EQ(r.q.tx_burst(ws.data(), uint16_t(ws.size())), ws.size());
		r.model.doorbell();
		r.model.executed.clear();
		r.model.process();
		r.q.tx_flush();
		return r.model.executed;
	};
	auto expect_av = [&](const std::vector<mlx5_model_wqe> &xs, const mlx5_av &av) {
		for (const auto &x : xs) {
			const auto want = expected_wqe(x.pi, mc.qpn, wr_to(ah_null), av, false, mc.qkey,
						       x.fm_ce_se, 0);
			EXPECT_EQ(x.bytes, want) << hexdiff(x.bytes, want);
		}
	};

	const ah_handle h1 = r.add_ah(av_old);
	auto xs = send({wr_to(h1), wr_to(h1), wr_to(h1)});
	ASSERT_EQ(xs.size(), 3u);
	expect_av(xs, av_old);

	/* No QSBR variable on this table: the slot is free at once, and the
	 * next AH takes it with the next live generation. */
	ASSERT_EQ(r.ahs.retire(h1), 0);
	const ah_handle h2 = r.add_ah(av_new);
	ASSERT_EQ(h2.slot, h1.slot);
	ASSERT_NE(h2.gen, h1.gen);
	xs = send({wr_to(h2), wr_to(h1), wr_to(h2), wr_to(h1), wr_to(h1), wr_to(h2)});
	ASSERT_EQ(xs.size(), 3u);
	expect_av(xs, av_new);
	EXPECT_EQ(r.q.counters().tx_stale_ah, 3u);

	/* Back to the first AV under a third generation: nothing of the
	 * second survives in a later burst. */
	ASSERT_EQ(r.ahs.retire(h2), 0);
	const ah_handle h3 = r.add_ah(av_old);
	ASSERT_EQ(h3.slot, h1.slot);
	xs = send({wr_to(h2), wr_to(h3), wr_to(h1), wr_to(h3)});
	ASSERT_EQ(xs.size(), 2u);
	expect_av(xs, av_old);
	EXPECT_EQ(r.q.counters().tx_stale_ah, 5u);
	EXPECT_EQ(r.q.counters().tx_pkts, 8u);
	EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
}

/* Loopback metadata on each port type: RoCEv2 over IPv4 and IPv6, IB with
 * a LID only (no GRH: slid and SL reported) and IB with a GRH. */
TEST(Mlx5Datapath, LoopbackMetadataPerPortType)
{
	struct tcase {
		const char *name;
		bool roce, v6, ib_grh;
	} cases[] = {
		{"roce-v4", true, false, false},
		{"roce-v6", true, true, false},
		{"ib-lid", false, false, false},
		{"ib-grh", false, false, true},
	};
	for (const tcase &t : cases) {
		SCOPED_TRACE(t.name);
		mlx5_model_config mc;
		mc.roce = t.roce;
		mc.local_lid = 0x17;
		wire::gid v6{};
		v6.raw[0] = 0xfd;
		v6.raw[15] = 1;
		mc.local_gid = t.roce && !t.v6 ? v4gid(10, 0, 0, 9) : v6;
		rig r(mc);
		ASSERT_TRUE(r.ok);
		mlx5_av av;
		if (t.roce) {
			av = roce_av(mc.local_gid);
		} else {
			ibv_ah_attr a{};
			a.port_num = 1;
			a.dlid = mc.local_lid;
			a.sl = 5;
			a.src_path_bits = 0;
			a.is_global = t.ib_grh;
			a.grh.hop_limit = 9;
			a.grh.traffic_class = 0x20;
			a.grh.flow_label = 0xbeef;
			memcpy(a.grh.dgid.raw, v6.raw, 16);
			ASSERT_EQ(build_ib_av(a, false, &av), 0);
		}
		const ah_handle h = r.add_ah(av);
		std::vector<uint8_t> pay(77, 0x3c);
		send_wr w{};
		w.ah = h;
		w.remote_qpn = mc.qpn;
		w.remote_qkey = mc.qkey;
		w.flags = send_inline | send_imm | send_solicited;
		w.inline_data = pay.data();
		w.inline_len = uint32_t(pay.size());
		w.imm_data = htobe32(0x01020304);
		ASSERT_EQ(r.q.tx_burst(&w, 1), 1);
		ASSERT_EQ(r.model.process(), 1u);
		std::vector<recv_wc> got;
		drain_rx(r, got);
		ASSERT_EQ(got.size(), 1u);
		const recv_wc &wc = got[0];
		EXPECT_EQ(wc.byte_len, grh_len + 77);
		EXPECT_EQ(wc.imm_data, htobe32(0x01020304));
		EXPECT_EQ(wc.wc_flags & (wc_with_imm | wc_solicited), wc_with_imm | wc_solicited);
		EXPECT_EQ(0, memcmp(rte_pktmbuf_mtod_offset(wc.mbuf, uint8_t *, grh_len), pay.data(), pay.size()));
		if (t.roce) {
			EXPECT_TRUE(wc.wc_flags & wc_grh);
			EXPECT_EQ(wc.l3, t.v6 ? l3_type::ipv6 : l3_type::ipv4);
			EXPECT_EQ(wc.slid, 0);
			EXPECT_EQ(wc.sl, 0); /* the L3 bits are not an SL */
			EXPECT_EQ(wc.sgid, mc.local_gid);
			EXPECT_EQ(wc.dgid, mc.local_gid);
			/* The completion answers itself: ibv_init_ah_from_wc(3)
			 * on it gives an AH back to the sender's GID. */
			port_attr pa;
			pa.gids = {mc.local_gid};
			gid_index gi;
			gi.build(pa.gids);
			ibv_ah_attr reply;
			ASSERT_EQ(init_ah_from_wc(pa, gi, 1, wc, rte_pktmbuf_mtod(wc.mbuf, const void *), &reply), 0);
			EXPECT_TRUE(reply.is_global);
			EXPECT_EQ(0, memcmp(reply.grh.dgid.raw, mc.local_gid.raw, 16));
			EXPECT_EQ(reply.grh.sgid_index, 0);
		} else {
			EXPECT_EQ(bool(wc.wc_flags & wc_grh), t.ib_grh);
			EXPECT_EQ(wc.slid, mc.local_lid);
			EXPECT_EQ(wc.sl, 5);
			EXPECT_EQ(wc.l3, l3_type::ib_grh);
			if (t.ib_grh) {
				EXPECT_EQ(wc.sgid, mc.local_gid);
				const auto *g = rte_pktmbuf_mtod(wc.mbuf, const uint8_t *);
				EXPECT_EQ(g[6], 0x1b);
				EXPECT_EQ(g[7], 9);
			}
		}
		free_wcs(got);
		EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
	}
}

/* The compact 16-byte AV for an AH without a GRH when the device has it;
 * the full AV for a global AH on the same queue. */
TEST(Mlx5Datapath, CompactAv)
{
	mlx5_model_config mc;
	mc.roce = false;
	mc.local_lid = 0x42;
	queue_config qc;
	qc.compact_av = true;
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	ibv_ah_attr a{};
	a.port_num = 1;
	a.dlid = 0x42;
	a.sl = 2;
	a.static_rate = IBV_RATE_40_GBPS;
	mlx5_av lid{}, glob{};
	ASSERT_EQ(build_ib_av(a, false, &lid), 0);
	a.is_global = 1;
	a.grh.hop_limit = 3;
	a.grh.dgid.raw[0] = 0xfe;
	a.grh.dgid.raw[1] = 0x80;
	ASSERT_EQ(build_ib_av(a, false, &glob), 0);
	const ah_handle h1 = r.add_ah(lid), h2 = r.add_ah(glob);
	std::vector<rte_mbuf *> ms;
	send_wr w[2]{};
	for (int i = 0; i < 2; i++) {
		w[i].ah = i == 0 ? h1 : h2;
		w[i].remote_qpn = mc.qpn;
		w[i].remote_qkey = mc.qkey;
		w[i].mbuf = payload_mbuf(r.mp, 100, 1);
	}
	const uint32_t pi = r.q.sq_head();
	const auto want0 = expected_wqe(pi, mc.qpn, w[0], lid, true, mc.qkey, 0, lkey_of(r, w[0].mbuf));
	const auto want1 = expected_wqe(pi + 1, mc.qpn, w[1], glob, false, mc.qkey, 0, lkey_of(r, w[1].mbuf));
	EXPECT_EQ(want0.size(), 48u); /* ctrl + 16-byte AV + data seg: one block */
	ASSERT_EQ(r.q.tx_burst(w, 2), 2);
	ASSERT_EQ(r.model.process(), 2u);
	EXPECT_TRUE(r.model.executed[0].compact);
	EXPECT_FALSE(r.model.executed[1].compact);
	EXPECT_EQ(r.model.executed[0].bytes, want0) << hexdiff(r.model.executed[0].bytes, want0);
	EXPECT_EQ(r.model.executed[1].bytes, want1) << hexdiff(r.model.executed[1].bytes, want1);
	std::vector<recv_wc> got;
	drain_rx(r, got);
	EXPECT_EQ(got.size(), 2u);
	free_wcs(got);
	EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
}

/* Error CQEs are counted and their buffers go back to the pool: a
 * responder error, a receive too long for its buffer, a requester error. */
TEST(Mlx5Datapath, ErrorCqesCountedBuffersBack)
{
	mlx5_model_config mc = roce_cfg();
	queue_config qc;
	qc.signal_every = 1;
	qc.rx_buf_len = 40 + 256;
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	const ah_handle h = r.add_ah(roce_av(mc.local_gid));
	auto send = [&](uint32_t len) {
		send_wr w{};
		w.ah = h;
		w.remote_qpn = mc.qpn;
		w.remote_qkey = mc.qkey;
		w.mbuf = payload_mbuf(r.mp, len, 9);
		EXPECT_EQ(r.q.tx_burst(&w, 1), 1);
		r.model.process();
	};
	std::vector<recv_wc> got;
	r.model.fail_next_recv(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
	send(10);
	send(300); /* 40 + 300 > 296: LOCAL_LENGTH_ERR from the device */
	r.model.fail_next_send(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
	send(10);
	send(10); /* fine */
	drain_rx(r, got);
	r.q.tx_flush();
	EXPECT_EQ(got.size(), 1u);
	EXPECT_EQ(r.q.counters().rx_cqe_err, 2u);
	EXPECT_EQ(r.q.counters().tx_cqe_err, 1u);
	EXPECT_EQ(r.q.counters().tx_cqes, 3u);
	/* The loopback's accounting through the queue's iteration (stats.h):
	 * 4 sent = 1 received + the drops (kind drop), tx_cqes an event. */
	EXPECT_EQ(got.size() + r.q.counters().drops(), 4u);
	EXPECT_EQ(r.q.counters().rx_drops(), 2u);
	r.q.counters().for_each([](const xstat_name &n, uint64_t) {
		if (strcmp(n.name, "tx_cqes") == 0 || strcmp(n.name, "doorbells") == 0) {
			EXPECT_EQ(n.kind, counter_kind::event) << n.name;
		}
	});
	free_wcs(got);
	/* Only the RQ's own buffers are out, once refilled. */
	r.q.post_recvs();
	EXPECT_EQ(r.in_use(), r.q.rq_posted());
	EXPECT_EQ(r.q.rq_posted(), mc.rq_wqe_cnt);
	r.q.detach();
	EXPECT_EQ(r.in_use(), 0u);
	EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
}

/* A byte count beyond the posted buffer (or under the GRH area) is never
 * trusted: dropped, counted, buffer freed. */
TEST(Mlx5Datapath, OversizedByteCntDropped)
{
	mlx5_model_config mc = roce_cfg();
	rig r(mc);
	ASSERT_TRUE(r.ok);
	const ah_handle h = r.add_ah(roce_av(mc.local_gid));
	send_wr w{};
	w.ah = h;
	w.remote_qpn = mc.qpn;
	w.remote_qkey = mc.qkey;
	w.mbuf = payload_mbuf(r.mp, 100, 1);
	r.model.lie_next_byte_cnt(r.q.rx_buf_len()); /* reports 40 + 100 + room */
	ASSERT_EQ(r.q.tx_burst(&w, 1), 1);
	r.model.process();
	std::vector<recv_wc> got;
	drain_rx(r, got);
	EXPECT_TRUE(got.empty());
	EXPECT_EQ(r.q.counters().rx_cqe_bad_len, 1u);
	EXPECT_EQ(r.q.counters().rx_pkts, 0u);
	r.q.tx_flush();
	/* The RQ's buffers, and the sent mbuf: its WQE was not signalled. */
	EXPECT_EQ(r.in_use(), r.q.rq_posted() + 1);
	r.q.detach();
	EXPECT_EQ(r.in_use(), 0u);
}

/* The owner bit over many laps of small CQs and RQ: every packet delivered
 * once, in order, the model never sees an overrun. */
TEST(Mlx5Datapath, CqOwnerBitWrapsOverLaps)
{
	mlx5_model_config mc = roce_cfg();
	mc.rq_wqe_cnt = 8;
	mc.rcq_cqe_cnt = 8;
	mc.scq_cqe_cnt = 8;
	mc.sq_wqe_cnt = 32;
	queue_config qc;
	qc.signal_every = 4;
	qc.rq_refill_batch = 4;
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	const ah_handle h = r.add_ah(roce_av(mc.local_gid));
	uint32_t next = 0;
	for (int b = 0; b < 100; b++) {
		send_wr wrs[4]{};
		for (auto &w : wrs) {
			w.ah = h;
			w.remote_qpn = mc.qpn;
			w.remote_qkey = mc.qkey;
			w.mbuf = payload_mbuf(r.mp, 4, 0);
			const uint32_t v = htobe32(next++);
			memcpy(rte_pktmbuf_mtod(w.mbuf, void *), &v, 4);
		}
		ASSERT_EQ(r.q.tx_burst(wrs, 4), 4);
		ASSERT_EQ(r.model.process(), 4u);
		r.q.tx_flush();
		std::vector<recv_wc> got;
		drain_rx(r, got);
		ASSERT_EQ(got.size(), 4u) << "burst " << b;
		for (unsigned i = 0; i < 4; i++) {
			uint32_t v;
			memcpy(&v, rte_pktmbuf_mtod_offset(got[i].mbuf, void *, grh_len), 4);
			EXPECT_EQ(be32toh(v), next - 4 + i);
		}
		free_wcs(got);
	}
	EXPECT_EQ(r.model.delivered, 400u);
	EXPECT_EQ(r.model.resp_cqes, 400u); /* 50 laps of the 8-entry CQ */
	EXPECT_EQ(r.model.drop_no_rwqe, 0u);
	EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
}

/* When the SQ is full, tx_burst takes what fits and the caller keeps the
 * rest; completions make room again. */
TEST(Mlx5Datapath, SqFullTakesWhatFits)
{
	mlx5_model_config mc = roce_cfg();
	mc.sq_wqe_cnt = 32;
	queue_config qc;
	qc.signal_every = 4; /* 4 * 2 blocks < 32 */
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	const ah_handle h = r.add_ah(roce_av(mc.local_gid));
	send_wr wrs[32]{};
	for (auto &w : wrs) {
		w.ah = h;
		w.remote_qpn = mc.qpn + 5;
		w.remote_qkey = mc.qkey;
		w.mbuf = payload_mbuf(r.mp, 16, 0);
	}
	/* 2 blocks each: 16 fit. */
	EXPECT_EQ(r.q.tx_burst(wrs, 32), 16);
	EXPECT_EQ(r.q.counters().tx_port_full, 1u);
	EXPECT_EQ(r.q.tx_burst(wrs + 16, 16), 0);
	r.model.process();
	EXPECT_EQ(r.q.tx_burst(wrs + 16, 16), 16); /* reaps, then takes them */
	r.model.process();
	r.q.tx_flush();
	EXPECT_EQ(r.q.sq_outstanding(), 0u);
	EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
}

/* Drops on the send side: stale AH, inline over the limit, payload over the
 * MTU, an mbuf outside every registered region. */
TEST(Mlx5Datapath, SendDropsCounted)
{
	mlx5_model_config mc = roce_cfg();
	mc.max_inline = 64;
	queue_config qc;
	qc.mtu = 1024;
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	const unsigned base = r.in_use();
	const ah_handle h = r.add_ah(roce_av(mc.local_gid));
	const ah_handle stale = r.add_ah(roce_av(mc.local_gid));
	ASSERT_EQ(r.ahs.retire(stale), 0);
	std::vector<uint8_t> big(65);
	send_wr w[3]{};
	for (auto &x : w) {
		x.ah = h;
		x.remote_qpn = mc.qpn;
		x.remote_qkey = mc.qkey;
	}
	w[0].ah = stale;
	w[0].mbuf = payload_mbuf(r.mp, 10, 0);
	w[1].flags = send_inline;
	w[1].inline_data = big.data();
	w[1].inline_len = 65;
	w[2].mbuf = payload_mbuf(r.mp, 1025, 0);
	EXPECT_EQ(r.q.tx_burst(w, 3), 3);
	EXPECT_EQ(r.q.counters().tx_stale_ah, 1u);
	EXPECT_EQ(r.q.counters().tx_inline_too_long, 1u);
	EXPECT_EQ(r.q.counters().tx_too_long, 1u);
	EXPECT_EQ(r.q.counters().doorbells, 0u); /* nothing posted, no doorbell */
	EXPECT_EQ(r.in_use(), base);

	/* A chained mbuf on a QP created with one SGE (the default), and an
	 * mbuf from a pool the device has no memory region for: dropped,
	 * each under its name, freed. */
	rte_mbuf *m = payload_mbuf(r.mp, 10, 0);
	ASSERT_EQ(rte_pktmbuf_chain(m, payload_mbuf(r.mp, 10, 0)), 0);
	rte_mempool *other = rte_pktmbuf_pool_create("mlx5t_unreg", 63, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
						     SOCKET_ID_ANY);
	ASSERT_NE(other, nullptr);
	send_wr y[2] = {w[2], w[2]};
	y[0].mbuf = m;
	y[1].mbuf = payload_mbuf(other, 10, 0);
	EXPECT_EQ(r.q.tx_burst(y, 2), 2);
	EXPECT_EQ(r.q.counters().tx_too_many_segs, 1u);
	EXPECT_EQ(r.q.counters().tx_bad_mbuf, 1u);
	EXPECT_EQ(r.q.counters().doorbells, 0u);
	EXPECT_EQ(r.in_use(), base);
	EXPECT_EQ(rte_mempool_in_use_count(other), 0u);
	rte_mempool_free(other);
	EXPECT_EQ(r.q.counters().tx_pkts, 0u);
}

namespace {

/* A chain of one mbuf per length (an empty segment for 0), from pools[i %
 * pools.size()], each byte a function of seed and its offset in the
 * message. */
rte_mbuf *chain_of(const std::vector<rte_mempool *> &pools, const std::vector<uint32_t> &lens, uint8_t seed)
{
	rte_mbuf *head = nullptr;
	uint32_t off = 0;
	for (size_t i = 0; i < lens.size(); i++) {
		rte_mbuf *m = rte_pktmbuf_alloc(pools[i % pools.size()]);
		if (m == nullptr) {
			rte_pktmbuf_free(head);
			return nullptr;
		}
		auto *p = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, uint16_t(lens[i])));
		for (uint32_t j = 0; j < lens[i]; j++, off++)
			p[j] = uint8_t(seed + off * 13 + (off >> 8));
		if (head == nullptr)
			head = m;
		else if (rte_pktmbuf_chain(head, m) != 0) {
			rte_pktmbuf_free(head);
			rte_pktmbuf_free(m);
			return nullptr;
		}
	}
	return head;
}

/* The chain's bytes, concatenated: what the peer must receive. */
std::vector<uint8_t> chain_bytes(const rte_mbuf *m)
{
	std::vector<uint8_t> v;
	for (; m != nullptr; m = m->next) {
		const auto *p = rte_pktmbuf_mtod(m, const uint8_t *);
		v.insert(v.end(), p, p + m->data_len);
	}
	return v;
}

/* The WQE rdma-core's helpers build for a WR whose mbuf is a chain, as
 * _mlx5_post_send builds it for a WR of one SGE per segment: ctrl,
 * datagram, then one mlx5dv_set_data_seg per non-empty segment (empty
 * SGEs get none), each with the lkey of the region covering it. */
std::vector<uint8_t> expected_chain_wqe(uint32_t pi, uint32_t qpn, const send_wr &wr, const mlx5_av &av,
					uint32_t qkey, uint8_t fm_ce_se, ibv::lkey_map &mrs)
{
	std::vector<mlx5_wqe_data_seg> segs;
	for (const rte_mbuf *m = wr.mbuf; m != nullptr; m = m->next) {
		if (m->data_len == 0)
			continue;
		const uintptr_t a = rte_pktmbuf_mtod(m, uintptr_t);
		uint32_t lkey = 0;
		EXPECT_TRUE(mrs.lookup(a, m->data_len, &lkey));
		mlx5_wqe_data_seg d{};
		mlx5dv_set_data_seg(&d, m->data_len, lkey, a);
		segs.push_back(d);
	}
	const uint8_t ds = uint8_t(4 + segs.size());
	std::vector<uint8_t> w(ds * 16u, 0);
	expected_head(w.data(), pi, qpn, wr, av, false, qkey, fm_ce_se, ds);
	for (size_t i = 0; i < segs.size(); i++)
		memcpy(w.data() + 64 + 16 * i, &segs[i], 16);
	return w;
}

/* Registers a second mempool with the rig's device and queue (the queue
 * copies its region table at attach, so it is attached again; call before
 * any traffic). */
rte_mempool *second_pool(rig &r, const char *name, uint32_t lkey0)
{
	rte_mempool *p = rte_pktmbuf_pool_create(name, 255, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
	if (p == nullptr)
		return nullptr;
	struct ctx {
		rig *r;
		uint32_t k;
	} c{&r, lkey0};
	rte_mempool_mem_iter(
		p,
		[](rte_mempool *, void *o, rte_mempool_memhdr *mh, unsigned i) {
			auto *x = static_cast<ctx *>(o);
			x->r->mrs.add(uintptr_t(mh->addr), mh->len, x->k + i);
			x->r->model.add_mr(uintptr_t(mh->addr), mh->len, x->k + i);
		},
		&c);
	if (r.q.attach(r.model.rings(), r.qc, r.mp, r.mrs, &r.ahs) != 0) {
		rte_mempool_free(p);
		return nullptr;
	}
	r.q.post_recvs();
	return p;
}

/* Posts WQEs of 2 and 3 blocks (inline 0 and 100 bytes) until the SQ head
 * is at block target of the 16-block ring, executing and reaping each. */
void advance_head_to(rig &r, ah_handle h, uint32_t target)
{
	static uint8_t pay[100];
	send_wr s{};
	s.ah = h;
	s.remote_qpn = r.model.config().qpn;
	s.remote_qkey = r.model.config().qkey;
	s.flags = send_inline;
	s.inline_data = pay;
	const uint32_t mask = r.model.config().sq_wqe_cnt - 1;
	for (uint32_t dist; (dist = (target - r.q.sq_head()) & mask) != 0;) {
		s.inline_len = dist % 2 ? 100 : 0;
		ASSERT_EQ(r.q.tx_burst(&s, 1), 1);
		r.model.doorbell();
		r.model.process();
		r.q.tx_flush();
		std::vector<recv_wc> got;
		drain_rx(r, got);
		free_wcs(got);
	}
}

} // namespace

/* Chained mbufs of 2, 3 and max_send_sge segments, from two mempools with
 * their own lkeys, on a 16-block ring: each WQE equals rdma-core's helpers'
 * (one data segment per segment, DS and blocks following), the model
 * gathers the segments in order and the peer receives the concatenation,
 * and each chain is freed whole by its completion. */
TEST(Mlx5Datapath, ChainedMbufsGatherEndToEnd)
{
	mlx5_model_config mc = roce_cfg();
	mc.sq_wqe_cnt = 16;
	mc.max_inline = 0;
	mc.max_send_sge = 8; /* 16 + 48 + 8 * 16 = 192: three blocks */
	queue_config qc;
	qc.signal_every = 2; /* 2 * 3 blocks < 16 */
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	ASSERT_EQ(r.q.max_wqe_bbs(), 3u);
	rte_mempool *hdrs = second_pool(r, "mlx5t_hdrs", 0x7b000);
	ASSERT_NE(hdrs, nullptr);
	const unsigned base = r.in_use();
	const mlx5_av av = roce_av(mc.local_gid);
	const ah_handle h = r.add_ah(av);

	const unsigned nsegs[] = {2, 3, 8};
	unsigned checked = 0, straddled = 0, two_pools = 0;
	uint64_t k = 0;
	for (int round = 0; round < 96; round++) {
		const unsigned n = 1 + round % 3;
		send_wr wrs[3]{};
		std::vector<std::vector<uint8_t>> want_pay(n), want(n);
		uint32_t pi = r.q.sq_head();
		for (unsigned i = 0; i < n; i++) {
			const unsigned ns = nsegs[(round + i) % 3];
			std::vector<uint32_t> lens(ns);
			for (unsigned j = 0; j < ns; j++)
				lens[j] = 1 + uint32_t((round * 31 + i * 17 + j * 7) % 150);
			/* The header segment from the other pool: its own lkey. */
			wrs[i].mbuf = chain_of({hdrs, r.mp}, lens, uint8_t(round * 3 + i));
			ASSERT_NE(wrs[i].mbuf, nullptr);
			wrs[i].ah = h;
			wrs[i].remote_qpn = mc.qpn;
			wrs[i].remote_qkey = mc.qkey;
			if (round % 4 == 1) {
				wrs[i].flags = send_imm;
				wrs[i].imm_data = htobe32(0xc0de0000u + round);
			}
			want_pay[i] = chain_bytes(wrs[i].mbuf);
			const bool sig = ++k % qc.signal_every == 0;
			want[i] = expected_chain_wqe(pi, mc.qpn, wrs[i], av, mc.qkey,
						     sig ? MLX5_WQE_CTRL_CQ_UPDATE : 0, r.mrs);
			const uint32_t bbs = uint32_t(want[i].size() + 63) / 64;
			straddled += (pi & 15) + bbs > 16;
			pi += bbs;
		}
		ASSERT_EQ(r.q.tx_burst(wrs, uint16_t(n)), n);
		EXPECT_EQ(r.q.sq_head(), pi);
		EXPECT_TRUE(r.model.doorbell().matches);
		r.model.executed.clear();
		ASSERT_EQ(r.model.process(), n);
		std::vector<recv_wc> got;
		drain_rx(r, got);
		ASSERT_EQ(got.size(), n);
		for (unsigned i = 0; i < n; i++) {
			const auto &x = r.model.executed[i];
			EXPECT_EQ(x.bytes, want[i]) << "round " << round << " wqe " << i << hexdiff(x.bytes, want[i]);
			EXPECT_EQ(x.segs.size(), (want[i].size() - 64) / 16);
			if (x.segs.size() > 1 && x.segs[0].lkey != x.segs[1].lkey)
				two_pools++;
			EXPECT_EQ(x.payload, want_pay[i]);
			EXPECT_EQ(got[i].byte_len, grh_len + want_pay[i].size());
			ASSERT_EQ(got[i].mbuf->data_len, got[i].byte_len);
			EXPECT_EQ(0, memcmp(rte_pktmbuf_mtod_offset(got[i].mbuf, uint8_t *, grh_len),
					    want_pay[i].data(), want_pay[i].size()))
				<< "round " << round << " wqe " << i;
			EXPECT_EQ(bool(got[i].wc_flags & wc_with_imm), bool(wrs[i].flags & send_imm));
			checked++;
		}
		free_wcs(got);
	}
	EXPECT_EQ(checked, 192u);
	EXPECT_GT(straddled, 5u) << "the test should exercise WQEs that wrap";
	EXPECT_EQ(two_pools, checked);
	EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
	EXPECT_EQ(r.q.counters().tx_drops(), 0u);
	EXPECT_EQ(r.q.counters().tx_pkts, checked);
	/* Completions free every segment of every chain, once: both pools
	 * back to what the RQ holds, before detach frees anything. */
	r.q.tx_flush();
	r.q.post_recvs(); /* the RQ back to full: base is what it holds */
	EXPECT_EQ(r.q.sq_outstanding(), 0u);
	EXPECT_EQ(r.in_use(), base);
	EXPECT_EQ(rte_mempool_in_use_count(hdrs), 0u);
	r.q.detach();
	EXPECT_EQ(r.in_use(), 0u);
	rte_mempool_free(hdrs);
}

/* A chain of as many segments as a UD WQE can carry (DS 63: ctrl, AV and
 * 59 data segments in 16 blocks), delivered intact. */
TEST(Mlx5Datapath, ChainAtTheDsLimit)
{
	constexpr uint32_t n = mlx5_queue::max_send_sge_limit;
	static_assert(16 + 48 + 16 * n <= 63 * 16 && 16 + 48 + 16 * (n + 1) > 63 * 16);
	mlx5_model_config mc = roce_cfg();
	mc.max_inline = 0;
	mc.max_send_sge = n;
	queue_config qc;
	qc.signal_every = 8;
	qc.signal_last = true; /* the one WQE asks for its CQE */
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	EXPECT_EQ(r.q.max_wqe_bbs(), 16u);
	const unsigned base = r.in_use();
	const mlx5_av av = roce_av(mc.local_gid);
	send_wr w{};
	w.ah = r.add_ah(av);
	w.remote_qpn = mc.qpn;
	w.remote_qkey = mc.qkey;
	w.mbuf = chain_of({r.mp}, std::vector<uint32_t>(n, 30), 5); /* 1770 bytes */
	ASSERT_NE(w.mbuf, nullptr);
	const std::vector<uint8_t> pay = chain_bytes(w.mbuf);
	const auto want =
		expected_chain_wqe(r.q.sq_head(), mc.qpn, w, av, mc.qkey, MLX5_WQE_CTRL_CQ_UPDATE, r.mrs);
	ASSERT_EQ(want.size(), 63u * 16);
	ASSERT_EQ(r.q.tx_burst(&w, 1), 1);
	EXPECT_EQ(r.q.sq_head(), 16u);
	r.model.executed.clear();
	ASSERT_EQ(r.model.process(), 1u);
	EXPECT_EQ(r.model.executed[0].bytes, want) << hexdiff(r.model.executed[0].bytes, want);
	EXPECT_EQ(r.model.executed[0].payload, pay);
	std::vector<recv_wc> got;
	drain_rx(r, got);
	ASSERT_EQ(got.size(), 1u);
	EXPECT_EQ(got[0].byte_len, grh_len + pay.size());
	EXPECT_EQ(0, memcmp(rte_pktmbuf_mtod_offset(got[0].mbuf, uint8_t *, grh_len), pay.data(), pay.size()));
	free_wcs(got);
	EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
	/* One more segment than the limit: the queue refuses the config. */
	mlx5_queue q2;
	queue_config c2 = r.qc;
	c2.max_send_sge = n + 1;
	EXPECT_EQ(q2.attach(r.model.rings(), c2, r.mp, r.mrs, &r.ahs), EINVAL);
	c2.max_send_sge = 0;
	EXPECT_EQ(q2.attach(r.model.rings(), c2, r.mp, r.mrs, &r.ahs), EINVAL);
	/* The chain is freed by its completion, not by detach. */
	r.q.tx_flush();
	r.q.post_recvs(); /* the RQ back to full: base is what it holds */
	EXPECT_EQ(r.in_use(), base);
}

/* A chained WQE whose data segments wrap the SQ ring's end: right after
 * the first block (the list starts at the ring's start), and between the
 * fourth and fifth segment. Byte for byte in the ring, and gathered right. */
TEST(Mlx5Datapath, ChainWqeWrapsRingEnd)
{
	for (const uint32_t start : {15u, 14u}) {
		SCOPED_TRACE(start);
		mlx5_model_config mc = roce_cfg();
		mc.sq_wqe_cnt = 16;
		mc.max_inline = 100;
		mc.max_send_sge = 8;
		mc.bf_size = 256;
		queue_config qc;
		qc.signal_every = 2;
		qc.signal_last = true;
		rig r(mc, qc);
		ASSERT_TRUE(r.ok);
		const unsigned base = r.in_use();
		const mlx5_av av = roce_av(mc.local_gid);
		const ah_handle h = r.add_ah(av);
		advance_head_to(r, h, start);
		ASSERT_EQ(r.q.sq_head() & 15, start);
		send_wr w{};
		w.ah = h;
		w.remote_qpn = mc.qpn;
		w.remote_qkey = mc.qkey;
		w.mbuf = chain_of({r.mp}, {14, 20, 100, 1, 7, 64, 33, 250}, 9);
		ASSERT_NE(w.mbuf, nullptr);
		const std::vector<uint8_t> pay = chain_bytes(w.mbuf);
		const uint32_t pi = r.q.sq_head();
		const auto want = expected_chain_wqe(pi, mc.qpn, w, av, mc.qkey, MLX5_WQE_CTRL_CQ_UPDATE, r.mrs);
		ASSERT_EQ(want.size(), 192u);
		ASSERT_EQ(r.q.tx_burst(&w, 1), 1);
		const uint8_t *ring = r.model.rings().sq_buf;
		const uint32_t before_end = (16 - start) * 64; /* bytes up to the ring's end */
		EXPECT_EQ(0, memcmp(ring + start * 64, want.data(), before_end));
		EXPECT_EQ(0, memcmp(ring, want.data() + before_end, want.size() - before_end));
		const mlx5_doorbell db = r.model.doorbell();
		EXPECT_TRUE(db.bf);
		EXPECT_EQ(db.bbs, 3u);
		EXPECT_TRUE(db.matches);
		r.model.executed.clear();
		ASSERT_EQ(r.model.process(), 1u);
		EXPECT_EQ(r.model.executed[0].bytes, want) << hexdiff(r.model.executed[0].bytes, want);
		EXPECT_EQ(r.model.executed[0].payload, pay);
		std::vector<recv_wc> got;
		drain_rx(r, got);
		ASSERT_EQ(got.size(), 1u);
		EXPECT_EQ(0, memcmp(rte_pktmbuf_mtod_offset(got[0].mbuf, uint8_t *, grh_len), pay.data(),
				    pay.size()));
		free_wcs(got);
		r.q.tx_flush();
		r.q.post_recvs(); /* the RQ back to full: base is what it holds */
		EXPECT_EQ(r.in_use(), base);
		EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
	}
}

/* Chains that cannot be sent, each dropped under its own name with every
 * segment back in its pool: more segments than max_send_sge (empty ones
 * count, as rdma-core counts num_sge), a segment in memory no region
 * covers, a message over the MTU. A good chain between them still goes,
 * and one exactly at the MTU. */
TEST(Mlx5Datapath, ChainDropsCountedNoLeak)
{
	mlx5_model_config mc = roce_cfg();
	mc.max_inline = 0;
	mc.max_send_sge = 4;
	mc.mtu = 1024;
	queue_config qc;
	qc.mtu = 1024;
	qc.signal_every = 1;
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	const unsigned base = r.in_use();
	rte_mempool *other = rte_pktmbuf_pool_create("mlx5t_unreg2", 63, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
						     SOCKET_ID_ANY);
	ASSERT_NE(other, nullptr);
	const ah_handle h = r.add_ah(roce_av(mc.local_gid));
	send_wr w[6]{};
	for (auto &x : w) {
		x.ah = h;
		x.remote_qpn = mc.qpn;
		x.remote_qkey = mc.qkey;
	}
	w[0].mbuf = chain_of({r.mp}, {10, 10, 10, 10, 10}, 1);       /* 5 > 4 segments */
	w[1].mbuf = chain_of({r.mp}, {10, 0, 10, 10, 10}, 2);        /* 5, one empty: still 5 */
	w[2].mbuf = chain_of({r.mp, r.mp, other}, {10, 20, 30}, 3);   /* third unregistered */
	w[3].mbuf = chain_of({r.mp}, {400, 400, 225}, 4);            /* 1025 > MTU */
	w[4].mbuf = chain_of({r.mp}, {400, 400, 224}, 5);            /* 1024: at the MTU */
	w[5].mbuf = chain_of({other, r.mp}, {10, 20}, 6);            /* first unregistered */
	for (auto &x : w)
		ASSERT_NE(x.mbuf, nullptr);
	const std::vector<uint8_t> good = chain_bytes(w[4].mbuf);
	EXPECT_EQ(r.q.tx_burst(w, 6), 6);
	EXPECT_EQ(r.q.counters().tx_too_many_segs, 2u);
	EXPECT_EQ(r.q.counters().tx_bad_mbuf, 2u);
	EXPECT_EQ(r.q.counters().tx_too_long, 1u);
	EXPECT_EQ(r.q.counters().tx_pkts, 1u);
	EXPECT_EQ(r.q.counters().tx_bytes, 1024u);
	EXPECT_EQ(rte_mempool_in_use_count(other), 0u); /* dropped chains freed whole */
	r.model.executed.clear();
	ASSERT_EQ(r.model.process(), 1u);
	EXPECT_EQ(r.model.executed[0].payload, good);
	std::vector<recv_wc> got;
	drain_rx(r, got);
	ASSERT_EQ(got.size(), 1u);
	EXPECT_EQ(got[0].byte_len, grh_len + 1024);
	free_wcs(got);
	r.q.tx_flush();
	r.q.post_recvs(); /* the RQ back to full: base is what it holds */
	EXPECT_EQ(r.in_use(), base);
	/* Only drops in a burst: no WQE, no doorbell. */
	const uint64_t dbs = r.q.counters().doorbells;
	send_wr y = w[0];
	y.mbuf = chain_of({r.mp, other}, {10, 10}, 7);
	ASSERT_NE(y.mbuf, nullptr);
	EXPECT_EQ(r.q.tx_burst(&y, 1), 1);
	EXPECT_EQ(r.q.counters().tx_bad_mbuf, 3u);
	EXPECT_EQ(r.q.counters().doorbells, dbs);
	EXPECT_EQ(r.in_use(), base);
	EXPECT_EQ(rte_mempool_in_use_count(other), 0u);
	EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
	rte_mempool_free(other);
}

/* Empty segments of a chain get no data segment and no DS unit, as
 * rdma-core skips SGEs of length 0: [10, 0, 20, 0] is two data segments;
 * [0, 30] is one (the single-segment WQE); [0, 0] is a zero-length send
 * of ctrl and AV only (DS 4), delivered as 40 bytes of GRH area. A
 * single-segment mbuf of 0 bytes gets no data segment either (DS 4), as
 * rdma-core posts a WR whose only SGE is empty.
 *
 * send_chains_and_check sends one burst of the mbuf chains given by their
 * segment lengths (on a QP of max_send_sge segments, no inline) and checks
 * each WQE byte for byte against the helpers', its DS, the payload
 * delivered, and that nothing is dropped or left outstanding. */
static void send_chains_and_check(const std::vector<std::vector<uint32_t>> &chains,
				  const std::vector<size_t> &want_ds,
				  uint32_t max_send_sge, uint64_t want_bytes)
{
	mlx5_model_config mc = roce_cfg();
	mc.max_inline = 0;
	mc.max_send_sge = max_send_sge;
	queue_config qc;
	qc.signal_every = 1;
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	const unsigned base = r.in_use();
	const mlx5_av av = roce_av(mc.local_gid);
	const ah_handle h = r.add_ah(av);
	const size_t n = chains.size();
	ASSERT_LE(n, 32u);
	send_wr w[32]{};
	std::vector<std::vector<uint8_t>> want(n), pay(n);
	uint32_t pi = r.q.sq_head();
	for (size_t i = 0; i < n; i++) {
		w[i].ah = h;
		w[i].remote_qpn = mc.qpn;
		w[i].remote_qkey = mc.qkey;
		w[i].mbuf = chain_of({r.mp}, chains[i], uint8_t(i));
		ASSERT_NE(w[i].mbuf, nullptr);
		ASSERT_EQ(w[i].mbuf->nb_segs, chains[i].size());
		pay[i] = chain_bytes(w[i].mbuf);
		want[i] = expected_chain_wqe(pi, mc.qpn, w[i], av, mc.qkey, MLX5_WQE_CTRL_CQ_UPDATE, r.mrs);
		ASSERT_EQ(want[i].size(), want_ds[i] * 16);
		pi += uint32_t(want[i].size() + 63) / 64;
	}
	ASSERT_EQ(r.q.tx_burst(w, uint16_t(n)), n);
	EXPECT_EQ(r.q.sq_head(), pi);
	r.model.executed.clear();
	ASSERT_EQ(r.model.process(), n);
	std::vector<recv_wc> got;
	drain_rx(r, got);
	ASSERT_EQ(got.size(), n);
	for (size_t i = 0; i < n; i++) {
		SCOPED_TRACE(i);
		EXPECT_EQ(r.model.executed[i].ds, want_ds[i]);
		EXPECT_EQ(r.model.executed[i].bytes, want[i]) << hexdiff(r.model.executed[i].bytes, want[i]);
		EXPECT_EQ(r.model.executed[i].payload, pay[i]);
		EXPECT_EQ(got[i].byte_len, grh_len + pay[i].size());
	}
	free_wcs(got);
	EXPECT_EQ(r.q.counters().tx_drops(), 0u);
	EXPECT_EQ(r.q.counters().tx_bytes, want_bytes);
	r.q.tx_flush();
	r.q.post_recvs(); /* the RQ back to full: base is what it holds */
	EXPECT_EQ(r.in_use(), base);
	EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
}

TEST(Mlx5Datapath, ChainZeroLengthSegmentsSkipped)
{
	send_chains_and_check({{10, 0, 20, 0}, {0, 30}, {0, 0}, {0, 5, 0, 6}}, {6, 5, 4, 6}, 4, 71);
}

TEST(Mlx5Datapath, ZeroLengthMbufHasNoDataSegment)
{
	send_chains_and_check({{24}, {0}, {7}}, {5, 4, 5}, 1, 31);
}

/* Every inline length from 0 to max_inline, with the extended (RoCE) and
 * the compact (IB, no GRH) AV: the WQE equals the helpers' byte for byte,
 * DS and the block count follow the 16-byte units and 64-byte blocks
 * (the inline segment crossing block boundaries at every length where
 * that happens), on a 16-block ring so many WQEs wrap, including inline
 * segments split by the ring's end, and each payload arrives intact. */
TEST(Mlx5Datapath, InlineEveryLengthAcrossBlocks)
{
	for (const cpu_isa isa : run_writer_levels())
	for (const bool compact : {false, true}) {
		SCOPED_TRACE(std::string(compact ? "compact AV" : "extended AV") + ", run writers " + cpu_isa_name(isa));
		mlx5_model_config mc = compact ? mlx5_model_config{} : roce_cfg();
		mc.roce = !compact;
		mc.local_lid = 0x42;
		mc.sq_wqe_cnt = 16;
		mc.max_inline = 188; /* 16 + 48 + 192 = 256: up to 4 blocks */
		queue_config qc;
		qc.signal_every = 3; /* 3 * 4 blocks < 16 */
		qc.compact_av = compact;
		qc.isa_cap = isa;
		rig r(mc, qc);
		ASSERT_TRUE(r.ok);
		ASSERT_EQ(r.q.tx_isa(), isa);
		mlx5_av av{};
		if (compact) {
			ibv_ah_attr a{};
			a.port_num = 1;
			a.dlid = 0x42;
			a.sl = 1;
			ASSERT_EQ(build_ib_av(a, false, &av), 0);
		} else {
			av = roce_av(mc.local_gid);
		}
		const ah_handle h = r.add_ah(av);
		unsigned by_bbs[5] = {}, seg_split = 0;
		uint64_t k = 0;
		for (uint32_t len = 0; len <= mc.max_inline; len++) {
			/* The payload ends where its allocation ends (ASan
			 * builds catch a read past it) and starts at every
			 * alignment mod 8. */
			const uint32_t off = len % 8;
			std::unique_ptr<uint8_t[]> buf(new uint8_t[off + len]);
			uint8_t *const pay = buf.get() + off;
			for (uint32_t i = 0; i < len; i++)
				pay[i] = uint8_t(len * 31 + i);
			send_wr w{};
			w.ah = h;
			w.remote_qpn = mc.qpn;
			w.remote_qkey = mc.qkey;
			w.flags = send_inline;
			w.inline_data = len != 0 ? pay : nullptr;
			w.inline_len = len;
			const uint32_t pi = r.q.sq_head();
			const bool sig = ++k % qc.signal_every == 0;
			const auto want = expected_wqe(pi, mc.qpn, w, av, compact, mc.qkey,
						       sig ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 0);
			const uint32_t avlen = compact ? 16 : 48;
			const uint32_t ds = (16 + avlen + (4 + len + 15) / 16 * 16) / 16;
			ASSERT_EQ(want.size(), ds * 16u);
			const uint32_t bbs = (ds * 16 + 63) / 64;
			/* Inline segment starting in the ring's last block
			 * and ending past it. */
			const uint32_t seg_at = (pi & 15) * 64 + 16 + avlen;
			seg_split += seg_at < 16 * 64 && seg_at + (ds * 16 - 16 - avlen) > 16 * 64;
			ASSERT_EQ(r.q.tx_burst(&w, 1), 1) << "len " << len;
			ASSERT_EQ(r.q.sq_head() - pi, bbs) << "len " << len;
			by_bbs[bbs]++;
			const mlx5_doorbell db = r.model.doorbell();
			EXPECT_TRUE(db.matches) << "len " << len;
			r.model.executed.clear();
			ASSERT_EQ(r.model.process(), 1u) << "len " << len;
			const mlx5_model_wqe &x = r.model.executed[0];
			EXPECT_EQ(x.ds, ds) << "len " << len;
			EXPECT_EQ(x.compact, compact);
			EXPECT_EQ(x.bytes, want) << "len " << len << hexdiff(x.bytes, want);
			std::vector<recv_wc> got;
			drain_rx(r, got);
			r.q.tx_flush();
			ASSERT_EQ(got.size(), 1u) << "len " << len;
			EXPECT_EQ(got[0].byte_len, grh_len + len);
			if (len != 0) {
				EXPECT_EQ(0, memcmp(rte_pktmbuf_mtod_offset(got[0].mbuf, uint8_t *, grh_len),
						    pay, len))
					<< "len " << len;
			}
			free_wcs(got);
		}
		/* Every block count a WQE of this AV can have was produced:
		 * extended 2..4, compact 1..4. */
		for (uint32_t b = compact ? 1 : 2; b <= 4; b++)
			EXPECT_GT(by_bbs[b], 0u) << b << " blocks";
		EXPECT_GT(seg_split, 3u) << "inline segments split by the ring's end";
		EXPECT_EQ(r.q.counters().tx_drops(), 0u);
		/* Inline only: completions retire by jumping to the reported
		 * WQE; all but the unsignalled tail (< signal_every WQEs) is
		 * retired, no CQE was a stray. */
		EXPECT_EQ(r.q.counters().tx_cqes, r.model.req_cqes);
		EXPECT_EQ(r.q.counters().tx_cqe_stray, 0u);
		EXPECT_LE(r.q.sq_outstanding(), (qc.signal_every - 1) * 4);
		if (k % qc.signal_every == 0) { /* the last WQE was signalled */
			EXPECT_EQ(r.q.sq_outstanding(), 0u);
		}
		EXPECT_EQ(r.model.delivered, mc.max_inline + 1u);
		EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
	}
}

/* Without compact-AV support an AH without a GRH still goes out with the
 * 48-byte AV and MLX5_EXTENDED_UD_AV (the compact one needs the device's
 * say-so). */
TEST(Mlx5Datapath, ExtendedAvWithoutCompactSupport)
{
	mlx5_model_config mc;
	mc.roce = false;
	mc.local_lid = 0x42;
	queue_config qc;
	qc.compact_av = false;
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	ibv_ah_attr a{};
	a.port_num = 1;
	a.dlid = 0x42;
	mlx5_av lid{};
	ASSERT_EQ(build_ib_av(a, false, &lid), 0);
	send_wr w{};
	w.ah = r.add_ah(lid);
	w.remote_qpn = mc.qpn;
	w.remote_qkey = mc.qkey;
	w.mbuf = payload_mbuf(r.mp, 20, 3);
	const auto want = expected_wqe(r.q.sq_head(), mc.qpn, w, lid, false, mc.qkey, 0, lkey_of(r, w.mbuf));
	ASSERT_EQ(r.q.tx_burst(&w, 1), 1);
	ASSERT_EQ(r.model.process(), 1u);
	EXPECT_FALSE(r.model.executed[0].compact);
	EXPECT_EQ(r.model.executed[0].bytes, want) << hexdiff(r.model.executed[0].bytes, want);
	std::vector<recv_wc> got;
	drain_rx(r, got);
	ASSERT_EQ(got.size(), 1u);
	EXPECT_FALSE(got[0].wc_flags & wc_grh); /* no GRH on the wire: none reported */
	free_wcs(got);
	EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
}

/* GRH and data in the buffer (the normal case, every other test) versus
 * scattered into the CQE (MLX5_INLINE_SCATTER_32 / _64): rdgram never
 * enables scatter-to-CQE, so such a CQE is counted and dropped, its
 * receive WQE consumed and its buffer back in the pool, and the receives
 * around it are delivered unharmed. */
TEST(Mlx5Datapath, ScatterToCqeCountedAndDropped)
{
	mlx5_model_config mc = roce_cfg();
	queue_config qc;
	qc.rq_refill_batch = 1;
	rig r(mc, qc);
	ASSERT_TRUE(r.ok);
	const ah_handle h = r.add_ah(roce_av(mc.local_gid));
	const uint8_t fmts[4] = {0, MLX5_INLINE_SCATTER_32, MLX5_INLINE_SCATTER_64, 0};
	std::vector<recv_wc> got;
	for (unsigned i = 0; i < 4; i++) {
		uint8_t pay[8];
		memset(pay, 0x10 + i, sizeof(pay));
		send_wr w{};
		w.ah = h;
		w.remote_qpn = mc.qpn;
		w.remote_qkey = mc.qkey;
		w.flags = send_inline;
		w.inline_data = pay;
		w.inline_len = sizeof(pay);
		ASSERT_EQ(r.q.tx_burst(&w, 1), 1);
		if (fmts[i] != 0)
			r.model.scatter_next_recv(fmts[i]);
		ASSERT_EQ(r.model.process(), 1u);
		drain_rx(r, got);
	}
	r.q.tx_flush();
	ASSERT_EQ(got.size(), 2u);
	EXPECT_EQ(*rte_pktmbuf_mtod_offset(got[0].mbuf, uint8_t *, grh_len), 0x10);
	EXPECT_EQ(*rte_pktmbuf_mtod_offset(got[1].mbuf, uint8_t *, grh_len), 0x13);
	EXPECT_EQ(r.q.counters().rx_cqe_scatter, 2u);
	EXPECT_EQ(r.q.counters().rx_wqe_mismatch, 0u);
	EXPECT_EQ(r.q.counters().rx_cqe_unexpected, 0u);
	EXPECT_EQ(r.q.counters().rx_pkts, 2u);
	EXPECT_EQ(r.model.resp_cqes, 4u);
	free_wcs(got);
	r.q.post_recvs();
	EXPECT_EQ(r.in_use(), r.q.rq_posted()); /* no buffer leaked */
	r.q.detach();
	EXPECT_EQ(r.in_use(), 0u);
	EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
}

/* Runs of WRs that differ only in their payload (the same AH, remote QPN
 * and Q_Key, plain inline SENDs of one length, or plain SENDs of
 * single-segment mbufs) are written by tx_burst's run loops, which make
 * the per-WR checks once per run. Random bursts of
 * up to 32 WRs in runs, broken by a change of AH, QPN, Q_Key, length or
 * flags, by an mbuf, by a drop (stale AH, inline over the limit, a chain
 * the QP has too few SGEs for), by the
 * signalling rule, by the ring's end and by a full SQ: every WQE equals
 * the helpers' byte for byte and the model accepts it, for the extended
 * AV (the whole-block loop for payloads up to 124 bytes, the copy loop
 * above) and the compact AV (the copy loop). */
TEST(Mlx5Datapath, InlineRunsMatchHelpers)
{
	for (const cpu_isa isa : run_writer_levels())
	for (const bool compact : {false, true})
	for (const uint32_t every : {1u, 3u, 7u, 15u})
	for (const bool last : {false, true}) {
		SCOPED_TRACE(std::string(compact ? "compact AV" : "extended AV") + ", signal_every " +
			     std::to_string(every) + (last ? ", signal_last" : "") + ", run writers " +
			     cpu_isa_name(isa));
		mlx5_model_config mc = compact ? mlx5_model_config{} : roce_cfg();
		mc.roce = !compact;
		mc.local_lid = 0x42;
		mc.sq_wqe_cnt = 64; /* 16 * 4 blocks: the SQ fills within a burst */
		mc.max_inline = 188;
		queue_config qc;
		qc.signal_every = every;
		qc.signal_last = last;
		qc.compact_av = compact;
		qc.isa_cap = isa;
		rig r(mc, qc);
		ASSERT_TRUE(r.ok);
		ASSERT_EQ(r.q.tx_isa(), isa);
		const unsigned base = r.in_use();
		mlx5_av avs[2];
		if (compact) {
			for (int a = 0; a < 2; a++) {
				ibv_ah_attr at{};
				at.port_num = 1;
				at.dlid = uint16_t(0x42 + a);
				at.sl = uint8_t(1 + a);
				ASSERT_EQ(build_ib_av(at, false, &avs[a]), 0);
			}
		} else {
			avs[0] = roce_av(v4gid(10, 0, 0, 2));
			avs[1] = roce_av(v4gid(10, 0, 0, 3));
		}
		const ah_handle hs[2] = {r.add_ah(avs[0]), r.add_ah(avs[1])};
		/* A stale handle: its slot's generation has moved on. */
		const ah_handle dead = r.add_ah(avs[0]);
		ASSERT_EQ(r.ahs.retire(dead), 0);
		const uint32_t lens[] = {0, 3, 8, 12, 16, 17, 33, 44, 60, 61, 64, 100, 124, 125, 188};

		/* Every payload its own bytes, alive until the WQE is checked. */
		std::vector<std::unique_ptr<uint8_t[]>> bufs;
		struct want_wqe {
			std::vector<uint8_t> bytes, payload;
		};
		std::vector<want_wqe> want; /* posted, not yet executed */
		std::vector<send_wr> backlog; /* WRs a full SQ left with the caller */
		uint64_t since = 0, sigs = 0, sent = 0, followers = 0, mbuf_followers = 0, stale = 0, too_long = 0,
			 too_many = 0, sent_bytes = 0;
		unsigned fulls = 0, wrapped = 0;
		uint32_t rng = 12345;
		auto rnd = [&](uint32_t n) {
			rng = rng * 1103515245u + 12345u;
			return (rng >> 8) % n;
		};
		auto process = [&]() {
			r.model.doorbell();
			r.model.executed.clear();
			r.model.process();
			ASSERT_EQ(r.model.executed.size(), want.size());
			for (size_t i = 0; i < want.size(); i++) {
				EXPECT_EQ(r.model.executed[i].bytes, want[i].bytes)
					<< "wqe " << i << hexdiff(r.model.executed[i].bytes, want[i].bytes);
				EXPECT_EQ(r.model.executed[i].payload, want[i].payload) << "wqe " << i;
			}
			want.clear();
			r.q.tx_flush();
		};
		for (int burst = 0; burst < 150; burst++) {
			std::vector<send_wr> wrs = backlog;
			backlog.clear();
			const unsigned n = 1 + rnd(mlx5_queue::max_burst);
			while (wrs.size() < n) {
				send_wr w{};
				const unsigned kind = rnd(16);
				w.ah = kind == 0 ? dead : hs[rnd(4) == 0];
				w.remote_qpn = mc.qpn + 1 + (rnd(6) == 0);
				w.remote_qkey = rnd(5) == 0 ? 0x80000000u : mc.qkey;
				const uint32_t len = kind == 1 ? mc.max_inline + 1 : lens[rnd(std::size(lens))];
				if (kind == 2 || kind == 5) {
					w.mbuf = payload_mbuf(r.mp, len + 1, uint8_t(burst));
					ASSERT_NE(w.mbuf, nullptr);
					/* Some mbuf runs with an immediate or
					 * solicited: not for mbuf_run. */
					const unsigned f = rnd(6);
					if (f == 0) {
						w.flags |= send_imm;
						w.imm_data = htobe32(0xdef00000u + burst);
					} else if (f == 1) {
						w.flags |= send_solicited;
					}
				} else {
					w.flags = send_inline;
					w.inline_len = len;
				}
				if (kind == 3) {
					w.flags |= send_imm;
					w.imm_data = htobe32(0xabc00000u + burst);
				}
				if (kind == 4)
					w.flags |= send_solicited;
				/* Then a run of copies of it, each with its own
				 * payload. */
				const unsigned run = 1 + rnd(12);
				for (unsigned k = 0; k < run && wrs.size() < n; k++) {
					send_wr c = w;
					if (c.flags & send_inline) {
						bufs.emplace_back(new uint8_t[c.inline_len + 1]);
						uint8_t *pay = bufs.back().get();
						for (uint32_t j = 0; j < c.inline_len; j++)
							pay[j] = uint8_t(rnd(256));
						c.inline_data = c.inline_len != 0 ? pay : nullptr;
					} else if (k != 0) {
						/* An mbuf run: lengths vary; now and
						 * then a chain, which this QP (one
						 * SGE) drops. */
						c.mbuf = payload_mbuf(r.mp, w.mbuf->data_len + k % 3, uint8_t(k));
						ASSERT_NE(c.mbuf, nullptr);
						if (k % 5 == 4) {
							rte_mbuf *t = payload_mbuf(r.mp, 7, uint8_t(k + 1));
							ASSERT_NE(t, nullptr);
							ASSERT_EQ(rte_pktmbuf_chain(c.mbuf, t), 0);
						}
					}
					wrs.push_back(c);
				}
			}
			/* Which WRs are chains, read before tx_burst frees the
			 * dropped ones. */
			std::vector<bool> chain(wrs.size());
			for (size_t i = 0; i < wrs.size(); i++)
				chain[i] = !(wrs[i].flags & send_inline) && wrs[i].mbuf->nb_segs > 1;
			const uint32_t pi0 = r.q.sq_head();
			const uint16_t taken = r.q.tx_burst(wrs.data(), uint16_t(wrs.size()));
			/* What the helpers build for the taken WRs, in order. */
			uint32_t pi = pi0;
			unsigned posted = 0;
			const send_wr *prev = nullptr;
			for (unsigned i = 0; i < taken; i++) {
				const send_wr &w = wrs[i];
				if (w.ah.slot == dead.slot && w.ah.gen == dead.gen) {
					stale++;
					continue;
				}
				if ((w.flags & send_inline) && w.inline_len > mc.max_inline) {
					too_long++;
					continue;
				}
				if (chain[i]) {
					too_many++;
					continue;
				}
				const bool is_last = [&] {
					for (unsigned j = i + 1; j < taken; j++) {
						const send_wr &x = wrs[j];
						if (!(x.ah.slot == dead.slot && x.ah.gen == dead.gen) &&
						    !((x.flags & send_inline) && x.inline_len > mc.max_inline) && !chain[j])
							return false;
					}
					return true;
				}();
				const bool sig = ++since >= every || (last && is_last);
				if (sig)
					since = 0;
				sigs += sig;
				const uint8_t f = uint8_t((sig ? MLX5_WQE_CTRL_CQ_UPDATE : 0) |
							  ((w.flags & send_solicited) ? MLX5_WQE_CTRL_SOLICITED : 0));
				const int a = w.ah.slot == hs[0].slot ? 0 : 1;
				want_wqe x;
				x.bytes = expected_wqe(pi, mc.qpn, w, avs[a], compact, mc.qkey, f,
						       (w.flags & send_inline) ? 0 : lkey_of(r, w.mbuf));
				if (w.flags & send_inline) {
					const auto *p = static_cast<const uint8_t *>(w.inline_data);
					x.payload.assign(p, p + w.inline_len);
				} else {
					const auto *p = rte_pktmbuf_mtod(w.mbuf, const uint8_t *);
					x.payload.assign(p, p + w.mbuf->data_len);
				}
				const uint32_t bbs = uint32_t(x.bytes.size() + 63) / 64;
				wrapped += (pi & (mc.sq_wqe_cnt - 1)) + bbs >= mc.sq_wqe_cnt;
				/* One the run loop writes: same head, plain inline,
				 * same length as the WQE before it. */
				followers += prev != nullptr && w.flags == send_inline && prev->flags == send_inline &&
					     memcmp(&w, prev, 16) == 0 && w.inline_len == prev->inline_len;
				/* One mbuf_run writes: same head, plain mbuf SEND. */
				mbuf_followers += prev != nullptr && w.flags == 0 && memcmp(&w, prev, 16) == 0;
				prev = &w;
				sent_bytes += x.payload.size();
				want.push_back(std::move(x));
				pi += bbs;
				posted++;
				sent++;
			}
			EXPECT_EQ(r.q.sq_head(), pi) << "burst " << burst;
			if (taken < wrs.size()) {
				/* Only when the next WQE does not fit. */
				const send_wr &w = wrs[taken];
				const uint32_t avlen = compact ? 16 : 48;
				const uint32_t seg = (w.flags & send_inline) ? (4 + w.inline_len + 15) / 16 * 16 : 16;
				const uint32_t need = (16 + avlen + seg + 63) / 64;
				EXPECT_GT(r.q.sq_outstanding() + need, mc.sq_wqe_cnt) << "burst " << burst;
				fulls++;
				backlog.assign(wrs.begin() + taken, wrs.end());
			}
			/* Completions some bursts only, so the SQ fills. */
			if (rnd(3) != 0 || taken < wrs.size())
				process();
			if (::testing::Test::HasFailure())
				return;
		}
		process();
		r.q.tx_flush();
		for (const send_wr &w : backlog)
			if (!(w.flags & send_inline))
				rte_pktmbuf_free(w.mbuf);
		EXPECT_GT(followers, 500u) << "the run loop should write most WQEs";
		EXPECT_GT(mbuf_followers, 100u) << "and mbuf runs too";
		EXPECT_EQ(r.q.counters().tx_too_many_segs, too_many);
		EXPECT_GT(wrapped, 10u) << "runs should reach the ring's end";
		EXPECT_GT(fulls, 3u) << "the SQ should fill within a run";
		EXPECT_EQ(r.q.counters().tx_pkts, sent);
		EXPECT_EQ(r.q.counters().tx_bytes, sent_bytes);
		EXPECT_EQ(r.q.counters().tx_stale_ah, stale);
		EXPECT_EQ(r.q.counters().tx_inline_too_long, too_long);
		EXPECT_EQ(r.model.req_cqes, sigs);
		EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
		r.q.detach();
		EXPECT_GT(base, 0u);
		EXPECT_EQ(r.in_use(), 0u); /* every mbuf back in the pool */
	}
}

/* The run writers chosen at attach, forced one per queue: the same bursts
 * (runs of inline SENDs of every length, so every writer's range and its
 * edges, with an immediate or an mbuf send now and then to end a run) give
 * byte-identical WQEs and payloads from block_writer_avx512,
 * block_writer_avx2 and the portable copy_writer. On this project's
 * AVX-512 hosts all three run, in a generic build as in a native one. */
TEST(Mlx5Datapath, RunWritersByteIdentical)
{
	const std::vector<cpu_isa> levels = run_writer_levels();
	if (__builtin_cpu_supports("avx512bw") && std::getenv("RDGRAM_CPU_MAX") == nullptr) {
		EXPECT_EQ(levels.size(), 3u) << "an AVX-512 CPU runs every writer";
	}
	for (const bool compact : {false, true}) {
		SCOPED_TRACE(compact ? "compact AV" : "extended AV");
		std::vector<std::vector<uint8_t>> ref_bytes, ref_payloads;
		for (const cpu_isa isa : levels) {
			SCOPED_TRACE(std::string("run writers ") + cpu_isa_name(isa));
			mlx5_model_config mc = compact ? mlx5_model_config{} : roce_cfg();
			mc.roce = !compact;
			mc.local_lid = 0x42;
			mc.sq_wqe_cnt = 64;
			mc.max_inline = 188;
			queue_config qc;
			qc.signal_every = 7;
			qc.compact_av = compact;
			qc.isa_cap = isa;
			rig r(mc, qc);
			ASSERT_TRUE(r.ok);
			ASSERT_EQ(r.q.tx_isa(), isa);
			mlx5_av av{};
			if (compact) {
				ibv_ah_attr a{};
				a.port_num = 1;
				a.dlid = 0x42;
				a.sl = 2;
				ASSERT_EQ(build_ib_av(a, false, &av), 0);
			} else {
				av = roce_av(v4gid(10, 0, 0, 7));
			}
			const ah_handle h = r.add_ah(av);
			std::vector<std::vector<uint8_t>> bytes, payloads;
			uint32_t rng = 777; /* the same payloads for every level */
			for (uint32_t len = 0; len <= mc.max_inline; len++) {
				const unsigned n = 2 + len % 11; /* 2..12 WQEs of at most 4 blocks */
				std::vector<std::unique_ptr<uint8_t[]>> bufs;
				std::vector<send_wr> wrs;
				for (unsigned k = 0; k < n; k++) {
					send_wr w{};
					w.ah = h;
					w.remote_qpn = mc.qpn;
					w.remote_qkey = mc.qkey;
					if (k == n / 2 && len % 3 == 0) {
						/* A run breaker: an mbuf send, or an immediate. */
						if (len % 2 == 0) {
							w.mbuf = payload_mbuf(r.mp, len + 1, uint8_t(len));
							ASSERT_NE(w.mbuf, nullptr);
							wrs.push_back(w);
							continue;
						}
						w.flags = send_imm;
						w.imm_data = htobe32(0xfeed0000u + len);
					}
					w.flags |= send_inline;
					w.inline_len = len;
					/* Payloads end where their allocation ends. */
					bufs.emplace_back(new uint8_t[len + 1]);
					uint8_t *p = bufs.back().get() + 1;
					for (uint32_t j = 0; j < len; j++) {
						rng = rng * 1103515245u + 12345u;
						p[j] = uint8_t(rng >> 16);
					}
					w.inline_data = len != 0 ? p : nullptr;
					wrs.push_back(w);
				}
				ASSERT_EQ(r.q.tx_burst(wrs.data(), uint16_t(wrs.size())), wrs.size()) << "len " << len;
				r.model.doorbell();
				r.model.executed.clear();
				ASSERT_EQ(r.model.process(), wrs.size()) << "len " << len;
				for (const mlx5_model_wqe &x : r.model.executed) {
					/* The mbuf's address differs between rigs. */
					if (!x.inl) {
						bytes.emplace_back(x.bytes.begin(), x.bytes.end() - 8);
					} else {
						bytes.push_back(x.bytes);
					}
					payloads.push_back(x.payload);
				}
				std::vector<recv_wc> got;
				drain_rx(r, got);
				free_wcs(got);
				r.q.tx_flush();
			}
			EXPECT_EQ(r.q.counters().tx_drops(), 0u);
			EXPECT_TRUE(r.model.violations.empty()) << r.model.violations.front();
			if (ref_bytes.empty()) {
				ref_bytes = std::move(bytes);
				ref_payloads = std::move(payloads);
				continue;
			}
			ASSERT_EQ(bytes.size(), ref_bytes.size());
			size_t diffs = 0;
			for (size_t i = 0; i < bytes.size(); i++) {
				if (bytes[i] != ref_bytes[i] && ++diffs <= 5)
					ADD_FAILURE() << "wqe " << i << " differs from the " << cpu_isa_name(levels[0])
						      << " writer's" << hexdiff(bytes[i], ref_bytes[i]);
				if (payloads[i] != ref_payloads[i] && ++diffs <= 5)
					ADD_FAILURE() << "wqe " << i << " payload differs";
			}
			EXPECT_EQ(diffs, 0u);
		}
	}
}

/* build_ib_av follows mlx5_create_ah's rules for an IB port. */
TEST(Mlx5Av, IbAvAsProviderBuildsIt)
{
	ibv_ah_attr a{};
	a.port_num = 1;
	a.dlid = 0x1234;
	a.sl = 0xb;
	a.src_path_bits = 0xff;
	a.static_rate = IBV_RATE_100_GBPS; /* index 16 -> mlx5 rate 15 */
	mlx5_av av;
	ASSERT_EQ(build_ib_av(a, false, &av), 0);
	EXPECT_EQ(av.wqe.rlid, htobe16(0x1234));
	EXPECT_EQ(av.wqe.fl_mlid, 0x7f);
	EXPECT_EQ(av.wqe.stat_rate_sl, 15 << 4 | 0xb);
	EXPECT_EQ(av.wqe.grh_gid_fl, 0u);
	EXPECT_EQ(av.global, 0u);
	const uint8_t zero[16] = {};
	EXPECT_EQ(0, memcmp(av.wqe.rgid, zero, 16));
	a.is_global = 1;
	a.grh.sgid_index = 3;
	a.grh.flow_label = 0x1abcde; /* 20 bits kept */
	a.grh.hop_limit = 7;
	a.grh.traffic_class = 0x11;
	a.grh.dgid.raw[15] = 9;
	ASSERT_EQ(build_ib_av(a, true, &av), 0);
	EXPECT_EQ(be32toh(av.wqe.grh_gid_fl), 1u << 30 | 3u << 20 | 0xabcde);
	EXPECT_EQ(av.wqe.hop_limit, 7);
	EXPECT_EQ(av.wqe.tclass, 0x11);
	EXPECT_EQ(av.wqe.rgid[15], 9);
	EXPECT_EQ(av.global, 1u);
	a.is_global = 0;
	EXPECT_EQ(build_ib_av(a, true, &av), EINVAL); /* port requires a GRH */
	a.port_num = 2;
	EXPECT_EQ(build_ib_av(a, false, &av), EINVAL);
	a.port_num = 1;
	a.static_rate = ibv_rate(40);
	EXPECT_EQ(build_ib_av(a, false, &av), EOPNOTSUPP);
}

/* parse_cqe agrees with mlx5dv's getters and the provider's field rules. */
TEST(Mlx5Cqe, ParseFields)
{
	mlx5_cqe64 c{};
	c.byte_cnt = htobe32(140);
	c.flags_rqpn = htobe32(1u << 28 | 2u << 24 | 0xabcdef);
	c.slid = htobe16(0x77);
	c.imm_inval_pkey = htobe32(0xdeadbeef);
	c.sop_drop_qpn = htobe32(0x99000123);
	c.wqe_counter = htobe16(0x1234);
	c.ml_path = 0x85;
	c.op_own = MLX5_CQE_RESP_SEND_IMM << 4 | 2 | 1;
	cqe_fields f;
	EXPECT_EQ(parse_cqe(c, &f), cqe_class::recv);
	EXPECT_EQ(f.opcode, mlx5dv_get_cqe_opcode(&c));
	EXPECT_EQ(f.byte_cnt, 140u);
	EXPECT_EQ(f.src_qp, 0xabcdefu);
	EXPECT_EQ(f.qpn, 0x123u);
	EXPECT_EQ(f.l3_or_sl, 2);
	EXPECT_EQ(f.grh, 1);
	EXPECT_TRUE(f.with_imm);
	EXPECT_TRUE(f.solicited);
	EXPECT_EQ(f.imm, htobe32(0xdeadbeef));
	EXPECT_EQ(f.wqe_counter, 0x1234);
	EXPECT_TRUE(cqe_sw_owned(&c, 8, 8));   /* lap 1: owner 1 */
	EXPECT_FALSE(cqe_sw_owned(&c, 0, 8));  /* lap 0 expects owner 0 */
	c.op_own = MLX5_CQE_INVALID << 4 | 1;
	EXPECT_FALSE(cqe_sw_owned(&c, 8, 8));
	c.op_own = MLX5_CQE_RESP_SEND << 4 | MLX5_INLINE_SCATTER_32;
	EXPECT_EQ(parse_cqe(c, &f), cqe_class::inline_scatter);
	c.op_own = MLX5_CQE_RESP_SEND << 4 | 3 << 2;
	EXPECT_EQ(parse_cqe(c, &f), cqe_class::compressed);
	auto &e = reinterpret_cast<mlx5_err_cqe &>(c);
	e.syndrome = MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
	e.vendor_err_synd = 0x33;
	c.op_own = MLX5_CQE_RESP_ERR << 4;
	EXPECT_EQ(parse_cqe(c, &f), cqe_class::resp_err);
	EXPECT_EQ(f.syndrome, MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
	EXPECT_EQ(f.vendor_syndrome, 0x33);
	c.op_own = MLX5_CQE_RESIZE_CQ << 4;
	EXPECT_EQ(parse_cqe(c, &f), cqe_class::other);
}
