/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * One DPDK port with the soft driver on it, opened the one way every app
 * and rdgram's libibverbs open it (docs/PORTS.md): a port table
 * (soft_config_toml.h) in, an owner out. soft::port owns, and tears down in
 * reverse order:
 *   - the probe: devargs probed here (rte_dev_probe) are removed again
 *     (rte_dev_remove); a port the EAL was given (--vdev, -a) is only
 *     stopped and closed;
 *   - the soft device on it (soft_device::open/close);
 *   - the device's control poller (soft_device::control_poller: ARP/ND
 *     answers, neighbour timers, AH reclamation) on the host the caller
 *     names (port_setup::control; an app's control thread:
 *     apps/common/open_device.h), taken off it before the port stops.
 * A port is probed from its devargs (probe) or is one the caller made
 * itself (adopt: a net_ring pair, a switch's ports).
 * The queues stay with the caller, in its poll threads' own state
 * (soft_device::create_queue on queue pair i, destroy_queue before
 * stop()).
 * It also steps around DPDK 22.11's net_memif races at open and close
 * (soft_port.cc): a port of any app is safe to start and stop while the
 * other end does the same.
 *
 * Threads: main or control thread, after rte_eal_init and before the
 * poll threads use a queue (open); after they stopped (close).
 * (NOT thread safe)
 */
#ifndef RDGRAM_SOFT_PORT_H
#define RDGRAM_SOFT_PORT_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "soft_config_toml.h"
#include "soft_device.h"

namespace rdgram::soft {

struct intr_hold;

/* The ethdev port named by the first comma-separated field of devargs
 * ("net_memif0,role=server" names net_memif0). When the EAL has it already
 * (--vdev, -a), *port is that port and *probed false; otherwise devargs is
 * probed with rte_dev_probe and *probed is true. 0, or an errno value with
 * *err saying what failed (no prefix): what rte_dev_probe failed with
 * (EINVAL for devargs no driver takes, EEXIST for a name another device
 * already has, ...); ENODEV when the probe made no ethdev port of that
 * name. probed may be nullptr. (Main thread.) */
int probe_port(const std::string &devargs, uint16_t *port, std::string *err, bool *probed = nullptr);

/* Where a device's control poller runs: add(f, arg) registers f(arg, now)
 * to be called again and again on a control thread (0 or an errno
 * value), remove(f, arg) takes it off and returns once it no longer runs
 * (rdgram::control_thread's add_poller/remove_poller). Empty: the caller
 * calls soft_device::control_poller itself (rdgram's libibverbs, from
 * its service thread). */
struct poller_host {
	using poll_fn = bool (*)(void *, uint64_t);
	std::function<int(poll_fn, void *)> add;
	std::function<void(poll_fn, void *)> remove;
};

/* What the caller adds to the port table at start. */
struct port_setup {
	/* Where the device's control poller runs (see poller_host). */
	poller_host control;
	/* The poll threads' QSBR (runtime::qsbr()); may be nullptr. */
	rte_rcu_qsbr *qsbr = nullptr;
	/* NUMA nodes that get an AV replica (replica_nodes()); empty: the
	 * port's. */
	std::vector<int> av_nodes;
	/* Static neighbours beyond the table's (a peer's configured MAC). */
	std::vector<neighbour> neighbours;
	/* The last word on the device's configuration, after the table and
	 * the fields above are in (rdgram-coll's descriptor counts, the
	 * libibverbs GID table, report_ahn, ...); may be empty. */
	std::function<void(soft_config &)> adjust;
};

/* The blocking way to an AH on a soft device, for a thread that may wait
 * (never a poll thread): asks prepare_ah until the neighbour of attr is
 * known (a static one at once; else ARP/ND, whose replies come in on queue
 * 0, which step must keep polling, or have polled), then creates the AH.
 * on_ctl(f) runs f where the device's control-thread methods may be
 * called: on the control thread (control_thread::call), or under the
 * lock that stands for it. deadline is a TSC value. 0 with *out the AH, or
 * an errno value: prepare_ah's (ETIMEDOUT: no answer after the port's
 * retries; EHOSTUNREACH: unknown and resolution off), ETIMEDOUT at the
 * deadline, create_ah's. The asynchronous form, for many callers at once,
 * is ah_service's. */
int resolve_ah(soft_device &dev, const ibv_ah_attr &attr, uint64_t deadline,
	       const std::function<void(const std::function<void()> &)> &on_ctl, const std::function<void()> &step,
	       ah_handle *out);

/* rte_eth_stats_get, and the frames the kernel dropped on a port whose PMD
 * reads a kernel socket, which DPDK 22.11 does not count: for
 * net_af_packet, the frames that found a receive ring of this process's
 * AF_PACKET sockets on the port's interface full (packet(7)
 * PACKET_STATISTICS, tp_drops) go into imissed, summed over the calls
 * since the port opened. Read them while the port is open: the sockets go
 * with it. 0, or rte_eth_stats_get's error. Control path (syscalls, a
 * lock). */
int port_stats(uint16_t port_id, rte_eth_stats *st);

/* Before a port stops: the frames a PMD that sends through a kernel
 * socket has taken but not handed to the kernel yet leave. DPDK 22.11's
 * net_af_packet counts a frame sent once it is in its TX ring; when the
 * kick finds the socket's send buffer full (a slow receiver behind a tap
 * or veth) the frame waits for the next burst, and a port stopped before
 * that drops it. This kicks each of this process's AF_PACKET sockets on
 * the port's interface once more, blocking, for at most timeout_ms. Any
 * other port: nothing. Control path (syscalls). */
void flush_kernel_tx(uint16_t port_id, unsigned timeout_ms = 1000);

class port {
public:
	port() = default;
	port(const port &) = delete;
	port &operator=(const port &) = delete;
	~port() { close(); }

	/* Takes pc's port (probe_port) and checks that it offers `queues`
	 * queue pairs (pc.queues when given). 0, or an errno value with *err
	 * one line: "port NAME: cannot probe '...': ..." or "port NAME: 2
	 * queue pairs asked, the port offers 1 RX and 1 TX (PMD ...)". Done
	 * apart from start() so that a caller can place its poll threads by
	 * socket() first. */
	int probe(const port_config &pc, uint16_t queues, std::string *err);
	/* The same for a port the caller made itself (rte_eth_from_rings,
	 * ...), named by port_id; pc's devargs are not read. Such a port is
	 * stopped and closed at close(), as one the EAL was given; what it
	 * was made of (rings) stays the caller's. 0, or ENODEV (no such
	 * port) or EINVAL (too few queues) with *err one line. */
	int adopt(const port_config &pc, uint16_t port_id, uint16_t queues, std::string *err);
	/* Opens the device on the probed port with pc's settings and s's.
	 * 0, or an errno value with *err one line "port NAME: <DPDK's or the
	 * driver's reason>"; what was done is undone (close()). */
	int start(const port_setup &s, std::string *err);
	/* The control poller, the ethdev and the probe; the device and its
	 * pool stay, so that a caller can count what came back to the pool
	 * before close(). Idempotent. The caller's queues are destroyed
	 * already. */
	void stop();
	/* stop(), then the device: everything open did, in reverse.
	 * Idempotent. */
	void close();

	/* probe() or adopt() took a port, not closed since. */
	bool has_port() const { return have_port_; }
	soft_device &device() { return dev_; }
	const soft_device &device() const { return dev_; }
	uint16_t port_id() const { return port_id_; }
	/* The port's NUMA node (SOCKET_ID_ANY when it has none). */
	int socket() const;

private:
	port_config cfg_;
	soft_device dev_;
	poller_host host_; /* the control poller's, while it is registered */
	uint16_t nq_ = 0;
	uint16_t port_id_ = 0;
	bool have_port_ = false, probed_ = false, started_ = false, polled_ = false;
	int check_queues(std::string *err);
	intr_hold *hold_ = nullptr; /* a memif server's (soft_port.cc) */
};

} // namespace rdgram::soft

#endif
