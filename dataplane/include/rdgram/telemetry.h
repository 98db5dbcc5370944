/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Live telemetry: DPDK telemetry commands under /rdgram/ that
 * dpdk-telemetry.py (or any client of the v2 socket) reads from a running
 * app, and rte_log log types per component.
 *
 *   /rdgram/lcores   poll lcores: role, CPU, NUMA node
 *   /rdgram/ports    ports: driver, DPDK port, MAC, GIDs, MTU, ethdev totals
 *   /rdgram/qps      per QP: its driver and every counter of the driver's set
 *                    (stats.h: each named drop reason, any driver), the
 *                    drop sums by the rule, plus the AH client's counters
 *                    when it has one; "/rdgram/qps,NAME" for one QP
 *   /rdgram/xstats   "/rdgram/xstats,NAME": one QP's counters as DPDK's
 *                    xstats, each with its kind and description
 *   /rdgram/ah       AH registry summary: live, capacity, unreferenced,
 *                    evictions, memory, reclaim-pending, service figures
 *   /rdgram/pending  the AH clients' pending queues: waiting messages and
 *                    destinations, hits/misses, every pend_* drop reason
 *
 * Who reads what. Telemetry callbacks run on DPDK's telemetry thread, which
 * may read nothing a poll thread or the control thread owns. So every figure
 * is published for it:
 *
 *  - a poll thread copies its counters into its qp_publisher (a seqlock:
 *    relaxed atomic stores between two sequence increments; no syscall, no
 *    lock, no allocation) when publish_due() says so, every publish_interval
 *    (10 ms) at most. A reader retries until it sees an even, unchanged
 *    sequence: one QP's figures are one consistent copy of that QP's
 *    counters, at most one interval plus one loop iteration old. Different
 *    QPs are published independently (no cross-QP snapshot).
 *  - the AH figures are the control thread's (registry, device, service
 *    statistics): a control_thread poller that attach() installs copies them
 *    into a seqlock every 100 ms. The telemetry thread never waits for the
 *    control thread, so a slow AH storm cannot stall a telemetry client.
 *  - lcores and ports are copied at attach() (they do not change while a
 *    run is attached); ethdev totals come from rte_eth_stats_get, as DPDK's
 *    own /ethdev/stats reads them from the same thread.
 *
 * The socket. DPDK creates <runtime dir>/dpdk_telemetry.v2 during
 * rte_eal_init with the process umask; anyone who can connect may read every
 * counter (and run every command DPDK registers). Apps call rt.init under a
 * private_umask (so the socket is born 0600 in a 0700 directory) and then
 * secure_socket(), which chmods both explicitly (readable by its
 * owner only).
 */
#ifndef RDGRAM_TELEMETRY_H
#define RDGRAM_TELEMETRY_H

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <type_traits>
#include <vector>

#include <rte_cycles.h>
#include <rte_log.h>

#include "rdgram/log.h"
#include "rdgram/stats.h"

namespace rdgram {

class ah_client;
class ah_registry;
class ah_service;
class control_thread;
class device;
struct ah_client_counters;

/* Log types and RDGRAM_LOG: rdgram/log.h. */
namespace telemetry {

/* ---- poll-thread publication -------------------------------------------- */

/* What one QP publishes: its driver's counter set (stats.h) as the table's
 * address and the values in table order, and, when it sends through an AH
 * client, the client's counters. */
inline constexpr unsigned max_xstats = 48;
struct qp_snapshot {
	uint64_t names;    /* const xstat_name *: the driver's static table */
	uint64_t driver;   /* const char *: its driver's name */
	uint64_t n_xstats; /* entries of names and xstat */
	uint64_t xstat[max_xstats];
	uint64_t client[16]; /* ah_client_counters words (see telemetry.cc) */
	uint32_t waiting_messages, waiting_destinations;
	uint32_t has_client;
	uint32_t pad;
	uint64_t published_tsc; /* rte_get_tsc_cycles() at publication */

	const xstat_name *table() const { return reinterpret_cast<const xstat_name *>(uintptr_t(names)); }
	const char *driver_name() const { return reinterpret_cast<const char *>(uintptr_t(driver)); }
	/* f(const xstat_name &, uint64_t value) for every counter. */
	template <class F> void for_each(F &&f) const
	{
		const xstat_name *t = table();
		for (unsigned i = 0; i < n_xstats; i++)
			f(t[i], xstat[i]);
	}
	/* The counter called name; 0 when the driver has none of that name. */
	uint64_t value(const char *name) const
	{
		const xstat_name *t = table();
		for (unsigned i = 0; i < n_xstats; i++)
			if (strcmp(t[i].name, name) == 0)
				return xstat[i];
		return 0;
	}
	/* The drops by the rule (stats.h). */
	uint64_t drops(drop_side side = drop_side::any) const
	{
		return xstat_drops(table(), xstat, unsigned(n_xstats), side);
	}
};
static_assert(std::is_trivially_copyable_v<qp_snapshot>);
static_assert(sizeof(qp_snapshot) % 8 == 0);
static_assert(sizeof(uintptr_t) <= sizeof(uint64_t));

/*
 * One QP's published counters: one writer (the poll thread owning the QP),
 * any number of readers. (publish: the owning poll thread only; read: any
 * thread.)
 */
class qp_publisher {
public:
	static constexpr double publish_interval_s = 0.01;

