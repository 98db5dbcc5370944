/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The polled path: ibv_post_send, ibv_post_recv, ibv_poll_cq (inline in
 * verbs.h, reached through ibv_context_ops) and ibv_req_notify_cq, over
 * the soft queue's bursts. Per datagram: no system call, no allocation
 * from the heap, and the only lock is the device's data-path spinlock,
 * which a single-threaded program never finds taken. (The one system call
 * is the eventfd write that wakes a thread sleeping in ibv_get_cq_event,
 * once per event of an armed CQ.)
 */
#include <cerrno>
#include <cstring>

#include <sched.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_memcpy.h>

#include "rv.h"

namespace rdgram::rv {

namespace {

/* Appends a completion; false when the CQ is full (counted). (dp) */
inline bool cq_push(rv_device &d, rv_cq &cq, const ibv_wc &wc)
{
	const uint32_t h = cq.head.load(std::memory_order_relaxed);
	if (unlikely(h - cq.tail.load(std::memory_order_acquire) > cq.mask)) {
		d.drops.cq_overrun++;
		cq.overruns++;
		return false;
	}
	cq.ring[h & cq.mask] = wc;
	cq.head.store(h + 1, std::memory_order_release);
	return true;
}

/* One event on cq's channel: listed, counted, and the eventfd's count
 * raised (it wakes ibv_get_cq_event and poll(2) on the fd). */
void post_event(rv_cq &cq)
{
	rv_channel *ch = cq.chan;
	{
		std::lock_guard<std::mutex> g(ch->mu);
		ch->events.push_back(&cq.cq);
		cq.events_reported++;
	}
	const uint64_t one = 1;
	ssize_t w = write(ch->ch.fd, &one, sizeof(one));
	(void)w;
}

/* ibv_req_notify_cq(3): an armed CQ raises one event on its channel for
 * the next completion (solicited_only: the next solicited receive or error
 * completion), then is disarmed. (dp) */
inline void cq_notify(rv_device &d, rv_cq &cq, bool solicited)
{
	int a = cq.armed.load(std::memory_order_acquire);
	if (likely(a == 0) || (a == 2 && !solicited))
		return;
	if (!cq.armed.compare_exchange_strong(a, 0))
		return;
	d.armed_cqs--;
	if (likely(d.nnotify < RTE_DIM(d.notify)))
		d.notify[d.nnotify++] = &cq;
	else
		post_event(cq); /* more CQs armed than the list holds: now */
}

inline rv_qp *qp_by_num(rv_device &d, uint32_t qpn)
{
	rv_qp *qp = d.qps[qpn & (soft::soft_queue::max_qps - 1)];
	return qp != nullptr && qp->qp.qp_num == qpn ? qp : nullptr;
}

/* One received datagram into the next receive its QP posted, and its
 * completion into the QP's receive CQ. Frees the mbuf. (dp) */
void deliver(rv_device &d, const recv_wc &r)
{
	rv_qp *qp = qp_by_num(d, r.qp_num);
	if (unlikely(qp == nullptr)) {
		d.drops.rx_no_qp++;
		rte_pktmbuf_free(r.mbuf);
		return;
	}
	const ibv_qp_state st = qp->qp.state;
	if (unlikely(st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_SQE)) {
		d.drops.rx_qp_not_ready++;
		rte_pktmbuf_free(r.mbuf);
		return;
	}
	const uint32_t t = qp->rq_tail.load(std::memory_order_relaxed);
	if (unlikely(t == qp->rq_head.load(std::memory_order_acquire))) {
		d.drops.rx_no_recv_wqe++;
		rte_pktmbuf_free(r.mbuf);
		return;
	}
	const rv_recv &w = qp->rq[t & qp->rq_mask];
	const ibv_sge *sge = qp->rq_sge + size_t(t & qp->rq_mask) * qp->cap.max_recv_sge;
	/* The GRH area and the payload, scattered over the receive's SGEs in
	 * order, each filled before the next (ibv_post_recv(3)). */
	const uint8_t *src = rte_pktmbuf_mtod(r.mbuf, const uint8_t *);
	uint32_t left = r.byte_len;
	for (uint32_t i = 0; i < w.nsge && left != 0; i++) {
		const uint32_t n = std::min(left, sge[i].length);
		memcpy(reinterpret_cast<void *>(uintptr_t(sge[i].addr)), src, n);
		src += n;
		left -= n;
	}
	ibv_wc wc;
	wc.wr_id = w.wr_id;
	wc.status = left == 0 ? IBV_WC_SUCCESS : IBV_WC_LOC_LEN_ERR;
	if (left != 0)
		d.drops.rx_len_err++;
	wc.opcode = IBV_WC_RECV;
	wc.vendor_err = 0;
	wc.byte_len = r.byte_len;
	wc.imm_data = r.imm_data;
	wc.qp_num = r.qp_num;
	wc.src_qp = r.src_qp;
	wc.wc_flags = IBV_WC_GRH | ((r.wc_flags & wc_with_imm) ? IBV_WC_WITH_IMM : 0);
	wc.pkey_index = r.pkey_index;
	wc.slid = r.slid;
	wc.sl = r.sl;
	wc.dlid_path_bits = r.dlid_path_bits;
	qp->rq_tail.store(t + 1, std::memory_order_release);
	rte_pktmbuf_free(r.mbuf);
	if (cq_push(d, *qp->rcq, wc))
		cq_notify(d, *qp->rcq, (r.wc_flags & wc_solicited) != 0 || left != 0);
}

inline void send_done(rv_device &d, rv_qp &qp, uint64_t wr_id, bool signaled, ibv_wc_status status)
{
	if (!signaled && status == IBV_WC_SUCCESS)
		return;
	ibv_wc wc{};
	wc.wr_id = wr_id;
	wc.status = status;
	wc.opcode = IBV_WC_SEND;
	wc.qp_num = qp.qp.qp_num;
	if (cq_push(d, *qp.scq, wc))
		cq_notify(d, *qp.scq, status != IBV_WC_SUCCESS);
}

inline bool signaled(const rv_qp &qp, const ibv_send_wr &wr)
{
	return qp.sq_sig_all || (wr.send_flags & IBV_SEND_SIGNALED);
}

inline void send_completion(rv_device &d, rv_qp &qp, const ibv_send_wr &wr, ibv_wc_status status)
{
	send_done(d, qp, wr.wr_id, signaled(qp, wr), status);
}

/* Hands qp's waiting sends to the port, in order, as far as it takes them;
 * each taken one completes. true when the queue is empty after. (dp) */
bool drain_sq(rv_device &d, rv_qp &qp)
{
	d.q.select_send_qp(unsigned(qp.sidx));
	while (qp.sq_tail != qp.sq_head) {
		send_wr b[soft::soft_queue::max_burst];
		unsigned n = 0;
		for (uint32_t t = qp.sq_tail; t != qp.sq_head && n < RTE_DIM(b); t++)
			b[n++] = qp.sq[t & qp.sq_mask].s;
		const unsigned k = d.q.tx_burst(b, uint16_t(n));
		for (unsigned i = 0; i < k; i++) {
			const rv_qp::pending &p = qp.sq[qp.sq_tail++ & qp.sq_mask];
			send_done(d, qp, p.wr_id, p.signaled, IBV_WC_SUCCESS);
		}
		d.backlog.fetch_sub(k, std::memory_order_relaxed);
		if (k < n)
			return false;
	}
	return true;
}

void drain_backlog(rv_device &d)
{
	for (rv_qp *qp : d.qps)
		if (qp != nullptr && qp->sq_tail != qp->sq_head && qp->sidx >= 0 && !drain_sq(d, *qp))
			break;
}

/* Checks a WR before anything of it is sent: ibv_post_send(3)'s errors
 * come back with *bad set and nothing of that WR or later ones posted. */
inline int check_wr(const rv_qp &qp, const ibv_send_wr &wr, uint32_t mtu)
{
	if (unlikely(wr.opcode != IBV_WR_SEND && wr.opcode != IBV_WR_SEND_WITH_IMM))
		return EINVAL;
	if (unlikely(wr.num_sge < 0 || uint32_t(wr.num_sge) > qp.cap.max_send_sge))
		return EINVAL;
	if (unlikely(wr.wr.ud.ah == nullptr || reinterpret_cast<const rv_ah *>(wr.wr.ud.ah)->dev != qp.dev))
		return EINVAL;
	uint64_t len = 0;
	for (int i = 0; i < wr.num_sge; i++)
		len += wr.sg_list[i].length;
	if (unlikely(len > mtu))
		return EINVAL;
	if (unlikely((wr.send_flags & IBV_SEND_INLINE) && len > qp.cap.max_inline_data))
		return EINVAL;
	return 0;
}

/* A non-inline SGE must lie inside an MR of its lkey (ibv_post_send(3):
 * IBV_WC_LOC_PROT_ERR otherwise). (dp) */
inline bool sge_ok(const rv_device &d, const ibv_sge &s)
{
	const rv_mr *m = d.mrs[s.lkey & (rv_max_mrs - 1)];
	return m != nullptr && m->mr.lkey == s.lkey && s.addr >= m->lo && s.addr + s.length <= m->hi;
}

} // namespace

void dp_lock(rv_device &d)
{
	for (unsigned i = 0; !rv_trylock(&d.dp); i++) {
		if (i < 128)
			rte_pause();
		else
			sched_yield();
	}
}

bool dp_trylock(rv_device &d)
{
	return rv_trylock(&d.dp);
}

void dp_unlock(rv_device &d)
{
	const unsigned n = d.nnotify;
	if (likely(n == 0)) {
		rv_unlock(&d.dp);
		return;
	}
	rv_cq *ev[RTE_DIM(d.notify)];
	memcpy(ev, d.notify, n * sizeof(ev[0]));
	d.nnotify = 0;
	/* ibv_destroy_cq waits for this to reach 0 before it frees a CQ. */
	d.events_in_flight.fetch_add(1, std::memory_order_acq_rel);
	rv_unlock(&d.dp);
	for (unsigned i = 0; i < n; i++)
		post_event(*ev[i]);
	d.events_in_flight.fetch_sub(1, std::memory_order_acq_rel);
}

void flush_recvs(rv_qp &qp)
{
	uint32_t t = qp.rq_tail.load(std::memory_order_relaxed);
	const uint32_t h = qp.rq_head.load(std::memory_order_acquire);
	for (; t != h; t++) {
		ibv_wc wc{};
		wc.wr_id = qp.rq[t & qp.rq_mask].wr_id;
		wc.status = IBV_WC_WR_FLUSH_ERR;
		wc.opcode = IBV_WC_RECV;
		wc.qp_num = qp.qp.qp_num;
		if (cq_push(*qp.dev, *qp.rcq, wc))
			cq_notify(*qp.dev, *qp.rcq, true);
	}
	qp.rq_tail.store(t, std::memory_order_release);
}

void flush_sends(rv_qp &qp, bool complete)
{
	rv_device &d = *qp.dev;
	for (; qp.sq_tail != qp.sq_head; qp.sq_tail++) {
		rv_qp::pending &p = qp.sq[qp.sq_tail & qp.sq_mask];
		rte_pktmbuf_free(p.s.mbuf);
		d.backlog.fetch_sub(1, std::memory_order_relaxed);
		if (complete) {
			ibv_wc wc{};
			wc.wr_id = p.wr_id;
			wc.status = IBV_WC_WR_FLUSH_ERR;
			wc.opcode = IBV_WC_SEND;
			wc.qp_num = qp.qp.qp_num;
			if (cq_push(d, *qp.scq, wc))
				cq_notify(d, *qp.scq, true);
		}
	}
}

unsigned progress(rv_device &d)
{
	if (unlikely(d.backlog.load(std::memory_order_relaxed) != 0)) {
		d.q.tx_flush();
		drain_backlog(d);
	}
	recv_wc wcs[soft::soft_queue::max_burst];
	const unsigned n = d.q.rx_burst(wcs, soft::soft_queue::max_burst);
	for (unsigned i = 0; i < n; i++)
		deliver(d, wcs[i]);
	/* ARP/ND handed to the control thread: it answers now, not at its
	 * next round. */
	if (unlikely(d.q.counters().rx_to_control != d.ctl_seen)) {
		d.ctl_seen = d.q.counters().rx_to_control;
		service_wake();
	}
	d.q.tx_flush();
	if (d.q.tx_pending() == 0)
		d.tx_staged.store(false, std::memory_order_relaxed);
	bump(d.rx_polls);
	return n;
}

int post_send(ibv_qp *q, ibv_send_wr *wr, ibv_send_wr **bad)
{
	auto *qp = reinterpret_cast<rv_qp *>(q);
	rv_device &d = *qp->dev;
	if (unlikely(q->state != IBV_QPS_RTS)) {
		*bad = wr;
		return EINVAL;
	}
	const uint32_t mtu = d.cfg.mtu;
	dp_lock(d);
	if (unlikely(qp->sidx < 0)) {
		dp_unlock(d);
		*bad = wr;
		return EINVAL;
	}
	d.q.select_send_qp(unsigned(qp->sidx));
	int rc = 0;
	bool signalled_any = false;
	for (; wr != nullptr; wr = wr->next) {
		if ((rc = check_wr(*qp, *wr, mtu)) != 0)
			break;
		signalled_any |= signaled(*qp, *wr);
		const bool inl = (wr->send_flags & IBV_SEND_INLINE) != 0;
		bool prot_ok = true;
		if (!inl)
			for (int i = 0; i < wr->num_sge; i++)
				prot_ok &= sge_ok(d, wr->sg_list[i]);
		if (unlikely(!prot_ok)) {
			d.drops.tx_lkey_err++;
			send_completion(d, *qp, *wr, IBV_WC_LOC_PROT_ERR);
			continue;
		}
		const auto *ah = reinterpret_cast<const rv_ah *>(wr->wr.ud.ah);
		send_wr s;
		s.ah = ah->h;
		s.remote_qpn = wr->wr.ud.remote_qpn;
		s.remote_qkey = wr->wr.ud.remote_qkey;
		s.mbuf = nullptr;
		s.imm_data = wr->imm_data;
		s.flags = uint16_t(send_inline | (wr->opcode == IBV_WR_SEND_WITH_IMM ? send_imm : 0) |
				   ((wr->send_flags & IBV_SEND_SOLICITED) ? send_solicited : 0));
		/* Every send is copied into its frame now: one SGE is copied
		 * from where it is, several are gathered first. */
		if (wr->num_sge == 1) {
			s.inline_data = reinterpret_cast<const void *>(uintptr_t(wr->sg_list[0].addr));
			s.inline_len = wr->sg_list[0].length;
		} else {
			uint32_t off = 0;
			for (int i = 0; i < wr->num_sge; i++) {
				memcpy(d.gather + off, reinterpret_cast<const void *>(uintptr_t(wr->sg_list[i].addr)),
				       wr->sg_list[i].length);
				off += wr->sg_list[i].length;
			}
			s.inline_data = d.gather;
			s.inline_len = off;
		}
		if (unlikely(ah->loop)) {
			/* To our own GID: the frame is built as for the wire and
			 * received here, through the same checks. */
			recv_wc r;
			if (d.q.tx_loopback(s, r))
				deliver(d, r);
			send_completion(d, *qp, *wr, IBV_WC_SUCCESS);
			continue;
		}
		/* Built now, into the soft queue's stash, when nothing of this
		 * QP waits before it and the stash has room (a stash without
		 * room for a burst is pushed to the port first). */
		if (qp->sq_head == qp->sq_tail && d.q.tx_stage(&s, 1) == 1) {
			send_completion(d, *qp, *wr, IBV_WC_SUCCESS);
			continue;
		}
		/* Otherwise into the QP's send queue, the payload copied into
		 * an mbuf: it completes when the port takes it. */
		if (qp->sq_head - qp->sq_tail > qp->sq_mask) {
			d.drops.tx_sq_full++;
			rc = ENOMEM;
			break;
		}
		rte_mbuf *m = rte_pktmbuf_alloc(d.dev.mempool());
		if (unlikely(m == nullptr)) {
			d.drops.tx_no_mbuf++;
			rc = ENOMEM;
			break;
		}
		void *dst = rte_pktmbuf_append(m, uint16_t(s.inline_len));
		if (unlikely(dst == nullptr)) {
			rte_pktmbuf_free(m);
			d.drops.tx_no_mbuf++;
			rc = ENOMEM;
			break;
		}
		rte_memcpy(dst, s.inline_data, s.inline_len);
		s.mbuf = m;
		s.inline_data = nullptr;
		s.inline_len = 0;
		s.flags = uint16_t(s.flags & ~send_inline);
		qp->sq[qp->sq_head++ & qp->sq_mask] = rv_qp::pending{s, wr->wr_id, signaled(*qp, *wr)};
		d.backlog.fetch_add(1, std::memory_order_relaxed);
	}
	if (unlikely(qp->sq_head != qp->sq_tail))
		drain_sq(d, *qp);
	/* Unsignalled sends are staged, so that the port gets a burst at a
	 * time (a NIC's doorbell batching; what ib_send_bw posts between its
	 * signalled sends): they go with the next signalled send, a full
	 * burst, the next poll of an empty CQ (progress), or a service round.
	 * A signalled send is the end of a batch the program will wait on:
	 * it goes now, with whatever is staged. */
	if (signalled_any || d.q.tx_pending() >= soft::soft_queue::max_burst)
		d.q.tx_flush();
	if (d.q.tx_pending() != 0) {
		if (!d.tx_staged.load(std::memory_order_relaxed)) {
			d.tx_staged.store(true, std::memory_order_relaxed);
			service_kick();
		}
	} else if (d.tx_staged.load(std::memory_order_relaxed)) {
		d.tx_staged.store(false, std::memory_order_relaxed);
	}
	bump(d.app_calls);
	dp_unlock(d);
	if (rc != 0)
		*bad = wr;
	return rc;
}

int post_recv(ibv_qp *q, ibv_recv_wr *wr, ibv_recv_wr **bad)
{
	auto *qp = reinterpret_cast<rv_qp *>(q);
	if (unlikely(q->state == IBV_QPS_RESET)) {
		*bad = wr;
		return EINVAL;
	}
	int rc = 0;
	rv_lock(&qp->rq_lock);
	uint32_t h = qp->rq_head.load(std::memory_order_relaxed);
	for (; wr != nullptr; wr = wr->next) {
		if (unlikely(wr->num_sge < 0 || uint32_t(wr->num_sge) > qp->cap.max_recv_sge)) {
			rc = EINVAL;
			break;
		}
		if (unlikely(h - qp->rq_tail.load(std::memory_order_acquire) > qp->rq_mask)) {
			rc = ENOMEM;
			break;
		}
		rv_recv &r = qp->rq[h & qp->rq_mask];
		r.wr_id = wr->wr_id;
		r.nsge = uint32_t(wr->num_sge);
		memcpy(qp->rq_sge + size_t(h & qp->rq_mask) * qp->cap.max_recv_sge, wr->sg_list,
		       sizeof(ibv_sge) * r.nsge);
		h++;
	}
	qp->rq_head.store(h, std::memory_order_release);
	rv_unlock(&qp->rq_lock);
	if (unlikely(q->state == IBV_QPS_ERR)) {
		/* A QP in ERR completes what is posted to it at once. */
		dp_lock(*qp->dev);
		flush_recvs(*qp);
		dp_unlock(*qp->dev);
	}
	if (rc != 0)
		*bad = wr;
	return rc;
}

int poll_cq(ibv_cq *c, int n, ibv_wc *wc)
{
	auto *cq = reinterpret_cast<rv_cq *>(c);
	if (unlikely(n <= 0))
		return 0;
	int got = 0;
	rv_device &dev = *cq->dev;
	bump(dev.app_calls);
	rv_lock(&cq->poll_lock);
	for (int pass = 0; pass < 2; pass++) {
		uint32_t t = cq->tail.load(std::memory_order_relaxed);
		const uint32_t h = cq->head.load(std::memory_order_acquire);
		while (t != h && got < n)
			wc[got++] = cq->ring[t++ & cq->mask];
		cq->tail.store(t, std::memory_order_release);
		if (got != 0 || pass == 1) {
			/* Completions of sends still staged: the frames go to the
			 * port now, before the program sees them done. */
			if (got != 0 && dev.tx_staged.load(std::memory_order_relaxed) && dp_trylock(dev)) {
				dev.q.tx_flush();
				if (dev.q.tx_pending() == 0)
					dev.tx_staged.store(false, std::memory_order_relaxed);
				dp_unlock(dev);
			}
			break;
		}
		/* Empty: receive a burst. Whoever holds dp is doing it
		 * already, and fills this CQ. */
		if (!dp_trylock(dev))
			break;
		progress(dev);
		dp_unlock(dev);
	}
	rv_unlock(&cq->poll_lock);
	return got;
}

int req_notify_cq(ibv_cq *c, int solicited_only)
{
	auto *cq = reinterpret_cast<rv_cq *>(c);
	if (cq->chan == nullptr)
		return EINVAL;
	if (cq->armed.exchange(solicited_only ? 2 : 1) == 0) {
		cq->dev->armed_cqs++;
		service_kick();
	}
	return 0;
}

} // namespace rdgram::rv
