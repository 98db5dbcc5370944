/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The switch's set-up: rings and net_ring ports (rte_eth_from_rings).
 */
#include "mcast_switch.h"

#include <cstdio>
#include <string>

#include <rte_eth_ring.h>

namespace rdgram::mcast {

namespace {
rte_ring *make_ring(const std::string &n)
{
	return rte_ring_create(n.c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
}
} // namespace

int flood_switch::add_publisher_port()
{
	rte_ring *rx = make_ring("mc_pub_rx");
	pub_tx_ = make_ring("mc_pub_tx");
	const int port = rx && pub_tx_ ? rte_eth_from_rings("mc_pub", &rx, 1, &pub_tx_, 1, 0) : -1;
	if (port < 0)
		fprintf(stderr, "rdgram-mcast: cannot create the publisher's net_ring port\n");
	return port;
}

int flood_switch::add_subscriber_port()
{
	const std::string k = std::to_string(sub_rx_.size());
	rte_ring *rx = make_ring("mc_sub_rx" + k);
	rte_ring *tx = make_ring("mc_sub_tx" + k);
	const std::string name = "mc_sub" + k;
	const int port = rx && tx ? rte_eth_from_rings(name.c_str(), &rx, 1, &tx, 1, 0) : -1;
	if (port < 0) {
		fprintf(stderr, "rdgram-mcast: cannot create %s\n", name.c_str());
		return -1;
	}
	sub_rx_.push_back(rx);
	sub_tx_.push_back(tx);
	sub_pool_.push_back(nullptr);
	seen_.emplace_back();
	return port;
}

} // namespace rdgram::mcast
