/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll's collectives over UD: one rank as a state machine a poll
 * thread advances (several ranks may share one poll thread), with its own
 * loss recovery.
 *
 * Schedule: every rank runs the same list of collectives, numbered by a
 * collective sequence number cseq (0, 1, ...): --iters barriers, then
 * --iters allgathers, then --iters alltoalls.
 *
 *   barrier    dissemination (Hensgen, Finkel, Manber 1988): in round k a
 *              rank sends to r + 2^k and waits for r - 2^k. Each message
 *              carries the set of ranks the sender knows have entered; a
 *              rank leaves with the full set (the verification).
 *   allgather  ring: at step s a rank sends block (r - s) mod N to r + 1
 *              as soon as it holds it; block j's bytes are pattern(j, i,
 *              cseq), checked when the op ends.
 *   alltoall   pairwise: block for rank d goes straight to d; its bytes are
 *              pattern(r, d, i, cseq), checked by d.
 *
 * Loss recovery (UD loses, duplicates are possible after retransmission):
 * every DATA message is identified by (cseq, sender, step) and answered by
 * an ACK; an unacknowledged DATA message is sent again after rto, then
 * after twice that, and so on up to 64 x rto (exponential backoff); a
 * receiver keeps a per-step "have" flag, so duplicates are counted and only
 * acknowledged. Each of these collectives completes at a rank only after
 * every rank entered it (every block or barrier bit depends on every
 * rank), so a peer is at most one collective ahead (its messages are kept
 * in the next of two receive slots) and, when a rank enters cseq c, all of
 * its messages of c - 2 have been received by their destination: the two
 * halves of the retransmission table and of the receive slots are reused by
 * parity of cseq.
 *
 * Threads: a coll_rank belongs to one poll thread (NOT thread safe). Its
 * loop step (poll) makes no syscall, takes no lock, allocates nothing:
 * every buffer is sized at set-up (init, in coll_rank_init.h).
 */
#ifndef RDGRAM_COLL_ENGINE_H
#define RDGRAM_COLL_ENGINE_H

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_mbuf.h>

#include "rdgram/ud.h"

