/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The provider's commands (IBVERBS_PRIVATE_34's ibv_cmd_* and
 * execute_ioctl): libibverbs' half of each (the core command's fields,
 * the attribute structs built from the kernel's response), then the
 * context's emulated kernel (rv_kernel.h) for the part ib_uverbs and the
 * driver do. The commands no kernel here offers yet stay in rv_compat.c,
 * refused as a kernel without them refuses (EOPNOTSUPP). Cold path.
 */
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/eventfd.h>

#include "rv.h"
#include "rv_api.h"
#include "rv_kernel.h"

using namespace rdgram::rv;

namespace {

/* The kernel behind a provider context; null (and the caller refuses
 * with EOPNOTSUPP) for anything else. */
const rv_kernel *kern(ibv_context *c, const char *what)
{
	const rv_kernel *k = kernel_of(c);
	if (k == nullptr)
		kernel_refuse("uverbs", what, EOPNOTSUPP);
	return k;
}

/* The core query_device response, as libibverbs turns it into the
 * attributes (each extended field only when both the caller's attr and
 * the response hold it). */
void attr_from_resp(ibv_device_attr_ex *attr, size_t attr_size, const ib_uverbs_ex_query_device_resp &r,
		    const pabi::verbs_sysfs_dev *sysfs)
{
	ibv_device_attr &a = attr->orig_attr;
	const ib_uverbs_query_device_resp &b = r.base;
	a.node_guid = b.node_guid;
	a.sys_image_guid = b.sys_image_guid;
	a.max_mr_size = b.max_mr_size;
	a.page_size_cap = b.page_size_cap;
	a.vendor_id = b.vendor_id;
	a.vendor_part_id = b.vendor_part_id;
	a.hw_ver = b.hw_ver;
	a.max_qp = int(b.max_qp);
	a.max_qp_wr = int(b.max_qp_wr);
	a.device_cap_flags = unsigned(b.device_cap_flags);
	a.max_sge = int(b.max_sge);
	a.max_sge_rd = int(b.max_sge_rd);
	a.max_cq = int(b.max_cq);
	a.max_cqe = int(b.max_cqe);
	a.max_mr = int(b.max_mr);
	a.max_pd = int(b.max_pd);
	a.max_qp_rd_atom = int(b.max_qp_rd_atom);
	a.max_ee_rd_atom = int(b.max_ee_rd_atom);
	a.max_res_rd_atom = int(b.max_res_rd_atom);
	a.max_qp_init_rd_atom = int(b.max_qp_init_rd_atom);
	a.max_ee_init_rd_atom = int(b.max_ee_init_rd_atom);
	a.atomic_cap = ibv_atomic_cap(b.atomic_cap);
	a.max_ee = int(b.max_ee);
	a.max_rdd = int(b.max_rdd);
	a.max_mw = int(b.max_mw);
	a.max_raw_ipv6_qp = int(b.max_raw_ipv6_qp);
	a.max_raw_ethy_qp = int(b.max_raw_ethy_qp);
	a.max_mcast_grp = int(b.max_mcast_grp);
	a.max_mcast_qp_attach = int(b.max_mcast_qp_attach);
	a.max_total_mcast_qp_attach = int(b.max_total_mcast_qp_attach);
	a.max_ah = int(b.max_ah);
	a.max_fmr = int(b.max_fmr);
	a.max_map_per_fmr = int(b.max_map_per_fmr);
	a.max_srq = int(b.max_srq);
	a.max_srq_wr = int(b.max_srq_wr);
	a.max_srq_sge = int(b.max_srq_sge);
	a.max_pkeys = b.max_pkeys;
	a.local_ca_ack_delay = b.local_ca_ack_delay;
	a.phys_port_cnt = b.phys_port_cnt;
	/* An extended field is copied when the caller's attr and the
	 * kernel's response both reach its end. */
	auto both = [&](size_t attr_end, size_t resp_end) {
		return attr_size >= attr_end && r.response_length >= resp_end;
	};
#define RV_END(type, m) (offsetof(type, m) + sizeof(type::m))
	if (both(RV_END(ibv_device_attr_ex, odp_caps), RV_END(ib_uverbs_ex_query_device_resp, odp_caps))) {
		attr->odp_caps.general_caps = r.odp_caps.general_caps;
		attr->odp_caps.per_transport_caps.rc_odp_caps = r.odp_caps.per_transport_caps.rc_odp_caps;
		attr->odp_caps.per_transport_caps.uc_odp_caps = r.odp_caps.per_transport_caps.uc_odp_caps;
		attr->odp_caps.per_transport_caps.ud_odp_caps = r.odp_caps.per_transport_caps.ud_odp_caps;
	}
	if (both(RV_END(ibv_device_attr_ex, completion_timestamp_mask),
		 RV_END(ib_uverbs_ex_query_device_resp, timestamp_mask)))
		attr->completion_timestamp_mask = r.timestamp_mask;
	if (both(RV_END(ibv_device_attr_ex, hca_core_clock), RV_END(ib_uverbs_ex_query_device_resp, hca_core_clock)))
		attr->hca_core_clock = r.hca_core_clock;
	if (both(RV_END(ibv_device_attr_ex, device_cap_flags_ex),
		 RV_END(ib_uverbs_ex_query_device_resp, device_cap_flags_ex)))
		attr->device_cap_flags_ex = r.device_cap_flags_ex;
	if (both(RV_END(ibv_device_attr_ex, rss_caps), RV_END(ib_uverbs_ex_query_device_resp, rss_caps))) {
		attr->rss_caps.supported_qpts = r.rss_caps.supported_qpts;
		attr->rss_caps.max_rwq_indirection_tables = r.rss_caps.max_rwq_indirection_tables;
		attr->rss_caps.max_rwq_indirection_table_size = r.rss_caps.max_rwq_indirection_table_size;
	}
	if (both(RV_END(ibv_device_attr_ex, max_wq_type_rq), RV_END(ib_uverbs_ex_query_device_resp, max_wq_type_rq)))
		attr->max_wq_type_rq = r.max_wq_type_rq;
	if (both(RV_END(ibv_device_attr_ex, raw_packet_caps),
		 RV_END(ib_uverbs_ex_query_device_resp, raw_packet_caps)))
		attr->raw_packet_caps = r.raw_packet_caps;
	if (both(RV_END(ibv_device_attr_ex, tm_caps), RV_END(ib_uverbs_ex_query_device_resp, tm_caps))) {
		attr->tm_caps.max_rndv_hdr_size = r.tm_caps.max_rndv_hdr_size;
		attr->tm_caps.max_num_tags = r.tm_caps.max_num_tags;
		attr->tm_caps.flags = r.tm_caps.flags;
		attr->tm_caps.max_ops = r.tm_caps.max_ops;
		attr->tm_caps.max_sge = r.tm_caps.max_sge;
	}
	if (both(RV_END(ibv_device_attr_ex, cq_mod_caps),
		 RV_END(ib_uverbs_ex_query_device_resp, cq_moderation_caps))) {
		attr->cq_mod_caps.max_cq_count = r.cq_moderation_caps.max_cq_moderation_count;
		attr->cq_mod_caps.max_cq_period = r.cq_moderation_caps.max_cq_moderation_period;
	}
	if (both(RV_END(ibv_device_attr_ex, max_dm_size), RV_END(ib_uverbs_ex_query_device_resp, max_dm_size)))
		attr->max_dm_size = r.max_dm_size;
	if (both(RV_END(ibv_device_attr_ex, xrc_odp_caps), RV_END(ib_uverbs_ex_query_device_resp, xrc_odp_caps)))
		attr->xrc_odp_caps = r.xrc_odp_caps;
	if (attr_size >= RV_END(ibv_device_attr_ex, phys_port_cnt_ex))
		attr->phys_port_cnt_ex = sysfs != nullptr && sysfs->num_ports != 0 ? sysfs->num_ports : a.phys_port_cnt;
#undef RV_END
}

} // namespace

