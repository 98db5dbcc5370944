/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Provider devices (docs/VERBS.md, "Device kinds"): a [[port]] of kind
 * mlx5 is a verbs device whose context is made by an unmodified rdma-core
 * provider (Debian's libmlx5.so.1), loaded by this library as libibverbs
 * loads providers. Everything a provider asks of the kernel (the ibv_cmd_*
 * commands and execute_ioctl of IBVERBS_PRIVATE_34, and mmap of its
 * cmd_fd) is answered in user space by an emulated kernel driver, an
 * rv_kernel (mlx5_ib: rv_mlx5_ib.cc), written from the uAPI headers and
 * from what the provider does with the answers.
 *
 *   rv_provider.cc  loading the provider, its registration, the sysfs
 *                   device it matches, contexts (verbs_init_context & co),
 *                   and the provider kind's rv_ops (the front's verbs sent
 *                   to the provider's verbs_context_ops)
 *   rv_uverbs.cc    the ibv_cmd_* entry points: the library half of each
 *                   command (the core structs), then the context's kernel
 *   rv_mlx5_ib.cc   the mlx5_ib kernel: ucontext, queries, UAR pages
 *
 * Cold path throughout: nothing here runs per packet.
 */
#ifndef RDGRAM_RV_KERNEL_H
#define RDGRAM_RV_KERNEL_H

#include <cstddef>
#include <cstdint>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>

#include "rv_ops.h"
#include "rv_provider_abi.h"

namespace rdgram::rv {

struct rv_device;

/* An emulated kernel driver (the role of mlx5_ib, efa, ...). Each entry
 * returns 0 or a positive errno value, the one the Linux driver returns
 * for the same request. Called by one thread at a time per context
 * (the provider serialises its commands as the kernel would not need to,
 * but nothing here is shared between contexts but the device's
 * constants). */
struct rv_kernel {
	const char *name; /* "mlx5_ib", in messages */
	/* The device as sysfs would show it, and the provider for it. */
	const char *provider_lib;  /* dlopen name: "libmlx5.so.1" */
	const char *provider_name; /* its verbs_device_ops.name: "mlx5" */
	const char *provider_env;  /* a path to load instead (tests) */
	uint16_t pci_vendor, pci_device;
	const char *modalias;
	uint32_t driver_id; /* enum rdma_driver_id */
	uint32_t abi_ver;   /* the uverbs driver ABI the provider matches */

	/* The character device's open: the fd the provider is given as
	 * cmd_fd (it mmaps it), and the context's state in c->kern. */
	int (*open)(rv_context *c, int *cmd_fd);
	/* Its release: after the provider's free_context. */
	void (*release)(rv_context *c);
	/* alloc_ucontext: the driver's request and response (udata). */
	int (*alloc_ucontext)(rv_context *c, const void *in, size_t inlen, void *out, size_t outlen);
	/* query_device: the core response (every field) and the driver's
	 * (udata, outlen may be 0). */
	int (*query_device)(rv_context *c, ib_uverbs_ex_query_device_resp *core, void *out, size_t outlen);
	int (*query_port)(rv_context *c, uint8_t port_num, ibv_port_attr *attr);
	/* The GID table (ENODATA for an empty entry, EINVAL past it) and
	 * the P_Key table, as sysfs and the ioctl GID queries show them. */
	int (*query_gid)(rv_context *c, uint8_t port_num, uint32_t index, ibv_gid_entry *entry);
	int (*query_pkey)(rv_context *c, uint8_t port_num, uint16_t index, __be16 *pkey);
	/* An ioctl method (object, method) with its attributes. */
	int (*ioctl)(rv_context *c, const ib_uverbs_ioctl_hdr *hdr);

	/* The objects. in/inlen: the driver's request (udata in), out/outlen
	 * its response (udata out, zeroed by the caller); *handle: the
	 * kernel's handle of the new object (ibv_pd.handle, ...). */
	int (*alloc_pd)(rv_context *c, uint32_t *handle, void *out, size_t outlen);
	int (*dealloc_pd)(rv_context *c, uint32_t handle);
	int (*reg_mr)(rv_context *c, uint32_t pd, uint64_t addr, uint64_t length, uint64_t iova, int access,
		      uint32_t *handle, uint32_t *lkey, uint32_t *rkey);
	int (*dereg_mr)(rv_context *c, uint32_t handle);
	/* cq is the provider's, named in its completion events; *cqe_out
	 * the entries it really has. */
	int (*create_cq)(rv_context *c, ibv_cq *cq, uint32_t cqe, ibv_comp_channel *channel, const void *in,
			 size_t inlen, void *out, size_t outlen, uint32_t *handle, uint32_t *cqe_out);
	/* *events: the completion events reported for it (the caller waits
	 * for their acknowledgement). */
	int (*destroy_cq)(rv_context *c, uint32_t handle, uint32_t *events);
	/* attr->cap is answered with what the QP has. */
	int (*create_qp)(rv_context *c, ibv_qp_init_attr_ex *attr, const void *in, size_t inlen, void *out,
			 size_t outlen, uint32_t *handle, uint32_t *qpn);
	int (*modify_qp)(rv_context *c, ibv_qp *qp, const ibv_qp_attr *attr, int mask);
	int (*query_qp)(rv_context *c, ibv_qp *qp, ibv_qp_attr *attr, int mask, ibv_qp_init_attr *init);
	int (*destroy_qp)(rv_context *c, uint32_t handle);
	int (*create_ah)(rv_context *c, ibv_pd *pd, const ibv_ah_attr *attr, void *out, size_t outlen,
			 uint32_t *handle);
	int (*destroy_ah)(rv_context *c, uint32_t handle);
	/* A basic SRQ: attr->attr is answered with what it has. */
	int (*create_srq)(rv_context *c, ibv_srq_init_attr *attr, const void *in, size_t inlen, void *out,
			  size_t outlen, uint32_t *handle, uint32_t *srqn);
	int (*modify_srq)(rv_context *c, uint32_t handle, const ibv_srq_attr *attr, int mask);
	int (*query_srq)(rv_context *c, uint32_t handle, ibv_srq_attr *attr);
	int (*destroy_srq)(rv_context *c, uint32_t handle);
};

extern const rv_kernel mlx5_ib;

/* rv_provider.cc: the provider kind's operations. */
extern const rv_ops provider_ops;

/* Makes d (its port open) a provider device of kernel k: loads the
 * provider, matches and allocates its device (d.ib.listed). 0, or an
 * errno value with one line printed. (Service thread, at start.) */
int provider_attach(rv_device &d, unsigned index, const rv_kernel &k);
inline int mlx5_attach(rv_device &d, unsigned index) { return provider_attach(d, index, mlx5_ib); }

/* Opens a provider device (ibv_open_device, verbs_open_device). */
ibv_context *provider_open(ibv_device *device, void *private_data);

/* libibverbs' fields of a new CQ (verbs_init_cq). */
void verbs_init_cq_impl(ibv_cq *cq, ibv_context *ctx, ibv_comp_channel *channel, void *cq_context);

/* The kernel of a context; null for a soft context. */
const rv_kernel *kernel_of(ibv_context *c);

/* "rdgram-verbs: <what> refused by the emulated <kernel> (<ERRNO>)",
 * once per what per process, and returns e. */
int kernel_refuse(const char *kernel, const char *what, int e);

} // namespace rdgram::rv

#endif