namespace rdgram::coll {

enum class op_kind : uint8_t { barrier = 0, allgather = 1, alltoall = 2 };
inline constexpr unsigned nb_ops = 3;
inline const char *op_name(op_kind o)
{
	static const char *n[] = {"barrier", "allgather", "alltoall"};
	return n[unsigned(o)];
}

/* The datagram payload header, little endian (all ranks run the same app;
 * byte order is fixed anyway so mixed hosts agree). */
struct __attribute__((packed)) msg_hdr {
	uint16_t magic; /* msg_magic */
	uint8_t type;   /* msg_data / msg_ack */
	uint8_t op;     /* op_kind */
	uint16_t src;   /* sender rank */
	uint16_t step;  /* slot in the sender's retransmission table half */
	uint16_t block; /* allgather: block index; barrier: round */
	uint16_t len;   /* data bytes after the header */
	uint32_t cseq;
};
static_assert(sizeof(msg_hdr) == 16);
inline constexpr uint16_t msg_magic = 0xc011;
inline constexpr uint8_t msg_data = 1, msg_ack = 2;

/* Byte i of the block rank a sends to rank b (allgather: b = 0xffff) in
 * collective cseq. */
inline uint8_t pattern(uint32_t a, uint32_t b, uint32_t i, uint32_t cseq)
{
	uint32_t x = a * 0x9e3779b1u ^ b * 0x85ebca77u ^ i * 0xc2b2ae3du ^ cseq * 0x27d4eb2fu;
	x ^= x >> 15;
	return uint8_t(x ^ x >> 8);
}

struct peer_addr {
	ah_handle ah;
	uint32_t qpn;
	uint32_t qkey;
};

struct rank_stats {
	uint64_t data_sent, acks_sent, retransmits, tx_refused;
	uint64_t data_recv, acks_recv, duplicates, stale_acks;
	uint64_t dropped;      /* --drop-rate: received datagrams thrown away */
	uint64_t bad_msgs;     /* wrong magic/length/rank/cseq: counted, ignored */
	uint64_t verify_fail;  /* collectives whose result was wrong */
	uint64_t verified;     /* collectives whose result was checked */
};

struct rank_params {
	uint16_t rank, nranks;
	uint32_t size;     /* bytes per block */
	uint32_t iters;
	uint64_t rto_cyc;  /* retransmission timeout in TSC cycles */
	double drop_rate;
	uint64_t seed;
};

template <class Q> class coll_rank {
public:
	static constexpr unsigned tx_batch = 32;

	/* (Set-up, main thread, before the poll thread runs the rank:
	 * sizes every buffer; coll_rank_init.h.) peers[i] addresses rank i
	 * (its own entry unused). */
	void init(const rank_params &p, Q *q, const std::vector<peer_addr> &peers);

	/* One loop step: receive, make progress, retransmit, send. now:
	 * rte_get_tsc_cycles(). Returns whether it received or sent anything
	 * (false: an empty iteration, for poll_idle). (Poll thread.) */
	bool poll(uint64_t now)
	{
		recv_wc wc[32];
		const uint16_t n = q_->rx_burst(wc, 32);
		deliver(wc, n);
		if (cur_ < total_)
			progress(now);
		if (now - last_scan_ >= p_.rto_cyc / 4) {
			last_scan_ = now;
			retransmit(now);
		}
		const bool did = n != 0 || pending_ != 0;
		flush();
		q_->tx_flush();
		return did;
	}

	/* Consumes n completions received from the rank's queue (poll() does
	 * for its own; a caller that polled the queue before init passes what
	 * it held) and frees their mbufs. (Poll thread.) */
	void deliver(recv_wc *wc, unsigned n)
	{
		for (unsigned i = 0; i < n; i++) {
			on_recv(wc[i]);
			rte_pktmbuf_free(wc[i].mbuf);
		}
	}

	/* Every collective done and every message acknowledged (or known
	 * delivered): the rank may stop once its peers are done too. */
	bool finished() const { return cur_ >= total_; }
	bool quiet() const
	{
		for (const tx_ent &e : tx_)
			if (e.live)
				return false;
		return true;
	}
	uint32_t cseq() const { return cur_; }
	const rank_stats &stats() const { return st_; }
	/* Latency of collective cseq at this rank, TSC cycles. */
	uint64_t latency(uint32_t cseq) const { return lat_[cseq]; }
	op_kind op_of(uint32_t cseq) const { return op_kind(cseq / p_.iters); }

private:
	struct slot_state {
		uint32_t tag;               /* the cseq it holds */
		std::vector<uint8_t> have;  /* per block / per barrier round */
		std::vector<uint8_t> buf;   /* received blocks (N x size) */
		std::vector<uint8_t> sendbuf; /* alltoall: blocks to send */
		std::vector<uint8_t> bits;  /* barrier: set of entered ranks per round */
		uint32_t sent;              /* steps sent so far */
	};
	struct tx_ent {
		bool live;
		uint8_t op;
		uint16_t dst, step, block, len;
		uint32_t cseq;
		uint64_t last;
		uint64_t rto; /* doubles per retransmission, up to max_backoff x */
	};
	static constexpr unsigned max_backoff = 64;

	slot_state &slot(uint32_t cseq) { return slot_[cseq & 1]; }
	void reset(slot_state &s, uint32_t cseq)
	{
		s.tag = cseq;
		memset(s.have.data(), 0, s.have.size());
		memset(s.bits.data(), 0, s.bits.size());
		s.sent = 0;
	}
	bool drop_now()
	{
		if (p_.drop_rate <= 0)
			return false;
		/* xorshift64*: deterministic per (seed, rank). */
		rng_ ^= rng_ >> 12;
		rng_ ^= rng_ << 25;
		rng_ ^= rng_ >> 27;
		const uint64_t r = rng_ * 0x2545f4914f6cdd1dull;
		return double(r >> 11) * 0x1.0p-53 < p_.drop_rate;
	}

	void on_recv(const recv_wc &wc)
	{
		if (drop_now()) {
			st_.dropped++;
			return;
		}
		const uint32_t grh = 40;
		if (unlikely(wc.byte_len < grh + sizeof(msg_hdr))) {
			st_.bad_msgs++;
			return;
		}
		const uint8_t *p = rte_pktmbuf_mtod_offset(wc.mbuf, const uint8_t *, grh);
		msg_hdr h;
		memcpy(&h, p, sizeof(h));
		const uint32_t cseq = rte_le_to_cpu_32(h.cseq);
		const uint16_t src = rte_le_to_cpu_16(h.src), step = rte_le_to_cpu_16(h.step);
		const uint16_t block = rte_le_to_cpu_16(h.block), len = rte_le_to_cpu_16(h.len);
		if (unlikely(rte_le_to_cpu_16(h.magic) != msg_magic || src >= p_.nranks || src == p_.rank ||
			     h.op >= nb_ops || step >= per_op_ || wc.byte_len < grh + sizeof(msg_hdr) + len ||
			     len > maxdata_ || cseq >= total_ || op_kind(h.op) != op_of(cseq))) {
			st_.bad_msgs++;
			return;
		}
		if (h.type == msg_ack) {
			st_.acks_recv++;
			tx_ent &e = tx_[(cseq & 1) * per_op_ + step];
			if (e.live && e.cseq == cseq && e.dst == src)
				e.live = false;
			else
				st_.stale_acks++;
			return;
		}
		if (h.type != msg_data) {
			st_.bad_msgs++;
			return;
		}
		st_.data_recv++;
		queue_ack(src, h.op, step, cseq);
		if (cseq < cur_) {
			/* A retransmission whose ACK was lost: ACKed above. */
			st_.duplicates++;
			return;
		}
		if (cseq > cur_ + 1) {
			/* Cannot happen (a peer is at most one ahead). */
			st_.bad_msgs++;
			return;
		}
		slot_state &s = slot(cseq);
		if (s.tag != cseq)
			reset(s, cseq);
		const uint8_t *data = p + sizeof(msg_hdr);
		switch (op_kind(h.op)) {
		case op_kind::barrier:
			if (block >= rounds_ || len != bitmap_len_) {
				st_.bad_msgs++;
				return;
			}
			if (s.have[block]) {
				st_.duplicates++;
				return;
			}
			s.have[block] = 1;
			memcpy(&s.bits[size_t(block + 1) * bitmap_len_], data, bitmap_len_);
			break;
		case op_kind::allgather:
		case op_kind::alltoall: {
			const uint16_t idx = op_kind(h.op) == op_kind::allgather ? block : src;
			if (idx >= p_.nranks || len != p_.size) {
				st_.bad_msgs++;
				return;
			}
			if (s.have[idx]) {
				st_.duplicates++;
				return;
			}
			s.have[idx] = 1;
			memcpy(&s.buf[size_t(idx) * p_.size], data, p_.size);
			break;
		}
		}
	}

	void enter(uint64_t now)
	{
		slot_state &s = slot(cur_);
		if (s.tag != cur_)
			reset(s, cur_);
		/* This half of the table held cseq - 2: delivered by now. */
		for (unsigned i = 0; i < per_op_; i++)
			tx_[(cur_ & 1) * per_op_ + i].live = false;
		const unsigned n = p_.nranks, r = p_.rank;
		switch (op_of(cur_)) {
		case op_kind::barrier:
			/* bits row 0: what this rank knows on entry (itself). */
			memset(s.bits.data(), 0, bitmap_len_);
			s.bits[r / 8] |= uint8_t(1u << (r % 8));
			break;
		case op_kind::allgather:
			for (uint32_t i = 0; i < p_.size; i++)
				s.buf[size_t(r) * p_.size + i] = pattern(r, 0xffff, i, cur_);
			s.have[r] = 1;
			break;
		case op_kind::alltoall:
			for (unsigned d = 0; d < n; d++)
				for (uint32_t i = 0; i < p_.size; i++)
					s.sendbuf[size_t(d) * p_.size + i] = pattern(r, d, i, cur_);
			memcpy(&s.buf[size_t(r) * p_.size], &s.sendbuf[size_t(r) * p_.size], p_.size);
			s.have[r] = 1;
			break;
		}
		t_enter_ = now;
		entered_ = true;
	}

	void progress(uint64_t now)
	{
		if (!entered_)
			enter(now);
		slot_state &s = slot(cur_);
		const unsigned n = p_.nranks, r = p_.rank;
		bool done = false;
		switch (op_of(cur_)) {
		case op_kind::barrier: {
			/* Round k goes out once round k - 1 came in: what it
			 * carries is row k, the union of rows 0..k. */
			while (s.sent < rounds_ && (s.sent == 0 || s.have[s.sent - 1])) {
				const unsigned k = s.sent;
				uint8_t *row = &s.bits[size_t(k) * bitmap_len_];
				if (k > 0) {
					/* row k = row k-1 (own knowledge) | what round
					 * k-1 brought (stored in row k on receipt). */
					const uint8_t *prev = &s.bits[size_t(k - 1) * bitmap_len_];
					for (unsigned b = 0; b < bitmap_len_; b++)
						row[b] |= prev[b];
				}
				send_data(uint16_t((r + (1u << k)) % n), op_kind::barrier, uint16_t(k), uint16_t(k),
					  row, uint16_t(bitmap_len_), now);
				s.sent++;
			}
			if (s.sent == rounds_ && (rounds_ == 0 || s.have[rounds_ - 1])) {
				uint8_t *last = &s.bits[size_t(rounds_) * bitmap_len_];
				if (rounds_ > 0) {
					const uint8_t *prev = &s.bits[size_t(rounds_ - 1) * bitmap_len_];
					for (unsigned b = 0; b < bitmap_len_; b++)
						last[b] |= prev[b];
				}
				bool all = true;
				for (unsigned i = 0; i < n; i++)
					all &= (last[i / 8] >> (i % 8) & 1) != 0;
				st_.verified++;
				st_.verify_fail += !all;
				done = true;
			}
			break;
		}
		case op_kind::allgather:
			while (s.sent + 1 < n) {
				const unsigned b = (r + n - s.sent) % n;
				if (!s.have[b])
					break;
				send_data(uint16_t((r + 1) % n), op_kind::allgather, uint16_t(s.sent), uint16_t(b),
					  &s.buf[size_t(b) * p_.size], uint16_t(p_.size), now);
				s.sent++;
			}
			if (s.sent + 1 >= n && all_have(s)) {
				bool ok = true;
				for (unsigned j = 0; j < n && ok; j++)
					for (uint32_t i = 0; i < p_.size; i++)
						if (s.buf[size_t(j) * p_.size + i] != pattern(j, 0xffff, i, cur_)) {
							ok = false;
							break;
						}
				st_.verified++;
				st_.verify_fail += !ok;
				done = true;
			}
			break;
		case op_kind::alltoall:
			/* Pairwise order: step s to r + s; all may be in flight. */
			while (s.sent + 1 < n && pending_ < tx_batch) {
				const unsigned d = (r + s.sent + 1) % n;
				send_data(uint16_t(d), op_kind::alltoall, uint16_t(s.sent), 0,
					  &s.sendbuf[size_t(d) * p_.size], uint16_t(p_.size), now);
				s.sent++;
			}
			if (s.sent + 1 >= n && all_have(s)) {
				bool ok = true;
				for (unsigned j = 0; j < n && ok; j++)
					for (uint32_t i = 0; i < p_.size; i++)
						if (s.buf[size_t(j) * p_.size + i] != pattern(j, r, i, cur_)) {
							ok = false;
							break;
						}
				st_.verified++;
				st_.verify_fail += !ok;
				done = true;
			}
			break;
		}
		if (done) {
			lat_[cur_] = now - t_enter_;
			cur_++;
			entered_ = false;
		}
	}

	bool all_have(const slot_state &s) const
	{
		for (unsigned i = 0; i < p_.nranks; i++)
			if (!s.have[i])
				return false;
		return true;
	}

	/* Records the message for retransmission and stages it. */
	void send_data(uint16_t dst, op_kind op, uint16_t step, uint16_t block, const uint8_t *data, uint16_t len,
		       uint64_t now)
	{
		const unsigned idx = (cur_ & 1) * per_op_ + step;
		tx_ent &e = tx_[idx];
		e = tx_ent{true, uint8_t(op), dst, step, block, len, cur_, now, p_.rto_cyc};
		memcpy(&txdata_[size_t(idx) * maxdata_], data, len);
		stage(e, msg_data, &txdata_[size_t(idx) * maxdata_]);
		st_.data_sent++;
	}

	void queue_ack(uint16_t dst, uint8_t op, uint16_t step, uint32_t cseq)
	{
		tx_ent a{false, op, dst, step, 0, 0, cseq, 0, 0};
		stage(a, msg_ack, nullptr);
		st_.acks_sent++;
	}

	void retransmit(uint64_t now)
	{
		for (unsigned i = 0; i < tx_.size(); i++) {
			tx_ent &e = tx_[i];
			if (e.live && now - e.last >= e.rto) {
				/* Exponential backoff: a peer that is slow (not
				 * scheduled, on an oversubscribed host) is not
				 * flooded; the first retry still comes after rto. */
				e.last = now;
				e.rto = std::min<uint64_t>(e.rto * 2, p_.rto_cyc * max_backoff);
				stage(e, msg_data, &txdata_[size_t(i) * maxdata_]);
				st_.retransmits++;
			}
		}
	}

	void stage(const tx_ent &e, uint8_t type, const uint8_t *data)
	{
		if (pending_ == tx_batch)
			flush();
		uint8_t *buf = &scratch_[size_t(pending_) * (sizeof(msg_hdr) + maxdata_)];
		msg_hdr h;
		h.magic = rte_cpu_to_le_16(msg_magic);
		h.type = type;
		h.op = e.op;
		h.src = rte_cpu_to_le_16(p_.rank);
		h.step = rte_cpu_to_le_16(e.step);
		h.block = rte_cpu_to_le_16(e.block);
		const uint16_t len = type == msg_data ? e.len : 0;
		h.len = rte_cpu_to_le_16(len);
		h.cseq = rte_cpu_to_le_32(e.cseq);
		memcpy(buf, &h, sizeof(h));
		if (len)
			memcpy(buf + sizeof(h), data, len);
		const peer_addr &pa = peers_[e.dst];
		send_wr &w = wrs_[pending_++];
		w = send_wr{};
		w.ah = pa.ah;
		w.remote_qpn = pa.qpn;
		w.remote_qkey = pa.qkey;
		w.inline_data = buf;
		w.inline_len = uint32_t(sizeof(h) + len);
		w.flags = send_inline;
	}

	/* Hands the staged WRs to the driver; what it refuses is lost like a
	 * datagram on the wire (retransmission covers DATA, the peer's
	 * retransmission brings another ACK). */
	void flush()
	{
		uint16_t done = 0;
		while (done < pending_) {
			const uint16_t k = q_->tx_burst(wrs_ + done, uint16_t(pending_ - done));
			if (k == 0)
				break;
			done = uint16_t(done + k);
		}
		st_.tx_refused += pending_ - done;
		pending_ = 0;
	}

	rank_params p_{};
	Q *q_ = nullptr;
	std::vector<peer_addr> peers_;
	unsigned rounds_ = 0, bitmap_len_ = 0, per_op_ = 1;
	uint32_t maxdata_ = 0;
	slot_state slot_[2];
	std::vector<tx_ent> tx_;
	std::vector<uint8_t> txdata_;
	std::vector<uint8_t> scratch_;
	send_wr wrs_[tx_batch];
	unsigned pending_ = 0;
	std::vector<uint64_t> lat_;
	uint64_t rng_ = 0, t_enter_ = 0, last_scan_ = 0;
	uint32_t cur_ = 0, total_ = 0;
	bool entered_ = false;
	rank_stats st_{};
};

} // namespace rdgram::coll

#endif