extern "C" {

/* The context's first command: ib_uverbs' part (the async event file,
 * the completion vectors) around the driver's alloc_ucontext. */
RV_EXPORT int ibv_cmd_get_context(verbs_context *v, pabi::ibv_get_context *cmd, size_t cmd_size,
				  ib_uverbs_get_context_resp *resp, size_t resp_size)
{
	const rv_kernel *k = kern(&v->context, "ibv_cmd_get_context");
	if (k == nullptr)
		return EOPNOTSUPP;
	if (cmd_size < sizeof(*cmd) || resp_size < sizeof(*resp))
		return EINVAL;
	rv_context *c = ctx_of(&v->context);
	if (int e = k->alloc_ucontext(c, reinterpret_cast<char *>(cmd) + sizeof(*cmd), cmd_size - sizeof(*cmd),
				      reinterpret_cast<char *>(resp) + sizeof(*resp), resp_size - sizeof(*resp));
	    e != 0)
		return e;
	/* The async event file: an eventfd nothing writes yet (no async
	 * event is raised), read by ibv_get_async_event. */
	const int afd = eventfd(0, EFD_CLOEXEC);
	if (afd < 0)
		return errno;
	if (v->context.async_fd >= 0)
		close(v->context.async_fd);
	v->context.async_fd = afd;
	v->context.num_comp_vectors = 1;
	resp->async_fd = uint32_t(afd);
	resp->num_comp_vectors = 1;
	return 0;
}

RV_EXPORT int ibv_cmd_query_device_any(ibv_context *context, const ibv_query_device_ex_input *input,
				       ibv_device_attr_ex *attr, size_t attr_size, ib_uverbs_ex_query_device_resp *resp,
				       size_t *resp_size)
{
	const rv_kernel *k = kern(context, "ibv_cmd_query_device_any");
	if (k == nullptr)
		return EOPNOTSUPP;
	if ((input != nullptr && input->comp_mask != 0) || attr_size < sizeof(attr->orig_attr))
		return EINVAL;
	ib_uverbs_ex_query_device_resp own;
	size_t own_size = sizeof(own);
	if (resp == nullptr) {
		resp = &own;
		resp_size = &own_size;
	}
	/* resp is the core response followed by the driver's (udata). */
	const size_t out = *resp_size;
	if (out < sizeof(resp->base))
		return EINVAL;
	ib_uverbs_ex_query_device_resp core{};
	char *drv = out > sizeof(core) ? reinterpret_cast<char *>(resp) + sizeof(core) : nullptr;
	const size_t drv_len = out > sizeof(core) ? out - sizeof(core) : 0;
	if (drv != nullptr)
		memset(drv, 0, drv_len);
	if (int e = k->query_device(ctx_of(context), &core, drv, drv_len); e != 0)
		return e;
	/* The extended command when the caller wants more than the base
	 * attributes, else the base one (whose response is base only). */
	core.response_length = attr_size > sizeof(attr->orig_attr) ? uint32_t(std::min(out, sizeof(core)))
								    : uint32_t(sizeof(core.base));
	memcpy(resp, &core, std::min(out, sizeof(core)));
	*resp_size = core.response_length;
	memset(attr, 0, attr_size);
	const auto *vd = reinterpret_cast<const pabi::verbs_device *>(context->device);
	attr_from_resp(attr, attr_size, core, vd->sysfs);
	return 0;
}

RV_EXPORT int ibv_cmd_query_port(ibv_context *context, uint8_t port_num, ibv_port_attr *port_attr,
				 pabi::ibv_query_port *, size_t)
{
	const rv_kernel *k = kern(context, "ibv_cmd_query_port");
	if (k == nullptr)
		return EOPNOTSUPP;
	ibv_port_attr a{};
	if (int e = k->query_port(ctx_of(context), port_num, &a); e != 0)
		return e;
	*port_attr = a;
	return 0;
}

RV_EXPORT int execute_ioctl(ibv_context *context, pabi::ibv_command_buffer *cmd)
{
	const rv_kernel *k = kern(context, "execute_ioctl");
	if (k == nullptr)
		return EOPNOTSUPP;
	return k->ioctl(ctx_of(context), &cmd->hdr);
}

/* The context query of ibv_import_device: no context is shared between
 * processes here. */
RV_EXPORT int ibv_cmd_query_context(ibv_context *, pabi::ibv_command_buffer *)
{
	return kernel_refuse("uverbs", "ibv_cmd_query_context (ibv_import_device)", EOPNOTSUPP);
}

} /* extern "C" */

