/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The DPDK port an app runs on, named by devargs as on the EAL's --vdev or
 * -a: a port the EAL already has, or a vdev probed here. Main thread, after
 * rte_eal_init and before the poll threads.
 * (NOT thread safe)
 */
#ifndef RDGRAM_APPS_PORT_H
#define RDGRAM_APPS_PORT_H

#include <cstdint>
#include <string>

namespace rdgram::apps {

/* The port named by the first comma-separated field of devargs
 * ("net_memif0,role=server" names net_memif0). When the EAL has it
 * already (given with --vdev or -a), *port is that port and *probed false;
 * otherwise devargs is probed with rte_dev_probe and *probed is true: the
 * caller closes the port and rte_dev_remove()s it when done with it.
 * Returns 0, or an errno value with *err saying what failed (no prefix):
 *   what rte_dev_probe failed with (EINVAL for devargs no driver takes,
 *   EEXIST for a name another device already has, ...),
 *   ENODEV when the probe succeeded but made no ethdev port of that name.
 * probed may be nullptr. */
int probe_port(const std::string &devargs, uint16_t *port, std::string *err, bool *probed = nullptr);

} // namespace rdgram::apps

#endif
