/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/mlx5/mlx5_caps.h without a device: the QUERY_HCA_CAP input
 * mailbox byte for byte, and the compact-AV bit read from output mailboxes
 * built by hand at the PRM's offsets (status, syndrome, cmd_hca_cap at
 * byte 16, compact_address_vector = bit 0x200 of it). The command itself
 * runs in tests/hw/test_mlx5_hw.cc on a device.
 */
#include <cerrno>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "mlx5_caps.h"

using namespace rdgram::mlx5;

namespace {

/* A big-endian bit field write at PRM bit offset `bit` (bit 0 = MSB of
 * byte 0), as the kernel's MLX5_SET does, written independently of the
 * header's byte/mask constants. */
void set_bits(uint8_t *p, unsigned bit, unsigned width, uint32_t v)
{
	for (unsigned i = 0; i < width; i++) {
		const unsigned b = bit + i;
		const uint8_t m = uint8_t(0x80 >> (b % 8));
		if ((v >> (width - 1 - i)) & 1)
			p[b / 8] |= m;
		else
			p[b / 8] &= uint8_t(~m);
	}
}

} // namespace

TEST(Mlx5Caps, QueryHcaCapInputMailbox)
{
	uint8_t in[query_hca_cap_in_len];
	memset(in, 0xee, sizeof(in));
	build_query_hca_cap(in);
	uint8_t want[16] = {};
	set_bits(want, 0x00, 16, 0x100); /* opcode */
	set_bits(want, 0x30, 16, 0x1);   /* op_mod: general caps (0) << 1 | current (1) */
	EXPECT_EQ(memcmp(in, want, sizeof(want)), 0);
}

TEST(Mlx5Caps, CompactAvBitAtPrmOffset)
{
	std::vector<uint8_t> out(query_hca_cap_out_len, 0);
	bool compact = true;
	uint32_t syn = 1;
	ASSERT_EQ(parse_hca_cap_compact_av(out.data(), out.size(), &compact, &syn), 0);
	EXPECT_FALSE(compact);
	/* capability at bit 0x80 of the output, compact_address_vector at bit
	 * 0x200 of cmd_hca_cap */
	set_bits(out.data(), 0x80 + 0x200, 1, 1);
	ASSERT_EQ(parse_hca_cap_compact_av(out.data(), out.size(), &compact, &syn), 0);
	EXPECT_TRUE(compact);
	/* Its neighbours do not count: striding_rq (0x201) and cqe_version
	 * (0x1fc..0x1ff) set, compact clear. */
	set_bits(out.data(), 0x80 + 0x200, 1, 0);
	set_bits(out.data(), 0x80 + 0x201, 1, 1);
	set_bits(out.data(), 0x80 + 0x1fc, 4, 0xf);
	ASSERT_EQ(parse_hca_cap_compact_av(out.data(), out.size(), &compact, &syn), 0);
	EXPECT_FALSE(compact);
}

TEST(Mlx5Caps, FailedCommandAndShortOutput)
{
	std::vector<uint8_t> out(query_hca_cap_out_len, 0);
	set_bits(out.data(), 0x80 + 0x200, 1, 1);
	set_bits(out.data(), 0x00, 8, 0x3);          /* status: bad parameter */
	set_bits(out.data(), 0x20, 32, 0x12345678u); /* syndrome */
	bool compact = true;
	uint32_t syn = 0;
	EXPECT_EQ(parse_hca_cap_compact_av(out.data(), out.size(), &compact, &syn), EPROTO);
	EXPECT_FALSE(compact); /* never trusted from a failed command */
	EXPECT_EQ(syn, 0x12345678u);
	out.assign(16 + 64, 0);
	EXPECT_EQ(parse_hca_cap_compact_av(out.data(), out.size(), &compact, &syn), EPROTO);
	out.resize(16 + 65);
	EXPECT_EQ(parse_hca_cap_compact_av(out.data(), out.size(), &compact, &syn), 0);
}