/* ---- the objects: libibverbs' half (the core command's fields, the
 * object's library fields from the response), then the kernel's ---- */

namespace {

/* A failed command: errno as the system call left it, and the value. */
int failed(int e)
{
	errno = e;
	return e;
}

/* The driver's part of a response: after the core struct, zeroed. */
template <typename Core> void *drv_out(Core *resp, size_t resp_size, size_t *len)
{
	*len = resp_size > sizeof(Core) ? resp_size - sizeof(Core) : 0;
	char *p = reinterpret_cast<char *>(resp) + sizeof(Core);
	if (*len != 0)
		memset(p, 0, *len);
	return *len != 0 ? p : nullptr;
}

} // namespace

extern "C" {

RV_EXPORT int ibv_cmd_alloc_pd(ibv_context *context, ibv_pd *pd, pabi::ibv_alloc_pd *, size_t,
			       ib_uverbs_alloc_pd_resp *resp, size_t resp_size)
{
	const rv_kernel *k = kern(context, "ibv_cmd_alloc_pd");
	if (k == nullptr)
		return failed(EOPNOTSUPP);
	if (resp_size < sizeof(*resp))
		return failed(EINVAL);
	size_t len;
	void *out = drv_out(resp, resp_size, &len);
	uint32_t h;
	if (int e = k->alloc_pd(ctx_of(context), &h, out, len); e != 0)
		return failed(e);
	resp->pd_handle = h;
	pd->handle = h;
	pd->context = context;
	return 0;
}

RV_EXPORT int ibv_cmd_dealloc_pd(ibv_pd *pd)
{
	const rv_kernel *k = kern(pd->context, "ibv_cmd_dealloc_pd");
	if (k == nullptr)
		return failed(EOPNOTSUPP);
	if (int e = k->dealloc_pd(ctx_of(pd->context), pd->handle); e != 0)
		return failed(e);
	return 0;
}

RV_EXPORT int ibv_cmd_reg_mr(ibv_pd *pd, void *addr, size_t length, uint64_t hca_va, int access,
			     pabi::verbs_mr *vmr, pabi::ibv_reg_mr *, size_t, ib_uverbs_reg_mr_resp *resp,
			     size_t resp_size)
{
	const rv_kernel *k = kern(pd->context, "ibv_cmd_reg_mr");
	if (k == nullptr)
		return failed(EOPNOTSUPP);
	if (resp_size < sizeof(*resp))
		return failed(EINVAL);
	uint32_t h, lkey, rkey;
	if (int e = k->reg_mr(ctx_of(pd->context), pd->handle, uint64_t(uintptr_t(addr)), length, hca_va, access,
			      &h, &lkey, &rkey);
	    e != 0)
		return failed(e);
	resp->mr_handle = h;
	resp->lkey = lkey;
	resp->rkey = rkey;
	vmr->mr.handle = h;
	vmr->mr.lkey = lkey;
	vmr->mr.rkey = rkey;
	vmr->mr.context = pd->context;
	vmr->mr_type = 0; /* IBV_MR_TYPE_MR */
	vmr->access = access;
	return 0;
}

RV_EXPORT int ibv_cmd_dereg_mr(pabi::verbs_mr *vmr)
{
	const rv_kernel *k = kern(vmr->mr.context, "ibv_cmd_dereg_mr");
	if (k == nullptr)
		return failed(EOPNOTSUPP);
	if (int e = k->dereg_mr(ctx_of(vmr->mr.context), vmr->mr.handle); e != 0)
		return failed(e);
	return 0;
}

RV_EXPORT int ibv_cmd_create_cq(ibv_context *context, int cqe, ibv_comp_channel *channel, int comp_vector,
				ibv_cq *cq, pabi::ibv_create_cq *cmd, size_t cmd_size,
				ib_uverbs_create_cq_resp *resp, size_t resp_size)
{
	const rv_kernel *k = kern(context, "ibv_cmd_create_cq");
	if (k == nullptr)
		return failed(EOPNOTSUPP);
	if (cmd_size < sizeof(*cmd) || resp_size < sizeof(*resp) || cqe < 1 || comp_vector != 0)
		return failed(EINVAL);
	size_t len;
	void *out = drv_out(resp, resp_size, &len);
	uint32_t h, n;
	if (int e = k->create_cq(ctx_of(context), cq, uint32_t(cqe), channel, reinterpret_cast<char *>(cmd) + sizeof(*cmd),
				 cmd_size - sizeof(*cmd), out, len, &h, &n);
	    e != 0)
		return failed(e);
	resp->cq_handle = h;
	resp->cqe = n;
	cq->context = context;
	cq->handle = h;
	cq->cqe = int(n);
	return 0;
}

RV_EXPORT int ibv_cmd_create_cq_ex(ibv_context *context, const ibv_cq_init_attr_ex *attr, pabi::verbs_cq *vcq,
				   pabi::ibv_create_cq_ex *cmd, size_t cmd_size, ib_uverbs_ex_create_cq_resp *resp,
				   size_t resp_size, uint32_t)
{
	const rv_kernel *k = kern(context, "ibv_cmd_create_cq_ex");
	if (k == nullptr)
		return failed(EOPNOTSUPP);
	if (attr->comp_mask & ~uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))
		return failed(EOPNOTSUPP);
	if (cmd_size < sizeof(*cmd) || resp_size < sizeof(*resp) || attr->cqe < 1 || attr->comp_vector != 0)
		return failed(EINVAL);
	size_t len;
	void *out = drv_out(resp, resp_size, &len);
	uint32_t h, n;
	ibv_cq *cq = &vcq->cq;
	if (int e = k->create_cq(ctx_of(context), cq, attr->cqe, attr->channel,
				 reinterpret_cast<char *>(cmd) + sizeof(*cmd), cmd_size - sizeof(*cmd), out, len, &h, &n);
	    e != 0)
		return failed(e);
	resp->base.cq_handle = h;
	resp->base.cqe = n;
	resp->comp_mask = 0;
	resp->response_length = uint32_t(sizeof(*resp));
	cq->context = context;
	cq->handle = h;
	cq->cqe = int(n);
	return 0;
}