	qp_publisher() { interval_ = uint64_t(publish_interval_s * double(rte_get_tsc_hz())); }
	qp_publisher(const qp_publisher &) = delete;
	qp_publisher &operator=(const qp_publisher &) = delete;

	/* True when the last publication is publish_interval old. */
	bool publish_due(uint64_t now) const { return now >= next_; }

	/* Copies the counters of a driver's set (and the client's, if any)
	 * for readers. (Owning poll thread.) */
	template <counter_set S> void publish(const S &c, const ah_client *cl, uint64_t now)
	{
		static_assert(S::xstat_count <= max_xstats, "raise telemetry::max_xstats");
		qp_snapshot s;
		memset(&s, 0, sizeof(s));
		s.names = uintptr_t(S::xstat_names);
		s.driver = uintptr_t(S::driver);
		s.n_xstats = S::xstat_count;
		c.xstat_values(s.xstat);
		publish_snapshot(s, cl, now);
	}
	/* publish_due then publish. */
	template <counter_set S> void maybe_publish(const S &c, const ah_client *cl, uint64_t now)
	{
		if (now >= next_)
			publish(c, cl, now);
	}

	/* A consistent copy of the last publication. false: none yet.
	 * (Any thread.) */
	bool read(qp_snapshot *out) const;

private:
	/* Adds the client's figures to s and stores it. */
	void publish_snapshot(qp_snapshot &s, const ah_client *cl, uint64_t now);

	static constexpr size_t nwords = sizeof(qp_snapshot) / 8;
	std::atomic<uint64_t> seq_{0};
	std::atomic<uint64_t> w_[nwords]{};
	uint64_t next_ = 0;     /* writer only */
	uint64_t interval_ = 0; /* writer only */
};

/* Writes s into the seqlock words: the writer half, shared with the AH
 * summary. */
void seqlock_write(std::atomic<uint64_t> &seq, std::atomic<uint64_t> *w, const void *src, size_t nwords);
bool seqlock_read(const std::atomic<uint64_t> &seq, const std::atomic<uint64_t> *w, void *dst, size_t nwords);

/* ---- what an app exposes ------------------------------------------------ */

struct lcore_info {
	unsigned lcore;
	unsigned cpu;
	int numa;          /* -1: unknown */
	std::string role;  /* e.g. "client", "server", "poll" */
};

struct port_info {
	const device *dev; /* driver name and port_attr, read at attach */
	int port_id;       /* DPDK ethdev port, -1: none */
	std::string name;  /* how the app names it */
	std::string mac;   /* the driver's MAC; "": the ethdev's */
};

struct qp_info {
	std::string name;  /* unique: the /rdgram/qps key */
	unsigned lcore;
	int port_id;
	uint32_t qpn;
	const qp_publisher *pub;
};

struct attachment {
	std::vector<lcore_info> lcores;
	std::vector<port_info> ports;
	std::vector<qp_info> qps;
	/* AH figures (all optional). With a service, its registry is used
	 * (registry may be left null). Published by a poller on ctl. */
	control_thread *ctl = nullptr;
	ah_service *service = nullptr;
	ah_registry *registry = nullptr;
	std::vector<device *> ah_devices; /* live_ahs / reclaim_pending */
	std::string app;                  /* app name, in every reply */
};

/* Registers the /rdgram/ commands with DPDK (once per process) and exposes
 * a: every pointer in it must stay valid until detach(). Installs the AH
 * summary poller on a.ctl when given. (Main thread, after rte_eal_init.)
 * 0, EBUSY (already attached), or the errno of a failed registration. */
int attach(attachment a);
/* Stops exposing the attachment (commands then answer an empty dict) and
 * removes the poller. After it returns no callback reads the attachment.
 * (Main thread; before the control thread stops.) */
void detach();

/* ---- the socket --------------------------------------------------------- */

/* Sets the process umask to 077 for its lifetime (wrap rte_eal_init /
 * runtime::init in one, so the runtime directory and the telemetry socket
 * are created owner-only, with no window where they are not). */
class private_umask {
public:
	private_umask() : old_(umask(077)) {}
	~private_umask() { umask(old_); }
	private_umask(const private_umask &) = delete;
	private_umask &operator=(const private_umask &) = delete;

private:
	mode_t old_;
};

/* The telemetry socket of this process: rte_eal_get_runtime_dir() +
 * "/dpdk_telemetry.v2". (After rte_eal_init.) */
std::string socket_path();
/* chmod 0700 on the runtime directory and 0600 on the socket. 0; ENOENT
 * when there is no socket (--no-telemetry); else the chmod errno, with a
 * message in *err. (After rte_eal_init.) */
int secure_socket(std::string *err);

} // namespace telemetry
} // namespace rdgram

#endif
