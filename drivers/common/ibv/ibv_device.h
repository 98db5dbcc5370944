/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/common/ibv: the rdma-core glue of the verbs, mlx5 and EFA drivers,
 * written once (as DPDK keeps drivers/common/mlx5 and rdma-core util/). Each
 * question has one answer here, for every driver:
 *
 *   Opening a device by name (open_device): the device named, or, with no
 *     name, the first that the driver accepts (mlx5: mlx5dv_is_supported;
 *     EFA: efadv_query_device answers; verbs: any) and that has the port
 *     asked for (0: its first) in state ACTIVE. Not found: ENODEV, with the
 *     reason in words ("no RDMA device named x", "x is not an mlx5 device",
 *     "x has no active port 2", ...).
 *   The port facts (query_port): ibv_query_device, ibv_query_port, P_Key 0
 *     and the whole GID table at once (ibv_query_gid_table(3); one entry at
 *     a time with ibv_query_gid_ex(3) where the kernel lacks it), turned
 *     into port_attr by translate_port (ibv_port.h): the GIDs of the type
 *     an AH may use as its source (RoCEv2 on Ethernet, IB otherwise), every
 *     entry's type apart; max_ah the device's capped by the driver's AH
 *     table.
 *   The MTU (mtu_bytes, ibv_port.h): the five IB MTUs; any other active_mtu
 *     is refused (EINVAL at open), never guessed.
 *   The NUMA node (numa_node): sysfs (<ibdev_path>/device/numa_node); when
 *     sysfs says -1 (unknown) or has no such file, the NUMA node whose CPUs
 *     include the device's local CPUs (hwloc_ibv_get_device_cpuset) when a
 *     topology is given; otherwise SOCKET_ID_ANY (-1): no preference, as
 *     DPDK reports a device of unknown socket, which rte_malloc/mempool
 *     calls and runtime::poll_lcores take as such.
 *   Memory registration (register_mempool): one ibv_reg_mr
 *     (IBV_ACCESS_LOCAL_WRITE) per memory chunk of the mempool, all or
 *     nothing: on any failure every MR it made is deregistered and the
 *     lkey map is left as it was.
 *   The device's receive pool (device_pool): the pool the config gives,
 *     whose data room must hold headroom + the 40-byte GRH area + the MTU
 *     (EINVAL otherwise), or one made at open of that room on the device's
 *     NUMA node, which close frees.
 *   The lkey of a buffer (lkey_map, ibv_lkey_map.h): sorted, overlaps
 *     refused, bounds checked without overflow.
 *
 * (Control path: the calling thread's; none of it is for a poll loop.)
 */
#ifndef RDGRAM_IBV_DEVICE_H
#define RDGRAM_IBV_DEVICE_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <hwloc.h>
#include <infiniband/verbs.h>
#include <rte_mempool.h>

#include "ibv_lkey_map.h"
#include "ibv_port.h"
#include "rdgram/device.h"

namespace rdgram::ibv {

/* Which device open_device takes. */
struct device_match {
	std::string name;          /* ibv device name; empty: the first accepted */
	uint8_t port = 0;          /* physical port, which must be ACTIVE; 0: the first active one */
	const char *kind = "RDMA"; /* in reasons: "no <kind> device ..." */
	/* The driver's test of a device before it is opened (mlx5:
	 * mlx5dv_is_supported); empty: every device. */
	std::function<bool(ibv_device *)> accept_device;
	/* How to open it (mlx5: mlx5dv_open_device with DevX, falling back to
	 * ibv_open_device); empty: ibv_open_device. nullptr: not opened. */
	std::function<ibv_context *(ibv_device *)> open;
	/* The driver's test of an open device (EFA: efadv_query_device
	 * answers); empty: every device. */
	std::function<bool(ibv_context *)> accept_context;
};

/* Opens the device m describes. Returns the context (ctx->device stays
 * valid while it is open: ibv_open_device holds its own reference) and
 * *port, the active port chosen; nullptr with ENODEV in *err and the
 * reason in *why when no device qualifies. */
ibv_context *open_device(const device_match &m, uint8_t *port, int *err, std::string *why);

/* What query_port read, beyond port_attr, for a driver that needs more
 * (mlx5: dev.max_sge; EFA: port.max_msg_sz). */
struct port_facts {
	port_attr attr;
	std::vector<gid_kind> kinds; /* kinds[i]: the type of sgid_index i */
	ibv_device_attr dev{};
	ibv_port_attr port{};
};

/* The facts of port port_num of ctx (see the header comment). table_cap:
 * the driver's AH table size, which caps attr.max_ah; numa_node goes to
 * attr.numa_node. 0, or the errno of the verbs call that failed, or EINVAL
 * (an active MTU that is not an IB MTU); the reason in *why. */
int query_port(ibv_context *ctx, uint8_t port_num, uint32_t table_cap, int numa_node, port_facts *out,
	       std::string *why);

/* The NUMA node of dev (see the header comment); its local CPUs (OS
 * indices) in *cpus when a topology is given and cpus is not null. */
int numa_node(ibv_device *dev, hwloc_topology_t topo, std::vector<unsigned> *cpus);

/* Registers every memory chunk of mp in pd: appends the MRs to *mrs and
 * their ranges to *map. 0, or ibv_reg_mr's errno (ENOMEM when it sets
 * none), or lkey_map::add's (EEXIST: a chunk overlaps a range already in
 * map; ENOSPC: more chunks than lkey_map::max_chunks); then nothing was
 * added to either and the reason is in *why. */
int register_mempool(ibv_pd *pd, rte_mempool *mp, std::vector<ibv_mr *> *mrs, lkey_map *map, std::string *why);

/* The device's receive pool, the one policy of verbs, mlx5 and EFA: given
 * (kept, *owned false) when its data room holds RTE_PKTMBUF_HEADROOM + 40
 * (GRH) + mtu, EINVAL otherwise; else made here (*owned true: the caller
 * frees it at close), nb_mbufs of that room on NUMA node socket, named
 * <prefix><n>. 0 or an errno value (EINVAL: a room over 65535 bytes; the
 * mempool's rte_errno), the reason in *why. */
int device_pool(rte_mempool *given, uint32_t nb_mbufs, uint32_t mtu, int socket, const char *prefix,
		rte_mempool **out, bool *owned, std::string *why);

} // namespace rdgram::ibv

#endif
