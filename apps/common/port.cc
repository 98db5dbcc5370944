/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "port.h"

#include <cstring>

#include <rte_dev.h>
#include <rte_ethdev.h>

namespace rdgram::apps {

int probe_port(const std::string &devargs, uint16_t *port, std::string *err, bool *probed)
{
	if (probed != nullptr)
		*probed = false;
	const std::string name = devargs.substr(0, devargs.find(','));
	if (rte_eth_dev_get_port_by_name(name.c_str(), port) == 0)
		return 0; /* given to the EAL (--vdev, -a) */
	if (int rc = rte_dev_probe(devargs.c_str()); rc < 0) {
		/* DPDK 22.11's net_af_packet joins the PACKET_FANOUT group
		 * (getpid() ^ ifindex) & 0xffff: two processes in one network
		 * namespace can collide, and the probe then fails. */
		const bool afp = devargs.rfind("net_af_packet", 0) == 0 || devargs.rfind("eth_af_packet", 0) == 0;
		*err = "cannot probe '" + devargs + "': " + strerror(-rc);
		if (afp)
			*err += " (if the PMD said PACKET_FANOUT: another process of this namespace has the same "
				"fanout group, (pid ^ ifindex) & 0xffff; give the veths other ifindexes, as "
				"tests/integration/lib.sh fabric_up does)";
		return -rc;
	}
	if (rte_eth_dev_get_port_by_name(name.c_str(), port) != 0) {
		*err = "'" + devargs + "' created no ethdev port named '" + name + "'";
		return ENODEV;
	}
	if (probed != nullptr)
		*probed = true;
	return 0;
}

} // namespace rdgram::apps
