/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The control verbs: PD, MR, completion channels, CQs, UD QPs and their
 * state machine, AHs (ibv_create_ah(3) resolving the neighbour, the reply
 * path from a completion), multicast attachment, and the refusals of what
 * a UD-only device without SRQs or memory windows does not offer.
 */
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "rdgram/ah_from_wc.h"
#include "rv.h"
#include "rv_api.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_query_port

using namespace rdgram;
using namespace rdgram::rv;

namespace {

rv_device *pd_dev(ibv_pd *pd) { return dev_of(pd->context); }

uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

/* The kernel's table of UD QP transitions (drivers/infiniband/core/
 * verbs.c, qp_state_table, the IB_QPT_UD columns): the attributes each
 * transition requires and those it also takes; IBV_QP_STATE aside. */
struct transition {
	bool valid;
	int req, opt;
};
transition ud_transition(ibv_qp_state from, ibv_qp_state to)
{
	const int any = 0;
	if (to == IBV_QPS_RESET || to == IBV_QPS_ERR)
		return {true, any, any};
	switch (from) {
	case IBV_QPS_RESET:
		if (to == IBV_QPS_INIT)
			return {true, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, any};
		break;
	case IBV_QPS_INIT:
		if (to == IBV_QPS_INIT)
			return {true, any, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY};
		if (to == IBV_QPS_RTR)
			return {true, any, IBV_QP_PKEY_INDEX | IBV_QP_QKEY};
		break;
	case IBV_QPS_RTR:
		if (to == IBV_QPS_RTS)
			return {true, IBV_QP_SQ_PSN, IBV_QP_CUR_STATE | IBV_QP_QKEY};
		break;
	case IBV_QPS_RTS:
		if (to == IBV_QPS_RTS)
			return {true, any, IBV_QP_CUR_STATE | IBV_QP_QKEY};
		if (to == IBV_QPS_SQD)
			return {true, any, IBV_QP_EN_SQD_ASYNC_NOTIFY};
		break;
	case IBV_QPS_SQD:
		if (to == IBV_QPS_RTS)
			return {true, any, IBV_QP_CUR_STATE | IBV_QP_QKEY};
		if (to == IBV_QPS_SQD)
			return {true, any, IBV_QP_PKEY_INDEX | IBV_QP_QKEY};
		break;
	case IBV_QPS_SQE:
		if (to == IBV_QPS_RTS)
			return {true, any, IBV_QP_CUR_STATE | IBV_QP_QKEY};
		break;
	default:
		break;
	}
	return {false, 0, 0};
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

ibv_mr *reg_mr(ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned access)
{
	rv_device *d = pd_dev(pd);
	/* ibv_reg_mr(3): remote write or atomic needs local write. */
	if (((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE)) ||
	    (length != 0 && addr == nullptr) || reinterpret_cast<uintptr_t>(addr) + length < length) {
		errno = EINVAL;
		return nullptr;
	}
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

} // namespace

extern "C" {

/* ---- PD ---- */

RV_EXPORT ibv_pd *ibv_alloc_pd(ibv_context *context)
{
	auto *pd = new (std::nothrow) ibv_pd{};
	if (pd == nullptr) {
		errno = ENOMEM;
		return nullptr;
	}
	pd->context = context;
	return pd;
}
RV_PIN(ibv_alloc_pd);

RV_EXPORT int ibv_dealloc_pd(ibv_pd *pd)
{
	delete pd;
	return 0;
}
RV_PIN(ibv_dealloc_pd);

/* ---- MR ---- */

RV_EXPORT ibv_mr *ibv_reg_mr(ibv_pd *pd, void *addr, size_t length, int access)
{
	return reg_mr(pd, addr, length, reinterpret_cast<uintptr_t>(addr), unsigned(access));
}
RV_PIN(ibv_reg_mr);

RV_EXPORT ibv_mr *ibv_reg_mr_iova(ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	return reg_mr(pd, addr, length, iova, unsigned(access));
}

RV_EXPORT ibv_mr *ibv_reg_mr_iova2(ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	return reg_mr(pd, addr, length, iova, access);
}

RV_EXPORT ibv_mr *ibv_reg_dmabuf_mr(ibv_pd *, uint64_t, size_t, uint64_t, int, int)
{
	refuse("ibv_reg_dmabuf_mr", "no device memory: the device is a DPDK port");
	return nullptr;
}

RV_EXPORT int ibv_rereg_mr(ibv_mr *, int, ibv_pd *, void *, size_t, int)
{
	refuse("ibv_rereg_mr", "deregister and register again");
	return IBV_REREG_MR_ERR_INPUT;
}

RV_EXPORT int ibv_dereg_mr(ibv_mr *mr)
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
RV_PIN(ibv_dereg_mr);

/* ---- completion channels ---- */

RV_EXPORT ibv_comp_channel *ibv_create_comp_channel(ibv_context *context)
{
	auto *c = new (std::nothrow) rv_channel{};
	if (c == nullptr) {
		errno = ENOMEM;
		return nullptr;
	}
	/* Semaphore mode: the counter is the number of events waiting, one
	 * read takes one, so the fd polls readable exactly while one waits. */
	c->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (c->ch.fd < 0) {
		int e = errno;
		delete c;
		errno = e;
		return nullptr;
	}
	c->ch.context = context;
	c->ch.refcnt = 0;
	c->events.reserve(64);
	return &c->ch;
}

RV_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel *channel)
{
	auto *c = reinterpret_cast<rv_channel *>(channel);
	{
		std::lock_guard<std::mutex> g(c->mu);
		if (c->ncq != 0)
			return EBUSY;
	}
	close(c->ch.fd);
	delete c;
	return 0;
}

RV_EXPORT int ibv_get_cq_event(ibv_comp_channel *channel, ibv_cq **cq, void **cq_context)
{
	auto *c = reinterpret_cast<rv_channel *>(channel);
	uint64_t v;
	if (read(c->ch.fd, &v, sizeof(v)) != sizeof(v))
		return -1; /* errno: EAGAIN on a non-blocking, empty channel */
	std::lock_guard<std::mutex> g(c->mu);
	if (c->events.empty()) { /* its CQ was destroyed meanwhile */
		errno = EAGAIN;
		return -1;
	}
	rv_cq *q = c->events.front();
	c->events.erase(c->events.begin());
	*cq = &q->cq;
	*cq_context = q->cq.cq_context;
	return 0;
}
RV_PIN(ibv_get_cq_event);

RV_EXPORT void ibv_ack_cq_events(ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}
RV_PIN(ibv_ack_cq_events);

/* ---- CQ ---- */

RV_EXPORT ibv_cq *ibv_create_cq(ibv_context *context, int cqe, void *cq_context, ibv_comp_channel *channel,
				int comp_vector)
{
	rv_device *d = dev_of(context);
	ibv_device_attr lim;
	device_attr(*d, lim);
	if (cqe < 1 || cqe > lim.max_cqe || comp_vector < 0 || comp_vector >= context->num_comp_vectors ||
	    (channel != nullptr && channel->context->device != context->device)) {
		errno = EINVAL;
		return nullptr;
	}
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
RV_PIN(ibv_create_cq);

RV_EXPORT int ibv_resize_cq(ibv_cq *, int)
{
	refuse("ibv_resize_cq", "CQs keep the size they were created with");
	return EOPNOTSUPP;
}
RV_PIN(ibv_resize_cq);

RV_EXPORT int ibv_destroy_cq(ibv_cq *cq)
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
			if (*it == q) {
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
RV_PIN(ibv_destroy_cq);

/* ---- QP ---- */

RV_EXPORT ibv_qp *ibv_create_qp(ibv_pd *pd, ibv_qp_init_attr *a)
{
	rv_device *d = pd_dev(pd);
	if (a->qp_type != IBV_QPT_UD) {
		refuse(a->qp_type == IBV_QPT_RC	  ? "ibv_create_qp(IBV_QPT_RC)"
		       : a->qp_type == IBV_QPT_UC ? "ibv_create_qp(IBV_QPT_UC)"
						  : "ibv_create_qp of this type",
		       "rdgram-verbs offers UD QPs only");
		return nullptr;
	}
	/* ibv_create_qp(3): caps within what ibv_query_device(3) reports. */
	ibv_device_attr lim;
	device_attr(*d, lim);
	if (a->srq != nullptr || a->send_cq == nullptr || a->recv_cq == nullptr ||
	    a->send_cq->context->device != pd->context->device || a->recv_cq->context->device != pd->context->device ||
	    a->cap.max_send_wr > uint32_t(lim.max_qp_wr) || a->cap.max_recv_wr > uint32_t(lim.max_qp_wr) ||
	    a->cap.max_send_sge > uint32_t(lim.max_sge) || a->cap.max_recv_sge > uint32_t(lim.max_sge) ||
	    a->cap.max_inline_data > 4096) {
		errno = EINVAL;
		return nullptr;
	}
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
RV_PIN(ibv_create_qp);

ibv_qp *rv_create_qp_ex(ibv_context *context, ibv_qp_init_attr_ex *a)
{
	if (a->comp_mask & ~uint32_t(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS) ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags != 0)) {
		refuse("ibv_create_qp_ex with send ops, XRC, RSS or create flags", "UD QPs with ibv_post_send only");
		return nullptr;
	}
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || a->pd == nullptr || a->pd->context != context) {
		errno = EINVAL;
		return nullptr;
	}
	return ibv_create_qp(a->pd, reinterpret_cast<ibv_qp_init_attr *>(a));
}

RV_EXPORT int ibv_modify_qp(ibv_qp *q, ibv_qp_attr *attr, int mask)
{
	auto *qp = reinterpret_cast<rv_qp *>(q);
	rv_device *d = qp->dev;
	std::lock_guard<std::mutex> g(d->ctl);
	const ibv_qp_state cur = q->state;
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur)
		return EINVAL;
	const ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (next > IBV_QPS_ERR)
		return EINVAL;
	const transition t = ud_transition(cur, next);
	if (!t.valid || (mask & t.req) != t.req || (mask & ~(t.req | t.opt | IBV_QP_STATE)) != 0)
		return EINVAL;
	if ((mask & IBV_QP_PORT) && attr->port_num != 1)
		return EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index != 0)
		return EINVAL;
	if ((mask & IBV_QP_QKEY) && (attr->qkey & soft::qkey_controlled) && !privileged())
		return EPERM;
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
RV_PIN(ibv_modify_qp);

RV_EXPORT int ibv_query_qp(ibv_qp *q, ibv_qp_attr *attr, int, ibv_qp_init_attr *init)
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
RV_PIN(ibv_query_qp);

RV_EXPORT int ibv_destroy_qp(ibv_qp *q)
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
RV_PIN(ibv_destroy_qp);

RV_EXPORT int ibv_attach_mcast(ibv_qp *q, const ibv_gid *gid, uint16_t)
{
	auto *qp = reinterpret_cast<rv_qp *>(q);
	rv_device *d = qp->dev;
	wire::gid g;
	memcpy(g.raw, gid->raw, 16);
	if (!g.is_multicast())
		return EINVAL;
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
RV_PIN(ibv_attach_mcast);

RV_EXPORT int ibv_detach_mcast(ibv_qp *q, const ibv_gid *gid, uint16_t)
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
RV_PIN(ibv_detach_mcast);

RV_EXPORT ibv_qp_ex *ibv_qp_to_qp_ex(ibv_qp *)
{
	/* No QP here is created with send ops (ibv_create_qp_ex refuses
	 * them): libibverbs returns NULL for such a QP too. */
	return nullptr;
}

RV_EXPORT int ibv_query_qp_data_in_order(ibv_qp *, enum ibv_wr_opcode, uint32_t)
{
	return 0; /* "not in order": UD datagrams guarantee nothing */
}

/* ---- AH ---- */

RV_EXPORT ibv_ah *ibv_create_ah(ibv_pd *pd, ibv_ah_attr *user_attr)
{
	rv_device *d = pd_dev(pd);
	/* The flow label is 20 bits; Linux takes the rest of the field without
	 * a word (uverbs copies it, RoCE's UDP source port uses the low 20
	 * bits: rdma_flow_label_to_udp_sport). UCX's UD transport passes
	 * ~(path factor * path index), i.e. 0xffffffff, on every RoCE AH
	 * (uct_ib_iface_fill_ah_attr_from_gid_lid). The soft driver's own
	 * rdgram_create_ah stays strict; here the verbs meaning applies. */
	ibv_ah_attr a = *user_attr;
	a.grh.flow_label &= 0xfffff;
	ibv_ah_attr *attr = &a;
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
		if (rte_eth_link_get_nowait(d->port_id, &l) != 0 || l.link_status == RTE_ETH_LINK_UP ||
		    std::chrono::steady_clock::now() > link_deadline)
			break;
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
	std::unique_lock<std::mutex> g(d->ctl);
	int rc = d->dev.prepare_ah(*attr);
	if (rc == EINPROGRESS) {
		/* The neighbour is being resolved: the ARP/ND exchange needs
		 * the port's receive path and the device's control work, which
		 * this thread drives (and the service thread too, for programs
		 * that create AHs from several threads). Bounded by the
		 * device's own retries, plus slack. */
		const auto deadline = std::chrono::steady_clock::now() +
				      std::chrono::milliseconds(uint64_t(d->cfg.neigh_retries + 1) *
								d->cfg.neigh_retry_ms + 500);
		d->ah_waiters++;
		service_wake();
		while (rc == EINPROGRESS) {
			g.unlock();
			if (dp_trylock(*d)) {
				progress(*d);
				dp_unlock(*d);
			}
			std::this_thread::sleep_for(std::chrono::microseconds(20));
			g.lock();
			d->dev.poll(rte_get_tsc_cycles());
			rc = d->dev.prepare_ah(*attr);
			if (rc == EINPROGRESS && std::chrono::steady_clock::now() > deadline)
				rc = ETIMEDOUT;
		}
		d->ah_waiters--;
	}
	if (rc != 0) {
		delete ah;
		errno = rc;
		return nullptr;
	}
	int err = 0;
	dp_lock(*d);
	ah->h = d->dev.create_ah(*attr, &err);
	dp_unlock(*d);
	if (err != 0) {
		delete ah;
		errno = err;
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
RV_PIN(ibv_create_ah);

RV_EXPORT int ibv_destroy_ah(ibv_ah *a)
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
RV_PIN(ibv_destroy_ah);

RV_EXPORT int ibv_init_ah_from_wc(ibv_context *context, uint8_t port_num, ibv_wc *wc, ibv_grh *grh,
				  ibv_ah_attr *ah_attr)
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

RV_EXPORT ibv_ah *ibv_create_ah_from_wc(ibv_pd *pd, ibv_wc *wc, ibv_grh *grh, uint8_t port_num)
{
	ibv_ah_attr a;
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a) != 0)
		return nullptr;
	return ibv_create_ah(pd, &a);
}

/* ---- what a UD-only device without SRQs or memory windows refuses ---- */

RV_EXPORT ibv_srq *ibv_create_srq(ibv_pd *, ibv_srq_init_attr *)
{
	refuse("ibv_create_srq", "no shared receive queues: post receives to each UD QP");
	return nullptr;
}
RV_PIN(ibv_create_srq);

RV_EXPORT int ibv_modify_srq(ibv_srq *, ibv_srq_attr *, int)
{
	return EOPNOTSUPP;
}
RV_PIN(ibv_modify_srq);

RV_EXPORT int ibv_query_srq(ibv_srq *, ibv_srq_attr *)
{
	return EOPNOTSUPP;
}
RV_PIN(ibv_query_srq);

RV_EXPORT int ibv_destroy_srq(ibv_srq *)
{
	return EOPNOTSUPP;
}
RV_PIN(ibv_destroy_srq);

RV_EXPORT int ibv_query_ece(ibv_qp *, ibv_ece *)
{
	return EOPNOTSUPP;
}

RV_EXPORT int ibv_set_ece(ibv_qp *, ibv_ece *)
{
	return EOPNOTSUPP;
}

RV_EXPORT ibv_context *ibv_import_device(int)
{
	refuse("ibv_import_device", "contexts are not shared between processes");
	return nullptr;
}

RV_EXPORT ibv_pd *ibv_import_pd(ibv_context *, uint32_t)
{
	refuse("ibv_import_pd", "contexts are not shared between processes");
	return nullptr;
}

RV_EXPORT void ibv_unimport_pd(ibv_pd *) {}

RV_EXPORT ibv_mr *ibv_import_mr(ibv_pd *, uint32_t)
{
	refuse("ibv_import_mr", "contexts are not shared between processes");
	return nullptr;
}

RV_EXPORT void ibv_unimport_mr(ibv_mr *) {}

RV_EXPORT ibv_dm *ibv_import_dm(ibv_context *, uint32_t)
{
	refuse("ibv_import_dm", "no device memory");
	return nullptr;
}

RV_EXPORT void ibv_unimport_dm(ibv_dm *) {}

} /* extern "C" */

int rv_post_srq_recv(ibv_srq *, ibv_recv_wr *wr, ibv_recv_wr **bad)
{
	*bad = wr;
	return EOPNOTSUPP;
}

ibv_mw *rv_alloc_mw(ibv_pd *, ibv_mw_type)
{
	refuse("ibv_alloc_mw", "memory windows are for RDMA reads and writes: UD has none");
	return nullptr;
}

int rv_bind_mw(ibv_qp *, ibv_mw *, ibv_mw_bind *)
{
	return EOPNOTSUPP;
}

int rv_dealloc_mw(ibv_mw *)
{
	return EOPNOTSUPP;
}
