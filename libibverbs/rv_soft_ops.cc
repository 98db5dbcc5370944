/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The soft kind's operations (a provider's role, rv_ops.h): the soft
 * device's PDs, MRs, CQs, UD QPs and their soft-queue entries, AHs
 * (resolving the neighbour), multicast attachment and the queries. The
 * front (rv_verbs.cc) has checked every argument against the verbs' rules
 * and the device's limits before any of these runs. The data path is in
 * rv_datapath.cc.
 */
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <thread>

#include <sched.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "rdgram/ah_from_wc.h"
#include "rv.h"
#include "soft_port.h"

namespace rdgram::rv {

namespace {

uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

/* Every QP's index in the soft queue's table, after it changed. (dp) */
void reindex(rv_device &d)
{
	for (rv_qp *qp : d.qps) {
		if (qp == nullptr)
			continue;
		qp->sidx = -1;
		for (unsigned i = 0; i < d.q.nb_qps(); i++)
			if (d.q.qp(i)->qpn == qp->qp.qp_num)
				qp->sidx = int(i);
	}
}

constexpr unsigned link_wait_ms = 3000;

bool privileged()
{
	/* Linux lets a process with CAP_NET_RAW hold a controlled Q_Key;
	 * the effective uid 0 stands for it here. */
	return geteuid() == 0;
}

/* ---- context and queries ---- */

int open_context(rv_context *c)
{
	reinterpret_cast<rv_device *>(c->dev)->contexts++;
	return 0;
}

void free_context(rv_context *c)
{
	rv_device *d = reinterpret_cast<rv_device *>(c->dev);
	/* Frames built but not yet taken by the port go now: nothing of
	 * this context stays out of the pool. */
	dp_lock(*d);
	d->q.tx_flush();
	dp_unlock(*d);
	d->contexts--;
}

int query_device_ex(ibv_context *context, ibv_device_attr_ex *a)
{
	memset(a, 0, sizeof(*a));
	device_attr(*dev_of(context), a->orig_attr);
	a->max_dm_size = 0;
	/* ibv_query_device_ex(3): the port count, without the u8 limit. */
	a->phys_port_cnt_ex = a->orig_attr.phys_port_cnt;
	return 0;
}

int query_port(ibv_context *context, uint8_t, ibv_port_attr *a)
{
	port_attr(*dev_of(context), *a);
	return 0;
}

int query_gid(ibv_context *context, uint8_t port_num, uint32_t index, ibv_gid_entry *e)
{
	rv_device *d = dev_of(context);
	if (index >= d->gids.size())
		return ENODATA;
	memset(e, 0, sizeof(*e));
	memcpy(e->gid.raw, d->gids[index].raw, 16);
	e->gid_index = index;
	e->port_num = port_num;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	e->ndev_ifindex = 0;
	return 0;
}

int query_pkey(ibv_context *context, uint8_t, uint16_t, __be16 *pkey)
{
	*pkey = htobe16(dev_of(context)->cfg.pkey);
	return 0;
}

/* ---- PD, MR ---- */

ibv_pd *alloc_pd(ibv_context *context)
{
	auto *pd = new (std::nothrow) ibv_pd{};
	if (pd == nullptr) {
		errno = ENOMEM;
		return nullptr;
	}
	pd->context = context;
	return pd;
}

int dealloc_pd(ibv_pd *pd)
{
	delete pd;
	return 0;
}

ibv_mr *reg_mr(ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned)
{
	rv_device *d = dev_of(pd->context);
	auto *m = new (std::nothrow) rv_mr{};
	if (m == nullptr) {
		errno = ENOMEM;
		return nullptr;
	}
	std::lock_guard<std::mutex> g(d->ctl);
	unsigned slot = 0;
	while (slot < rv_max_mrs && d->mrs[slot] != nullptr)
		slot++;
	if (slot == rv_max_mrs) {
		delete m;
		errno = ENOMEM;
		return nullptr;
	}
	const uint32_t key = (d->mr_serial++ << 12 | slot) & 0xffffffffu;
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.handle = slot;
	m->mr.lkey = key;
	m->mr.rkey = key;
	m->lo = reinterpret_cast<uintptr_t>(addr);
	m->hi = m->lo + length;
	(void)iova;
	__atomic_store_n(&d->mrs[slot], m, __ATOMIC_RELEASE);
	return &m->mr;
}

int dereg_mr(ibv_mr *mr)
{
	rv_device *d = dev_of(mr->context);
	std::lock_guard<std::mutex> g(d->ctl);
	if (mr->handle >= rv_max_mrs || d->mrs[mr->handle] != reinterpret_cast<rv_mr *>(mr))
		return EINVAL;
	/* Sends in progress read the table under dp. */
	dp_lock(*d);
	d->mrs[mr->handle] = nullptr;
	dp_unlock(*d);
	delete reinterpret_cast<rv_mr *>(mr);
	return 0;
}

/* ---- CQ ---- */

ibv_cq *create_cq(ibv_context *context, int cqe, void *cq_context, ibv_comp_channel *channel, int)
{
	rv_device *d = dev_of(context);
	auto *q = new (std::nothrow) rv_cq{};
	/* The ring holds size completions (cq_push is full at size). */
	const uint32_t size = pow2_at_least(uint32_t(cqe));
	ibv_wc *ring = static_cast<ibv_wc *>(calloc(size, sizeof(ibv_wc)));
	if (q == nullptr || ring == nullptr) {
		delete q;
		free(ring);
		errno = ENOMEM;
		return nullptr;
	}
	q->dev = d;
	q->ring = ring;
	q->mask = size - 1;
	rte_spinlock_init(&q->poll_lock);
	q->chan = reinterpret_cast<rv_channel *>(channel);
	q->cq.context = context;
	q->cq.channel = channel;
	q->cq.cq_context = cq_context;
	q->cq.cqe = int(size);
	pthread_mutex_init(&q->cq.mutex, nullptr);
	pthread_cond_init(&q->cq.cond, nullptr);
	if (q->chan != nullptr) {
		std::lock_guard<std::mutex> g(q->chan->mu);
		q->chan->ncq++;
		q->chan->ch.refcnt++;
	}
	return &q->cq;
}

/* A new ring, the waiting completions moved to it in order. Producers
 * (dp) and consumers (poll_lock) are both held off meanwhile. */
int resize_cq(ibv_cq *cq, int cqe)
{
	auto *q = reinterpret_cast<rv_cq *>(cq);
	rv_device *d = q->dev;
	const uint32_t size = pow2_at_least(uint32_t(cqe));
	auto *ring = static_cast<ibv_wc *>(calloc(size, sizeof(ibv_wc)));
	if (ring == nullptr)
		return ENOMEM;
	rv_lock(&q->poll_lock);
	dp_lock(*d);
	const uint32_t t = q->tail.load(std::memory_order_relaxed);
	const uint32_t n = q->head.load(std::memory_order_relaxed) - t;
	if (n > size) {
		dp_unlock(*d);
		rv_unlock(&q->poll_lock);
		free(ring);
		return EINVAL;
	}
	for (uint32_t i = 0; i < n; i++)
		ring[i] = q->ring[(t + i) & q->mask];
	ibv_wc *old = q->ring;
	q->ring = ring;
	q->mask = size - 1;
	q->tail.store(0, std::memory_order_relaxed);
	q->head.store(n, std::memory_order_release);
	cq->cqe = int(size);
	dp_unlock(*d);
	rv_unlock(&q->poll_lock);
	free(old);
	return 0;
}

int destroy_cq(ibv_cq *cq)
{
	auto *q = reinterpret_cast<rv_cq *>(cq);
	rv_device *d = q->dev;
	dp_lock(*d);
	for (rv_qp *qp : d->qps)
		if (qp != nullptr && (qp->scq == q || qp->rcq == q)) {
			dp_unlock(*d);
			return EBUSY;
		}
	if (q->armed.exchange(0) != 0 && q->chan != nullptr)
		d->armed_cqs--;
	/* Its events queued under dp and not yet posted go with it. */
	unsigned k = 0;
	for (unsigned i = 0; i < d->nnotify; i++)
		if (d->notify[i] != q)
			d->notify[k++] = d->notify[i];
	d->nnotify = k;
	dp_unlock(*d);
	/* and those another thread is posting right now are waited for. */
	while (d->events_in_flight.load(std::memory_order_acquire) != 0)
		sched_yield();
	uint32_t reported = 0;
	if (q->chan != nullptr) {
		/* Its events not yet read go with it (the kernel does the
		 * same); each takes its count off the eventfd. */
		std::lock_guard<std::mutex> g(q->chan->mu);
		for (auto it = q->chan->events.begin(); it != q->chan->events.end();)
			if (*it == cq) {
				uint64_t v;
				if (read(q->chan->ch.fd, &v, sizeof(v)) != sizeof(v))
					break;
				it = q->chan->events.erase(it);
				q->events_reported--;
			} else {
				++it;
			}
		reported = q->events_reported;
		q->chan->ncq--;
		q->chan->ch.refcnt--;
	}
	/* As libibverbs: wait until every event reported was acknowledged
	 * (ibv_ack_cq_events(3)). */
	pthread_mutex_lock(&cq->mutex);
	while (cq->comp_events_completed != reported)
		pthread_cond_wait(&cq->cond, &cq->mutex);
	pthread_mutex_unlock(&cq->mutex);
	pthread_mutex_destroy(&cq->mutex);
	pthread_cond_destroy(&cq->cond);
	free(q->ring);
	delete q;
	return 0;
}

/* ---- QP ---- */

ibv_qp *create_qp(ibv_pd *pd, ibv_qp_init_attr *a)
{
	rv_device *d = dev_of(pd->context);
	auto *qp = new (std::nothrow) rv_qp{};
	const uint32_t rq_size = pow2_at_least(std::max(a->cap.max_recv_wr, 1u));
	const uint32_t sq_size = pow2_at_least(std::max(a->cap.max_send_wr, 1u));
	const uint32_t recv_sge = std::max(a->cap.max_recv_sge, 1u);
	rv_recv *rq = static_cast<rv_recv *>(calloc(rq_size, sizeof(rv_recv)));
	auto *rq_sge = static_cast<ibv_sge *>(calloc(size_t(rq_size) * recv_sge, sizeof(ibv_sge)));
	auto *sq = static_cast<rv_qp::pending *>(calloc(sq_size, sizeof(rv_qp::pending)));
	if (qp == nullptr || rq == nullptr || rq_sge == nullptr || sq == nullptr) {
		delete qp;
		free(rq);
		free(rq_sge);
		free(sq);
		errno = ENOMEM;
		return nullptr;
	}
	qp->dev = d;
	qp->scq = reinterpret_cast<rv_cq *>(a->send_cq);
	qp->rcq = reinterpret_cast<rv_cq *>(a->recv_cq);
	qp->rq = rq;
	qp->rq_sge = rq_sge;
	qp->rq_mask = rq_size - 1;
	qp->sq = sq;
	qp->sq_mask = sq_size - 1;
	rte_spinlock_init(&qp->rq_lock);
	/* What the QP really has, reported back as the man page says. */
	a->cap.max_recv_wr = rq_size;
	a->cap.max_send_wr = sq_size;
	a->cap.max_send_sge = std::max(a->cap.max_send_sge, 1u);
	a->cap.max_recv_sge = recv_sge;
	/* Every send is copied at post time, so any payload up to the MTU
	 * could be "inline"; 256 bytes is what rxe reports by default. */
	a->cap.max_inline_data = std::max(a->cap.max_inline_data, 256u);
	qp->cap = a->cap;
	qp->sq_sig_all = a->sq_sig_all != 0;
	qp->qp.context = pd->context;
	qp->qp.qp_context = a->qp_context;
	qp->qp.pd = pd;
	qp->qp.send_cq = a->send_cq;
	qp->qp.recv_cq = a->recv_cq;
	qp->qp.srq = nullptr;
	qp->qp.state = IBV_QPS_RESET;
	qp->qp.qp_type = IBV_QPT_UD;
	pthread_mutex_init(&qp->qp.mutex, nullptr);
	pthread_cond_init(&qp->qp.cond, nullptr);
	{
		std::lock_guard<std::mutex> g(d->ctl);
		dp_lock(*d);
		unsigned slot = 0;
		while (slot < soft::soft_queue::max_qps && d->qps[slot] != nullptr)
			slot++;
		if (slot == soft::soft_queue::max_qps) {
			dp_unlock(*d);
			free(rq);
			free(rq_sge);
			free(sq);
			delete qp;
			errno = ENOMEM;
			return nullptr;
		}
		/* The QPN's low bits are its slot: the receive path finds the
		 * QP without a search. QPNs 0 and 1 are the IB special QPs. */
		qp->qp.qp_num = (d->next_qpn_serial++ << 3 | slot) & 0xffffff;
		if (qp->qp.qp_num < 8)
			qp->qp.qp_num = (d->next_qpn_serial++ << 3 | slot) & 0xffffff;
		d->qps[slot] = qp;
		dp_unlock(*d);
	}
	return &qp->qp;
}

int modify_qp(ibv_qp *q, ibv_qp_attr *attr, int mask)
{
	auto *qp = reinterpret_cast<rv_qp *>(q);
	rv_device *d = qp->dev;
	std::lock_guard<std::mutex> g(d->ctl);
	const ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : q->state;
	dp_lock(*d);
	if (mask & IBV_QP_QKEY)
		qp->qkey = attr->qkey;
	if (mask & IBV_QP_PKEY_INDEX)
		qp->pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->port = attr->port_num;
	if (mask & IBV_QP_SQ_PSN)
		qp->sq_psn = attr->sq_psn & 0xffffff;
	int rc = 0;
	if (next == IBV_QPS_RESET) {
		/* RESET discards the posted receives, without completions. */
		qp->rq_tail.store(qp->rq_head.load(std::memory_order_acquire), std::memory_order_release);
		flush_sends(*qp, false);
		if (qp->sidx >= 0) {
			d->q.remove_qp(q->qp_num);
			reindex(*d);
		}
		qp->mcast.clear();
	} else if (next == IBV_QPS_ERR) {
		flush_recvs(*qp);
		flush_sends(*qp, true);
	}
	if (next != IBV_QPS_RESET) {
		if (qp->sidx < 0) {
			rc = d->q.add_qp(q->qp_num, qp->qkey, privileged());
			if (rc == 0)
				reindex(*d);
		} else {
			d->q.qp(unsigned(qp->sidx))->qkey = qp->qkey;
		}
		if (rc == 0 && (mask & IBV_QP_SQ_PSN))
			d->q.qp(unsigned(qp->sidx))->psn = qp->sq_psn;
	}
	if (rc == 0)
		q->state = next;
	dp_unlock(*d);
	return rc;
}

int query_qp(ibv_qp *q, ibv_qp_attr *attr, int, ibv_qp_init_attr *init)
{
	auto *qp = reinterpret_cast<rv_qp *>(q);
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = q->state;
	attr->cur_qp_state = q->state;
	attr->path_mtu = qp->dev->mtu_enum;
	attr->qkey = qp->qkey;
	attr->sq_psn = qp->sq_psn;
	attr->pkey_index = qp->pkey_index;
	attr->port_num = qp->port;
	attr->cap = qp->cap;
	if (init != nullptr) {
		memset(init, 0, sizeof(*init));
		init->qp_context = q->qp_context;
		init->send_cq = q->send_cq;
		init->recv_cq = q->recv_cq;
		init->cap = qp->cap;
		init->qp_type = IBV_QPT_UD;
		init->sq_sig_all = qp->sq_sig_all;
	}
	return 0;
}

int destroy_qp(ibv_qp *q)
{
	auto *qp = reinterpret_cast<rv_qp *>(q);
	rv_device *d = qp->dev;
	{
		std::lock_guard<std::mutex> g(d->ctl);
		for (const ibv_gid &gr : qp->mcast) {
			wire::gid w;
			memcpy(w.raw, gr.raw, 16);
			d->dev.leave_mcast(w);
		}
		dp_lock(*d);
		flush_sends(*qp, false);
		if (qp->sidx >= 0) {
			d->q.remove_qp(q->qp_num);
			qp->sidx = -1;
		}
		d->qps[q->qp_num & (soft::soft_queue::max_qps - 1)] = nullptr;
		reindex(*d);
		dp_unlock(*d);
	}
	pthread_mutex_destroy(&q->mutex);
	pthread_cond_destroy(&q->cond);
	free(qp->rq);
	free(qp->rq_sge);
	free(qp->sq);
	delete qp;
	return 0;
}

int attach_mcast(ibv_qp *q, const ibv_gid *gid, uint16_t)
{
	auto *qp = reinterpret_cast<rv_qp *>(q);
	rv_device *d = qp->dev;
	wire::gid g;
	memcpy(g.raw, gid->raw, 16);
	std::lock_guard<std::mutex> lg(d->ctl);
	dp_lock(*d);
	int rc = qp->sidx < 0 ? EINVAL : d->q.attach_mcast(q->qp_num, g);
	dp_unlock(*d);
	if (rc != 0)
		return rc;
	/* The IGMP/MLD report, as the kernel's IP stack sends it for rxe. */
	if (int e = d->dev.join_mcast(g); e != 0 && e != ENOBUFS) {
		dp_lock(*d);
		d->q.detach_mcast(q->qp_num, g);
		dp_unlock(*d);
		return e;
	}
	qp->mcast.push_back(*gid);
	return 0;
}

int detach_mcast(ibv_qp *q, const ibv_gid *gid, uint16_t)
{
	auto *qp = reinterpret_cast<rv_qp *>(q);
	rv_device *d = qp->dev;
	wire::gid g;
	memcpy(g.raw, gid->raw, 16);
	std::lock_guard<std::mutex> lg(d->ctl);
	dp_lock(*d);
	int rc = d->q.detach_mcast(q->qp_num, g);
	dp_unlock(*d);
	if (rc != 0)
		return rc;
	d->dev.leave_mcast(g);
	for (auto it = qp->mcast.begin(); it != qp->mcast.end(); ++it)
		if (memcmp(it->raw, gid->raw, 16) == 0) {
			qp->mcast.erase(it);
			break;
		}
	return 0;
}

/* ---- AH ---- */

/* The neighbour of attr resolved (ARP/ND), driving the port's receive
 * path and the device's control work meanwhile; 0 or an errno. (ctl held
 * by g.) */
ibv_ah *create_ah(ibv_pd *pd, ibv_ah_attr *attr)
{
	rv_device *d = dev_of(pd->context);
	auto *ah = new (std::nothrow) rv_ah{};
	if (ah == nullptr) {
		errno = ENOMEM;
		return nullptr;
	}
	/* A port whose link is not up yet (a net_memif pair still
	 * connecting on the EAL's interrupt thread) would lose the ARP/ND
	 * requests: resolution starts once it is up, or after link_wait. */
	const auto link_deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(link_wait_ms);
	for (;;) {
		rte_eth_link l{};
		if (rte_eth_link_get_nowait(d->port.port_id(), &l) != 0 || l.link_status == RTE_ETH_LINK_UP ||
		    std::chrono::steady_clock::now() > link_deadline)
			break;
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
	/* soft::resolve_ah: the device's control work under ctl (and dp, for
	 * the AH table the data path reads). While ARP/ND runs, this thread
	 * drives the port's receive path and the device's control work (and
	 * the service thread too, for programs that create AHs from several
	 * threads). Bounded by the device's own retries, plus slack. */
	const uint64_t deadline = rte_get_tsc_cycles() + rte_get_tsc_hz() *
								 ((uint64_t(d->cfg.neigh_retries) + 1) * d->cfg.neigh_retry_ms + 500) /
								 1000;
	bool waiting = false;
	const int rc = soft::resolve_ah(
		d->dev, *attr, deadline,
		[d](const std::function<void()> &f) {
			std::lock_guard<std::mutex> g(d->ctl);
			d->dev.poll(rte_get_tsc_cycles());
			dp_lock(*d);
			f();
			dp_unlock(*d);
		},
		[d, &waiting] {
			if (!waiting) {
				waiting = true;
				d->ah_waiters++;
				service_wake();
			}
			if (dp_trylock(*d)) {
				progress(*d);
				dp_unlock(*d);
			}
			std::this_thread::sleep_for(std::chrono::microseconds(20));
		},
		&ah->h);
	if (waiting)
		d->ah_waiters--;
	if (rc != 0) {
		delete ah;
		errno = rc;
		return nullptr;
	}
	ah->dev = d;
	ah->loop = false;
	for (const auto &gg : d->gids)
		ah->loop |= memcmp(gg.raw, attr->grh.dgid.raw, 16) == 0;
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	ah->ah.handle = ah->h.slot;
	return &ah->ah;
}

int destroy_ah(ibv_ah *a)
{
	auto *ah = reinterpret_cast<rv_ah *>(a);
	rv_device *d = ah->dev;
	std::lock_guard<std::mutex> g(d->ctl);
	/* The slot is reused at once (no grace period: every reader of the
	 * AH table holds dp). */
	dp_lock(*d);
	int rc = d->dev.destroy_ah(ah->h);
	dp_unlock(*d);
	if (rc == 0)
		delete ah;
	return rc;
}

int ah_attr_from_wc(ibv_context *context, uint8_t port_num, ibv_wc *wc, ibv_grh *grh, ibv_ah_attr *ah_attr)
{
	rv_device *d = dev_of(context);
	gid_index gi;
	gi.build(d->gids);
	recv_wc r{};
	r.slid = wc->slid;
	r.sl = wc->sl;
	r.dlid_path_bits = wc->dlid_path_bits;
	r.wc_flags = (wc->wc_flags & IBV_WC_GRH) ? wc_grh : 0;
	r.l3 = l3_type::ib_grh; /* not reported: the bytes decide */
	return init_ah_from_wc(d->dev.port(), gi, port_num, r, grh, ah_attr);
}

} // namespace

/* UD QPs only; no SRQs, memory windows, dmabuf MRs, re-registration or
 * ECE. */
const rv_ops soft_ops = {
	.kind = "soft",
	.qp_types = 1u << IBV_QPT_UD,
	/* Create flags in the mask, with none set. */
	.qp_init_attr_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
	.qp_create_flags = 0,
	/* Any send is copied into its frame at post time. */
	.max_inline_data = 4096,
	.open_context = open_context,
	.free_context = free_context,
	.query_device_ex = query_device_ex,
	.query_port = query_port,
	.query_gid = query_gid,
	.query_pkey = query_pkey,
	.alloc_pd = alloc_pd,
	.dealloc_pd = dealloc_pd,
	.reg_mr = reg_mr,
	.dereg_mr = dereg_mr,
	.create_cq = create_cq,
	.resize_cq = resize_cq,
	.destroy_cq = destroy_cq,
	.poll_cq = poll_cq,
	.req_notify_cq = req_notify_cq,
	.create_qp = create_qp,
	.modify_qp = modify_qp,
	.query_qp = query_qp,
	.destroy_qp = destroy_qp,
	.post_send = post_send,
	.post_recv = post_recv,
	.attach_mcast = attach_mcast,
	.detach_mcast = detach_mcast,
	.create_ah = create_ah,
	.destroy_ah = destroy_ah,
	.init_ah_from_wc = ah_attr_from_wc,
	.create_srq = nullptr,
	.modify_srq = nullptr,
	.query_srq = nullptr,
	.destroy_srq = nullptr,
	.post_srq_recv = nullptr,
	.alloc_mw = nullptr,
	.bind_mw = nullptr,
	.dealloc_mw = nullptr,
	.reg_dmabuf_mr = nullptr,
	.rereg_mr = nullptr,
	.query_ece = nullptr,
	.set_ece = nullptr,
};

} // namespace rdgram::rv