/* The kernel's destroy, then what ib_uverbs does for it: the CQ's
 * events not read yet go, and the ones reported are waited for until
 * acknowledged (ibv_destroy_cq(3), ibv_ack_cq_events(3)). */
RV_EXPORT int ibv_cmd_destroy_cq(ibv_cq *cq)
{
	const rv_kernel *k = kern(cq->context, "ibv_cmd_destroy_cq");
	if (k == nullptr)
		return failed(EOPNOTSUPP);
	uint32_t reported = 0;
	if (int e = k->destroy_cq(ctx_of(cq->context), cq->handle, &reported); e != 0)
		return failed(e);
	if (cq->channel != nullptr) {
		auto *ch = reinterpret_cast<rv_channel *>(cq->channel);
		std::lock_guard<std::mutex> g(ch->mu);
		for (auto it = ch->events.begin(); it != ch->events.end();)
			if (*it == cq) {
				uint64_t v;
				if (read(ch->ch.fd, &v, sizeof(v)) != sizeof(v))
					break;
				it = ch->events.erase(it);
				reported--;
			} else {
				++it;
			}
	}
	pthread_mutex_lock(&cq->mutex);
	while (cq->comp_events_completed != reported)
		pthread_cond_wait(&cq->cond, &cq->mutex);
	pthread_mutex_unlock(&cq->mutex);
	return 0;
}

