/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The soft driver's port keys in an app's TOML config, read the same way by
 * every app (rdgram/config.h's table_reader; errors "file:line:column: key
 * 'port.mtu': expected ..."):
 *
 *   mtu                 256, 512, 1024, 2048 or 4096 (the IB MTU sizes)
 *   pkey                1 to 0xffff
 *   max_ah              1 to 2^24
 *   resolve             true or false
 *   neigh_ttl_ms        1 to 86400000
 *   neigh_retry_ms      1 to 60000
 *   neigh_retries       1 to 100
 *   neigh_fail_hold_ms  0 to 86400000
 *   steer               "auto", "software" or "flow" (soft_params.h)
 *   vlan                1 to 4094 (802.1Q VLAN ID; absent: untagged)
 *   ecn                 true or false (ECT(0) on datagrams without ECN bits)
 *
 * Cold path: config loading, before the EAL starts. (NOT thread safe)
 */
#ifndef RDGRAM_SOFT_CONFIG_TOML_H
#define RDGRAM_SOFT_CONFIG_TOML_H

#include <cstdint>

#include "soft_params.h"

namespace rdgram {
class table_reader;
}

namespace rdgram::soft {

/* Reads the keys above that t has into p (absent keys keep p's values).
 * Marks them read and leaves finish() to the caller, whose table may hold
 * keys of its own (rdgram-fwd's [[port]] has name, device, qps, ...).
 * Throws config_error at the first bad key. */
void load_soft_port(table_reader &t, soft_port_params &p);

/* One integer key of the list above, under its own name in a table of an
 * app's own (rdgram-coll's [job] mtu, rdgram-ah's [ah] max_ah): def when
 * absent, else its value with the same range and error text as
 * load_soft_port's. name must be one of the integer keys above
 * (std::invalid_argument otherwise). */
uint32_t get_soft_key(table_reader &t, const char *name, uint32_t def);

} // namespace rdgram::soft

#endif
