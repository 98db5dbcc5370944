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

int flood_switch::add_publisher_port(uint16_t nq)
{
	nq_ = nq;
	std::vector<rte_ring *> rx;
	for (unsigned q = 0; q < nq; q++) {
		const std::string t = std::to_string(q);
		rx.push_back(make_ring("mc_pub_rx" + t));
		pub_tx_.push_back(make_ring("mc_pub_tx" + t));
		if (rx.back() == nullptr || pub_tx_.back() == nullptr) {
			fprintf(stderr, "rdgram-mcast: cannot create the publisher's rings\n");
			return -1;
		}
	}
	const int port = rte_eth_from_rings("mc_pub", rx.data(), nq, pub_tx_.data(), nq, 0);
	if (port < 0)
		fprintf(stderr, "rdgram-mcast: cannot create the publisher's net_ring port\n");
	return port;
}

int flood_switch::add_subscriber_port(uint16_t nq)
{
	const std::string k = std::to_string(sub_rx_.size());
	std::vector<rte_ring *> rx, tx;
	for (unsigned q = 0; q < nq; q++) {
		const std::string t = q == 0 ? k : k + "q" + std::to_string(q); /* queue 0 keeps the old names */
		rx.push_back(make_ring("mc_sub_rx" + t));
		tx.push_back(make_ring("mc_sub_tx" + t));
		if (rx.back() == nullptr || tx.back() == nullptr) {
			fprintf(stderr, "rdgram-mcast: cannot create subscriber %s's rings\n", k.c_str());
			return -1;
		}
	}
	const std::string name = "mc_sub" + k;
	const int port = rte_eth_from_rings(name.c_str(), rx.data(), nq, tx.data(), nq, 0);
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
