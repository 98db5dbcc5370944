/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The one HCA capability the send path needs and verbs does not report:
 * whether the device takes the compact 16-byte UD address vector (a WQE's
 * datagram segment without the extended-AV bit: 16 bytes instead of 48, so
 * an inline 64-byte send fits in 2 blocks instead of 3). Only the device's
 * general capabilities say so (cmd_hca_cap.compact_address_vector), read
 * with a QUERY_HCA_CAP command through DevX (mlx5dv_devx_general_cmd(3)),
 * as UCX's ud_mlx5 does.
 *
 * Mailbox layouts, from the PRM as the kernel's include/linux/mlx5/
 * mlx5_ifc.h and UCX's ib_mlx5_ifc.h give them (big-endian dwords):
 * - query_hca_cap_in (16 bytes): opcode 0x100 in bits 31:16 of dword 0;
 *   op_mod in bits 15:0 of dword 1 = (capability type << 1) | current,
 *   general device capabilities being type 0.
 * - query_hca_cap_out (16 + 4096 bytes): status in bits 31:24 of dword 0,
 *   syndrome in dword 1, the capability from byte 16. In cmd_hca_cap,
 *   compact_address_vector is bit 0x200: the top bit of byte 0x40, so
 *   byte 16 + 64 of the output, mask 0x80.
 * Pure functions: tests/unit/test_mlx5_caps.cc checks them on mailboxes
 * built by hand; the query itself needs a device (tests/hw).
 */
#ifndef RDGRAM_MLX5_CAPS_H
#define RDGRAM_MLX5_CAPS_H

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rdgram::mlx5 {

inline constexpr uint16_t cmd_query_hca_cap = 0x100;
inline constexpr uint16_t hca_cap_general = 0;
inline constexpr uint16_t hca_cap_current = 1;
inline constexpr size_t query_hca_cap_in_len = 16;
inline constexpr size_t query_hca_cap_out_len = 16 + 4096;
inline constexpr size_t hca_cap_offset = 16;        /* the capability in the output */
inline constexpr size_t compact_av_byte = 0x200 / 8; /* in cmd_hca_cap */
inline constexpr uint8_t compact_av_mask = 0x80;

/* Fills the 16-byte input mailbox of QUERY_HCA_CAP for the current
 * general device capabilities. */
inline void build_query_hca_cap(uint8_t in[query_hca_cap_in_len])
{
	memset(in, 0, query_hca_cap_in_len);
	in[0] = uint8_t(cmd_query_hca_cap >> 8);
	in[1] = uint8_t(cmd_query_hca_cap);
	const uint16_t op_mod = uint16_t(hca_cap_general << 1 | hca_cap_current);
	in[6] = uint8_t(op_mod >> 8);
	in[7] = uint8_t(op_mod);
}

/* From an output mailbox of len bytes: 0 and *compact set, or EPROTO when
 * the command failed (status != 0; *syndrome gets the firmware's
 * syndrome) or the output is too short to hold the bit. */
inline int parse_hca_cap_compact_av(const uint8_t *out, size_t len, bool *compact, uint32_t *syndrome)
{
	*compact = false;
	*syndrome = 0;
	if (len < hca_cap_offset + compact_av_byte + 1)
		return EPROTO;
	if (out[0] != 0) {
		*syndrome = uint32_t(out[4]) << 24 | uint32_t(out[5]) << 16 | uint32_t(out[6]) << 8 | out[7];
		return EPROTO;
	}
	*compact = (out[hca_cap_offset + compact_av_byte] & compact_av_mask) != 0;
	return 0;
}

} // namespace rdgram::mlx5

#endif
