/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * libFuzzer target: drivers/mlx5's CQE64 parsing (parse_cqe, cqe_sw_owned
 * in mlx5_ring.h) and everything mlx5_queue does with what a device writes
 * into its CQs: rx_burst on the receive CQ, the requester-CQE reaping of
 * tx_flush on the send CQ. Whatever a (buggy or hostile) device writes,
 * the driver must stay in its rings and buffers and account for every
 * CQE.
 *
 * Input: [flags:1][split:1][grh:40][CQE64 ...]
 *   flags bit 0: RoCE port (else IB); bits 3:1: sends posted before the
 *     send-CQ part (0..7, 2 basic blocks each); bit 4: start the receive
 *     CQ on its second lap (consumer index at cqe_cnt: owner bit 1
 *     expected).
 *   split: how many of the CQEs go to the receive CQ (the rest, up to the
 *     ring size, to the send CQ).
 *   grh: the bytes every posted receive buffer starts with (the GRH area
 *     the driver parses GIDs from).
 * Rings: RQ 8 WQEs, receive CQ 16 CQEs (so more responder CQEs than
 * posted WQEs are possible), SQ 64 blocks, send CQ 16.
 *
 * Invariants, each an abort:
 *   - the CQEs consumed are exactly the software-owned prefix of the ring,
 *     as an independent decoder written from mlx5dv.h sees it (owner bit
 *     vs the lap, opcode not MLX5_CQE_INVALID), and the CQ doorbell record
 *     holds the consumer index after;
 *   - every consumed receive-CQ CQE is delivered or counted under exactly
 *     the counter the reference decoder predicts (error, bad length,
 *     scatter, unexpected, no WQE);
 *   - a delivered completion matches the CQE: byte_len (40 <= it <= the
 *     posted length), src_qp, qp_num, immediate and its flag, solicited,
 *     slid and SL on IB, L3 type on RoCE; its mbuf's data_len equals it;
 *     GIDs are zero or bytes of the GRH area;
 *   - parse_cqe agrees with mlx5dv_get_cqe_opcode / _se / _format;
 *   - requester CQEs retire WQEs only forward, never past the head;
 *   - after detach the mempool has every mbuf back;
 *   - no byte outside a posted receive buffer is read (ASan poison), no UB.
 */
#include <endian.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "fuzz_common.h"
#include "mlx5_datapath.h"

using namespace rdgram;
using namespace rdgram::mlx5;
using namespace rdgram::fuzz;