RV_EXPORT int ibv_cmd_create_qp_ex(ibv_context *context, pabi::verbs_qp *vqp, ibv_qp_init_attr_ex *attr,
				   pabi::ibv_create_qp *cmd, size_t cmd_size, ib_uverbs_create_qp_resp *resp,
				   size_t resp_size)
{
	const rv_kernel *k = kern(context, "ibv_cmd_create_qp_ex");
	if (k == nullptr)
		return failed(EOPNOTSUPP);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || attr->pd == nullptr)
		return failed(EINVAL);
	if (attr->comp_mask & ~uint32_t(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return failed(EOPNOTSUPP);
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags != 0)
		return failed(EOPNOTSUPP);
	if (cmd_size < sizeof(*cmd) || resp_size < sizeof(*resp))
		return failed(EINVAL);
	size_t len;
	void *out = drv_out(resp, resp_size, &len);
	uint32_t h, qpn;
	if (int e = k->create_qp(ctx_of(context), attr, reinterpret_cast<char *>(cmd) + sizeof(*cmd),
				 cmd_size - sizeof(*cmd), out, len, &h, &qpn);
	    e != 0)
		return failed(e);
	resp->qp_handle = h;
	resp->qpn = qpn;
	resp->max_send_wr = attr->cap.max_send_wr;
	resp->max_recv_wr = attr->cap.max_recv_wr;
	resp->max_send_sge = attr->cap.max_send_sge;
	resp->max_recv_sge = attr->cap.max_recv_sge;
	resp->max_inline_data = attr->cap.max_inline_data;
	ibv_qp &qp = vqp->qp;
	qp.context = context;
	qp.handle = h;
	qp.qp_num = qpn;
	qp.qp_context = attr->qp_context;
	qp.pd = attr->pd;
	qp.send_cq = attr->send_cq;
	qp.recv_cq = attr->recv_cq;
	qp.srq = attr->srq;
	qp.qp_type = attr->qp_type;
	qp.state = IBV_QPS_RESET;
	qp.events_completed = 0;
	pthread_mutex_init(&qp.mutex, nullptr);
	pthread_cond_init(&qp.cond, nullptr);
	vqp->comp_mask = 0;
	return 0;
}

