/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/soft control path: a RoCEv2 "HCA" in software on one DPDK ethdev
 * port. It owns the port set-up, the GID table (built from the configured
 * IPv4/IPv6 addresses, IPv4-mapped as RoCEv2 GID tables hold them), the AH
 * table of header templates, QP numbering, and neighbour resolution (ARP and
 * ND, soft_neigh.h). The data path is in soft_datapath.h.
 *
 * Threads: open/close on the main or control thread; every other method of
 * soft_device on the control thread (poll() as a control_thread poller, see
 * control_poller). Neighbour frames travel between the two over rte_rings:
 * poll threads hand ARP/ND frames in, and the poll thread of queue 0 sends
 * the control thread's requests and replies, so dynamic resolution needs
 * queue 0 to be polled.
 */
#ifndef RDGRAM_SOFT_DEVICE_H
#define RDGRAM_SOFT_DEVICE_H

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <rte_ether.h>
#include <rte_mempool.h>

struct rte_flow;

#include "rdgram/dest_cache.h"
#include "rdgram/device.h"
#include "rdgram/queue_params.h"
#include "soft_datapath.h"
#include "soft_neigh.h"
#include "soft_params.h"

namespace rdgram::soft {

/* pkey, mtu, max_ah and neighbour resolution: soft_port_params, what an
 * app's config sets (soft_config_toml.h reads them). */
struct soft_config : soft_port_params {
	soft_config() = default;
	/* What an app's config set (its [port] table), the rest defaults. */
	explicit soft_config(const soft_port_params &p) : soft_port_params(p) {}

	uint16_t port_id = 0;           /* DPDK port, already probed */
	bool set_mac = false;           /* program mac into the port */
	rte_ether_addr mac{};           /* zero: the port's own */
	std::vector<wire::gid> addresses; /* GID table, index = sgid_index */
	std::vector<neighbour> neighbours; /* static GID -> MAC, never expire */
	uint16_t nb_queues = 1;
	uint16_t rx_desc = 1024, tx_desc = 1024;
	/* The device's mempool (device.h): the port's receive buffers and
	 * the neighbour frames. nullptr: open makes one of nb_mbufs on the
	 * port's NUMA node and close frees it; given: the caller keeps it
	 * (its data room must hold what the MTU, min_data_room and the PMD
	 * need: open says which fell short, EINVAL). The data room open
	 * gives its own pool is the largest of: headroom + the MTU's largest
	 * frame; headroom + min_data_room; headroom + what the PMD copies
	 * into each receive buffer (rte_eth_dev_info min_rx_bufsize; DPDK
	 * 22.11's net_af_packet: its framesz, 2048 by default, less its
	 * 32-byte tpacket2 header; net_af_xdp: its 2048-byte umem frame). */
	rte_mempool *pool = nullptr;
	uint32_t nb_mbufs = 8191;
	/* Data room of every mbuf at least this (0: what the MTU and the PMD
	 * need). */
	uint32_t min_data_room = 0;
	rte_rcu_qsbr *qsbr = nullptr;   /* poll threads' QSBR (runtime::qsbr) */
	/* NUMA nodes that host this port's poll threads (replica_nodes()):
	 * one AV replica on each. Empty: one, on the port's node. */
	std::vector<int> av_nodes;
	/* EFA receive semantics (efadv, libfabric's EFA provider): a receive's
	 * wc.slid carries the receiver's AH number (ahn: the AH table slot) for
	 * the sender's GID, or 0xFFFF when the receiver has no AH for it; the
	 * sender's GID is in wc.sgid either way. Needs max_ah <= 65535. */
	bool report_ahn = false;
};

class soft_device final : public device {
public:
	soft_device() = default;
	~soft_device() override;

	/* Configures and starts the port, creates the mempool (unless
	 * cfg.pool), the AH table and the neighbour rings. (Main or control
	 * thread.) 0 or an errno value; see error(). A port that cuts frames
	 * below the MTU's largest (net_af_packet: its framesz, or the
	 * interface's MTU) opens with one WARNING naming the limit and the
	 * largest payload that passes: larger datagrams are lost there. */
	int open(const soft_config &cfg);
	/* Stops the port and frees everything, frames still in the neighbour
	 * rings included. No poll thread may use a queue and the device must
	 * no longer be a control_thread poller. */
	void close();

