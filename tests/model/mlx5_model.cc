/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The mlx5 device model (see mlx5_model.h).
 */
#include "mlx5_model.h"

#include <endian.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rdgram::test {

using namespace rdgram::mlx5;

namespace {

constexpr uint8_t bf_poison = 0xa5;
constexpr uint32_t bth_len = 12, deth_len = 8, immdt_len = 4, icrc_len = 4;

bool pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

void *zalloc(size_t n)
{
	n = (n + 63) & ~size_t(63);
	void *p = aligned_alloc(64, n);
	if (p != nullptr)
		memset(p, 0, n);
	return p;
}

std::string hex32(uint32_t v)
{
	char b[16];
	snprintf(b, sizeof(b), "0x%x", v);
	return b;
}

uint16_t ip_csum(const uint8_t *h, unsigned len)
{
	uint32_t s = 0;
	for (unsigned i = 0; i < len; i += 2)
		s += uint32_t(h[i]) << 8 | h[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return uint16_t(~s);
}

} // namespace

mlx5_model::~mlx5_model()
{
	for (void *p : mem_)
		free(p);
}

int mlx5_model::init(const mlx5_model_config &c)
{
	if (!pow2(c.sq_wqe_cnt) || !pow2(c.rq_wqe_cnt) || !pow2(c.scq_cqe_cnt) || !pow2(c.rcq_cqe_cnt) ||
	    (c.bf_size != 0 && c.bf_size % 64 != 0))
		return EINVAL;
	c_ = c;
	r_ = mlx5::rings{};
	mem_[0] = zalloc(size_t(c.sq_wqe_cnt) * wqe_bb);
	mem_[1] = zalloc(size_t(c.rq_wqe_cnt) * 16);
	mem_[2] = zalloc(64); /* QP doorbell record */
	mem_[3] = zalloc(c.bf_size != 0 ? 2 * c.bf_size : 64);
	mem_[4] = zalloc(size_t(c.scq_cqe_cnt) * 64);
	mem_[5] = zalloc(size_t(c.rcq_cqe_cnt) * 64);
	mem_[6] = zalloc(64);
	mem_[7] = zalloc(64);
	for (void *p : mem_)
		if (p == nullptr)
			return ENOMEM;
	r_.sq_buf = static_cast<uint8_t *>(mem_[0]);
	r_.sq_wqe_cnt = c.sq_wqe_cnt;
	r_.sq_stride = wqe_bb;
	r_.rq_buf = static_cast<uint8_t *>(mem_[1]);
	r_.rq_wqe_cnt = c.rq_wqe_cnt;
	r_.rq_stride = 16;
	r_.dbrec = static_cast<volatile uint32_t *>(mem_[2]);
	r_.bf_reg = static_cast<uint8_t *>(mem_[3]);
	r_.bf_size = c.bf_size;
	memset(r_.bf_reg, bf_poison, c.bf_size != 0 ? 2 * c.bf_size : 64);
	r_.qpn = c.qpn;
	auto cq = [](void *buf, uint32_t cnt, void *db) {
		cq_ring q;
		q.buf = static_cast<uint8_t *>(buf);
		q.cqe_cnt = cnt;
		q.cqe_size = 64;
		q.dbrec = static_cast<volatile uint32_t *>(db);
		/* A new CQ: every CQE invalid, owner 0 (rdma-core
		 * mlx5_alloc_cq_buf). */
		for (uint32_t i = 0; i < cnt; i++)
			reinterpret_cast<mlx5_cqe64 *>(q.buf)[i].op_own = MLX5_CQE_INVALID << 4;
		return q;
	};
	r_.scq = cq(mem_[4], c.scq_cqe_cnt, mem_[6]);
	r_.rcq = cq(mem_[5], c.rcq_cqe_cnt, mem_[7]);
	r_.scq.cqn = 1;
	r_.rcq.cqn = 2;
	return 0;
}

void mlx5_model::add_mr(uintptr_t start, size_t len, uint32_t lkey)
{
	mrs_.push_back(mr{start, start + len, lkey});
}

bool mlx5_model::mr_ok(uint64_t addr, uint32_t len, uint32_t lkey) const
{
	for (const mr &m : mrs_)
		if (m.lkey == lkey && addr >= m.start && addr + len <= m.end)
			return true;
	return false;
}

void mlx5_model::violation(const std::string &what) { violations.push_back(what); }

/* Reads and checks the WQE at sq_ci_. false: too broken to execute (the
 * model stops, as a device would raise a local QP operation error). */
bool mlx5_model::parse_wqe(mlx5_model_wqe &w)
{
	const uint32_t mask = r_.sq_wqe_cnt - 1;
	const uint8_t *ring = r_.sq_buf;
	auto byte_at = [&](uint32_t off) { /* off from the WQE start, wrapping */
		return ring[(size_t(sq_ci_ & mask) * wqe_bb + off) % (size_t(r_.sq_wqe_cnt) * wqe_bb)];
	};
	const std::string at = "WQE " + hex32(sq_ci_ & 0xffff) + ": ";
	uint8_t c[16];
	for (unsigned i = 0; i < 16; i++)
		c[i] = byte_at(i);
	mlx5_wqe_ctrl_seg ctrl;
	memcpy(&ctrl, c, 16);
	const uint32_t oio = be32toh(ctrl.opmod_idx_opcode);
	const uint32_t qd = be32toh(ctrl.qpn_ds);
	w.pi = sq_ci_;
	w.opcode = uint8_t(oio & 0xff);
	w.ds = uint8_t(qd & 0x3f);
	w.fm_ce_se = ctrl.fm_ce_se;
	w.imm = ctrl.imm;
	if (w.opcode != MLX5_OPCODE_SEND && w.opcode != MLX5_OPCODE_SEND_IMM)
		violation(at + "opcode " + hex32(w.opcode) + " is not SEND/SEND_IMM");
	if ((oio >> 24) != 0)
		violation(at + "opmod not 0");
	if (((oio >> 8) & 0xffff) != (sq_ci_ & 0xffff))
		violation(at + "wqe index " + hex32((oio >> 8) & 0xffff) + " is not its position");
	if ((qd >> 8) != c_.qpn)
		violation(at + "qpn " + hex32(qd >> 8) + " is not the QP's");
	if (ctrl.signature != 0 || ctrl.dci_stream_channel_id != 0)
		violation(at + "signature/reserved bytes not 0");
	if (ctrl.fm_ce_se & ~uint8_t(MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED))
		violation(at + "fm_ce_se " + hex32(ctrl.fm_ce_se) + " has bits besides CQ_UPDATE/SOLICITED");
	if (w.opcode == MLX5_OPCODE_SEND && w.imm != 0)
		violation(at + "immediate set on a SEND without immediate");
	/* At least the control segment and the datagram segment's first
	 * 16 bytes (the compact AV); the AV's size is checked below. */
	if (w.ds < 2 || w.ds * 16u > r_.sq_wqe_cnt * wqe_bb) {
		violation(at + "ds " + std::to_string(w.ds) + " impossible for a UD send");
		return false;
	}
	w.bytes.resize(w.ds * 16u);
	for (unsigned i = 0; i < w.bytes.size(); i++)
		w.bytes[i] = byte_at(i);

	/* Datagram segment. */
	memset(&w.av, 0, sizeof(w.av));
	uint32_t dqp_dct;
	memcpy(&dqp_dct, w.bytes.data() + 16 + 8, 4);
	dqp_dct = be32toh(dqp_dct);
	w.compact = !(dqp_dct & MLX5_EXTENDED_UD_AV);
	const uint32_t avlen = w.compact ? compact_av_len : 48;
	if (w.ds * 16u < 16 + avlen) {
		violation(at + "ds " + std::to_string(w.ds) + " shorter than ctrl + AV");
		return false;
	}
	memcpy(&w.av, w.bytes.data() + 16, avlen);
	w.dqpn = dqp_dct & 0xffffff;
	if (dqp_dct & 0x7f000000)
		violation(at + "dqp_dct bits 30:24 set");
	w.qkey = be32toh(w.av.key.qkey.qkey);
	if (w.av.key.qkey.reserved != 0)
		violation(at + "AV key reserved word not 0");
	if (!w.compact && memcmp(w.av.reserved0, "\0\0\0\0", 4) != 0)
		violation(at + "AV reserved0 not 0");
	if (w.compact && (be32toh(w.av.grh_gid_fl) >> 30 & 1))
		violation(at + "compact AV for an AH with a GRH");

	/* Inline segment, or a gather list of data segments filling the rest
	 * of DS (none: a zero-length send, as rdma-core posts for a WR whose
	 * SGEs are all empty). */
	const uint8_t *seg = w.bytes.data() + 16 + avlen;
	const uint32_t rest = w.ds * 16u - (16 + avlen);
	uint32_t bc = 0;
	if (rest != 0) {
		memcpy(&bc, seg, 4);
		bc = be32toh(bc);
	}
	w.inl = (bc & MLX5_INLINE_SEG) != 0;
	if (w.inl) {
		w.len = bc & ~MLX5_INLINE_SEG;
		const uint32_t want = (16 + avlen + ((4 + w.len + 15) & ~15u)) / 16;
		if (w.ds != want) {
			violation(at + "ds " + std::to_string(w.ds) + " but an inline segment of " +
				  std::to_string(w.len) + " bytes needs " + std::to_string(want));
			return false;
		}
		if (w.len > c_.max_inline)
			violation(at + "inline length above max_inline");
		w.payload.assign(seg + 4, seg + 4 + w.len);
		for (uint32_t i = 16 + avlen + 4 + w.len; i < w.ds * 16u; i++)
			if (w.bytes[i] != 0) {
				violation(at + "inline padding not zero");
				break;
			}
	} else {
		/* The device gathers the segments' bytes in order into one
		 * message (PRM "Data Segments"; rdma-core _mlx5_post_send
		 * writes one mlx5_wqe_data_seg per non-empty SGE, and the
		 * QP's WQE size bounds them by cap.max_send_sge). */
		const uint32_t n = rest / 16;
		if (n > c_.max_send_sge) {
			violation(at + std::to_string(n) + " data segments, above max_send_sge " +
				  std::to_string(c_.max_send_sge));
			return false;
		}
		w.len = 0;
		for (uint32_t i = 0; i < n; i++) {
			mlx5_wqe_data_seg d;
			memcpy(&d, seg + 16 * i, 16);
			mlx5_model_seg g;
			g.len = be32toh(d.byte_count);
			g.lkey = be32toh(d.lkey);
			g.addr = be64toh(d.addr);
			const std::string si = at + "data segment " + std::to_string(i) + " ";
			if (g.len & MLX5_INLINE_SEG) {
				violation(si + "has the inline bit");
				return false;
			}
			if (g.len == 0)
				violation(si + "of 0 bytes (rdma-core skips empty SGEs)");
			if (!mr_ok(g.addr, g.len, g.lkey)) {
				violation(si + "[addr, +" + std::to_string(g.len) + ") not in lkey " + hex32(g.lkey));
				return false;
			}
			const auto *p = reinterpret_cast<const uint8_t *>(uintptr_t(g.addr));
			w.payload.insert(w.payload.end(), p, p + g.len);
			w.len += g.len;
			w.segs.push_back(g);
		}
		if (n != 0) {
			w.lkey = w.segs[0].lkey;
			w.addr = w.segs[0].addr;
		}
	}
	if (w.len > c_.mtu)
		violation(at + "message of " + std::to_string(w.len) + " bytes above the path MTU " +
			  std::to_string(c_.mtu));
	return true;
}

mlx5_cqe64 *mlx5_model::next_cqe(cq_ring &cq, uint32_t &pi, const char *which)
{
	const uint32_t ci = be32toh(cq.dbrec[cq_set_ci]) & cq_ci_mask;
	if (((pi - ci) & cq_ci_mask) >= cq.cqe_cnt) {
		violation(std::string(which) + " CQ overrun: software consumer index " + hex32(ci) +
			  ", device producer " + hex32(pi));
		return nullptr;
	}
	auto *cqe = reinterpret_cast<mlx5_cqe64 *>(cq.buf + size_t(pi & (cq.cqe_cnt - 1)) * 64);
	/* Everything but op_own first; op_own (opcode + owner) last. */
	uint8_t keep = cqe->op_own;
	memset(cqe, 0, 63);
	cqe->op_own = keep;
	return cqe;
}

void mlx5_model::publish_cqe(mlx5_cqe64 *cqe, uint8_t op_own_low, uint8_t opcode, uint32_t pi, uint32_t cnt)
{
	const uint8_t owner = (pi & cnt) ? 1 : 0;
	__atomic_store_n(&cqe->op_own, uint8_t(opcode << 4 | op_own_low | owner), __ATOMIC_RELEASE);
}

void mlx5_model::write_req_cqe(const mlx5_model_wqe &w, uint8_t err)
{
	mlx5_cqe64 *cqe = next_cqe(r_.scq, scq_pi_, "send");
	if (cqe == nullptr)
		return;
	if (err != 0) {
		auto *e = reinterpret_cast<mlx5_err_cqe *>(cqe);
		e->syndrome = err;
		e->s_wqe_opcode_qpn = htobe32(uint32_t(w.opcode) << 24 | c_.qpn);
		e->wqe_counter = htobe16(uint16_t(w.pi));
		publish_cqe(cqe, 0, MLX5_CQE_REQ_ERR, scq_pi_, r_.scq.cqe_cnt);
		err_cqes++;
	} else {
		cqe->sop_drop_qpn = htobe32(uint32_t(w.opcode) << 24 | c_.qpn);
		cqe->wqe_counter = htobe16(uint16_t(w.pi));
		publish_cqe(cqe, 0, MLX5_CQE_REQ, scq_pi_, r_.scq.cqe_cnt);
		req_cqes++;
	}
	scq_pi_++;
}

/* Writes the 40-byte GRH area as the receive side would get it; returns
 * the GRH indication for flags_rqpn (0: none) and the RoCE L3 type. */
uint32_t mlx5_model::grh_area(const mlx5_model_wqe &w, uint8_t *area, uint32_t paylen, uint8_t *l3)
{
	const uint32_t transport = bth_len + deth_len + (w.opcode == MLX5_OPCODE_SEND_IMM ? immdt_len : 0) +
				   paylen + icrc_len;
	const uint32_t fl = be32toh(w.av.grh_gid_fl);
	wire::gid dst;
	memcpy(dst.raw, w.av.rgid, 16);
	if (c_.roce && dst.is_v4_mapped()) {
		memset(area, 0, 20);
		uint8_t *ip = area + 20;
		const uint32_t tot = 20 + 8 + transport;
		ip[0] = 0x45;
		ip[1] = w.av.tclass;
		ip[2] = uint8_t(tot >> 8);
		ip[3] = uint8_t(tot);
		ip[4] = ip[5] = 0;
		ip[6] = 0x40; /* DF: RoCEv2 is never fragmented */
		ip[7] = 0;
		ip[8] = w.av.hop_limit;
		ip[9] = 17;
		ip[10] = ip[11] = 0;
		memcpy(ip + 12, c_.local_gid.raw + 12, 4);
		memcpy(ip + 16, dst.raw + 12, 4);
		const uint16_t cs = ip_csum(ip, 20);
		ip[10] = uint8_t(cs >> 8);
		ip[11] = uint8_t(cs);
		*l3 = roce_l3_ipv4;
		return 1;
	}
	if (!c_.roce && !(fl >> 30 & 1))
		return 0; /* IB without a GRH: the area is left as it was */
	const uint32_t w0 = 6u << 28 | uint32_t(w.av.tclass) << 20 | (fl & 0xfffff);
	const uint32_t plen = c_.roce ? 8 + transport : transport + 2 /* VCRC */;
	area[0] = uint8_t(w0 >> 24);
	area[1] = uint8_t(w0 >> 16);
	area[2] = uint8_t(w0 >> 8);
	area[3] = uint8_t(w0);
	area[4] = uint8_t(plen >> 8);
	area[5] = uint8_t(plen);
	area[6] = c_.roce ? 17 : 0x1b;
	area[7] = w.av.hop_limit;
	memcpy(area + 8, c_.local_gid.raw, 16);
	memcpy(area + 24, dst.raw, 16);
	*l3 = roce_l3_ipv6;
	return 1;
}

void mlx5_model::deliver(const mlx5_model_wqe &w)
{
	if (w.dqpn != c_.qpn) {
		drop_qpn++;
		return;
	}
	if (w.qkey != c_.qkey) {
		drop_qkey++; /* IBA 10.2.5: a UD packet with the wrong Q_Key is silently dropped */
		return;
	}
	const uint16_t rq_pi = uint16_t(be32toh(r_.dbrec[MLX5_RCV_DBR]));
	if (uint16_t(rq_ci_) == rq_pi) {
		drop_no_rwqe++; /* UD: no receive WQE, the packet is dropped */
		return;
	}
	const auto *d = reinterpret_cast<const mlx5_wqe_data_seg *>(
		r_.rq_buf + size_t(rq_ci_ & (r_.rq_wqe_cnt - 1)) * r_.rq_stride);
	const uint32_t room = be32toh(d->byte_count);
	const uint32_t lkey = be32toh(d->lkey);
	const uint64_t addr = be64toh(d->addr);
	const std::string at = "RWQE " + hex32(rq_ci_ & 0xffff) + ": ";

	mlx5_cqe64 *cqe = next_cqe(r_.rcq, rcq_pi_, "receive");
	if (cqe == nullptr)
		return;
	uint8_t syndrome = fail_recv_;
	fail_recv_ = 0;
	if (syndrome == 0 && !mr_ok(addr, room, lkey)) {
		violation(at + "buffer not in lkey " + hex32(lkey));
		syndrome = MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
	}
	if (syndrome == 0 && grh_len + w.len > room)
		syndrome = MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
	if (syndrome != 0) {
		auto *e = reinterpret_cast<mlx5_err_cqe *>(cqe);
		e->syndrome = syndrome;
		e->s_wqe_opcode_qpn = htobe32(c_.qpn);
		e->wqe_counter = htobe16(uint16_t(rq_ci_));
		publish_cqe(cqe, 0, MLX5_CQE_RESP_ERR, rcq_pi_, r_.rcq.cqe_cnt);
		err_cqes++;
	} else {
		auto *buf = reinterpret_cast<uint8_t *>(uintptr_t(addr));
		uint8_t l3 = roce_l3_grh;
		const uint8_t scatter = scatter_;
		scatter_ = 0;
		uint32_t g;
		std::vector<uint8_t> tmp;
		if (scatter != 0) {
			/* The bytes go to the CQE, not the buffer: built in a
			 * scratch area, copied over the CQE's first 32 bytes
			 * once its fields are written (slid and flags_rqpn lie
			 * inside them: in this format they are data). */
			tmp.resize(grh_len + w.len);
			g = grh_area(w, tmp.data(), w.len, &l3);
			if (w.len != 0)
				memcpy(tmp.data() + grh_len, w.payload.data(), w.len);
		} else {
			g = grh_area(w, buf, w.len, &l3);
			if (w.len != 0)
				memcpy(buf + grh_len, w.payload.data(), w.len);
		}
		const uint32_t sl = w.av.stat_rate_sl & 0xf;
		cqe->byte_cnt = htobe32(grh_len + w.len + lie_);
		lie_ = 0;
		cqe->flags_rqpn = htobe32(g << 28 | (c_.roce ? uint32_t(l3) : sl) << 24 | c_.qpn);
		cqe->slid = htobe16(c_.roce ? 0 : c_.local_lid);
		cqe->ml_path = 0;
		cqe->imm_inval_pkey = w.opcode == MLX5_OPCODE_SEND_IMM ? w.imm : htobe32(0);
		cqe->sop_drop_qpn = htobe32(c_.qpn);
		cqe->wqe_counter = htobe16(uint16_t(rq_ci_));
		if (scatter != 0)
			memcpy(cqe, tmp.data(), 32); /* tmp holds 40 bytes at least */
		const uint8_t se = (w.fm_ce_se & MLX5_WQE_CTRL_SOLICITED) ? 2 : 0;
		publish_cqe(cqe, uint8_t(se | scatter),
			    w.opcode == MLX5_OPCODE_SEND_IMM ? MLX5_CQE_RESP_SEND_IMM : MLX5_CQE_RESP_SEND,
			    rcq_pi_, r_.rcq.cqe_cnt);
		resp_cqes++;
		delivered++;
	}
	rcq_pi_++;
	rq_ci_++;
}

unsigned mlx5_model::process()
{
	const uint16_t pi = uint16_t(be32toh(r_.dbrec[MLX5_SND_DBR]));
	unsigned n = 0;
	while (uint16_t(sq_ci_) != pi) {
		if (uint16_t(pi - uint16_t(sq_ci_)) > r_.sq_wqe_cnt) {
			violation("SQ doorbell record " + hex32(pi) + " more than the ring ahead of " +
				  hex32(sq_ci_ & 0xffff));
			return n;
		}
		mlx5_model_wqe w{};
		if (!parse_wqe(w))
			return n;
		const uint32_t bbs = (w.ds * 16u + wqe_bb - 1) / wqe_bb;
		sq_ci_ += bbs;
		n++;
		const uint8_t err = fail_send_;
		fail_send_ = 0;
		if (err == 0)
			deliver(w);
		if (err != 0 || (w.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE))
			write_req_cqe(w, err);
		executed.push_back(std::move(w));
	}
	return n;
}

mlx5_doorbell mlx5_model::doorbell()
{
	mlx5_doorbell d;
	const uint32_t half = r_.bf_size != 0 ? r_.bf_size : 8;
	const uint32_t span = r_.bf_size != 0 ? 2 * r_.bf_size : 64;
	auto written = [&](uint32_t off) {
		for (uint32_t i = 0; i < half; i++)
			if (r_.bf_reg[off + i] != bf_poison)
				return true;
		return false;
	};
	uint32_t last = UINT32_MAX;
	const uint32_t other = r_.bf_size != 0 ? bf_next_ ^ r_.bf_size : bf_next_;
	if (written(bf_next_)) {
		d.writes++;
		last = bf_next_;
	}
	if (other != bf_next_ && written(other)) {
		d.writes++;
		last = other;
	}
	if (last != UINT32_MAX) {
		const uint8_t *reg = r_.bf_reg + last;
		uint32_t oio, qd;
		memcpy(&oio, reg, 4);
		memcpy(&qd, reg + 4, 4);
		const uint32_t idx = (be32toh(oio) >> 8) & 0xffff;
		const uint32_t ds = be32toh(qd) & 0x3f;
		const uint32_t bbs = (ds * 16 + wqe_bb - 1) / wqe_bb;
		const uint16_t dbr = uint16_t(be32toh(r_.dbrec[MLX5_SND_DBR]));
		const size_t ring = size_t(r_.sq_wqe_cnt) * wqe_bb;
		auto ring_byte = [&](uint32_t off) {
			return r_.sq_buf[(size_t(idx & (r_.sq_wqe_cnt - 1)) * wqe_bb + off) % ring];
		};
		bool head = true;
		for (unsigned i = 0; i < 8; i++)
			head &= reg[i] == ring_byte(i);
		bool rest_poison = true;
		for (uint32_t i = 8; i < half && i < 64; i++)
			rest_poison &= reg[i] == bf_poison;
		if (r_.bf_size != 0 && !rest_poison) {
			d.bf = true;
			d.bbs = bbs;
			bool all = bbs * wqe_bb <= r_.bf_size;
			for (uint32_t i = 0; all && i < bbs * wqe_bb; i++)
				all = reg[i] == ring_byte(i);
			d.matches = all && uint16_t(idx + bbs) == dbr;
		} else {
			d.matches = head && uint16_t(idx + bbs) == dbr;
		}
		if (d.writes == 1)
			bf_next_ = other;
	}
	memset(r_.bf_reg, bf_poison, span);
	return d;
}

} // namespace rdgram::test
