/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once
/*
 * Bursts on ports whose PMD unmaps queue memory behind the poll thread.
 *
 * DPDK's net_memif handles a peer's disconnect on the EAL interrupt thread:
 * memif_disconnect() clears the CONNECTED flag and then munmap()s the shared
 * regions (memif_free_regions). rx_burst/tx_burst test that flag once on
 * entry, so a poll thread that passed the test (or was preempted just after
 * it) reads an unmapped ring: SIGSEGV in the process that SURVIVED its peer
 * (seen under ASan in tests/fault/memif_restart.sh; DPDK 22.11 and the
 * current tree have the same code). No ethdev event is raised before the
 * unmap, so an application cannot stop polling in time by itself.
 *
 * The guard closes the race with DPDK's own RCU: each burst on such a port is
 * a read-side section of one rte_rcu_qsbr variable (thread online before the
 * burst, offline after: one full fence per burst, and only on guarded ports),
 * and rdgram's munmap() (burst_guard.cc interposes the libc symbol), when
 * called on the EAL interrupt thread, first waits until every burst in flight
 * at its start has ended. A burst that starts later already sees the cleared
 * flag and returns 0. Other ports (net_ring, pcap, af_packet, ...) get slot
 * -1: one predicted branch per burst.
 */
#include <atomic>
#include <cstdint>

#include <rte_rcu_qsbr.h>

namespace rdgram {

class burst_guard {
public:
	static constexpr unsigned max_slots = 128;

	/* Control path. The read-side slot of (port, queue), the same one on
	 * every call, when the port's PMD frees queue memory on the interrupt
	 * thread (net_memif); -1 for any other port, and when all max_slots
	 * are taken (then that queue is unguarded, as without rdgram). */
	static int slot_for(uint16_t port, uint16_t queue);

	/* The owning poll thread, around rte_eth_rx_burst/tx_burst. */
	static void enter(int slot)
	{
		if (slot >= 0)
			rte_rcu_qsbr_thread_online(v_.load(std::memory_order_relaxed), unsigned(slot));
	}
	static void leave(int slot)
	{
		if (slot >= 0)
			rte_rcu_qsbr_thread_offline(v_.load(std::memory_order_relaxed), unsigned(slot));
	}

	/* Waits until every guarded burst in flight now has ended, at most
	 * timeout_ns (a poll thread stuck inside a PMD must not hang the
	 * interrupt thread forever). true: none left; false: timed out. */
	static bool synchronize(uint64_t timeout_ns);

	/* How many munmap()s on the interrupt thread waited, and how many of
	 * those timed out (tests, telemetry). */
	static uint64_t waits();
	static uint64_t timeouts();

	/* The QSBR variable, made with the first slot and never freed. A
	 * thread holding a slot got it after the store (slot_for), so a
	 * relaxed load suffices there; the munmap hook acquires it. */
	static inline std::atomic<rte_rcu_qsbr *> v_{nullptr};
};

} // namespace rdgram
