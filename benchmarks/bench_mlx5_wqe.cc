/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * What a UD send WQE costs the CPU on drivers/mlx5's path, beside its floor
 * and beside rdma-core's helpers, and how fast CQE64s are parsed. All in
 * ordinary memory (the ring and BlueFlame register come from the device
 * model in tests/model, the doorbell record and "MMIO" are plain memory):
 * no ConnectX is involved, and on one the doorbell's MMIO writes would add
 * their own cost per burst.
 *
 * Send side, bursts of 32 WQEs of 64 bytes inline to one RoCE destination
 * (extended 48-byte AV): 16 + 48 + align16(4 + 64) = 144 bytes, DS 9,
 * three 64-byte basic blocks, in an SQ of 1024 blocks (64 KiB: it stays in
 * L2, and WQEs straddle the ring's end as they do on a device):
 *
 *   tx/mlx5_path        mlx5_queue::tx_burst: AH table lookup, Q_Key rule,
 *                       WQE build, the doorbell record and a BlueFlame copy
 *                       of the last WQE (to memory), counters, and the reap
 *                       of one requester CQE per burst. The "device" writes
 *                       that CQE (one 64-byte store and two fields) inside
 *                       the timed loop.
 *   tx/memcpy_floor     memcpy of the same 144 precomputed WQE bytes into
 *                       the same ring positions (split at the ring's end):
 *                       the least any path can do.
 *   tx/mlx5_path_2dest  the same with bursts that are not one run (every
 *   tx/mlx5_path_2len   WR's destination, or length, differs from the one
 *                       before it): each WR takes the per-WR checks.
 *   tx/memcpy_prefetchw  the floor with the path's prefetchw of the next
 *                       WQE's blocks before each copy: a control, showing
 *                       whether the floor itself gains from it.
 *   tx/rdma_core_helpers  mlx5dv_set_ctrl_seg + mlx5dv_set_dgram_seg from
 *                       the AV's fields, the inline header, payload memcpy
 *                       and zero padding (split at the ring's end), as an
 *                       application composing WQEs with mlx5dv.h would;
 *                       no doorbell, no AH lookup.
 *
 * The same for payloads in mbufs (data segments: 16 + 48 + 16 per
 * segment, two blocks for one or two segments), bursts of 32 from a
 * mempool the queue has memory regions for:
 *
 *   tx/mlx5_path_1seg   tx_burst of 32 single-segment mbufs of 64 bytes:
 *                       the lkey lookup and one data segment per WQE; the
 *                       burst's mbufs are allocated (rte_pktmbuf_alloc_bulk)
 *                       and freed by the reap of the burst's CQE, both
 *                       inside the timed loop, as an application's are.
 *   tx/mbufs_1seg       that allocation and free alone (subtract it).
 *   tx/rdma_core_helpers_1seg  mlx5dv_set_ctrl_seg, mlx5dv_set_dgram_seg
 *                       and one mlx5dv_set_data_seg per WQE, for fixed
 *                       buffers (no mbufs, no lkey lookup, no doorbell).
 *   tx/..._2seg         the same with chains of two mbufs (a 14-byte
 *                       header mbuf, then 50 bytes of payload): two data
 *                       segments per WQE, two lkey lookups, the chain
 *                       walked out of line (gather_chain, write_chain).
 *
 * Before timing, each variant's WQE bytes are checked equal to the others'
 * (but for the WQE index); a mismatch aborts the benchmark.
 *
 * Receive side:
 *   rx/parse_cqe        cqe_sw_owned + parse_cqe over a ring of 1024
 *                       prepared responder CQE64s (RESP_SEND, GRH, RoCE
 *                       IPv4 L3 type), as rx_burst reads them.
 *   rx/rx_burst         mlx5_queue::rx_burst of 32 CQEs: parse, GRH area
 *                       classification (an IPv4 header in every buffer),
 *                       recv_wc fill, the CQ doorbell record, RQ refill from
 *                       the mempool; the application's rte_pktmbuf_free_bulk
 *                       and the "device's" 32 CQE writes are inside the loop.
 *   rx/device_writes    those 32 CQE writes alone (subtract from rx_burst).
 *
 * items/s = WQEs or CQEs per second; ns per item = 1e9 / items_per_second.
 *
 * Run e.g.:
 *   build/benchmarks/bench_mlx5_wqe --benchmark_min_time=0.5 \
 *       --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
 *       --benchmark_report_aggregates_only=true
 */
#include <benchmark/benchmark.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "mlx5_av.h"
#include "mlx5_datapath.h"
#include "model/mlx5_model.h"

namespace {

using namespace rdgram;
using namespace rdgram::mlx5;

constexpr unsigned burst = 32;
constexpr uint32_t payload_len = 64;
constexpr uint32_t sq_blocks = 1024;
constexpr uint32_t wqe_len = 16 + 48 + (4 + payload_len + 15) / 16 * 16; /* 144 */
constexpr uint32_t wqe_bbs = (wqe_len + wqe_bb - 1) / wqe_bb;                /* 3 */
constexpr uint32_t qkey = 0x11111111;
constexpr uint32_t local_qpn = 0x123;
constexpr uint32_t remote_qpn = 0x456;
constexpr uint32_t lkey = 0x5a000;

rte_mempool *g_mp = nullptr;

mlx5_av bench_av()
{
	mlx5_av a{};
	a.wqe.rlid = htobe16(0xc123); /* RoCEv2 UDP source port */
	a.wqe.stat_rate_sl = 3 << 1;
	a.wqe.tclass = 0x68;
	a.wqe.hop_limit = 64;
	a.wqe.grh_gid_fl = htobe32(0x12345);
	const uint8_t ip[4] = {10, 0, 0, 2};
	a.wqe.rgid[10] = 0xff;
	a.wqe.rgid[11] = 0xff;
	memcpy(a.wqe.rgid + 12, ip, 4);
	const uint8_t mac[6] = {0x02, 0, 0, 0, 0x11, 0x22};
	memcpy(a.wqe.rmac, mac, 6);
	a.global = 1;
	return a;
}

/* Copies len bytes to the ring at dst, continuing at its start. */
inline void ring_copy(uint8_t *ring, uint8_t *end, uint8_t *dst, const uint8_t *src, uint32_t len)
{
	const uint32_t first = uint32_t(end - dst);
	if (len <= first) {
		memcpy(dst, src, len);
	} else {
		memcpy(dst, src, first);
		memcpy(ring, src + first, len - first);
	}
}

/* The WQE of len bytes at counter pi, unwrapped, with its index field
 * zeroed. */
std::vector<uint8_t> read_wqe(const uint8_t *ring, uint32_t pi, uint32_t len = wqe_len)
{
	std::vector<uint8_t> w(len);
	for (uint32_t i = 0; i < len; i++)
		w[i] = ring[(size_t(pi) * wqe_bb + i) % (size_t(sq_blocks) * wqe_bb)];
	w[1] = w[2] = 0; /* opmod_idx_opcode 23:8 */
	return w;
}

/* A queue on a model's rings; the model never executes anything here. */
struct tx_rig {
	test::mlx5_model model;
	ibv::lkey_map mrs;
	ah_table<mlx5_av> ahs;
	mlx5_queue q;
	ah_handle h = ah_null;
	uint8_t payload[payload_len];
	send_wr wrs[burst]{};
	uint32_t scq_pi = 0;
	bool ok = false;

	tx_rig()
	{
		test::mlx5_model_config mc;
		mc.sq_wqe_cnt = sq_blocks;
		mc.scq_cqe_cnt = 64;
		mc.qpn = local_qpn;
		mc.qkey = qkey;
		mc.max_inline = payload_len;
		if (model.init(mc) != 0 || ahs.init(64, SOCKET_ID_ANY, nullptr) != 0)
			return;
		/* The pool's memory chunks, for the data-segment variants. */
		rte_mempool_mem_iter(
			g_mp,
			[](rte_mempool *, void *o, rte_mempool_memhdr *mh, unsigned i) {
				static_cast<ibv::lkey_map *>(o)->add(uintptr_t(mh->addr), mh->len, lkey + i);
			},
			&mrs);
		uint32_t slot;
		if (!ahs.reserve(&slot))
			return;
		ahs.av_at(slot) = bench_av();
		h = ahs.publish(slot);
		queue_config qc;
		qc.qkey = qkey;
		qc.max_inline = payload_len;
		/* What mlx5_device asks for: the WQE stays three blocks. */
		qc.max_send_sge = 8;
		qc.signal_every = burst; /* the last WQE of every burst */
		if (q.attach(model.rings(), qc, g_mp, mrs, &ahs) != 0)
			return;
		for (uint32_t i = 0; i < payload_len; i++)
			payload[i] = uint8_t(i * 13);
		for (auto &w : wrs) {
			w.ah = h;
			w.remote_qpn = remote_qpn;
			w.remote_qkey = qkey;
			w.flags = send_inline;
			w.inline_data = payload;
			w.inline_len = payload_len;
		}
		ok = true;
	}
	~tx_rig()
	{
		q.detach();
		ahs.fini();
	}

	/* The device's part: one requester CQE for the burst's signalled
	 * (last) WQE, whose index covers the whole burst. */
	void complete_burst(uint32_t last_bbs = wqe_bbs)
	{
		const cq_ring &cq = model.rings().scq;
		auto *c = reinterpret_cast<mlx5_cqe64 *>(cq.buf + size_t(scq_pi & (cq.cqe_cnt - 1)) * 64);
		c->wqe_counter = htobe16(uint16_t(q.sq_head() - last_bbs));
		c->sop_drop_qpn = htobe32(local_qpn);
		c->op_own = uint8_t(MLX5_CQE_REQ << 4 | ((scq_pi & cq.cqe_cnt) != 0 ? 1 : 0));
		scq_pi++;
	}
};

/* The timed loop of the inline variants: a burst of r.wrs, then the
 * "device's" CQE for it; every WR must be taken and none dropped. */
void time_bursts(benchmark::State &st, tx_rig &r)
{
	for (auto _ : st) {
		const uint16_t n = r.q.tx_burst(r.wrs, burst);
		if (unlikely(n != burst)) {
			st.SkipWithError("SQ full: completions not reaped");
			break;
		}
		r.complete_burst();
	}
	benchmark::DoNotOptimize(r.model.rings().sq_buf[0]);
	if (r.q.counters().tx_drops() != 0 || r.q.counters().tx_inline_too_long != 0 ||
	    r.q.counters().tx_too_many_segs != 0)
		st.SkipWithError("drops counted");
	st.SetItemsProcessed(int64_t(st.iterations()) * burst);
}

/* The WQE bytes rdma-core's helpers compose, into the ring at pi. */
inline void compose_with_helpers(uint8_t *ring, uint8_t *end, uint32_t pi, const mlx5_av &av,
				 const uint8_t *payload, uint8_t fm_ce_se)
{
	uint8_t *ctrl = ring + size_t(pi & (sq_blocks - 1)) * wqe_bb;
	auto *cs = reinterpret_cast<mlx5_wqe_ctrl_seg *>(ctrl);
	mlx5dv_set_ctrl_seg(cs, uint16_t(pi), MLX5_OPCODE_SEND, 0, local_qpn, fm_ce_se, wqe_len / 16, 0, 0);
	cs->dci_stream_channel_id = 0; /* the helper leaves it as the ring held it */
	mlx5_wqe_av a = av.wqe;
	mlx5dv_set_dgram_seg(reinterpret_cast<mlx5_wqe_datagram_seg *>(ctrl + 16), uint64_t(qkey) << 32,
			     remote_qpn, 1, a.stat_rate_sl, a.fl_mlid, be16toh(a.rlid), a.rmac, a.tclass,
			     a.hop_limit, be32toh(a.grh_gid_fl), a.rgid);
	uint8_t *seg = ctrl + wqe_bb == end ? ring : ctrl + wqe_bb;
	/* Inline header, data and zero padding; no helper exists for the
	 * inline segment (mlx5dv.h has only its MLX5_INLINE_SEG bit). */
	uint8_t tail[wqe_len - 64];
	const uint32_t hdr = htobe32(payload_len | MLX5_INLINE_SEG);
	memcpy(tail, &hdr, 4);
	memcpy(tail + 4, payload, payload_len);
	memset(tail + 4 + payload_len, 0, sizeof(tail) - 4 - payload_len);
	ring_copy(ring, end, seg, tail, sizeof(tail));
}

void tx_mlx5_path(benchmark::State &st)
{
	tx_rig r;
	if (!r.ok) {
		st.SkipWithError("rig set-up failed");
		return;
	}
	/* Check the bytes once against the helpers' WQE. */
	{
		const uint32_t pi = r.q.sq_head();
		if (r.q.tx_burst(r.wrs, burst) != burst) {
			st.SkipWithError("first burst not accepted");
			return;
		}
		r.complete_burst();
		std::vector<uint8_t> ref(size_t(sq_blocks) * wqe_bb, 0);
		compose_with_helpers(ref.data(), ref.data() + ref.size(), pi, bench_av(), r.payload, 0);
		if (read_wqe(r.model.rings().sq_buf, pi) != read_wqe(ref.data(), pi)) {
			st.SkipWithError("mlx5 path WQE differs from the rdma-core helpers' WQE");
			return;
		}
	}
	time_bursts(st, r);
	st.counters["bf_copies_per_burst"] =
		double(r.q.counters().bf_copies) / double(r.q.counters().doorbells);
}

/* tx/mlx5_path with bursts that are not one run: every WR to a destination
 * (or of a length) other than the one before it, so each goes through
 * tx_burst's per-WR checks. _2dest alternates two AHs (the same AV under
 * two handles: the head is rebuilt for every WR), _2len alternates 64 and
 * 62 bytes (both 144-byte WQEs, the head reused). */
void tx_mlx5_path_mixed(benchmark::State &st, bool two_dest)
{
	tx_rig r;
	if (!r.ok) {
		st.SkipWithError("rig set-up failed");
		return;
	}
	uint32_t slot;
	if (!r.ahs.reserve(&slot)) {
		st.SkipWithError("no second AH");
		return;
	}
	r.ahs.av_at(slot) = bench_av();
	const ah_handle h2 = r.ahs.publish(slot);
	for (unsigned i = 1; i < burst; i += 2) {
		if (two_dest)
			r.wrs[i].ah = h2;
		else
			r.wrs[i].inline_len = payload_len - 2;
	}
	time_bursts(st, r);
}
void tx_mlx5_path_2dest(benchmark::State &st) { tx_mlx5_path_mixed(st, true); }
void tx_mlx5_path_2len(benchmark::State &st) { tx_mlx5_path_mixed(st, false); }

/* A ring of sq_blocks blocks (64-byte aligned, zeroed, no hugepages). */
struct plain_ring {
	uint8_t *buf = static_cast<uint8_t *>(rte_zmalloc("bench_sq", size_t(sq_blocks) * wqe_bb, 64));
	uint8_t *end() const { return buf + size_t(sq_blocks) * wqe_bb; }
	~plain_ring() { rte_free(buf); }
};

/* The floor: memcpy of the precomputed WQE (what the helpers build at
 * index 0). With prefetch, the mlx5 path's prefetchw of the next WQE's
 * three blocks before each copy (tx/memcpy_prefetchw): what the copy alone
 * costs once its stores do not wait for their blocks' reads for ownership.
 * A template, so that the plain floor has no branch in its loop. */
template <bool prefetch> void tx_memcpy(benchmark::State &st)
{
	plain_ring ring;
	if (ring.buf == nullptr) {
		st.SkipWithError("rte_zmalloc failed");
		return;
	}
	uint8_t payload[payload_len];
	for (uint32_t i = 0; i < payload_len; i++)
		payload[i] = uint8_t(i * 13);
	compose_with_helpers(ring.buf, ring.end(), 0, bench_av(), payload, 0);
	alignas(64) uint8_t wqe[wqe_len];
	memcpy(wqe, ring.buf, wqe_len);
	uint32_t pi = 0;
	for (auto _ : st) {
		for (unsigned i = 0; i < burst; i++) {
			if constexpr (prefetch) {
				const uint8_t *next = ring.buf + size_t((pi + wqe_bbs) & (sq_blocks - 1)) * wqe_bb;
				__builtin_prefetch(next, 1, 3);
				__builtin_prefetch(next + wqe_bb, 1, 3);
				__builtin_prefetch(next + 2 * wqe_bb, 1, 3);
			}
			ring_copy(ring.buf, ring.end(), ring.buf + size_t(pi & (sq_blocks - 1)) * wqe_bb, wqe,
				  wqe_len);
			pi += wqe_bbs;
		}
		benchmark::ClobberMemory();
	}
	st.SetItemsProcessed(int64_t(st.iterations()) * burst);
}
void tx_memcpy_floor(benchmark::State &st) { tx_memcpy<false>(st); }
void tx_memcpy_prefetchw(benchmark::State &st) { tx_memcpy<true>(st); }

void tx_rdma_core_helpers(benchmark::State &st)
{
	plain_ring ring;
	if (ring.buf == nullptr) {
		st.SkipWithError("rte_zmalloc failed");
		return;
	}
	uint8_t payload[payload_len];
	for (uint32_t i = 0; i < payload_len; i++)
		payload[i] = uint8_t(i * 13);
	const mlx5_av av = bench_av();
	uint32_t pi = 0;
	for (auto _ : st) {
		for (unsigned i = 0; i < burst; i++) {
			compose_with_helpers(ring.buf, ring.end(), pi, av, payload,
					     i == burst - 1 ? MLX5_WQE_CTRL_CQ_UPDATE : 0);
			pi += wqe_bbs;
		}
		benchmark::ClobberMemory();
	}
	st.SetItemsProcessed(int64_t(st.iterations()) * burst);
}

/* ---- data segments (payload in mbufs) ----------------------------------- */

constexpr uint32_t hdr_seg_len = 14; /* a header mbuf, e.g. an application header */

/* One segment of a WQE's gather list, as the helpers take it. */
struct gather {
	uintptr_t addr;
	uint32_t len, lkey;
};

constexpr uint32_t data_wqe_len(unsigned nsegs) { return 16 + 48 + 16 * nsegs; }
constexpr uint32_t data_wqe_bbs(unsigned nsegs) { return (data_wqe_len(nsegs) + wqe_bb - 1) / wqe_bb; }

/* The WQE rdma-core's helpers compose for a gather list, into the ring at
 * pi: ctrl, datagram, then one mlx5dv_set_data_seg per segment, each
 * continuing at the ring's start when it reaches the end (a segment is 16
 * bytes and never straddles it). */
inline void compose_data_with_helpers(uint8_t *ring, uint8_t *end, uint32_t pi, const mlx5_av &av,
				      const gather *g, unsigned nsegs, uint8_t fm_ce_se)
{
	uint8_t *ctrl = ring + size_t(pi & (sq_blocks - 1)) * wqe_bb;
	auto *cs = reinterpret_cast<mlx5_wqe_ctrl_seg *>(ctrl);
	mlx5dv_set_ctrl_seg(cs, uint16_t(pi), MLX5_OPCODE_SEND, 0, local_qpn, fm_ce_se,
			    uint8_t(data_wqe_len(nsegs) / 16), 0, 0);
	cs->dci_stream_channel_id = 0;
	mlx5_wqe_av a = av.wqe;
	mlx5dv_set_dgram_seg(reinterpret_cast<mlx5_wqe_datagram_seg *>(ctrl + 16), uint64_t(qkey) << 32,
			     remote_qpn, 1, a.stat_rate_sl, a.fl_mlid, be16toh(a.rlid), a.rmac, a.tclass,
			     a.hop_limit, be32toh(a.grh_gid_fl), a.rgid);
	uint8_t *seg = ctrl + wqe_bb;
	for (unsigned i = 0; i < nsegs; i++) {
		if (seg == end)
			seg = ring;
		mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg *>(seg), g[i].len, g[i].lkey, g[i].addr);
		seg += 16;
	}
}

/* An application's part of a data-segment send: nsegs mbufs per WR (the
 * first hdr_seg_len bytes, the second the rest of payload_len), chained. */
inline bool build_mbufs(send_wr *wrs, unsigned nsegs)
{
	rte_mbuf *ms[2 * burst];
	if (rte_pktmbuf_alloc_bulk(g_mp, ms, burst * nsegs) != 0)
		return false;
	for (unsigned i = 0; i < burst; i++) {
		rte_mbuf *m = ms[i * nsegs];
		if (nsegs == 1) {
			m->data_len = uint16_t(payload_len);
			m->pkt_len = payload_len;
		} else {
			rte_mbuf *t = ms[i * nsegs + 1];
			m->data_len = uint16_t(hdr_seg_len);
			t->data_len = uint16_t(payload_len - hdr_seg_len);
			m->next = t;
			m->nb_segs = 2;
			m->pkt_len = payload_len;
		}
		wrs[i].mbuf = m;
	}
	return true;
}

/* The gather list tx_burst should write for an mbuf chain. */
std::vector<gather> gather_of(ibv::lkey_map &mrs, rte_mbuf *m)
{
	std::vector<gather> g;
	for (; m != nullptr; m = m->next) {
		gather x{rte_pktmbuf_mtod(m, uintptr_t), m->data_len, 0};
		mrs.lookup(x.addr, x.len, &x.lkey);
		g.push_back(x);
	}
	return g;
}

void tx_mlx5_path_data(benchmark::State &st, unsigned nsegs)
{
	tx_rig r;
	if (!r.ok) {
		st.SkipWithError("rig set-up failed");
		return;
	}
	for (auto &w : r.wrs)
		w.flags = 0;
	const uint32_t bbs = data_wqe_bbs(nsegs);
	{
		const uint32_t pi = r.q.sq_head();
		if (!build_mbufs(r.wrs, nsegs)) {
			st.SkipWithError("mempool empty");
			return;
		}
		const std::vector<gather> g = gather_of(r.mrs, r.wrs[0].mbuf);
		if (r.q.tx_burst(r.wrs, burst) != burst) {
			st.SkipWithError("first burst not accepted");
			return;
		}
		r.complete_burst(bbs);
		std::vector<uint8_t> ref(size_t(sq_blocks) * wqe_bb, 0);
		compose_data_with_helpers(ref.data(), ref.data() + ref.size(), pi, bench_av(), g.data(),
					  unsigned(g.size()), 0);
		if (read_wqe(r.model.rings().sq_buf, pi, data_wqe_len(nsegs)) !=
		    read_wqe(ref.data(), pi, data_wqe_len(nsegs))) {
			st.SkipWithError("mlx5 path WQE differs from the rdma-core helpers' WQE");
			return;
		}
	}
	for (auto _ : st) {
		if (unlikely(!build_mbufs(r.wrs, nsegs))) {
			st.SkipWithError("mempool empty: completions not reaped");
			break;
		}
		const uint16_t n = r.q.tx_burst(r.wrs, burst);
		if (unlikely(n != burst)) {
			st.SkipWithError("SQ full: completions not reaped");
			break;
		}
		r.complete_burst(bbs);
	}
	r.q.tx_flush();
	benchmark::DoNotOptimize(r.model.rings().sq_buf[0]);
	if (r.q.counters().tx_drops() != 0 || r.q.counters().tx_inline_too_long != 0 ||
	    r.q.counters().tx_too_many_segs != 0)
		st.SkipWithError("drops counted");
	st.SetItemsProcessed(int64_t(st.iterations()) * burst);
}

void tx_mlx5_path_1seg(benchmark::State &st) { tx_mlx5_path_data(st, 1); }
void tx_mlx5_path_2seg(benchmark::State &st) { tx_mlx5_path_data(st, 2); }

/* The mbufs' allocation, chaining and free alone (what tx/mlx5_path_*seg
 * spends outside the driver). */
void tx_mbufs(benchmark::State &st, unsigned nsegs)
{
	send_wr wrs[burst]{};
	rte_mbuf *ms[burst];
	for (auto _ : st) {
		if (unlikely(!build_mbufs(wrs, nsegs))) {
			st.SkipWithError("mempool empty");
			break;
		}
		for (unsigned i = 0; i < burst; i++)
			ms[i] = wrs[i].mbuf;
		/* complete_to frees one WQE's chain at a time. */
		for (unsigned i = 0; i < burst; i++)
			rte_pktmbuf_free(ms[i]);
	}
	st.SetItemsProcessed(int64_t(st.iterations()) * burst);
}

void tx_mbufs_1seg(benchmark::State &st) { tx_mbufs(st, 1); }
void tx_mbufs_2seg(benchmark::State &st) { tx_mbufs(st, 2); }

void tx_rdma_core_helpers_data(benchmark::State &st, unsigned nsegs)
{
	plain_ring ring;
	if (ring.buf == nullptr) {
		st.SkipWithError("rte_zmalloc failed");
		return;
	}
	send_wr wrs[burst]{};
	if (!build_mbufs(wrs, nsegs)) {
		st.SkipWithError("mempool empty");
		return;
	}
	ibv::lkey_map mrs;
	rte_mempool_mem_iter(
		g_mp,
		[](rte_mempool *, void *o, rte_mempool_memhdr *mh, unsigned i) {
			static_cast<ibv::lkey_map *>(o)->add(uintptr_t(mh->addr), mh->len, lkey + i);
		},
		&mrs);
	gather g[burst][2];
	for (unsigned i = 0; i < burst; i++) {
		const std::vector<gather> v = gather_of(mrs, wrs[i].mbuf);
		for (unsigned j = 0; j < nsegs; j++)
			g[i][j] = v[j];
	}
	const mlx5_av av = bench_av();
	const uint32_t bbs = data_wqe_bbs(nsegs);
	uint32_t pi = 0;
	for (auto _ : st) {
		for (unsigned i = 0; i < burst; i++) {
			compose_data_with_helpers(ring.buf, ring.end(), pi, av, g[i], nsegs,
						  i == burst - 1 ? MLX5_WQE_CTRL_CQ_UPDATE : 0);
			pi += bbs;
		}
		benchmark::ClobberMemory();
	}
	for (auto &w : wrs)
		rte_pktmbuf_free(w.mbuf);
	st.SetItemsProcessed(int64_t(st.iterations()) * burst);
}

void tx_rdma_core_helpers_1seg(benchmark::State &st) { tx_rdma_core_helpers_data(st, 1); }
void tx_rdma_core_helpers_2seg(benchmark::State &st) { tx_rdma_core_helpers_data(st, 2); }

/* ---- receive side ------------------------------------------------------ */

constexpr uint32_t rcq_cnt = 1024;
constexpr uint32_t rx_payload = 64;

/* A responder CQE as the model (and a ConnectX on RoCE) writes it. */
mlx5_cqe64 resp_cqe(uint16_t wqe_counter)
{
	mlx5_cqe64 c{};
	c.byte_cnt = htobe32(grh_len + rx_payload);
	c.flags_rqpn = htobe32(1u << 28 | uint32_t(roce_l3_ipv4) << 24 | remote_qpn);
	c.sop_drop_qpn = htobe32(local_qpn);
	c.imm_inval_pkey = 0;
	c.wqe_counter = htobe16(wqe_counter);
	c.op_own = MLX5_CQE_RESP_SEND << 4;
	return c;
}

void rx_parse_cqe(benchmark::State &st)
{
	auto *ring = static_cast<mlx5_cqe64 *>(rte_zmalloc("bench_cq", sizeof(mlx5_cqe64) * rcq_cnt, 64));
	if (ring == nullptr) {
		st.SkipWithError("rte_zmalloc failed");
		return;
	}
	for (uint32_t i = 0; i < rcq_cnt; i++)
		ring[i] = resp_cqe(uint16_t(i));
	uint32_t ci = 0;
	uint64_t sum = 0;
	for (auto _ : st) {
		for (unsigned i = 0; i < burst; i++) {
			const mlx5_cqe64 *c = &ring[ci & (rcq_cnt - 1)];
			if (!cqe_sw_owned(c, ci, rcq_cnt))
				break;
			cqe_owner_before_fields();
			cqe_fields f;
			const cqe_class k = parse_cqe(*c, &f);
			sum += f.byte_cnt + f.src_qp + f.wqe_counter + uint32_t(k);
			ci++;
		}
		/* The device's next lap flips the owner bit: flip it for the
		 * lap the consumer enters (one store per CQE per lap). */
		if ((ci & (rcq_cnt - 1)) == 0)
			for (uint32_t i = 0; i < rcq_cnt; i++)
				ring[i].op_own ^= MLX5_CQE_OWNER_MASK;
	}
	benchmark::DoNotOptimize(sum);
	rte_free(ring);
	st.SetItemsProcessed(int64_t(ci));
}

/* An IPv4 header in the GRH area's last 20 bytes of every buffer, as the
 * device writes it on RoCEv2, so fill_wc classifies it (once, at set-up:
 * buffers come back with the same data offset). */
void put_ipv4_grh(rte_mempool *, void *, void *obj, unsigned)
{
	auto *m = static_cast<rte_mbuf *>(obj);
	uint8_t *a = static_cast<uint8_t *>(m->buf_addr) + RTE_PKTMBUF_HEADROOM;
	memset(a, 0, grh_len);
	uint8_t *ip = a + 20;
	ip[0] = 0x45;
	ip[8] = 64;
	ip[9] = 17;
	const uint8_t src[4] = {10, 0, 0, 2}, dst[4] = {10, 0, 0, 1};
	memcpy(ip + 12, src, 4);
	memcpy(ip + 16, dst, 4);
}

struct rx_rig {
	test::mlx5_model model;
	ibv::lkey_map mrs;
	mlx5_queue q;
	uint32_t rcq_pi = 0;
	uint16_t rq_pi = 0;
	bool ok = false;

	rx_rig()
	{
		test::mlx5_model_config mc;
		mc.rq_wqe_cnt = 256;
		mc.rcq_cqe_cnt = rcq_cnt;
		mc.qpn = local_qpn;
		if (model.init(mc) != 0)
			return;
		rte_mempool_mem_iter(
			g_mp,
			[](rte_mempool *, void *o, rte_mempool_memhdr *mh, unsigned i) {
				static_cast<ibv::lkey_map *>(o)->add(uintptr_t(mh->addr), mh->len, lkey + i);
			},
			&mrs);
		queue_config qc;
		qc.qkey = qkey;
		qc.rq_refill_batch = burst;
		if (q.attach(model.rings(), qc, g_mp, mrs, nullptr) != 0)
			return;
		q.post_recvs();
		ok = q.rq_posted() == mc.rq_wqe_cnt;
	}
	~rx_rig() { q.detach(); }

	/* The device's part: n responder CQEs for the oldest receive WQEs. */
	void deliver(unsigned n)
	{
		const cq_ring &cq = model.rings().rcq;
		for (unsigned i = 0; i < n; i++) {
			auto *c = reinterpret_cast<mlx5_cqe64 *>(cq.buf + size_t(rcq_pi & (cq.cqe_cnt - 1)) * 64);
			*c = resp_cqe(rq_pi++);
			c->op_own |= (rcq_pi & cq.cqe_cnt) != 0 ? 1 : 0;
			rcq_pi++;
		}
	}
};

void rx_rx_burst(benchmark::State &st)
{
	rx_rig r;
	if (!r.ok) {
		st.SkipWithError("rig set-up failed");
		return;
	}
	recv_wc wcs[burst];
	rte_mbuf *ms[burst];
	uint64_t got = 0;
	for (auto _ : st) {
		r.deliver(burst);
		const uint16_t n = r.q.rx_burst(wcs, burst);
		for (uint16_t i = 0; i < n; i++)
			ms[i] = wcs[i].mbuf;
		rte_pktmbuf_free_bulk(ms, n);
		got += n;
		if (unlikely(n != burst)) {
			st.SkipWithError("rx_burst returned fewer than delivered");
			break;
		}
	}
	const mlx5_counters &x = r.q.counters();
	if (x.rx_grh_unparsed != 0 || x.rx_wqe_mismatch != 0 || x.rx_cqe_bad_len != 0)
		st.SkipWithError("unexpected drops or mismatches");
	st.SetItemsProcessed(int64_t(got));
}

void rx_device_writes(benchmark::State &st)
{
	rx_rig r;
	if (!r.ok) {
		st.SkipWithError("rig set-up failed");
		return;
	}
	for (auto _ : st) {
		r.deliver(burst);
		benchmark::ClobberMemory();
	}
	st.SetItemsProcessed(int64_t(st.iterations()) * burst);
}

} // namespace

BENCHMARK(tx_mlx5_path)->Name("tx/mlx5_path");
BENCHMARK(tx_mlx5_path_2dest)->Name("tx/mlx5_path_2dest");
BENCHMARK(tx_mlx5_path_2len)->Name("tx/mlx5_path_2len");
BENCHMARK(tx_memcpy_floor)->Name("tx/memcpy_floor");
BENCHMARK(tx_memcpy_prefetchw)->Name("tx/memcpy_prefetchw");
BENCHMARK(tx_rdma_core_helpers)->Name("tx/rdma_core_helpers");
BENCHMARK(tx_mlx5_path_1seg)->Name("tx/mlx5_path_1seg");
BENCHMARK(tx_mbufs_1seg)->Name("tx/mbufs_1seg");
BENCHMARK(tx_rdma_core_helpers_1seg)->Name("tx/rdma_core_helpers_1seg");
BENCHMARK(tx_mlx5_path_2seg)->Name("tx/mlx5_path_2seg");
BENCHMARK(tx_mbufs_2seg)->Name("tx/mbufs_2seg");
BENCHMARK(tx_rdma_core_helpers_2seg)->Name("tx/rdma_core_helpers_2seg");
BENCHMARK(rx_parse_cqe)->Name("rx/parse_cqe");
BENCHMARK(rx_rx_burst)->Name("rx/rx_burst");
BENCHMARK(rx_device_writes)->Name("rx/device_writes");

int main(int argc, char **argv)
{
	const char *eal_args[] = {"bench_mlx5_wqe", "--no-huge", "--no-shconf", "--no-pci", "-m", "256",
				  "-l", "0", "--log-level", "lib.eal:error"};
	if (rte_eal_init(int(sizeof(eal_args) / sizeof(eal_args[0])), const_cast<char **>(eal_args)) < 0) {
		fprintf(stderr, "rte_eal_init failed\n");
		return 1;
	}
	/* A per-lcore cache as a poll thread's pool would have. */
	g_mp = rte_pktmbuf_pool_create("bench_mlx5", 4095, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
	if (g_mp == nullptr) {
		fprintf(stderr, "mempool: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	rte_mempool_obj_iter(g_mp, put_ipv4_grh, nullptr);
	benchmark::Initialize(&argc, argv);
	if (benchmark::ReportUnrecognizedArguments(argc, argv))
		return 1;
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	rte_mempool_free(g_mp);
	rte_eal_cleanup();
	return 0;
}