RV_EXPORT int ibv_cmd_modify_qp(ibv_qp *qp, ibv_qp_attr *attr, int mask, pabi::ibv_modify_qp *, size_t)
{
	const rv_kernel *k = kern(qp->context, "ibv_cmd_modify_qp");
	if (k == nullptr)
		return failed(EOPNOTSUPP);
	if (int e = k->modify_qp(ctx_of(qp->context), qp, attr, mask); e != 0)
		return failed(e);
	return 0;
}

RV_EXPORT int ibv_cmd_modify_qp_ex(ibv_qp *qp, ibv_qp_attr *attr, int mask, pabi::ibv_modify_qp_ex *, size_t,
				   ib_uverbs_ex_modify_qp_resp *resp, size_t resp_size)
{
	const rv_kernel *k = kern(qp->context, "ibv_cmd_modify_qp_ex");
	if (k == nullptr)
		return failed(EOPNOTSUPP);
	if (int e = k->modify_qp(ctx_of(qp->context), qp, attr, mask); e != 0)
		return failed(e);
	if (resp != nullptr && resp_size >= sizeof(*resp)) {
		resp->comp_mask = 0;
		resp->response_length = uint32_t(sizeof(*resp));
	}
	return 0;
}

RV_EXPORT int ibv_cmd_query_qp(ibv_qp *qp, ibv_qp_attr *attr, int mask, ibv_qp_init_attr *init,
			       pabi::ibv_query_qp *, size_t)
{
	const rv_kernel *k = kern(qp->context, "ibv_cmd_query_qp");
	if (k == nullptr)
		return failed(EOPNOTSUPP);
	if (int e = k->query_qp(ctx_of(qp->context), qp, attr, mask, init); e != 0)
		return failed(e);
	return 0;
}

RV_EXPORT int ibv_cmd_destroy_qp(ibv_qp *qp)
{
	const rv_kernel *k = kern(qp->context, "ibv_cmd_destroy_qp");
	if (k == nullptr)
		return failed(EOPNOTSUPP);
	if (int e = k->destroy_qp(ctx_of(qp->context), qp->handle); e != 0)
		return failed(e);
	return 0;
}

