/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The mlx5 address vector as the AH table holds it, and the syscall-free
 * way to build one for an InfiniBand port.
 *
 * Where the AV comes from:
 *   - RoCE (and in general): ibv_create_ah + mlx5dv_init_obj(MLX5DV_OBJ_AH)
 *     on the control thread; dv_ah.av is copied into every NUMA replica of
 *     the AH table (mlx5_device.cc). On RoCE the provider asks the kernel
 *     for the destination MAC (ibv_cmd_create_ah), which may block on ARP,
 *     and picks the RoCEv2 UDP source port at random into rlid.
 *   - InfiniBand: rdma-core's mlx5_create_ah (providers/mlx5/verbs.c) fills
 *     the AV from the attributes alone, without a system call. build_ib_av
 *     below does the same, byte for byte:
 *       stat_rate_sl = mlx5 rate code << 4 | (sl & 0xf)
 *       fl_mlid      = src_path_bits & 0x7f
 *       rlid         = htobe16(dlid)
 *       with a GRH: grh_gid_fl = htobe32(1 << 30 | sgid_index << 20 |
 *                   flow_label & 0xfffff), tclass, hop_limit, rgid = dgid
 *       everything else zero (the provider callocs the AV; key and dqp_dct
 *       are written per WQE).
 *     It is used only where that identity holds: an IB port and a
 *     static_rate inside the provider's rate table (the table below is
 *     rdma-core 44's ib_to_mlx5_rate_table; newer rates fall back to
 *     ibv_create_ah). tests/hw compares it with dv_ah.av on hardware.
 */
#ifndef RDGRAM_MLX5_AV_H
#define RDGRAM_MLX5_AV_H

#include <endian.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

namespace rdgram::mlx5 {

/* An AH table entry: the provider's 48-byte AV and whether it carries a
 * GRH (a compact 16-byte AV is possible only without one). 52 bytes: with
 * its generation it fits the table's 64-byte slot. */
struct mlx5_av {
	mlx5_wqe_av wqe;
	uint32_t global; /* 1: is_global (always on RoCE) */
};
static_assert(sizeof(mlx5_av) <= 60);

/* IB static rate (enum ibv_rate) to the mlx5 rate code, as the provider
 * maps it; 0 = unlimited. */
inline constexpr uint8_t ib_to_mlx5_rate[] = {
	0, 0, 7, 8, 9, 10, 11, 12, 13, 14, 15, 11, 13, 15, 0, 9, 15, 0, 0, 9, 13, 0, 0,
};

/*
 * Builds the AV mlx5_create_ah would build for attr on an InfiniBand port.
 * (Any thread: pure.) Returns 0, EINVAL (port_num not 1; without a GRH the
 * port requires one), or EOPNOTSUPP (a static_rate this table does not
 * know: use ibv_create_ah).
 */
inline int build_ib_av(const ibv_ah_attr &attr, bool grh_required, mlx5_av *out)
{
	if (attr.port_num != 1 || (!attr.is_global && grh_required))
		return EINVAL;
	if (attr.static_rate >= sizeof(ib_to_mlx5_rate))
		return EOPNOTSUPP;
	memset(out, 0, sizeof(*out));
	mlx5_wqe_av &av = out->wqe;
	av.fl_mlid = attr.src_path_bits & 0x7f;
	av.rlid = htobe16(attr.dlid);
	av.stat_rate_sl = uint8_t(ib_to_mlx5_rate[attr.static_rate] << 4 | (attr.sl & 0xf));
	if (attr.is_global) {
		av.tclass = attr.grh.traffic_class;
		av.hop_limit = attr.grh.hop_limit;
		av.grh_gid_fl = htobe32(1u << 30 | uint32_t(attr.grh.sgid_index) << 20 |
					(attr.grh.flow_label & 0xfffff));
		memcpy(av.rgid, attr.grh.dgid.raw, 16);
		out->global = 1;
	}
	return 0;
}

} // namespace rdgram::mlx5

#endif
