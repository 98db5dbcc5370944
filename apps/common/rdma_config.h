/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The RDMA device of the verbs, mlx5 and EFA drivers as every app's
 * [rdma] table names it (rdgram-perf, rdgram-fwd, rdgram-coll):
 *
 *   [rdma]
 *   device = "rxe0"   # ibv device name; absent: the first usable one
 *   port = 1          # physical port (1..255)
 *   gid_index = 1     # source GID index of the AHs; absent: the app's choice
 *
 * plus each app's own keys, which it reads itself. open_device.h opens the
 * device from it. (Main thread, before the EAL.)
 */
#ifndef RDGRAM_APPS_RDMA_CONFIG_H
#define RDGRAM_APPS_RDMA_CONFIG_H

#include <cstdint>
#include <string>

namespace rdgram::apps {

struct rdma_device_config {
	std::string device;     /* ibv device name; "": the first usable one */
	uint32_t port = 1;      /* physical port; 0: the first active one (verbs) */
	int32_t gid_index = -1; /* sgid_index of the AHs; -1: not given */

	/* The GID index to use: the one given, else def. */
	uint8_t sgid_index(uint8_t def = 0) const { return gid_index < 0 ? def : uint8_t(gid_index); }
};

/* Reads device, port and gid_index from t, an [rdma] table_reader
 * (rdgram/config.h; a template so that this header needs no TOML), over
 * what k holds; gid_index in [min_gid_index, 255] (-1: "not given" may
 * be written). The caller reads its own keys, then t.finish(). Throws
 * config_error with file:line:column and the key. */
template <class Table> void read_rdma_keys(Table &t, rdma_device_config &k, int min_gid_index = 0)
{
	k.device = t.get_string("device", k.device);
	k.port = uint32_t(t.get_int("port", k.port, 1, 255));
	k.gid_index = int32_t(t.get_int("gid_index", k.gid_index, min_gid_index, 255));
}

} // namespace rdgram::apps

#endif
