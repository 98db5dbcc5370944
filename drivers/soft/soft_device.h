/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/soft control path: a RoCEv2 "HCA" in software on one DPDK ethdev
 * port. It owns the port set-up, the GID table (built from the configured
 * IPv4/IPv6 addresses, IPv4-mapped as RoCEv2 GID tables hold them), the AH
 * table of header templates, and QP numbering. The data path is in
 * soft_datapath.h.
 */
#ifndef RDGRAM_SOFT_DEVICE_H
#define RDGRAM_SOFT_DEVICE_H

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <rte_ether.h>
#include <rte_mempool.h>

#include "rdgram/device.h"
#include "soft_datapath.h"

namespace rdgram::soft {

struct neighbour {
	wire::gid ip;
	rte_ether_addr mac;
};

struct soft_config {
	uint16_t port_id = 0;           /* DPDK port, already probed */
	bool set_mac = false;           /* program mac into the port */
	rte_ether_addr mac{};           /* zero: the port's own */
	std::vector<wire::gid> addresses; /* GID table, index = sgid_index */
	uint16_t pkey = 0xffff;
	uint32_t mtu = 4096;            /* path MTU: 256..4096 (IB MTU enum sizes) */
	uint32_t max_ah = 65536;        /* the "device" AH table size */
	std::vector<neighbour> neighbours; /* static GID -> MAC */
	uint16_t nb_queues = 1;
	uint16_t rx_desc = 1024, tx_desc = 1024;
	uint32_t nb_mbufs = 8191;
	rte_rcu_qsbr *qsbr = nullptr;   /* poll threads' QSBR (runtime::qsbr) */
};

class soft_device final : public device {
public:
	soft_device() = default;
	~soft_device() override;

	/* Configures and starts the port, creates the mempool and AH table.
	 * (Main or control thread.) 0 or an errno value; see error(). */
	int open(const soft_config &cfg);
	void close();

	const char *driver_name() const override { return "soft"; }
	const port_attr &port() const override { return attr_; }
	ah_handle create_ah(const ibv_ah_attr &attr, int *err) override;
	int destroy_ah(ah_handle h) override;
	void reclaim() override { ahs_.reclaim(); }
	uint32_t live_ahs() const override { return ahs_.live(); }

	/* Sets up data-path queue q for one poll thread. */
	int init_queue(uint16_t q, soft_queue &out) const;
	/* Fault switch for tests: the next create_ah fails with this errno. */
	void inject_create_error(int e) { inject_err_ = e; }

	rte_mempool *mempool() const { return mp_; }
	uint16_t port_id() const { return cfg_.port_id; }
	const rte_ether_addr &mac() const { return mac_; }
	const std::string &error() const { return err_; }
	const ah_table<soft_av> &ahs() const { return ahs_; }

	/* Builds the AV for attr into av (exposed for tests). 0 or errno. */
	int build_av(const ibv_ah_attr &attr, soft_av &av) const;

private:
	soft_config cfg_{};
	port_attr attr_{};
	rte_ether_addr mac_{};
	rte_mempool *mp_ = nullptr;
	ah_table<soft_av> ahs_;
	bool started_ = false;
	int inject_err_ = 0;
	std::string err_;
};

/* Ethernet multicast address for an IP multicast group (RFC 1112 sec. 6.4,
 * RFC 2464 sec. 7). */
rte_ether_addr multicast_mac(const wire::gid &g);

} // namespace rdgram::soft

#endif
