/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The verbs front (rdma-core's libibverbs/ role, rv_ops.h): every exported
 * control verb checks its arguments as its man page says, against the
 * limits the device reported at ibv_open_device, then calls the device's
 * kind through its rv_ops table. It knows no kind: a device is an
 * rv_ibdev, a context an rv_context. Also here, as in libibverbs:
 * contexts, completion channels and event acknowledgement, the refusals
 * of what a kind does not offer (EOPNOTSUPP), and the verbs no device
 * here has (SRQ ops without SRQs, imports, ECE).
 */
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include <sys/eventfd.h>
#include <unistd.h>

#include "rv_api.h"
#include "rv_kernel.h"
#include "rv_ops.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_query_port

using namespace rdgram::rv;

namespace {

/* A soft device's context: the front's state and the verbs_context in
 * one allocation (c first: ctx_of's priv points at it). */
struct rv_soft_context {
	rv_context c;
	verbs_context v;
};

const rv_ops &ops(ibv_context *c) { return ops_of(c); }
const ibv_device_attr &limits(ibv_context *c) { return ctx_of(c)->attr.orig_attr; }

/* A port number the device has (ports are numbered from 1). */
bool port_ok(ibv_context *c, uint32_t port_num)
{
	return port_num >= 1 && port_num <= ctx_of(c)->attr.phys_port_cnt_ex;
}

bool privileged()
{
	/* Linux lets a process with CAP_NET_RAW hold a controlled Q_Key
	 * (IBA 10.2.4; ib_uverbs' modify_qp says EPERM otherwise); the
	 * effective uid 0 stands for it here. */
	return geteuid() == 0;
}

/* A controlled Q_Key has its high-order bit set (IBA 10.2.4). */
constexpr uint32_t qkey_controlled = 0x80000000u;

const char *qp_type_name(unsigned t)
{
	switch (t) {
	case IBV_QPT_RC: return "RC";
	case IBV_QPT_UC: return "UC";
	case IBV_QPT_UD: return "UD";
	case IBV_QPT_RAW_PACKET: return "RAW_PACKET";
	case IBV_QPT_XRC_SEND: return "XRC_SEND";
	case IBV_QPT_XRC_RECV: return "XRC_RECV";
	case IBV_QPT_DRIVER: return "DRIVER";
	default: return nullptr;
	}
}

/* "ibv_create_qp(IBV_QPT_RC) is not offered (this device creates UD QPs
 * only)": the types from the kind's qp_types. */
void refuse_qp_type(const rv_ops &o, unsigned t)
{
	static thread_local std::string verb, why;
	const char *n = qp_type_name(t);
	verb = n != nullptr ? std::string("ibv_create_qp(IBV_QPT_") + n + ")" : "ibv_create_qp of this type";
	why = "this device creates";
	for (unsigned b = 0; b < 32; b++)
		if ((o.qp_types & (1u << b)) && qp_type_name(b) != nullptr)
			why += std::string(" ") + qp_type_name(b);
	why += " QPs only";
	refuse(verb.c_str(), why.c_str());
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

ibv_mr *reg_mr(ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned access)
{
	/* ibv_reg_mr(3): remote write or atomic needs local write; the range
	 * is within max_mr_size and does not wrap. */
	const uintptr_t lo = reinterpret_cast<uintptr_t>(addr);
	if (((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE)) ||
	    (length != 0 && addr == nullptr) || lo + length < lo || length > limits(pd->context).max_mr_size) {
		errno = EINVAL;
		return nullptr;
	}
	return ops(pd->context).reg_mr(pd, addr, length, iova, access);
}

/* One GID table entry: EINVAL for a port or an index past the port's
 * table, ENODATA for an empty entry (the kernel's rdma_get_gid_attr). */
int gid_entry(ibv_context *c, uint32_t port_num, uint32_t index, ibv_gid_entry *e)
{
	ibv_port_attr pa;
	if (port_num > 0xff || rv_query_port_ex(c, uint8_t(port_num), &pa, sizeof(pa)) != 0 ||
	    index >= uint32_t(pa.gid_tbl_len))
		return EINVAL;
	return ops(c).query_gid(c, uint8_t(port_num), index, e);
}

} // namespace

int rv_query_port_ex(ibv_context *context, uint8_t port_num, ibv_port_attr *attr, size_t len)
{
	if (!port_ok(context, port_num))
		return EINVAL;
	ibv_port_attr a;
	memset(&a, 0, sizeof(a));
	if (int rc = ops(context).query_port(context, port_num, &a); rc != 0)
		return rc;
	memcpy(attr, &a, std::min(len, sizeof(a)));
	return 0;
}

int rv_query_device_ex(ibv_context *context, const ibv_query_device_ex_input *input, ibv_device_attr_ex *attr,
		       size_t attr_size)
{
	if (input != nullptr && input->comp_mask != 0)
		return EINVAL;
	ibv_device_attr_ex a;
	if (int rc = ops(context).query_device_ex(context, &a); rc != 0)
		return rc;
	memcpy(attr, &a, std::min(attr_size, sizeof(a)));
	return 0;
}

ibv_qp *rv_create_qp_ex(ibv_context *context, ibv_qp_init_attr_ex *a)
{
	const rv_ops &o = ops(context);
	if ((a->comp_mask & ~o.qp_init_attr_mask) != 0 ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && (a->create_flags & ~o.qp_create_flags) != 0)) {
		refuse("ibv_create_qp_ex with send ops, XRC, RSS or create flags", "QPs with ibv_post_send only");
		return nullptr;
	}
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || a->pd == nullptr || a->pd->context != context) {
		errno = EINVAL;
		return nullptr;
	}
	return ibv_create_qp(a->pd, reinterpret_cast<ibv_qp_init_attr *>(a));
}

