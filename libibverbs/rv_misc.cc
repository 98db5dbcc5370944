/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The rest of libibverbs' public ABI: the *_str functions, rate
 * conversions, sysfs helpers, fork support, async events and the kernel
 * ABI copy helpers, as rdma-core 44 defines them (libibverbs/verbs.c,
 * enum_strs.c, sysfs.c, marshall.c, memory.c).
 */
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_verbs.h>

#include "rv.h"
#include "rv_api.h"

using namespace rdgram::rv;

extern "C" {

RV_EXPORT const char *ibv_node_type_str(enum ibv_node_type t)
{
	static const char *const s[] = {"InfiniBand channel adapter", "InfiniBand switch", "InfiniBand router",
					"iWARP NIC", "usNIC", "usNIC UDP", "unspecified"};
	if (t < IBV_NODE_CA || t > IBV_NODE_UNSPECIFIED)
		return "unknown";
	return s[t - IBV_NODE_CA];
}

RV_EXPORT const char *ibv_port_state_str(enum ibv_port_state s)
{
	static const char *const n[] = {"no state change (NOP)", "down", "init", "armed", "active", "active deferred"};
	if (s < IBV_PORT_NOP || s > IBV_PORT_ACTIVE_DEFER)
		return "unknown";
	return n[s];
}

RV_EXPORT const char *ibv_event_type_str(enum ibv_event_type e)
{
	static const char *const n[] = {"CQ error", "local work queue catastrophic error",
		"invalid request local work queue error", "local access violation work queue error",
		"communication established", "send queue drained", "path migrated", "path migration request error",
		"local catastrophic error", "port active", "port error", "LID change", "P_Key change",
		"SM change", "SRQ catastrophic error", "SRQ limit reached", "last WQE reached",
		"client reregistration", "GID table change", "WQ fatal"};
	if (e < IBV_EVENT_CQ_ERR || e > IBV_EVENT_WQ_FATAL)
		return "unknown";
	return n[e];
}

RV_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status s)
{
	static const char *const n[] = {"success", "local length error", "local QP operation error",
		"local EE context operation error", "local protection error", "Work Request Flushed Error",
		"memory management operation error", "bad response error", "local access error",
		"remote invalid request error", "remote access error", "remote operation error",
		"transport retry counter exceeded", "RNR retry counter exceeded", "local RDD violation error",
		"remote invalid RD request", "aborted error", "invalid EE context number",
		"invalid EE context state", "fatal error", "response timeout error", "general error",
		"TM error", "TM rendezvous error"};
	if (s < IBV_WC_SUCCESS || s > IBV_WC_TM_RNDV_INCOMPLETE)
		return "unknown";
	return n[s];
}

RV_EXPORT int ibv_rate_to_mult(enum ibv_rate r)
{
	switch (r) {
	case IBV_RATE_2_5_GBPS: return 1;
	case IBV_RATE_5_GBPS: return 2;
	case IBV_RATE_10_GBPS: return 4;
	case IBV_RATE_20_GBPS: return 8;
	case IBV_RATE_30_GBPS: return 12;
	case IBV_RATE_40_GBPS: return 16;
	case IBV_RATE_60_GBPS: return 24;
	case IBV_RATE_80_GBPS: return 32;
	case IBV_RATE_120_GBPS: return 48;
	case IBV_RATE_28_GBPS: return 11;
	case IBV_RATE_50_GBPS: return 20;
	case IBV_RATE_400_GBPS: return 160;
	case IBV_RATE_600_GBPS: return 240;
	case IBV_RATE_800_GBPS: return 320;
	case IBV_RATE_1200_GBPS: return 480;
	default: return -1;
	}
}

RV_EXPORT enum ibv_rate mult_to_ibv_rate(int m)
{
	switch (m) {
	case 1: return IBV_RATE_2_5_GBPS;
	case 2: return IBV_RATE_5_GBPS;
	case 4: return IBV_RATE_10_GBPS;
	case 8: return IBV_RATE_20_GBPS;
	case 12: return IBV_RATE_30_GBPS;
	case 16: return IBV_RATE_40_GBPS;
	case 24: return IBV_RATE_60_GBPS;
	case 32: return IBV_RATE_80_GBPS;
	case 48: return IBV_RATE_120_GBPS;
	case 11: return IBV_RATE_28_GBPS;
	case 20: return IBV_RATE_50_GBPS;
	case 160: return IBV_RATE_400_GBPS;
	case 240: return IBV_RATE_600_GBPS;
	case 320: return IBV_RATE_800_GBPS;
	case 480: return IBV_RATE_1200_GBPS;
	default: return IBV_RATE_MAX;
	}
}