namespace {

constexpr uint32_t sq_cnt = 64, rq_cnt = 8, rcq_cnt = 16, scq_cnt = 16;
constexpr uint32_t qpn = 0x000abc, qkey = 0x11111111;
constexpr uint16_t room = 2048;
constexpr size_t hdr_len = 2 + 40;

struct harness {
	rte_mempool *mp = nullptr;
	ibv::lkey_map mrs;
	ah_table<mlx5_av> ahs;
	ah_handle ah{};
	uint8_t *sq = nullptr, *rq = nullptr, *scq = nullptr, *rcq = nullptr;
	uint32_t *dbrec = nullptr, *scq_db = nullptr, *rcq_db = nullptr;
	uint8_t *bf = nullptr;
};
harness *H;

void *zalloc(size_t n)
{
	void *p = aligned_alloc(64, (n + 63) & ~size_t(63));
	FUZZ_CHECK(p != nullptr);
	memset(p, 0, n);
	return p;
}

/* The reference decoder: from mlx5dv.h's field definitions alone. */
enum class ref { deliver, err, bad_len, scatter, unexpected };
ref classify(const uint8_t *c, uint32_t rx_len)
{
	const uint8_t op_own = c[63];
	const uint8_t opcode = op_own >> 4, format = (op_own >> 2) & 3;
	if (opcode == 14)
		return ref::err;
	if (opcode != 2 && opcode != 3 && opcode != 4)
		return ref::unexpected;
	if (format == 3)
		return ref::unexpected;
	if (format != 0)
		return ref::scatter;
	const uint32_t bc = uint32_t(c[44]) << 24 | uint32_t(c[45]) << 16 | uint32_t(c[46]) << 8 | c[47];
	if (bc < 40 || bc > rx_len)
		return ref::bad_len;
	return ref::deliver;
}
bool owned(const uint8_t *c, uint32_t ci, uint32_t cnt)
{
	return (c[63] >> 4) != 15 && (c[63] & 1) == ((ci / cnt) & 1);
}
uint32_t be32_at(const uint8_t *p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

rings make_rings()
{
	rings r;
	r.sq_buf = H->sq;
	r.sq_wqe_cnt = sq_cnt;
	r.rq_buf = H->rq;
	r.rq_wqe_cnt = rq_cnt;
	r.rq_stride = 16;
	r.dbrec = H->dbrec;
	r.bf_reg = H->bf;
	r.bf_size = 256;
	r.qpn = qpn;
	r.scq.buf = H->scq;
	r.scq.cqe_cnt = scq_cnt;
	r.scq.dbrec = H->scq_db;
	r.rcq.buf = H->rcq;
	r.rcq.cqe_cnt = rcq_cnt;
	r.rcq.dbrec = H->rcq_db;
	return r;
}

void unpoison_pool()
{
	rte_mempool_mem_iter(
		H->mp, [](rte_mempool *, void *, rte_mempool_memhdr *mh, unsigned) { unpoison(mh->addr, mh->len); },
		nullptr);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
	start_eal("fuzz_mlx5_cqe");
	H = new harness;
	H->mp = rte_pktmbuf_pool_create("fz_mlx5", 255, 0, 0, room, SOCKET_ID_ANY);
	FUZZ_CHECK(H->mp != nullptr);
	rte_mempool_mem_iter(
		H->mp,
		[](rte_mempool *, void *, rte_mempool_memhdr *mh, unsigned i) {
			FUZZ_CHECK(H->mrs.add(uintptr_t(mh->addr), mh->len, 0x100 + i) == 0);
		},
		nullptr);
	FUZZ_CHECK(H->ahs.init(4, SOCKET_ID_ANY, nullptr) == 0);
	uint32_t slot;
	FUZZ_CHECK(H->ahs.reserve(&slot));
	H->ahs.av_at(slot) = mlx5_av{};
	H->ah = H->ahs.publish(slot);
	H->sq = static_cast<uint8_t *>(zalloc(sq_cnt * 64));
	H->rq = static_cast<uint8_t *>(zalloc(rq_cnt * 16));
	H->scq = static_cast<uint8_t *>(zalloc(scq_cnt * 64));
	H->rcq = static_cast<uint8_t *>(zalloc(rcq_cnt * 64));
	H->dbrec = static_cast<uint32_t *>(zalloc(64));
	H->scq_db = static_cast<uint32_t *>(zalloc(64));
	H->rcq_db = static_cast<uint32_t *>(zalloc(64));
	H->bf = static_cast<uint8_t *>(zalloc(512));
	return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < hdr_len)
		return 0;
	const uint8_t flags = data[0];
	const bool roce = flags & 1;
	const unsigned nsend = (flags >> 1) & 7;
	const bool second_lap = flags & 0x10;
	const uint8_t *grh = data + 2;
	const uint8_t *cqes = data + hdr_len;
	size_t ncqe = (size - hdr_len) / 64;
	size_t nr = data[1] < ncqe ? data[1] : ncqe;
	if (nr > rcq_cnt)
		nr = rcq_cnt;
	size_t ns = ncqe - nr;
	if (ns > scq_cnt)
		ns = scq_cnt;

	unpoison_pool();
	memset(H->sq, 0, sq_cnt * 64);
	memset(H->rq, 0, rq_cnt * 16);
	memset(H->dbrec, 0, 64);
	memset(H->scq_db, 0, 64);
	memset(H->rcq_db, 0, 64);
	for (uint32_t i = 0; i < scq_cnt; i++)
		H->scq[i * 64 + 63] = MLX5_CQE_INVALID << 4;
	for (uint32_t i = 0; i < rcq_cnt; i++)
		H->rcq[i * 64 + 63] = MLX5_CQE_INVALID << 4;

	auto *q = new mlx5_queue;
	queue_config c;
	c.qkey = qkey;
	c.roce = roce;
	c.max_inline = 64;
	c.signal_every = 4;
	c.rq_refill_batch = 64; /* never refill inside rx_burst: RQ underrun reachable */
	FUZZ_CHECK(q->attach(make_rings(), c, H->mp, H->mrs, &H->ahs) == 0);
	q->post_recvs();
	FUZZ_CHECK(q->rq_posted() == rq_cnt);
	const uint32_t rx_len = q->rx_buf_len();

	/* The GRH area in every posted buffer; the rest of each buffer
	 * poisoned outside what was posted. */
	for (uint32_t i = 0; i < rq_cnt; i++) {
		const auto *d = reinterpret_cast<const mlx5_wqe_data_seg *>(H->rq + i * 16);
		auto *buf = reinterpret_cast<uint8_t *>(uintptr_t(be64toh(d->addr)));
		FUZZ_CHECK(be32toh(d->byte_count) == rx_len);
		memcpy(buf, grh, 40);
		poison(buf - RTE_PKTMBUF_HEADROOM, RTE_PKTMBUF_HEADROOM);
		const uint32_t tail = room - RTE_PKTMBUF_HEADROOM - rx_len;
		if (tail != 0)
			poison(buf + rx_len, tail);
	}

	/* Receive CQ. Second lap: the queue's consumer index is moved there by
	 * consuming a first lap of (valid) CQEs the harness writes itself. */
	uint32_t ci0 = 0;
	std::vector<recv_wc> all;
	recv_wc wcs[mlx5_queue::max_burst];
	if (second_lap) {
		/* rcq_cnt RESP_ERR CQEs, owner 0: consumed, counted, buffers back;
		 * then the RQ refilled. */
		for (uint32_t i = 0; i < rcq_cnt; i++) {
			uint8_t *e = H->rcq + i * 64;
			memset(e, 0, 64);
			e[63] = MLX5_CQE_RESP_ERR << 4;
		}
		uint16_t k;
		while ((k = q->rx_burst(wcs, mlx5_queue::max_burst)) != 0)
			FUZZ_CHECK(false); /* error CQEs deliver nothing */
		FUZZ_CHECK(be32toh(*(H->rcq_db + cq_set_ci)) == rcq_cnt);
		ci0 = rcq_cnt;
		unpoison_pool();
		q->post_recvs();
		for (uint32_t i = 0; i < rq_cnt; i++) {
			const auto *d = reinterpret_cast<const mlx5_wqe_data_seg *>(H->rq + i * 16);
			memcpy(reinterpret_cast<uint8_t *>(uintptr_t(be64toh(d->addr))), grh, 40);
		}
	}
	const mlx5_counters before = q->counters();
	for (size_t i = 0; i < nr; i++)
		memcpy(H->rcq + i * 64, cqes + i * 64, 64);

	/* Reference: the owned prefix and what each CQE should become. */
	mlx5_counters want = before;
	uint32_t want_delivered = 0, outstanding = q->rq_posted(), consumed = 0;
	for (uint32_t i = 0; i < rcq_cnt; i++) {
		const uint8_t *cq = H->rcq + i * 64;
		if (!owned(cq, ci0 + i, rcq_cnt))
			break;
		consumed++;
		mlx5_cqe64 tmp;
		memcpy(&tmp, cq, 64);
		cqe_fields f;
		const cqe_class k = parse_cqe(tmp, &f);
		FUZZ_CHECK(f.opcode == mlx5dv_get_cqe_opcode(&tmp));
		FUZZ_CHECK(f.solicited == (mlx5dv_get_cqe_se(&tmp) != 0));
		/* Compressed: format 3 on anything but REQ, REQ_ERR, RESP_ERR
		 * (those are classified by opcode first). */
		const bool comp = mlx5dv_get_cqe_format(&tmp) == 3 && f.opcode != MLX5_CQE_REQ &&
				  f.opcode != MLX5_CQE_REQ_ERR && f.opcode != MLX5_CQE_RESP_ERR;
		FUZZ_CHECK((k == cqe_class::compressed) == comp);
		const ref r = classify(cq, rx_len);
		if (r == ref::unexpected) {
			want.rx_cqe_unexpected++;
			continue;
		}
		if (outstanding == 0) {
			want.rx_cqe_no_wqe++;
			continue;
		}
		outstanding--;
		if (r == ref::err)
			want.rx_cqe_err++;
		else if (r == ref::scatter)
			want.rx_cqe_scatter++;
		else if (r == ref::bad_len)
			want.rx_cqe_bad_len++;
		else
			want_delivered++;
	}

	uint16_t k;
	unsigned calls = 0;
	while ((k = q->rx_burst(wcs, mlx5_queue::max_burst)) != 0) {
		FUZZ_CHECK(k <= mlx5_queue::max_burst);
		FUZZ_CHECK(++calls <= rcq_cnt);
		all.insert(all.end(), wcs, wcs + k);
	}
	const mlx5_counters got = q->counters();
	FUZZ_CHECK(all.size() == want_delivered);
	FUZZ_CHECK(got.rx_cqe_unexpected == want.rx_cqe_unexpected);
	FUZZ_CHECK(got.rx_cqe_no_wqe == want.rx_cqe_no_wqe);
	FUZZ_CHECK(got.rx_cqe_err == want.rx_cqe_err);
	FUZZ_CHECK(got.rx_cqe_scatter == want.rx_cqe_scatter);
	FUZZ_CHECK(got.rx_cqe_bad_len == want.rx_cqe_bad_len);
	if (consumed != 0)
		FUZZ_CHECK(be32toh(*(H->rcq_db + cq_set_ci)) == ci0 + consumed);

	/* Delivered completions against their CQEs (in order: the j-th
	 * delivered one is the j-th CQE the reference delivered). */
	size_t j = 0;
	outstanding = rq_cnt;
	for (uint32_t i = 0; i < consumed && j < all.size(); i++) {
		const uint8_t *cq = H->rcq + i * 64;
		const ref r = classify(cq, rx_len);
		if (r == ref::unexpected)
			continue;
		if (outstanding == 0)
			continue;
		outstanding--;
		if (r != ref::deliver)
			continue;
		const recv_wc &wc = all[j++];
		const uint32_t bc = be32_at(cq + 44), fr = be32_at(cq + 24);
		const uint8_t opcode = cq[63] >> 4;
		FUZZ_CHECK(wc.byte_len == bc && bc >= 40 && bc <= rx_len);
		FUZZ_CHECK(wc.mbuf->data_len == bc && wc.mbuf->pkt_len == bc && wc.mbuf->nb_segs == 1);
		FUZZ_CHECK(wc.src_qp == (fr & 0xffffff));
		FUZZ_CHECK(wc.qp_num == (be32_at(cq + 56) & 0xffffff));
		FUZZ_CHECK(bool(wc.wc_flags & wc_with_imm) == (opcode == 3));
		if (opcode == 3) {
			uint32_t imm;
			memcpy(&imm, cq + 36, 4);
			FUZZ_CHECK(wc.imm_data == imm);
		}
		FUZZ_CHECK(bool(wc.wc_flags & wc_solicited) == bool(cq[63] & 2));
		FUZZ_CHECK(bool(wc.wc_flags & wc_grh) == (((fr >> 28) & 3) != 0));
		if (roce) {
			FUZZ_CHECK(wc.slid == 0 && wc.sl == 0);
			const uint32_t t = (fr >> 24) & 3;
			FUZZ_CHECK(wc.l3 == (t == 2 ? l3_type::ipv4 : t == 1 ? l3_type::ipv6 : l3_type::ib_grh));
		} else {
			FUZZ_CHECK(wc.slid == (uint16_t(cq[22]) << 8 | cq[23]));
			FUZZ_CHECK(wc.sl == ((fr >> 24) & 0xf));
		}
		/* GIDs: zero, or bytes of the area (IPv6/IB GRH at 8/24,
		 * IPv4-mapped addresses at 32/36). */
		if (!wc.sgid.is_zero()) {
			const bool v6 = memcmp(wc.sgid.raw, grh + 8, 16) == 0;
			const bool v4 = wc.sgid.is_v4_mapped() && memcmp(wc.sgid.raw + 12, grh + 32, 4) == 0;
			FUZZ_CHECK(v6 || v4);
		}
		unpoison_chain(wc.mbuf);
		const auto *p = rte_pktmbuf_mtod(wc.mbuf, const uint8_t *);
		FUZZ_CHECK(memcmp(p, grh, 40) == 0);
		rte_pktmbuf_free(wc.mbuf);
	}
	FUZZ_CHECK(j == all.size());

	/* Send CQ: nsend inline sends outstanding, then the input's CQEs. */
	if (ns != 0 || nsend != 0) {
		uint8_t pay[8] = {};
		send_wr w[7]{};
		for (unsigned i = 0; i < nsend; i++) {
			w[i].ah = H->ah;
			w[i].remote_qpn = qpn;
			w[i].remote_qkey = qkey;
			w[i].flags = send_inline;
			w[i].inline_data = pay;
			w[i].inline_len = sizeof(pay);
		}
		FUZZ_CHECK(q->tx_burst(w, uint16_t(nsend)) == nsend);
		const uint32_t out0 = q->sq_outstanding();
		FUZZ_CHECK(out0 == 2 * nsend);
		for (size_t i = 0; i < ns; i++)
			memcpy(H->scq + i * 64, cqes + (nr + i) * 64, 64);
		uint32_t sconsumed = 0;
		while (sconsumed < scq_cnt && owned(H->scq + sconsumed * 64, sconsumed, scq_cnt))
			sconsumed++;
		const mlx5_counters b = q->counters();
		q->tx_flush();
		const mlx5_counters a = q->counters();
		FUZZ_CHECK(q->sq_outstanding() <= out0);
		FUZZ_CHECK((a.tx_cqes - b.tx_cqes) + (a.tx_cqe_err - b.tx_cqe_err) +
				   (a.rx_cqe_unexpected - b.rx_cqe_unexpected) ==
			   sconsumed);
		if (sconsumed != 0)
			FUZZ_CHECK(be32toh(*(H->scq_db + cq_set_ci)) == sconsumed);
	}

	q->detach();
	delete q;
	unpoison_pool();
	FUZZ_CHECK(rte_mempool_in_use_count(H->mp) == 0);
	if (verbose())
		fprintf(stderr, "rcq %zu consumed %u delivered %zu; scq %zu\n", nr, consumed, all.size(), ns);
	return 0;
}