/* No SRQ of a kind without SRQs exists: the call is refused all the same. */
int rv_post_srq_recv(ibv_srq *srq, ibv_recv_wr *wr, ibv_recv_wr **bad)
{
	const rv_ops &o = ops(srq->context);
	if (o.post_srq_recv == nullptr) {
		*bad = wr;
		return EOPNOTSUPP;
	}
	return o.post_srq_recv(srq, wr, bad);
}

ibv_mw *rv_alloc_mw(ibv_pd *pd, ibv_mw_type type)
{
	const rv_ops &o = ops(pd->context);
	if (o.alloc_mw == nullptr) {
		refuse("ibv_alloc_mw", "memory windows are for RDMA reads and writes: UD has none");
		return nullptr;
	}
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = EINVAL;
		return nullptr;
	}
	return o.alloc_mw(pd, type);
}

int rv_bind_mw(ibv_qp *qp, ibv_mw *mw, ibv_mw_bind *bind)
{
	const rv_ops &o = ops(qp->context);
	return o.bind_mw == nullptr ? EOPNOTSUPP : o.bind_mw(qp, mw, bind);
}

int rv_dealloc_mw(ibv_mw *mw)
{
	const rv_ops &o = ops(mw->context);
	return o.dealloc_mw == nullptr ? EOPNOTSUPP : o.dealloc_mw(mw);
}

