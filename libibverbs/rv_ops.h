/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The seam between the verbs front and the device kinds behind it, as
 * rdma-core's between libibverbs/ and the providers (struct
 * verbs_context_ops, libibverbs/driver.h).
 *
 * The front (rv_verbs.cc) owns every exported ibv_* entry point: the
 * argument checks and errno rules of the man pages, against the limits the
 * device reports (cached in the context at ibv_open_device), and what
 * libibverbs itself keeps (completion channels, event acknowledgement).
 * It then calls the device's kind through one rv_ops table. A kind (the
 * soft device: rv_soft_ops.cc, rv_datapath.cc) builds its queues, posts
 * and polls; it is called only with arguments the front has checked, and
 * checks on its own only what depends on its state (a full table, an
 * lkey, a QP's state on the data path, as a provider's post_send does).
 *
 * A second kind is one more rv_ops table and devices that point at it; the
 * checks stay as they are. What a kind does not offer is a null entry (the
 * front answers EOPNOTSUPP, as rdma-core's dummy_ops.c), or a capability
 * it reports as absent (qp_types, qp_init_attr_mask, the device attributes).
 */
#ifndef RDGRAM_RV_OPS_H
#define RDGRAM_RV_OPS_H

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include <infiniband/verbs.h>

#include "rv_provider_abi.h"

namespace rdgram::rv {

struct rv_context;

/* One device kind's operations. Each is called by the front, after its
 * checks, with objects of this kind only. The data-path entries go into
 * every context's ibv_context_ops, which verbs.h's inline ibv_post_send,
 * ibv_post_recv, ibv_poll_cq and ibv_req_notify_cq call: one indirect call
 * per verb call, as with rdma-core. */
struct rv_ops {
	const char *kind; /* in messages: "soft" */
	/* The kind's contexts are a provider's (made by its alloc_context,
	 * freed by its free_context): ibv_open_device and ibv_close_device
	 * go through rv_provider.cc. */
	bool provider;
	/* Capabilities as data, read by the front's checks. */
	uint32_t qp_types;          /* bit (1 << ibv_qp_type) per type the kind creates */
	uint32_t qp_init_attr_mask; /* ibv_qp_init_attr_ex.comp_mask bits it takes */
	uint32_t qp_create_flags;   /* ibv_qp_create_flags it takes */
	uint32_t max_inline_data;   /* per QP */

	/* Context: called once the front's context is set up, and before it
	 * is freed. */
	int (*open_context)(rv_context *ctx);
	void (*free_context)(rv_context *ctx);
	/* Queries: the whole attribute structs (the front copies what the
	 * caller's size holds). query_gid: an index within the port's
	 * gid_tbl_len; ENODATA for an empty entry. */
	int (*query_device_ex)(ibv_context *ctx, ibv_device_attr_ex *attr);
	int (*query_port)(ibv_context *ctx, uint8_t port_num, ibv_port_attr *attr);
	int (*query_gid)(ibv_context *ctx, uint8_t port_num, uint32_t index, ibv_gid_entry *entry);
	int (*query_pkey)(ibv_context *ctx, uint8_t port_num, uint16_t index, __be16 *pkey);

	/* PD and MR: NULL with errno set on failure. */
	ibv_pd *(*alloc_pd)(ibv_context *ctx);
	int (*dealloc_pd)(ibv_pd *pd);
	ibv_mr *(*reg_mr)(ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned access);
	int (*dereg_mr)(ibv_mr *mr);

	/* CQ. cqe is within the device's max_cqe; the kind keeps the
	 * channel's ncq. */
	ibv_cq *(*create_cq)(ibv_context *ctx, int cqe, void *cq_context, ibv_comp_channel *channel,
			     int comp_vector);
	/* cqe within max_cqe; EINVAL when more completions wait than the
	 * new size holds (ibv_resize_cq(3)). Null: not offered. */
	int (*resize_cq)(ibv_cq *cq, int cqe);
	int (*destroy_cq)(ibv_cq *cq);
	int (*poll_cq)(ibv_cq *cq, int n, ibv_wc *wc);
	int (*req_notify_cq)(ibv_cq *cq, int solicited_only);

	/* QP. create_qp: a type in qp_types, caps within the device's limits,
	 * CQs of this device; it reports the caps the QP really has back in
	 * attr->cap. modify_qp: a transition the front found valid, with the
	 * attributes it requires and allows, each in range. */
	ibv_qp *(*create_qp)(ibv_pd *pd, ibv_qp_init_attr *attr);
	int (*modify_qp)(ibv_qp *qp, ibv_qp_attr *attr, int mask);
	int (*query_qp)(ibv_qp *qp, ibv_qp_attr *attr, int mask, ibv_qp_init_attr *init);
	int (*destroy_qp)(ibv_qp *qp);
	int (*post_send)(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad);
	int (*post_recv)(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad);
	int (*attach_mcast)(ibv_qp *qp, const ibv_gid *gid, uint16_t lid); /* gid is multicast */
	int (*detach_mcast)(ibv_qp *qp, const ibv_gid *gid, uint16_t lid);

	/* AH. attr's flow label is 20 bits. */
	ibv_ah *(*create_ah)(ibv_pd *pd, ibv_ah_attr *attr);
	int (*destroy_ah)(ibv_ah *ah);
	int (*init_ah_from_wc)(ibv_context *ctx, uint8_t port_num, ibv_wc *wc, ibv_grh *grh, ibv_ah_attr *attr);

	/* Not offered by every kind (null: EOPNOTSUPP from the front, as
	 * rdma-core's dummy_ops.c). */
	ibv_srq *(*create_srq)(ibv_pd *pd, ibv_srq_init_attr *attr);
	int (*modify_srq)(ibv_srq *srq, ibv_srq_attr *attr, int mask);
	int (*query_srq)(ibv_srq *srq, ibv_srq_attr *attr);
	int (*destroy_srq)(ibv_srq *srq);
	int (*post_srq_recv)(ibv_srq *srq, ibv_recv_wr *wr, ibv_recv_wr **bad);
	ibv_mw *(*alloc_mw)(ibv_pd *pd, ibv_mw_type type);
	int (*bind_mw)(ibv_qp *qp, ibv_mw *mw, ibv_mw_bind *bind);
	int (*dealloc_mw)(ibv_mw *mw);
	ibv_mr *(*reg_dmabuf_mr)(ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
	int (*rereg_mr)(ibv_mr *mr, int flags, ibv_pd *pd, void *addr, size_t length, int access);
	int (*query_ece)(ibv_qp *qp, ibv_ece *ece);
	int (*set_ece)(ibv_qp *qp, ibv_ece *ece);
};

/* What the front knows of a device: every kind's device begins with it.
 * A soft device is listed as vd itself (its ops are rv_device_ops, so the
 * providers' direct-verbs entry points, mlx5dv_is_supported,
 * efadv_query_device, ..., tell it is not theirs). A provider device
 * (kind mlx5, rv_provider.cc) is listed as the verbs_device the provider
 * allocated, whose sysfs is an rv_provider_sysfs pointing back here. */
struct rv_ibdev {
	pabi::verbs_device vd; /* a soft device's ibv_device */
	const rv_ops *ops;
	uint64_t node_guid_be; /* ibv_get_device_guid(3), network order */
	ibv_device *listed;    /* the device ibv_get_device_list hands out */
};

/* The verbs_device_ops of every soft device (rv_device.cc): only a name. */
extern const pabi::verbs_device_ops rv_device_ops;

/* The sysfs device the library builds for a provider device (its
 * verbs_device's sysfs points at dev). */
struct rv_provider_sysfs {
	pabi::verbs_sysfs_dev dev; /* must be first */
	rv_ibdev *owner;
};

/* The rv_ibdev of a listed device, of either kind. (Any thread.) */
inline rv_ibdev *ibdev_of(ibv_device *d)
{
	auto *vd = reinterpret_cast<pabi::verbs_device *>(d);
	if (vd->ops == &rv_device_ops)
		return reinterpret_cast<rv_ibdev *>(vd);
	return reinterpret_cast<rv_provider_sysfs *>(vd->sysfs)->owner;
}

/* An open device. The ibv_context handed out is the last member of a
 * verbs_context whose priv points here: for a soft device both are one
 * allocation (rv_soft_context, rv_verbs.cc); a provider's context is the
 * provider's own allocation (its verbs_init_and_alloc_context), and this
 * is allocated beside it (rv_provider.cc). */
struct rv_context {
	rv_ibdev *dev;
	const rv_ops *ops;
	/* ibv_query_device_ex at open: the limits the front checks against
	 * (a device's limits do not change while it is open). */
	ibv_device_attr_ex attr;
	verbs_context *vctx;
	/* Provider contexts: the provider's operations, merged from its
	 * verbs_set_ops calls (rdma-core's get_ops()), and the emulated
	 * kernel's state of this open of the device. */
	pabi::verbs_context_ops prov{};
	void *kern = nullptr;
};

inline verbs_context *vctx_of(ibv_context *c)
{
	return reinterpret_cast<verbs_context *>(reinterpret_cast<char *>(c) - offsetof(verbs_context, context));
}
inline rv_context *ctx_of(ibv_context *c) { return reinterpret_cast<rv_context *>(vctx_of(c)->priv); }
inline const rv_ops &ops_of(ibv_context *c) { return *ctx_of(c)->ops; }

/* Completion channel (the front's, as libibverbs' is): an eventfd in
 * semaphore mode that counts the events in list (so poll/epoll on fd is
 * readable exactly while an event waits), and the CQs those events are
 * for. A kind raises an event with channel_post. */
struct rv_channel {
	ibv_comp_channel ch; /* must be first */
	std::mutex mu;
	std::vector<ibv_cq *> events;
	int ncq = 0; /* CQs using it: destroy is EBUSY while any */
};

/* rv_device.cc: messages. refuse prints "rdgram-verbs: <verb> is not
 * offered (...)" the first time a process is refused a verb, then sets
 * errno = e. */
void refuse(const char *verb, const char *why, int e = EOPNOTSUPP);
void logf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

} // namespace rdgram::rv

#endif
