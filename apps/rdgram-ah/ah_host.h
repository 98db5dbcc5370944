/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-ah's host: the AH registry and service of one soft RoCEv2 device
 * ("local") whose peer (a second soft device, "peer") sits on the other end
 * of an in-process net_ring pair and answers ARP/ND for the addresses that
 * are resolved dynamically. One worker lcore polls both queues
 * (ah_engine.h); set-up and tear-down (ah_setup.cc) run on the main thread.
 */
#ifndef RDGRAM_AH_HOST_H
#define RDGRAM_AH_HOST_H

#include <atomic>
#include <cstdint>
#include <vector>

#include "ah_app.h"
#include "rdgram/ah_service.h"
#include "rdgram/runtime.h"
#include "rdgram/telemetry.h"
#include "soft_device.h"

namespace rdgram::ahtool {

inline constexpr uint32_t local_qpn = 0x300, peer_qpn = 0x301, qkey = 0x2222;

/* 10.net.host (IPv4-mapped) or fd<net>::host. */
wire::gid addr_of(bool v6, uint8_t net, uint32_t host);
/* An AH attribute to dst with flow label flow. */
ibv_ah_attr attr_to(const wire::gid &dst, uint32_t flow);

/* The addresses a run uses: the local device's static neighbours (behind
 * the peer's MAC), the peer's own addresses (it answers ARP/ND for them),
 * and storm's and bench's destinations. */
struct ah_dests {
	std::vector<wire::gid> statics, peer_addrs, storm;
};
/* The destinations of inspect (inspect), storm of storm_n AHs (storm) or
 * bench (neither). */
ah_dests plan_dests(const ah_app_config &c, bool inspect, bool storm, uint32_t storm_n);

/* Everything the modes share. */
struct host {
	host(runtime &r, const ah_app_config &cfg) : c(&cfg), rt(r) {}
	const ah_app_config *c;
	runtime &rt; /* outlives the host: its devices free EAL memory */
	soft::soft_device local, peer;
	soft::soft_queue ql, qp;
	ah_service svc;
	ah_client cl;
	bool svc_up = false, client_up = false, peer_polled = false;
	telemetry::qp_publisher pub_l, pub_p;
	lcore_cpu worker{};
	bool worker_running = false;

	/* Worker state. */
	std::atomic<bool> stop{false};
	/* Storm readiness watch: set up by main before watching is raised. */
	const ah_key *watch_keys = nullptr;
	uint64_t *ready_tsc = nullptr;   /* per key; written by the worker */
	uint32_t *watch_idx = nullptr;   /* keys not yet seen, compacted */
	uint32_t watch_n = 0;
	uint64_t scans = 0;              /* full passes over the pending keys */
	std::atomic<bool> watching{false}, watch_done{false};
	std::atomic<uint64_t> loops{0}; /* worker iterations, for the hand-off */
};

/* Opens both devices over a ring pair, the service and the worker (ah_engine.h).
 * 0, or 1/2 (printed). (Main thread.) */
int bring_up(host &h, const std::vector<wire::gid> &static_dests, const std::vector<wire::gid> &peer_addrs);
/* Stops the worker, the client and service, closes both devices. (Main thread.) */
void tear_down(host &h);

/* Drops the references the app API took, in one control-thread call
 * (destroy_ah is one round trip per AH: seconds for a storm). The same
 * registry release destroy_ah does, without its app_destroys count. */
void release_all(host &h, const std::vector<ah_handle> &hs, const std::vector<int> &errs, unsigned times = 1);

} // namespace rdgram::ahtool

#endif