extern "C" {

/* ---- devices and contexts ---- */

RV_EXPORT const char *ibv_get_device_name(ibv_device *device)
{
	return device->name;
}
RV_PIN(ibv_get_device_name);

RV_EXPORT __be64 ibv_get_device_guid(ibv_device *device)
{
	return ibdev_of(device)->node_guid_be;
}
RV_PIN(ibv_get_device_guid);

RV_EXPORT ibv_context *ibv_open_device(ibv_device *device)
{
	rv_ibdev *d = ibdev_of(device);
	const rv_ops &o = *d->ops;
	if (o.provider) /* the provider makes the context (rv_provider.cc) */
		return provider_open(device, nullptr);
	auto *sc = new (std::nothrow) rv_soft_context{};
	if (sc == nullptr) {
		errno = ENOMEM;
		return nullptr;
	}
	rv_context *c = &sc->c;
	c->dev = d;
	c->ops = &o;
	verbs_context &v = sc->v;
	c->vctx = &v;
	v.priv = reinterpret_cast<verbs_ex_private *>(c);
	v.sz = sizeof(verbs_context);
	v.query_port = rv_query_port_ex;
	v.query_device_ex = rv_query_device_ex;
	v.create_qp_ex = rv_create_qp_ex;
	ibv_context &ctx = v.context;
	ctx.device = device;
	ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
	/* The data path, straight to the kind: verbs.h's inline verbs call
	 * these. */
	ctx.ops.poll_cq = o.poll_cq;
	ctx.ops.req_notify_cq = o.req_notify_cq;
	ctx.ops.post_send = o.post_send;
	ctx.ops.post_recv = o.post_recv;
	ctx.ops.post_srq_recv = o.post_srq_recv != nullptr ? o.post_srq_recv : rv_post_srq_recv;
	ctx.ops.alloc_mw = rv_alloc_mw;
	ctx.ops.bind_mw = rv_bind_mw;
	ctx.ops.dealloc_mw = rv_dealloc_mw;
	ctx.cmd_fd = -1;
	ctx.num_comp_vectors = 1;
	if (int rc = o.query_device_ex(&ctx, &c->attr); rc != 0) {
		delete sc;
		errno = rc;
		return nullptr;
	}
	/* The async event fd: an eventfd nothing writes yet (no async event
	 * is raised), so a program's poll() on it waits as on a quiet HCA. */
	ctx.async_fd = eventfd(0, EFD_CLOEXEC);
	if (ctx.async_fd < 0) {
		int e = errno;
		delete sc;
		errno = e;
		return nullptr;
	}
	if (int rc = o.open_context(c); rc != 0) {
		close(ctx.async_fd);
		delete sc;
		errno = rc;
		return nullptr;
	}
	pthread_mutex_init(&ctx.mutex, nullptr);
	return &ctx;
}
RV_PIN(ibv_open_device);

RV_EXPORT int ibv_close_device(ibv_context *context)
{
	rv_context *c = ctx_of(context);
	if (c->ops->provider) { /* the provider's free_context frees it all */
		c->ops->free_context(c);
		return 0;
	}
	c->ops->free_context(c);
	close(context->async_fd);
	pthread_mutex_destroy(&context->mutex);
	delete reinterpret_cast<rv_soft_context *>(c);
	return 0;
}
RV_PIN(ibv_close_device);

RV_EXPORT int ibv_query_device(ibv_context *context, ibv_device_attr *attr)
{
	ibv_device_attr_ex a;
	if (int rc = ops(context).query_device_ex(context, &a); rc != 0)
		return rc;
	*attr = a.orig_attr;
	return 0;
}
RV_PIN(ibv_query_device);

RV_EXPORT int ibv_query_port(ibv_context *context, uint8_t port_num, _compat_ibv_port_attr *attr)
{
	/* The exported compat symbol: the old, shorter struct. */
	return rv_query_port_ex(context, port_num, reinterpret_cast<ibv_port_attr *>(attr),
				offsetof(ibv_port_attr, port_cap_flags2));
}
RV_PIN(ibv_query_port);

RV_EXPORT int ibv_query_gid(ibv_context *context, uint8_t port_num, int index, ibv_gid *gid)
{
	ibv_gid_entry e;
	const int rc = index < 0 ? EINVAL : gid_entry(context, port_num, uint32_t(index), &e);
	if (rc == ENODATA) { /* an empty entry reads as the zero GID, as with libibverbs */
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (rc != 0) {
		errno = rc;
		return -1;
	}
	*gid = e.gid;
	return 0;
}
RV_PIN(ibv_query_gid);

RV_EXPORT int ibv_query_pkey(ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
	ibv_port_attr pa;
	if (rv_query_port_ex(context, port_num, &pa, sizeof(pa)) != 0 || index < 0 || index >= int(pa.pkey_tbl_len)) {
		errno = EINVAL;
		return -1;
	}
	if (int rc = ops(context).query_pkey(context, port_num, uint16_t(index), pkey); rc != 0) {
		errno = rc;
		return -1;
	}
	return 0;
}
RV_PIN(ibv_query_pkey);

RV_EXPORT int ibv_get_pkey_index(ibv_context *context, uint8_t port_num, __be16 pkey)
{
	ibv_port_attr pa;
	if (rv_query_port_ex(context, port_num, &pa, sizeof(pa)) == 0)
		for (int i = 0; i < int(pa.pkey_tbl_len); i++) {
			__be16 p;
			if (ops(context).query_pkey(context, port_num, uint16_t(i), &p) == 0 && p == pkey)
				return i;
		}
	errno = EINVAL;
	return -1;
}

/* PRIVATE_34, used by ibv_devinfo: the GID type as sysfs names it
 * (rdma-core's enum ibv_gid_type_sysfs: 0 IB/RoCE v1, 1 RoCE v2). */
RV_EXPORT int ibv_query_gid_type(ibv_context *context, uint8_t port_num, unsigned int index, unsigned int *type)
{
	ibv_gid_entry e;
	const int rc = gid_entry(context, port_num, index, &e);
	if (rc != 0 && rc != ENODATA) {
		errno = rc;
		return -1;
	}
	/* An empty entry: RoCE v1, as libibverbs answers. */
	*type = rc == 0 && e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 1 : 0;
	return 0;
}

RV_EXPORT int _ibv_query_gid_ex(ibv_context *context, uint32_t port_num, uint32_t gid_index, ibv_gid_entry *entry,
				uint32_t flags, size_t entry_size)
{
	if (flags != 0 || entry_size < sizeof(ibv_gid_entry))
		return EINVAL;
	return gid_entry(context, port_num, gid_index, entry);
}

RV_EXPORT ssize_t _ibv_query_gid_table(ibv_context *context, ibv_gid_entry *entries, size_t max_entries,
				       uint32_t flags, size_t entry_size)
{
	if (flags != 0 || entry_size < sizeof(ibv_gid_entry))
		return -EINVAL;
	/* Every port's valid entries, one after the other. */
	size_t n = 0;
	for (uint32_t p = 1; port_ok(context, p); p++) {
		ibv_port_attr pa;
		if (int rc = rv_query_port_ex(context, uint8_t(p), &pa, sizeof(pa)); rc != 0)
			return -rc;
		for (uint32_t i = 0; i < uint32_t(pa.gid_tbl_len); i++) {
			ibv_gid_entry e;
			if (gid_entry(context, p, i, &e) != 0)
				continue;
			if (n == max_entries)
				return -EINVAL;
			memcpy(reinterpret_cast<char *>(entries) + n * entry_size, &e, sizeof(e));
			n++;
		}
	}
	return ssize_t(n);
}

/* ---- PD ---- */

RV_EXPORT ibv_pd *ibv_alloc_pd(ibv_context *context)
{
	return ops(context).alloc_pd(context);
}
RV_PIN(ibv_alloc_pd);

RV_EXPORT int ibv_dealloc_pd(ibv_pd *pd)
{
	return ops(pd->context).dealloc_pd(pd);
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

RV_EXPORT ibv_mr *ibv_reg_dmabuf_mr(ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd,
				    int access)
{
	const rv_ops &o = ops(pd->context);
	if (o.reg_dmabuf_mr == nullptr) {
		refuse("ibv_reg_dmabuf_mr", "no device memory: the device is a DPDK port");
		return nullptr;
	}
	/* ibv_reg_mr(3)'s access rule, and a length within max_mr_size. */
	if (((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE)) ||
	    fd < 0 || length > limits(pd->context).max_mr_size) {
		errno = EINVAL;
		return nullptr;
	}
	return o.reg_dmabuf_mr(pd, offset, length, iova, fd, access);
}

RV_EXPORT int ibv_rereg_mr(ibv_mr *mr, int flags, ibv_pd *pd, void *addr, size_t length, int access)
{
	const rv_ops &o = ops(mr->context);
	if (o.rereg_mr == nullptr) {
		refuse("ibv_rereg_mr", "deregister and register again");
		return IBV_REREG_MR_ERR_INPUT;
	}
	/* As libibverbs' ibv_rereg_mr: known flags, a translation with an
	 * address and a length, access only with IBV_REREG_MR_CHANGE_ACCESS. */
	if ((flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) != 0 ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (addr == nullptr || length == 0)) ||
	    (access != 0 && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	const int rc = o.rereg_mr(mr, flags, pd, addr, length, access);
	if (rc == 0 && (flags & IBV_REREG_MR_CHANGE_PD))
		mr->pd = pd;
	if (rc == 0 && (flags & IBV_REREG_MR_CHANGE_TRANSLATION)) {
		mr->addr = addr;
		mr->length = length;
	}
	return rc;
}

RV_EXPORT int ibv_dereg_mr(ibv_mr *mr)
{
	return ops(mr->context).dereg_mr(mr);
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
	ibv_cq *q = c->events.front();
	c->events.erase(c->events.begin());
	*cq = q;
	*cq_context = q->cq_context;
	/* A provider's own account of the event (libmlx5: the CQ's arm
	 * sequence number moves on), as libibverbs calls it. */
	if (rv_context *rc = ctx_of(q->context); rc->ops->provider && rc->prov.cq_event != nullptr)
		rc->prov.cq_event(q);
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
	/* ibv_create_cq(3): cqe from 1 to the device's max_cqe, a vector of
	 * the context, a channel of the same device. */
	if (cqe < 1 || cqe > limits(context).max_cqe || comp_vector < 0 || comp_vector >= context->num_comp_vectors ||
	    (channel != nullptr && channel->context->device != context->device)) {
		errno = EINVAL;
		return nullptr;
	}
	return ops(context).create_cq(context, cqe, cq_context, channel, comp_vector);
}
RV_PIN(ibv_create_cq);

RV_EXPORT int ibv_resize_cq(ibv_cq *cq, int cqe)
{
	const rv_ops &o = ops(cq->context);
	if (o.resize_cq == nullptr) {
		refuse("ibv_resize_cq", "CQs keep the size they were created with");
		return EOPNOTSUPP;
	}
	if (cqe < 1 || cqe > limits(cq->context).max_cqe)
		return EINVAL;
	return o.resize_cq(cq, cqe);
}
RV_PIN(ibv_resize_cq);

RV_EXPORT int ibv_destroy_cq(ibv_cq *cq)
{
	return ops(cq->context).destroy_cq(cq);
}
RV_PIN(ibv_destroy_cq);

/* ---- QP ---- */

RV_EXPORT ibv_qp *ibv_create_qp(ibv_pd *pd, ibv_qp_init_attr *a)
{
	ibv_context *c = pd->context;
	const rv_ops &o = ops(c);
	if (unsigned(a->qp_type) >= 32 || !(o.qp_types & (1u << a->qp_type))) {
		refuse_qp_type(o, unsigned(a->qp_type));
		return nullptr;
	}
	/* ibv_create_qp(3): CQs (and an SRQ) of this device, caps within what
	 * ibv_query_device(3) reports (max_qp_wr, max_sge) and the kind's
	 * inline limit. */
	const ibv_device_attr &lim = limits(c);
	if (a->send_cq == nullptr || a->recv_cq == nullptr || a->send_cq->context->device != c->device ||
	    a->recv_cq->context->device != c->device ||
	    (a->srq != nullptr && (o.create_srq == nullptr || a->srq->context->device != c->device)) ||
	    a->cap.max_send_wr > uint32_t(lim.max_qp_wr) || a->cap.max_recv_wr > uint32_t(lim.max_qp_wr) ||
	    a->cap.max_send_sge > uint32_t(lim.max_sge) || a->cap.max_recv_sge > uint32_t(lim.max_sge) ||
	    a->cap.max_inline_data > o.max_inline_data) {
		errno = EINVAL;
		return nullptr;
	}
	return o.create_qp(pd, a);
}
RV_PIN(ibv_create_qp);

RV_EXPORT int ibv_modify_qp(ibv_qp *q, ibv_qp_attr *attr, int mask)
{
	ibv_context *c = q->context;
	const ibv_qp_state cur = q->state;
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur)
		return EINVAL;
	const ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (next > IBV_QPS_ERR || q->qp_type != IBV_QPT_UD)
		return EINVAL;
	/* The IBA's state machine (IBA 10.3.1): the transition exists, with
	 * the attributes it requires and none it does not take. */
	const transition t = ud_transition(cur, next);
	if (!t.valid || (mask & t.req) != t.req || (mask & ~(t.req | t.opt | IBV_QP_STATE)) != 0)
		return EINVAL;
	if ((mask & IBV_QP_PORT) && !port_ok(c, attr->port_num))
		return EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index >= limits(c).max_pkeys)
		return EINVAL;
	if ((mask & IBV_QP_QKEY) && (attr->qkey & qkey_controlled) && !privileged())
		return EPERM;
	return ops(c).modify_qp(q, attr, mask);
}
RV_PIN(ibv_modify_qp);

RV_EXPORT int ibv_query_qp(ibv_qp *q, ibv_qp_attr *attr, int mask, ibv_qp_init_attr *init)
{
	return ops(q->context).query_qp(q, attr, mask, init);
}
RV_PIN(ibv_query_qp);

RV_EXPORT int ibv_destroy_qp(ibv_qp *q)
{
	return ops(q->context).destroy_qp(q);
}
RV_PIN(ibv_destroy_qp);

RV_EXPORT int ibv_attach_mcast(ibv_qp *q, const ibv_gid *gid, uint16_t lid)
{
	/* ibv_attach_mcast(3): a multicast GID (ff00::/8), to a UD QP. */
	if (gid->raw[0] != 0xff || q->qp_type != IBV_QPT_UD)
		return EINVAL;
	return ops(q->context).attach_mcast(q, gid, lid);
}
RV_PIN(ibv_attach_mcast);

RV_EXPORT int ibv_detach_mcast(ibv_qp *q, const ibv_gid *gid, uint16_t lid)
{
	return ops(q->context).detach_mcast(q, gid, lid);
}
RV_PIN(ibv_detach_mcast);

RV_EXPORT ibv_qp_ex *ibv_qp_to_qp_ex(ibv_qp *qp)
{
	/* A provider's QP (kind mlx5) is a verbs_qp: libibverbs' answer,
	 * its ibv_qp_ex when the provider filled its send ops (VERBS_QP_EX,
	 * 1 << 1). No soft QP is created with send ops (ibv_create_qp_ex
	 * refuses them): NULL, as libibverbs answers for such a QP too. */
	if (ctx_of(qp->context)->ops->provider) {
		auto *vqp = reinterpret_cast<pabi::verbs_qp *>(qp);
		return (vqp->comp_mask & (1u << 1)) ? &vqp->qp_ex : nullptr;
	}
	return nullptr;
}

RV_EXPORT int ibv_query_qp_data_in_order(ibv_qp *, enum ibv_wr_opcode, uint32_t)
{
	return 0; /* "not in order": UD datagrams guarantee nothing */
}

/* ---- AH ---- */

RV_EXPORT ibv_ah *ibv_create_ah(ibv_pd *pd, ibv_ah_attr *user_attr)
{
	/* The flow label is 20 bits; Linux takes the rest of the field without
	 * a word (uverbs copies it, RoCE's UDP source port uses the low 20
	 * bits: rdma_flow_label_to_udp_sport). UCX's UD transport passes
	 * ~(path factor * path index), i.e. 0xffffffff, on every RoCE AH
	 * (uct_ib_iface_fill_ah_attr_from_gid_lid). The soft driver's own
	 * rdgram_create_ah stays strict; here the verbs meaning applies. */
	ibv_ah_attr a = *user_attr;
	a.grh.flow_label &= 0xfffff;
	return ops(pd->context).create_ah(pd, &a);
}
RV_PIN(ibv_create_ah);

RV_EXPORT int ibv_destroy_ah(ibv_ah *ah)
{
	return ops(ah->context).destroy_ah(ah);
}
RV_PIN(ibv_destroy_ah);

RV_EXPORT int ibv_init_ah_from_wc(ibv_context *context, uint8_t port_num, ibv_wc *wc, ibv_grh *grh,
				  ibv_ah_attr *ah_attr)
{
	return ops(context).init_ah_from_wc(context, port_num, wc, grh, ah_attr);
}

RV_EXPORT ibv_ah *ibv_create_ah_from_wc(ibv_pd *pd, ibv_wc *wc, ibv_grh *grh, uint8_t port_num)
{
	ibv_ah_attr a;
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a) != 0)
		return nullptr;
	return ibv_create_ah(pd, &a);
}