static const struct {
	enum ibv_rate r;
	int mbps;
} rate_mbps[] = {
	{IBV_RATE_2_5_GBPS, 2500}, {IBV_RATE_5_GBPS, 5000}, {IBV_RATE_10_GBPS, 10000},
	{IBV_RATE_20_GBPS, 20000}, {IBV_RATE_30_GBPS, 30000}, {IBV_RATE_40_GBPS, 40000},
	{IBV_RATE_60_GBPS, 60000}, {IBV_RATE_80_GBPS, 80000}, {IBV_RATE_120_GBPS, 120000},
	{IBV_RATE_14_GBPS, 14062}, {IBV_RATE_56_GBPS, 56250}, {IBV_RATE_112_GBPS, 112500},
	{IBV_RATE_168_GBPS, 168750}, {IBV_RATE_25_GBPS, 25781}, {IBV_RATE_100_GBPS, 103125},
	{IBV_RATE_200_GBPS, 206250}, {IBV_RATE_300_GBPS, 309375}, {IBV_RATE_28_GBPS, 28125},
	{IBV_RATE_50_GBPS, 53125}, {IBV_RATE_400_GBPS, 425000}, {IBV_RATE_600_GBPS, 637500},
	{IBV_RATE_800_GBPS, 850000}, {IBV_RATE_1200_GBPS, 1275000},
};

RV_EXPORT int ibv_rate_to_mbps(enum ibv_rate r)
{
	for (const auto &e : rate_mbps)
		if (e.r == r)
			return e.mbps;
	return -1;
}

RV_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (const auto &e : rate_mbps)
		if (e.mbps == mbps)
			return e.r;
	return IBV_RATE_MAX;
}

/* sysfs: rdgram's devices have no sysfs entries, and these read the real
 * sysfs (other classes a program asks for still answer). rdma-core's
 * ibv_get_sysfs_path takes nothing and returns the path (driver.h,
 * libibverbs/sysfs.c): librdmacm's rdma_create_event_channel passes its
 * result to ibv_read_sysfs_file (UCX's rdmacm module calls it). */
RV_EXPORT const char *ibv_get_sysfs_path(void)
{
	return "/sys";
}

RV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size);
	close(fd);
	if (n <= 0)
		return -1;
	if (size_t(n) < size)
		buf[n] = '\0';
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return int(n);
}

/* Fork: the DPDK port's memory cannot follow a child. ibv_fork_init(3)
 * answers as a kernel without fork support would not: 0, and the child
 * must not use verbs (rdgram-verbs(1), "fork"). */
RV_EXPORT int ibv_fork_init(void)
{
	return 0;
}

RV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_DISABLED;
}

RV_EXPORT int ibv_dontfork_range(void *, size_t)
{
	return 0;
}

RV_EXPORT int ibv_dofork_range(void *, size_t)
{
	return 0;
}

/* Async events: none is raised (no port goes down under a program; CQ
 * overruns are counted instead). A blocking read waits on the eventfd. */
RV_EXPORT int ibv_get_async_event(ibv_context *context, ibv_async_event *event)
{
	uint64_t v;
	if (read(context->async_fd, &v, sizeof(v)) != sizeof(v))
		return -1;
	memset(event, 0, sizeof(*event));
	event->event_type = IBV_EVENT_DEVICE_FATAL;
	return 0;
}
RV_PIN(ibv_get_async_event);

RV_EXPORT void ibv_ack_async_event(ibv_async_event *) {}
RV_PIN(ibv_ack_async_event);

RV_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context *, ibv_ah_attr *, uint8_t[6], uint16_t *)
{
	refuse("ibv_resolve_eth_l2_from_gid", "ibv_create_ah resolves the neighbour itself");
	return -1;
}

/* The kernel ABI copy helpers (libibverbs/marshall.c): plain field copies. */
RV_EXPORT void ibv_copy_ah_attr_from_kern(ibv_ah_attr *dst, ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

RV_EXPORT void ibv_copy_qp_attr_from_kern(ibv_qp_attr *dst, ib_uverbs_qp_attr *src)
{
	dst->cur_qp_state = ibv_qp_state(src->cur_qp_state);
	dst->path_mtu = ibv_mtu(src->path_mtu);
	dst->path_mig_state = ibv_mig_state(src->path_mig_state);
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = int(src->qp_access_flags);
	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;
	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

RV_EXPORT void ibv_copy_path_rec_from_kern(ibv_sa_path_rec *dst, ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
	dst->packet_life_time_selector = src->packet_life_time_selector;
}

RV_EXPORT void ibv_copy_path_rec_to_kern(ib_user_path_rec *dst, ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(src->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(src->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
	dst->packet_life_time_selector = src->packet_life_time_selector;
}

} /* extern "C" */