	const char *driver_name() const override { return "soft"; }
	const port_attr &port() const override { return attr_; }
	/* create_ah never blocks: the neighbour must be known already
	 * (static, reachable or stale); EHOSTUNREACH while it is not (absent
	 * or being resolved: see prepare_ah), ETIMEDOUT when it never
	 * answered. */
	ah_handle create_ah(const ibv_ah_attr &attr, int *err) override;
	int destroy_ah(ah_handle h) override;
	void reclaim() override { ahs_.reclaim(); }
	uint32_t live_ahs() const override { return ahs_.live(); }
	/* Frees the ARP/ND frames still in flight between the poll threads and
	 * the control thread (close() does the same); returns how many. For an
	 * orderly stop: call it after the poll threads stopped, on the control
	 * thread, before checking that every mbuf is back in its pool. */
	unsigned drain_control_frames();
	uint32_t reclaim_pending() const override { return ahs_.retired_waiting(); }
	/* device.h semantics. 0: multicast, or a static, reachable or stale
	 * neighbour; EINPROGRESS: resolving (a first request goes out when
	 * the entry is new, or when a failure's hold time is over);
	 * ETIMEDOUT: no answer after neigh_retries requests, for
	 * neigh_fail_hold_ms; EHOSTUNREACH: unknown and resolve is off;
	 * EINVAL: as create_ah. */
	int prepare_ah(const ibv_ah_attr &attr) override;
	/* Drains the neighbour frames poll threads handed over, retransmits,
	 * moves TTLs on, reclaims AH slots. true when it did any work. */
	bool poll(uint64_t now) override;
	/* control_thread::add_poller adapter: arg is the soft_device. */
	static bool control_poller(void *dev, uint64_t now)
	{
		return static_cast<soft_device *>(dev)->poll(now);
	}

	/* Neighbour counters and entries. (Control thread.) */
	const soft::neigh_stats &neigh_stats() const { return neigh_.stats(); }
	bool neighbour_info(const wire::gid &ip, neigh_info *out) const { return neigh_.info(ip, out); }
	size_t nb_neighbours() const { return neigh_.size(); }

	/* Group membership on the wire (control thread). join_mcast sends an
	 * IGMPv2 Membership Report (RFC 2236; IPv4-mapped group) or an MLDv2
	 * Report with a CHANGE_TO_EXCLUDE({}) record (RFC 3810; IPv6 group)
	 * the first time g is joined; leave_mcast sends the IGMPv2 Leave Group
	 * to 224.0.0.2 or the MLDv2 CHANGE_TO_INCLUDE({}) record when the last
	 * join of g is left. Joins are counted per group; a QP receives the
	 * group once soft_queue::attach_mcast is done as well (rdma_cm's
	 * rdma_join_multicast followed by ibv_attach_mcast). Frames go out
	 * through queue 0 like ARP/ND, so queue 0 must be polled. The source
	 * address is the port's first address of the family (MLD wants a
	 * link-local one: configure it first for a real MLD router). 0;
	 * EINVAL: g not multicast, or the port has no address of its family;
	 * leave: EINVAL when g is not joined; ENOBUFS: no mbuf or the
	 * control-TX ring is full (the membership is changed anyway; periodic
	 * reports to a querier are not sent: a querier times the group out). */
	int join_mcast(const wire::gid &g);
	int leave_mcast(const wire::gid &g);
	struct mcast_stats {
		uint64_t igmp_reports = 0, igmp_leaves = 0; /* IGMPv2 frames queued */
		uint64_t mld_reports = 0, mld_leaves = 0;   /* MLDv2 reports queued */
		uint64_t tx_failed = 0;                     /* ENOBUFS */
	};
	const mcast_stats &mcast_counters() const { return mst_; }

	/* The queue contract (device.h, queue_params.h). */
	using queue_type = soft_queue;
	/* Sets up q on the port's RX/TX queue pair p.index for a poll thread
	 * on NUMA node p.socket (its AV replica). 0; EINVAL: p.index is not
	 * below nb_queues, or a field soft cannot honour: qkey (Q_Keys are per
	 * QP, soft_queue::add_qp), sq_depth/rq_depth other than the port's
	 * descriptor counts (fixed at open), max_inline, signal_every,
	 * recv_batch (soft builds every frame in an mbuf, has no send
	 * completions, and the PMD fills its receive ring itself); EBUSY:
	 * that queue pair has a live queue (destroy_queue it first); ENODEV:
	 * not open. See error(). */
	int create_queue(const queue_params &p, soft_queue &q);
	/* Frees the frames q still holds for the port (tx_flush first to
	 * send them), and those other queues handed to it that it never took
	 * (counted: handoff_freed), and makes its queue pair free for
	 * create_queue. No poll thread may use q any more. */
	void destroy_queue(soft_queue &q);
	/* Nothing to register: the PMD sends from any mempool. 0, or EINVAL
	 * for nullptr. */
	int register_mempool(rte_mempool *mp) const { return mp != nullptr ? 0 : EINVAL; }
	/* How datagrams reach their QP's queue (nb_queues > 1): "rte_flow
	 * (...)" when the port took a rule per address (soft_params.h,
	 * steer), else "software (why)": the port's own spread and the
	 * hand-off. Empty with one queue. For an app's start-up line. */
	const std::string &steering() const { return steering_; }
	/* The queue rte_flow puts datagrams to address sgid_index on. */
	uint16_t queue_of_address(unsigned sgid_index) const { return uint16_t(sgid_index % cfg_.nb_queues); }
	/* Frames handed between queues (steering, soft_steer.h) that their
	 * queue never took: freed by destroy_queue and close. */
	uint64_t handoff_freed() const { return handoff_freed_; }
	/* The port's descriptor counts, as the PMD adjusted them at open. */
	uint16_t rx_desc() const { return nrx_; }
	uint16_t tx_desc() const { return ntx_; }
	/* Fault switch for tests: the next count create_ah calls fail with
	 * errno e (count 0 or e 0: off). (Control thread, like create_ah; a
	 * control-path branch, so it stays in every build: fault.h.) */
	void inject_create_error(int e, uint32_t count = 1)
	{
		inject_err_ = e;
		inject_left_ = e != 0 ? count : 0;
	}
	/* create_ah calls failed by the switch so far. (Control thread.) */
	uint64_t injected_create_errors() const { return injected_; }

