/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-ah's host: the AH registry and service of one soft RoCEv2 device
 * ("local"), either
 *   - on an in-process net_ring pair, whose other end is a second soft
 *     device ("peer") that answers ARP/ND for the addresses resolved
 *     dynamically (no devargs in the port table), or
 *   - on the DPDK port of the table's devargs (soft::port), whose peer is
 *     whatever program is on the other end of the link.
 * --workers poll threads each poll queue i of the device(s) (ah_engine.h);
 * set-up and tear-down (ah_setup.cc) run on the main thread.
 */
#ifndef RDGRAM_AH_HOST_H
#define RDGRAM_AH_HOST_H

#include <atomic>
#include <functional>
#include <memory>
#include <cstdint>
#include <vector>

#include "ah_app.h"
#include "rdgram/ah_service.h"
#include "rdgram/runtime.h"
#include "rdgram/telemetry.h"
#include "soft_device.h"
#include "soft_port.h"

namespace rdgram::ahtool {

inline constexpr uint32_t local_qpn = 0x300, peer_qpn = 0x301, qkey = 0x2222;

/* 10.net.host (IPv4-mapped) or fd<net>::host. */
wire::gid addr_of(bool v6, uint8_t net, uint32_t host);

struct host;
/* An AH attribute to dst with flow label flow, from the local device's
 * first address of dst's family (its sgid_index). */
ibv_ah_attr attr_to(const host &h, const wire::gid &dst, uint32_t flow);

/* The addresses a run uses: the local device's static neighbours (behind
 * the peer's MAC), the peer's own addresses (it answers ARP/ND for them),
 * inspect's destinations, and storm's and bench's. On a DPDK port, inspect
 * and storm go to c.to, and neither list of the ring pair is used. */
struct ah_dests {
	std::vector<wire::gid> statics, peer_addrs, inspect, storm;
};
/* The destinations of inspect (inspect), storm of storm_n AHs (storm) or
 * bench (neither). */
ah_dests plan_dests(const ah_app_config &c, bool inspect, bool storm, uint32_t storm_n);

/* One poll thread: queue i of both devices (on a DPDK port: of the local
 * one) (its own QPs: local_qpn +
 * 0x10 i, peer_qpn + 0x10 i), its own AH client (its view of the
 * service), its share of storm's readiness watch (keys k with k % workers
 * == i), bench's lookups as a poll thread does them, and its counters.
 * Written by its thread only while it runs. */
struct ah_worker {
	unsigned index = 0;
	lcore_cpu where{};
	soft::soft_queue ql, qp;
	bool ql_up = false, qp_up = false;
	ah_client cl;
	bool client_up = false;
	telemetry::qp_publisher pub_l, pub_p;
	/* Storm watch: set up by the modes before watching is raised. */
	std::vector<uint32_t> watch_idx; /* this worker's keys not yet seen, compacted */
	uint32_t watch_n = 0, watched = 0, seen = 0;
	uint64_t scans = 0;              /* full passes over its pending keys */
	std::atomic<bool> watch_done{false};
	/* bench: lookups until bench_end, when bench_go (host) is raised. */
	uint64_t lookups = 0, hits = 0, lookup_tsc = 0;
	std::atomic<bool> bench_done{false};
	std::atomic<uint64_t> loops{0}; /* iterations, for the hand-off */
	/* Frames left in this worker's rings when the job stopped, freed at
	 * tear-down: local -> peer, and peer -> local. */
	uint64_t left_lp = 0, left_pl = 0;
	rte_ring *ring_lp = nullptr, *ring_pl = nullptr;
	/* inspect on a DPDK port (worker 0): the datagrams handed to its AH
	 * client so far, and those received on the local QP (the peer's
	 * replies). */
	uint32_t ping_given = 0;
	std::atomic<bool> ping_done{false};
	std::atomic<uint64_t> replies{0};
};

/* Everything the modes share. */
struct host {
	host(runtime &r, const ah_app_config &cfg) : c(&cfg), rt(r) {}
	const ah_app_config *c;
	runtime &rt; /* outlives the host: its devices free EAL memory */
	/* On the ring pair: the local port and the peer's (adopted net_ring
	 * ports; the peer's control poller answers ARP/ND on the control
	 * thread). On a DPDK port: port. */
	soft::port ring_port, peer_port, port;
	soft::soft_device &peer = peer_port.device();
	/* The local device: ring_port's, or port's. */
	soft::soft_device *local = &ring_port.device();
	bool on_port = false;
	uint32_t local_qkey = qkey; /* on a port: the ping Q_Key (ah_app.h) */
	int sgid_v4 = -1, sgid_v6 = -1; /* the local GID table's first of each family */
	ah_service svc;
	bool svc_up = false;
	std::vector<std::unique_ptr<ah_worker>> workers;

	std::atomic<bool> stop{false};
	/* Storm readiness watch: set up by the modes before watching is raised. */
	const ah_key *watch_keys = nullptr;
	uint64_t *ready_tsc = nullptr;   /* per key; written by the worker watching it */
	std::atomic<bool> watching{false};
	/* bench: the keys every worker looks up, until bench_end (TSC). */
	const ah_key *bench_keys = nullptr;
	uint32_t bench_n = 0;
	uint64_t bench_end = 0;
	std::atomic<bool> bench_go{false};
	/* inspect on a DPDK port: worker 0 sends one datagram to each of
	 * ping_keys (to c.ping_qpn) once ping_go is raised. */
	const ah_key *ping_keys = nullptr;
	uint32_t ping_n = 0;
	std::atomic<bool> ping_go{false};

	/* Whether every worker finished its storm watch. */
	bool watch_done() const
	{
		for (const auto &w : workers)
			if (!w->watch_done.load(std::memory_order_acquire))
				return false;
		return true;
	}
};

/* The lcores of c.workers poll threads (apps/common/workers.h): 0, or 2
 * (printed: more than the EAL's lcores). (Main thread.) */
int pick_lcores(host &h, std::vector<lcore_cpu> *out);

/* Runs fn on the workers, their loops (ah_engine.h) polling from now on,
 * and the mode beside them (on this thread, or on a plain thread when the
 * main lcore is a worker); stops them once fn returned. fn's value, or 1
 * when a worker could not be launched. (Main thread.) */
int run_with_workers(host &h, const std::function<int()> &fn);

/* Opens both devices over a ring pair (one ring each way per worker,
 * each device with one queue per worker), or the local one on the port
 * of c.port.devargs, the service, a client per worker and telemetry; the
 * workers start in run_with_workers. dests: the mode's destinations, for
 * which the local GID table needs an address of their family. 0, or 1/2 (printed). (Main thread.) */
int bring_up(host &h, const std::vector<lcore_cpu> &lcores, const std::vector<wire::gid> &static_dests,
	     const std::vector<wire::gid> &peer_addrs, const std::vector<wire::gid> &dests);
/* (The workers stopped.) Removes the clients, stops the service, counts
 * and frees the frames left in the rings, closes the device(s). On a
 * DPDK port, the mbufs that did not come back to the port's pool before
 * it closed (printed): 0 when all did. (Main thread.) */
unsigned tear_down(host &h);

/* Drops the references the app API took, in one control-thread call
 * (destroy_ah is one round trip per AH: seconds for a storm). The same
 * registry release destroy_ah does, without its app_destroys count. */
void release_all(host &h, const std::vector<ah_handle> &hs, const std::vector<int> &errs, unsigned times = 1);

} // namespace rdgram::ahtool

#endif