/* ---- SRQs, ECE, and what no device here offers (imports) ---- */

RV_EXPORT ibv_srq *ibv_create_srq(ibv_pd *pd, ibv_srq_init_attr *attr)
{
	const rv_ops &o = ops(pd->context);
	if (o.create_srq == nullptr) {
		refuse("ibv_create_srq", "no shared receive queues: post receives to each UD QP");
		return nullptr;
	}
	return o.create_srq(pd, attr);
}
RV_PIN(ibv_create_srq);

RV_EXPORT int ibv_modify_srq(ibv_srq *srq, ibv_srq_attr *attr, int mask)
{
	const rv_ops &o = ops(srq->context);
	return o.modify_srq == nullptr ? EOPNOTSUPP : o.modify_srq(srq, attr, mask);
}
RV_PIN(ibv_modify_srq);

RV_EXPORT int ibv_query_srq(ibv_srq *srq, ibv_srq_attr *attr)
{
	const rv_ops &o = ops(srq->context);
	return o.query_srq == nullptr ? EOPNOTSUPP : o.query_srq(srq, attr);
}
RV_PIN(ibv_query_srq);

RV_EXPORT int ibv_destroy_srq(ibv_srq *srq)
{
	const rv_ops &o = ops(srq->context);
	return o.destroy_srq == nullptr ? EOPNOTSUPP : o.destroy_srq(srq);
}
RV_PIN(ibv_destroy_srq);

RV_EXPORT int ibv_query_ece(ibv_qp *qp, ibv_ece *ece)
{
	const rv_ops &o = ops(qp->context);
	return o.query_ece == nullptr ? EOPNOTSUPP : o.query_ece(qp, ece);
}

RV_EXPORT int ibv_set_ece(ibv_qp *qp, ibv_ece *ece)
{
	const rv_ops &o = ops(qp->context);
	return o.set_ece == nullptr ? EOPNOTSUPP : o.set_ece(qp, ece);
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
