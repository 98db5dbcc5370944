/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The front's functions behind the verbs_context and ibv_context_ops
 * entries of a context (rv_verbs.cc fills them), and RV_EXPORT: the library is built
 * with hidden visibility, and the version script (gen_symbol_map.py) says
 * at which node each exported name goes.
 */
#ifndef RDGRAM_RV_API_H
#define RDGRAM_RV_API_H

#include <cstddef>

#include <infiniband/verbs.h>

#include "rv_nodes.h"

#define RV_EXPORT __attribute__((visibility("default")))
/* Binds the definition of name to its default node (name@@NODE, the node
 * the system's libibverbs has it at), for the names that are also
 * exported at a compat node (rv_compat.c); placed after the definition. */
#define RV_PIN(name) __asm__(".symver " #name ", " #name "@@@" RV_NODE_##name)

extern "C" {
int rv_query_port_ex(ibv_context *context, uint8_t port_num, ibv_port_attr *attr, size_t len);
int rv_query_device_ex(ibv_context *context, const ibv_query_device_ex_input *input, ibv_device_attr_ex *attr,
		       size_t attr_size);
ibv_qp *rv_create_qp_ex(ibv_context *context, ibv_qp_init_attr_ex *attr);
int rv_post_srq_recv(ibv_srq *srq, ibv_recv_wr *wr, ibv_recv_wr **bad);
ibv_mw *rv_alloc_mw(ibv_pd *pd, ibv_mw_type type);
int rv_bind_mw(ibv_qp *qp, ibv_mw *mw, ibv_mw_bind *bind);
int rv_dealloc_mw(ibv_mw *mw);
}

#endif
