/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The parts of libibverbs.so.1's ABI that no verbs program calls on an
 * rdgram device, present because binaries linked with -z now (every
 * rdma-core and perftest binary) must find every import at load:
 *
 *   IBVERBS_PRIVATE_34: the commands of the provider interface that no
 *   emulated kernel offers yet (rv_kernel.h: provider devices; the ones
 *   that are offered are in rv_uverbs.cc, the context calls in
 *   rv_provider.cc). Each fails as a kernel without the command does
 *   (EOPNOTSUPP), with one line per command; verbs_allow_disassociate_
 *   destroy is the data symbol libmlx5 reads.
 *
 *   The hidden IBVERBS_1.0 versions of the 1.1 verbs (libibverbs 1.0's
 *   struct layouts, 2006) and ibv_register_driver@IBVERBS_1.1: a program
 *   built against them is refused with one line, NULL or -1 and errno
 *   EOPNOTSUPP.
 *
 * C, not C++: these are declared here without the private rdma-core
 * headers that define their argument types (an empty parameter list takes
 * any arguments). The names come from gen_symbol_map.py's map, and
 * tests/verbs/abi_exports.sh checks that each one is exported.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define RV_EXPORT __attribute__((visibility("default")))

static void refused(const char *what)
{
	static atomic_bool said;
	if (!atomic_exchange(&said, true))
		fprintf(stderr, "rdgram-verbs: %s is not offered (provider interface or libibverbs 1.0 ABI)\n", what);
	errno = EOPNOTSUPP;
}

/* ---- IBVERBS_PRIVATE_34 ---- */

RV_EXPORT bool verbs_allow_disassociate_destroy;

/* A command no emulated kernel offers yet: one line per command, and
 * EOPNOTSUPP, as ib_uverbs answers a command the driver lacks. */
#define RV_CMD(name)                                                                                   \
	RV_EXPORT int name()                                                                           \
	{                                                                                              \
		static atomic_bool said;                                                               \
		if (!atomic_exchange(&said, true))                                                     \
			fprintf(stderr, "rdgram-verbs: %s refused by the emulated kernel (EOPNOTSUPP)\n", \
				#name);                                                                \
		errno = EOPNOTSUPP;                                                                    \
		return EOPNOTSUPP;                                                                     \
	}
RV_CMD(ibv_cmd_advise_mr)
RV_CMD(ibv_cmd_alloc_dm)
RV_CMD(ibv_cmd_alloc_mw)
RV_CMD(ibv_cmd_attach_mcast)
RV_CMD(ibv_cmd_close_xrcd)
RV_CMD(ibv_cmd_create_counters)
RV_CMD(ibv_cmd_create_flow)
RV_CMD(ibv_cmd_create_flow_action_esp)
RV_CMD(ibv_cmd_create_qp)
RV_CMD(ibv_cmd_create_qp_ex2)
RV_CMD(ibv_cmd_create_rwq_ind_table)
RV_CMD(ibv_cmd_create_srq_ex)
RV_CMD(ibv_cmd_create_wq)
RV_CMD(ibv_cmd_dealloc_mw)
RV_CMD(ibv_cmd_destroy_counters)
RV_CMD(ibv_cmd_destroy_flow)
RV_CMD(ibv_cmd_destroy_flow_action)
RV_CMD(ibv_cmd_destroy_rwq_ind_table)
RV_CMD(ibv_cmd_destroy_wq)
RV_CMD(ibv_cmd_detach_mcast)
RV_CMD(ibv_cmd_free_dm)
RV_CMD(ibv_cmd_modify_cq)
RV_CMD(ibv_cmd_modify_flow_action_esp)
RV_CMD(ibv_cmd_modify_wq)
RV_CMD(ibv_cmd_open_qp)
RV_CMD(ibv_cmd_open_xrcd)
RV_CMD(ibv_cmd_poll_cq)
RV_CMD(ibv_cmd_post_recv)
RV_CMD(ibv_cmd_post_send)
RV_CMD(ibv_cmd_post_srq_recv)
RV_CMD(ibv_cmd_query_mr)
RV_CMD(ibv_cmd_read_counters)
RV_CMD(ibv_cmd_reg_dm_mr)
RV_CMD(ibv_cmd_reg_dmabuf_mr)
RV_CMD(ibv_cmd_req_notify_cq)
RV_CMD(ibv_cmd_rereg_mr)
RV_CMD(ibv_cmd_resize_cq)
RV_CMD(ibv_read_ibdev_sysfs_file)

RV_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs)
{
	return num_attrs;
}

RV_EXPORT void __verbs_log() {}


/* ---- the hidden compat versions ---- */

#define RV_COMPAT(ret, name, ver, fail)                                                                \
	RV_EXPORT ret rv_compat_##name()                                                                \
	{                                                                                              \
		refused(#name "@" ver);                                                                \
		return fail;                                                                           \
	}                                                                                              \
	__asm__(".symver rv_compat_" #name ", " #name "@" ver);
#define RV_COMPAT_VOID(name, ver)                                                                      \
	RV_EXPORT void rv_compat_##name() { refused(#name "@" ver); }                                  \
	__asm__(".symver rv_compat_" #name ", " #name "@" ver);

RV_COMPAT_VOID(ibv_ack_async_event, "IBVERBS_1.0")
RV_COMPAT_VOID(ibv_ack_cq_events, "IBVERBS_1.0")
RV_COMPAT(void *, ibv_alloc_pd, "IBVERBS_1.0", NULL)
RV_COMPAT(int, ibv_attach_mcast, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT(int, ibv_close_device, "IBVERBS_1.0", -1)
RV_COMPAT(void *, ibv_create_ah, "IBVERBS_1.0", NULL)
RV_COMPAT(void *, ibv_create_cq, "IBVERBS_1.0", NULL)
RV_COMPAT(void *, ibv_create_qp, "IBVERBS_1.0", NULL)
RV_COMPAT(void *, ibv_create_srq, "IBVERBS_1.0", NULL)
RV_COMPAT(int, ibv_dealloc_pd, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT(int, ibv_dereg_mr, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT(int, ibv_destroy_ah, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT(int, ibv_destroy_cq, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT(int, ibv_destroy_qp, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT(int, ibv_destroy_srq, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT(int, ibv_detach_mcast, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT_VOID(ibv_free_device_list, "IBVERBS_1.0")
RV_COMPAT(int, ibv_get_async_event, "IBVERBS_1.0", -1)
RV_COMPAT(int, ibv_get_cq_event, "IBVERBS_1.0", -1)
RV_COMPAT(uint64_t, ibv_get_device_guid, "IBVERBS_1.0", 0)
RV_COMPAT(void *, ibv_get_device_list, "IBVERBS_1.0", NULL)
RV_COMPAT(const char *, ibv_get_device_name, "IBVERBS_1.0", NULL)
RV_COMPAT(int, ibv_modify_qp, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT(int, ibv_modify_srq, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT(void *, ibv_open_device, "IBVERBS_1.0", NULL)
RV_COMPAT(int, ibv_query_device, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT(int, ibv_query_gid, "IBVERBS_1.0", -1)
RV_COMPAT(int, ibv_query_pkey, "IBVERBS_1.0", -1)
RV_COMPAT(int, ibv_query_port, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT(int, ibv_query_qp, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT(int, ibv_query_srq, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT(void *, ibv_reg_mr, "IBVERBS_1.0", NULL)
RV_COMPAT(int, ibv_resize_cq, "IBVERBS_1.0", EOPNOTSUPP)
RV_COMPAT_VOID(ibv_register_driver, "IBVERBS_1.1")