	rte_mempool *mempool() const { return mp_; }
	/* Frames waiting in the control rings (poll threads -> control thread
	 * and back): mbufs out of the pool that close() gives back. (Once the
	 * poll threads and the control poller stopped.) */
	unsigned control_frames() const
	{
		return (ctl_rx_ != nullptr ? rte_ring_count(ctl_rx_) : 0) + (ctl_tx_ != nullptr ? rte_ring_count(ctl_tx_) : 0);
	}
	uint16_t port_id() const { return cfg_.port_id; }
	/* open started the port (and close stops it, unless its owner
	 * closed it first). */
	bool port_started() const { return started_; }
	const rte_ether_addr &mac() const { return mac_; }
	const std::string &error() const { return err_; }
	/* A VLAN port whose PMD inserts the 802.1Q tag (open enabled
	 * RTE_ETH_TX_OFFLOAD_VLAN_INSERT); false: TX writes it. */
	bool vlan_tx_offload() const { return vlan_tx_offload_; }
	const ah_table<soft_av> &ahs() const { return ahs_; }

	/* Builds the AV for attr into av (exposed for tests). 0 or errno. */
	int build_av(const ibv_ah_attr &attr, soft_av &av) const
	{
		uint32_t id;
		return make_av(attr, av, &id);
	}

private:
	/* ibv_create_ah(3)'s EINVAL cases; dg gets the destination. */
	int check_attr(const ibv_ah_attr &attr, wire::gid &dg) const;
	/* The AV and the neighbour entry it uses (UINT32_MAX: multicast). */
	int make_av(const ibv_ah_attr &attr, soft_av &av, uint32_t *neigh_id) const;

	soft_config cfg_{};
	port_attr attr_{};
	rte_ether_addr mac_{};
	rte_mempool *mp_ = nullptr;
	bool own_mp_ = false;
	bool vlan_tx_offload_ = false; /* the port inserts 802.1Q tags (open) */
	uint16_t nrx_ = 0, ntx_ = 0;
	std::vector<bool> queue_live_; /* by port queue pair: a live soft_queue */
	soft_steer steer_;             /* between the queues: nb_queues > 1 */
	std::vector<rte_flow *> flows_; /* steer: a rule per address */
	std::string steering_;
	int install_flows(std::string *why);
	void remove_flows();
	uint64_t handoff_freed_ = 0;
	ah_table<soft_av> ahs_;
	neigh_table neigh_;
	/* report_ahn: sender GID -> one live AH to it, read by poll threads;
	 * the control thread's list of live slots per GID and GID per slot. */
	dest_cache ahn_by_gid_;
	std::unordered_map<wire::gid, std::vector<uint32_t>, gid_hash> ahs_by_gid_;
	std::vector<wire::gid> gid_of_slot_;
	void ahn_add(uint32_t slot, uint32_t gen, const wire::gid &g);
	void ahn_remove(uint32_t slot);
	/* IGMP/MLD: joins per group, counters, report builder. */
	std::unordered_map<wire::gid, uint32_t, gid_hash> joined_;
	mcast_stats mst_{};
	int send_membership(const wire::gid &g, bool join);
	rte_ring *ctl_rx_ = nullptr; /* poll threads -> control: ARP/ND frames */
	rte_ring *ctl_tx_ = nullptr; /* control -> queue 0: frames to send */
	bool started_ = false;
	int inject_err_ = 0;
	uint32_t inject_left_ = 0;
	uint64_t injected_ = 0;
	std::string err_;
};

/* Ethernet multicast address for an IP multicast group (RFC 1112 sec. 6.4,
 * RFC 2464 sec. 7). */
rte_ether_addr multicast_mac(const wire::gid &g);

} // namespace rdgram::soft

#endif