RV_EXPORT int ibv_cmd_create_ah(ibv_pd *pd, ibv_ah *ah, ibv_ah_attr *attr, ib_uverbs_create_ah_resp *resp,
				size_t resp_size)
{
	const rv_kernel *k = kern(pd->context, "ibv_cmd_create_ah");
	if (k == nullptr)
		return failed(EOPNOTSUPP);
	if (resp_size < sizeof(*resp))
		return failed(EINVAL);
	size_t len;
	void *out = drv_out(resp, resp_size, &len);
	uint32_t h;
	if (int e = k->create_ah(ctx_of(pd->context), pd, attr, out, len, &h); e != 0)
		return failed(e);
	resp->ah_handle = h;
	ah->handle = h;
	ah->context = pd->context;
	ah->pd = pd;
	return 0;
}

RV_EXPORT int ibv_cmd_destroy_ah(ibv_ah *ah)
{
	const rv_kernel *k = kern(ah->context, "ibv_cmd_destroy_ah");
	if (k == nullptr)
		return failed(EOPNOTSUPP);
	if (int e = k->destroy_ah(ctx_of(ah->context), ah->handle); e != 0)
		return failed(e);
	return 0;
}

} /* extern "C" */

extern "C" {

/* A basic SRQ (the write command; mlx5's legacy create_srq uses it):
 * ib_uverbs' half is the library fields of the new SRQ and the limits
 * the kernel answers, which the caller's attr gets back. */
RV_EXPORT int ibv_cmd_create_srq(ibv_pd *pd, ibv_srq *srq, ibv_srq_init_attr *attr, pabi::ibv_create_srq *cmd,
				 size_t cmd_size, ib_uverbs_create_srq_resp *resp, size_t resp_size)
{
	const rv_kernel *k = kern(pd->context, "ibv_cmd_create_srq");
	if (k == nullptr || k->create_srq == nullptr)
		return failed(EOPNOTSUPP);
	if (cmd_size < sizeof(*cmd) || resp_size < sizeof(*resp))
		return failed(EINVAL);
	size_t len;
	void *out = drv_out(resp, resp_size, &len);
	uint32_t h, srqn;
	if (int e = k->create_srq(ctx_of(pd->context), attr, reinterpret_cast<char *>(cmd) + sizeof(*cmd),
				  cmd_size - sizeof(*cmd), out, len, &h, &srqn);
	    e != 0)
		return failed(e);
	resp->srq_handle = h;
	resp->max_wr = attr->attr.max_wr;
	resp->max_sge = attr->attr.max_sge;
	resp->srqn = srqn;
	srq->context = pd->context;
	srq->handle = h;
	pthread_mutex_init(&srq->mutex, nullptr);
	pthread_cond_init(&srq->cond, nullptr);
	return 0;
}

RV_EXPORT int ibv_cmd_modify_srq(ibv_srq *srq, ibv_srq_attr *attr, int mask, pabi::ibv_modify_srq *, size_t)
{
	const rv_kernel *k = kern(srq->context, "ibv_cmd_modify_srq");
	if (k == nullptr || k->modify_srq == nullptr)
		return failed(EOPNOTSUPP);
	if (int e = k->modify_srq(ctx_of(srq->context), srq->handle, attr, mask); e != 0)
		return failed(e);
	return 0;
}

RV_EXPORT int ibv_cmd_query_srq(ibv_srq *srq, ibv_srq_attr *attr, pabi::ibv_query_srq *, size_t)
{
	const rv_kernel *k = kern(srq->context, "ibv_cmd_query_srq");
	if (k == nullptr || k->query_srq == nullptr)
		return failed(EOPNOTSUPP);
	if (int e = k->query_srq(ctx_of(srq->context), srq->handle, attr); e != 0)
		return failed(e);
	return 0;
}

RV_EXPORT int ibv_cmd_destroy_srq(ibv_srq *srq)
{
	const rv_kernel *k = kern(srq->context, "ibv_cmd_destroy_srq");
	if (k == nullptr || k->destroy_srq == nullptr)
		return failed(EOPNOTSUPP);
	if (int e = k->destroy_srq(ctx_of(srq->context), srq->handle); e != 0)
		return failed(e);
	return 0;
}

} /* extern "C" */
