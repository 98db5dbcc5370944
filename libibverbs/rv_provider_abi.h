/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The provider interface of libibverbs.so.1 at IBVERBS_PRIVATE_34 (the
 * ABI of rdma-core v44, Debian 12's ibverbs-providers 44.0): the structs a
 * provider (libmlx5.so.1) and the library pass each other, declared here
 * from their documented layout (rdma-core's libibverbs/driver.h names
 * them; nothing of it is included or copied) and pinned below with the
 * sizes and offsets measured on x86-64 against v44's own headers.
 *
 * A provider built for another private ABI imports verbs_register_driver_NN
 * at another node and does not load (dlopen says which symbol); so every
 * provider this library meets speaks exactly this layout.
 *
 * The command structs ("ibv_get_context" and friends) are the uverbs write
 * commands of <rdma/ib_user_verbs.h>, each preceded by the 8-byte
 * ib_uverbs_cmd_hdr, as the provider lays them out in front of its driver
 * data (mlx5_alloc_ucontext = ibv_get_context + mlx5_ib_alloc_ucontext_req_v2).
 */
#ifndef RDGRAM_RV_PROVIDER_ABI_H
#define RDGRAM_RV_PROVIDER_ABI_H

#include <cstddef>
#include <cstdint>
#include <ctime>

#include <sys/types.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>

namespace rdgram::rv::pabi {

/* The private ABI version this library speaks (verbs_register_driver_34). */
inline constexpr int version = 34;

/* ccan's doubly linked list node, as embedded in the structs below. */
struct list_node {
	list_node *next, *prev;
};

/* How a provider's match table names the devices it drives. */
enum match_kind : uint8_t {
	match_sentinel = 0, /* the table's end */
	match_pci = 1,      /* vendor, device: PCI IDs */
	match_modalias = 2, /* u.modalias: an fnmatch pattern */
	match_driver_id = 3,
};

struct verbs_match_ent {
	void *driver_data;
	union {
		const char *modalias;
		uint64_t driver_id;
	} u;
	uint16_t vendor;
	uint16_t device;
	match_kind kind;
};

/* A device as the library found it in sysfs (/sys/class/infiniband_verbs):
 * what it hands the provider's match_device and alloc_device. */
struct verbs_sysfs_dev {
	list_node entry;
	void *provider_data;
	const verbs_match_ent *match; /* the table entry that matched */
	unsigned int flags;
	char sysfs_name[IBV_SYSFS_NAME_MAX]; /* uverbsN */
	dev_t sysfs_cdev;
	char ibdev_name[IBV_SYSFS_NAME_MAX]; /* mlx5_0 */
	char ibdev_path[IBV_SYSFS_PATH_MAX];
	char modalias[512];
	uint64_t node_guid; /* network order */
	uint32_t driver_id; /* enum rdma_driver_id */
	ibv_node_type node_type;
	int ibdev_idx;
	uint32_t num_ports;
	uint32_t abi_ver; /* the uverbs driver ABI (mlx5: 1) */
	timespec time_created;
};

struct verbs_device;
struct verbs_context_ops;

/* What a provider registers (verbs_register_driver_34). */
struct verbs_device_ops {
	const char *name;
	uint32_t match_min_abi_version;
	uint32_t match_max_abi_version;
	const verbs_match_ent *match_table;
	const verbs_device_ops **static_providers;
	bool (*match_device)(verbs_sysfs_dev *sysfs_dev);
	verbs_context *(*alloc_context)(ibv_device *device, int cmd_fd, void *private_data);
	verbs_context *(*import_context)(ibv_device *device, int cmd_fd);
	verbs_device *(*alloc_device)(verbs_sysfs_dev *sysfs_dev);
	void (*uninit_device)(verbs_device *device);
};

/* Every device the library lists begins with this (the provider's own
 * device struct embeds it first). */
struct verbs_device {
	ibv_device device; /* must be first */
	const verbs_device_ops *ops;
	int refcount; /* atomic_int */
	list_node entry;
	verbs_sysfs_dev *sysfs;
	uint64_t core_support;
};

/* A provider's memory region: libibverbs' fields after the ibv_mr. */
struct verbs_mr {
	ibv_mr mr; /* rdma-core names it ibv_mr */
	int mr_type; /* enum ibv_mr_type: 0 MR */
	int access;
};

/* A provider's CQ and QP: libibverbs' fields around the public ones. */
struct verbs_cq {
	union {
		ibv_cq cq;
		ibv_cq_ex cq_ex;
	};
};
struct verbs_qp {
	union {
		ibv_qp qp;
		ibv_qp_ex qp_ex;
	};
	uint32_t comp_mask;
	void *xrcd; /* verbs_xrcd */
};

/* The provider's operations, as verbs_set_ops hands them over; a null
 * entry is one the provider does not offer. (Order and types are the
 * ABI.) */
struct verbs_context_ops {
	int (*advise_mr)(ibv_pd *pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge *sg_list,
			 uint32_t num_sges);
	ibv_dm *(*alloc_dm)(ibv_context *context, ibv_alloc_dm_attr *attr);
	ibv_mw *(*alloc_mw)(ibv_pd *pd, ibv_mw_type type);
	ibv_mr *(*alloc_null_mr)(ibv_pd *pd);
	ibv_pd *(*alloc_parent_domain)(ibv_context *context, ibv_parent_domain_init_attr *attr);
	ibv_pd *(*alloc_pd)(ibv_context *context);
	ibv_td *(*alloc_td)(ibv_context *context, ibv_td_init_attr *init_attr);
	void (*async_event)(ibv_context *context, ibv_async_event *event);
	int (*attach_counters_point_flow)(ibv_counters *counters, ibv_counter_attach_attr *attr, ibv_flow *flow);
	int (*attach_mcast)(ibv_qp *qp, const ibv_gid *gid, uint16_t lid);
	int (*bind_mw)(ibv_qp *qp, ibv_mw *mw, ibv_mw_bind *mw_bind);
	int (*close_xrcd)(ibv_xrcd *xrcd);
	void (*cq_event)(ibv_cq *cq);
	ibv_ah *(*create_ah)(ibv_pd *pd, ibv_ah_attr *attr);
	ibv_counters *(*create_counters)(ibv_context *context, ibv_counters_init_attr *init_attr);
	ibv_cq *(*create_cq)(ibv_context *context, int cqe, ibv_comp_channel *channel, int comp_vector);
	ibv_cq_ex *(*create_cq_ex)(ibv_context *context, ibv_cq_init_attr_ex *init_attr);
	ibv_flow *(*create_flow)(ibv_qp *qp, ibv_flow_attr *flow_attr);
	ibv_flow_action *(*create_flow_action_esp)(ibv_context *context, ibv_flow_action_esp_attr *attr);
	ibv_qp *(*create_qp)(ibv_pd *pd, ibv_qp_init_attr *attr);
	ibv_qp *(*create_qp_ex)(ibv_context *context, ibv_qp_init_attr_ex *qp_init_attr_ex);
	ibv_rwq_ind_table *(*create_rwq_ind_table)(ibv_context *context, ibv_rwq_ind_table_init_attr *init_attr);
	ibv_srq *(*create_srq)(ibv_pd *pd, ibv_srq_init_attr *srq_init_attr);
	ibv_srq *(*create_srq_ex)(ibv_context *context, ibv_srq_init_attr_ex *srq_init_attr_ex);
	ibv_wq *(*create_wq)(ibv_context *context, ibv_wq_init_attr *wq_init_attr);
	int (*dealloc_mw)(ibv_mw *mw);
	int (*dealloc_pd)(ibv_pd *pd);
	int (*dealloc_td)(ibv_td *td);
	int (*dereg_mr)(verbs_mr *vmr);
	int (*destroy_ah)(ibv_ah *ah);
	int (*destroy_counters)(ibv_counters *counters);
	int (*destroy_cq)(ibv_cq *cq);
	int (*destroy_flow)(ibv_flow *flow);
	int (*destroy_flow_action)(ibv_flow_action *action);
	int (*destroy_qp)(ibv_qp *qp);
	int (*destroy_rwq_ind_table)(ibv_rwq_ind_table *rwq_ind_table);
	int (*destroy_srq)(ibv_srq *srq);
	int (*destroy_wq)(ibv_wq *wq);
	int (*detach_mcast)(ibv_qp *qp, const ibv_gid *gid, uint16_t lid);
	void (*free_context)(ibv_context *context);
	int (*free_dm)(ibv_dm *dm);
	int (*get_srq_num)(ibv_srq *srq, uint32_t *srq_num);
	ibv_dm *(*import_dm)(ibv_context *context, uint32_t dm_handle);
	ibv_mr *(*import_mr)(ibv_pd *pd, uint32_t mr_handle);
	ibv_pd *(*import_pd)(ibv_context *context, uint32_t pd_handle);
	int (*modify_cq)(ibv_cq *cq, ibv_modify_cq_attr *attr);
	int (*modify_flow_action_esp)(ibv_flow_action *action, ibv_flow_action_esp_attr *attr);
	int (*modify_qp)(ibv_qp *qp, ibv_qp_attr *attr, int attr_mask);
	int (*modify_qp_rate_limit)(ibv_qp *qp, ibv_qp_rate_limit_attr *attr);
	int (*modify_srq)(ibv_srq *srq, ibv_srq_attr *srq_attr, int srq_attr_mask);
	int (*modify_wq)(ibv_wq *wq, ibv_wq_attr *wq_attr);
	ibv_qp *(*open_qp)(ibv_context *context, ibv_qp_open_attr *attr);
	ibv_xrcd *(*open_xrcd)(ibv_context *context, ibv_xrcd_init_attr *xrcd_init_attr);
	int (*poll_cq)(ibv_cq *cq, int num_entries, ibv_wc *wc);
	int (*post_recv)(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad_wr);
	int (*post_send)(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad_wr);
	int (*post_srq_ops)(ibv_srq *srq, ibv_ops_wr *op, ibv_ops_wr **bad_op);
	int (*post_srq_recv)(ibv_srq *srq, ibv_recv_wr *recv_wr, ibv_recv_wr **bad_recv_wr);
	int (*query_device_ex)(ibv_context *context, const ibv_query_device_ex_input *input,
			       ibv_device_attr_ex *attr, size_t attr_size);
	int (*query_ece)(ibv_qp *qp, ibv_ece *ece);
	int (*query_port)(ibv_context *context, uint8_t port_num, ibv_port_attr *port_attr);
	int (*query_qp)(ibv_qp *qp, ibv_qp_attr *attr, int attr_mask, ibv_qp_init_attr *init_attr);
	int (*query_qp_data_in_order)(ibv_qp *qp, ibv_wr_opcode op, uint32_t flags);
	int (*query_rt_values)(ibv_context *context, ibv_values_ex *values);
	int (*query_srq)(ibv_srq *srq, ibv_srq_attr *srq_attr);
	int (*read_counters)(ibv_counters *counters, uint64_t *counters_value, uint32_t ncounters, uint32_t flags);
	ibv_mr *(*reg_dm_mr)(ibv_pd *pd, ibv_dm *dm, uint64_t dm_offset, size_t length, unsigned int access);
	ibv_mr *(*reg_dmabuf_mr)(ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
	ibv_mr *(*reg_mr)(ibv_pd *pd, void *addr, size_t length, uint64_t hca_va, int access);
	int (*req_notify_cq)(ibv_cq *cq, int solicited_only);
	int (*rereg_mr)(verbs_mr *vmr, int flags, ibv_pd *pd, void *addr, size_t length, int access);
	int (*resize_cq)(ibv_cq *cq, int cqe);
	int (*set_ece)(ibv_qp *qp, ibv_ece *ece);
	void (*unimport_dm)(ibv_dm *dm);
	void (*unimport_mr)(ibv_mr *mr);
	void (*unimport_pd)(ibv_pd *pd);
};

/* An ioctl command being built by the provider (execute_ioctl's
 * argument): the uverbs ioctl header and its attributes follow the
 * bookkeeping fields; next links a driver's attributes to a core
 * command's. */
struct ibv_command_buffer {
	ibv_command_buffer *next;
	ib_uverbs_attr *next_attr;
	ib_uverbs_attr *last_attr;
	uint8_t uhw_in_idx;
	uint8_t uhw_out_idx;
	uint8_t uhw_in_headroom_dwords;
	uint8_t uhw_out_headroom_dwords;
	uint8_t buffer_error : 1;
	uint8_t fallback_require_ex : 1;
	uint8_t fallback_ioctl_only : 1;
	ib_uverbs_ioctl_hdr hdr;
};

/* The write commands the provider hands ibv_cmd_*: header, then the
 * command of <rdma/ib_user_verbs.h>; the driver's data follows the
 * struct. */
template <typename Core> struct write_cmd {
	ib_uverbs_cmd_hdr hdr;
	Core core;
};
using ibv_get_context = write_cmd<ib_uverbs_get_context>;
using ibv_query_port = write_cmd<ib_uverbs_query_port>;
using ibv_alloc_pd = write_cmd<ib_uverbs_alloc_pd>;
using ibv_reg_mr = write_cmd<ib_uverbs_reg_mr>;
using ibv_create_cq = write_cmd<ib_uverbs_create_cq>;
using ibv_create_qp = write_cmd<ib_uverbs_create_qp>;
using ibv_modify_qp = write_cmd<ib_uverbs_modify_qp>;
using ibv_query_qp = write_cmd<ib_uverbs_query_qp>;
using ibv_create_srq = write_cmd<ib_uverbs_create_srq>;
using ibv_modify_srq = write_cmd<ib_uverbs_modify_srq>;
using ibv_query_srq = write_cmd<ib_uverbs_query_srq>;
/* The extended commands: a second header after the first. */
template <typename Core> struct ex_cmd {
	ib_uverbs_cmd_hdr hdr;
	ib_uverbs_ex_cmd_hdr ex_hdr;
	Core core;
};
using ibv_create_cq_ex = ex_cmd<ib_uverbs_ex_create_cq>;
using ibv_modify_qp_ex = ex_cmd<ib_uverbs_ex_modify_qp>;

/* The sizes and offsets of rdma-core v44 on x86-64 (measured with its
 * headers): a change here is a different ABI. */
static_assert(sizeof(void *) == 8, "the layouts below are x86-64's (LP64)");
static_assert(sizeof(verbs_match_ent) == 24);
static_assert(sizeof(verbs_sysfs_dev) == 992);
static_assert(offsetof(verbs_sysfs_dev, sysfs_cdev) == 104);
static_assert(offsetof(verbs_sysfs_dev, modalias) == 432);
static_assert(offsetof(verbs_sysfs_dev, node_guid) == 944);
static_assert(offsetof(verbs_sysfs_dev, abi_ver) == 968);
static_assert(offsetof(verbs_sysfs_dev, time_created) == 976);
static_assert(sizeof(verbs_device_ops) == 72);
static_assert(offsetof(verbs_device_ops, alloc_device) == 56);
static_assert(offsetof(verbs_device_ops, uninit_device) == 64);
static_assert(sizeof(verbs_device) == 712);
static_assert(offsetof(verbs_device, ops) == 664);
static_assert(offsetof(verbs_device, sysfs) == 696);
static_assert(offsetof(verbs_device, core_support) == 704);
static_assert(sizeof(verbs_context_ops) == 608);
static_assert(offsetof(verbs_context_ops, alloc_pd) == 40);
static_assert(offsetof(verbs_context_ops, create_cq_ex) == 128);
static_assert(offsetof(verbs_context_ops, free_context) == 312);
static_assert(offsetof(verbs_context_ops, query_device_ex) == 464);
static_assert(offsetof(verbs_context_ops, query_port) == 480);
static_assert(offsetof(verbs_context_ops, reg_mr) == 544);
static_assert(offsetof(verbs_context_ops, unimport_pd) == 600);
static_assert(sizeof(ibv_command_buffer) == 56);
static_assert(offsetof(ibv_command_buffer, hdr) == 32);
static_assert(sizeof(verbs_mr) == 56);
static_assert(offsetof(verbs_qp, comp_mask) == sizeof(ibv_qp_ex));
static_assert(sizeof(ibv_get_context) == 16);
static_assert(sizeof(ibv_query_port) == 24);
static_assert(sizeof(ibv_alloc_pd) == 16);
static_assert(sizeof(ibv_reg_mr) == 48);
static_assert(sizeof(ibv_create_cq) == 40);
static_assert(sizeof(ibv_create_cq_ex) == 56);
static_assert(sizeof(ibv_create_qp) == 64);
static_assert(sizeof(ibv_create_srq) == 40);
static_assert(sizeof(ibv_modify_srq) == 24);
static_assert(sizeof(ibv_query_srq) == 24);
/* The public verbs_context of <infiniband/verbs.h> (v44), whose priv the
 * library owns. */
static_assert(sizeof(verbs_context) == 648);
static_assert(offsetof(verbs_context, priv) == 208);

} // namespace rdgram::rv::pabi

#endif
