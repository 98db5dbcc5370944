/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The ibv_ah_attr the apps give create_ah for a destination addressed by
 * its GID (RoCE v2, every driver here): a GRH, port 1 (rdgram numbers a
 * device's one port 1), source GID index, hop limit and flow label as
 * asked; ibv_create_ah(3). rdgram-perf's verbs and mlx5 side builds its
 * own (perf_main.cc): on InfiniBand it addresses by LID without a GRH.
 */
#ifndef RDGRAM_APPS_AH_ATTR_H
#define RDGRAM_APPS_AH_ATTR_H

#include <cstdint>
#include <cstring>

#include <infiniband/verbs.h>

namespace rdgram::apps {

inline ibv_ah_attr gid_ah_attr(const uint8_t (&dgid)[16], uint8_t sgid_index = 0, uint8_t hop_limit = 64,
			       uint32_t flow_label = 0)
{
	ibv_ah_attr a{};
	a.is_global = 1;
	a.port_num = 1;
	a.grh.sgid_index = sgid_index;
	a.grh.hop_limit = hop_limit;
	a.grh.flow_label = flow_label;
	memcpy(a.grh.dgid.raw, dgid, 16);
	return a;
}

} // namespace rdgram::apps

#endif
