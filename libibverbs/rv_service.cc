/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The service thread: the EAL's main lcore, started with the devices
 * (rv_device.cc). It is the soft devices' control thread (ARP/ND, AH slot
 * reclamation: soft_device::poll under ctl), and it drives a port's receive
 * path when no program thread does:
 *   - a CQ is armed for an event (the program sleeps in ibv_get_cq_event or
 *     poll(2)s the channel's fd): every wake_us, so an event reaches it
 *     within tens of microseconds of its datagram;
 *   - an ibv_create_ah waits for its neighbour, sends wait in a QP's send
 *     queue for room in the port, or built frames wait in the soft queue's
 *     stash for a poll that flushes them;
 *   - nobody received for idle_us (peers' ARP/ND requests are answered while
 *     the program does something else).
 * A program thread that posts or polls (app_calls moves) keeps the service
 * thread out of its way (rounds 1 ms apart, control work only). Between rounds it sleeps: a system call, but never on a
 * program's thread.
 */
#include <atomic>
#include <ctime>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <rte_cycles.h>

#include "rv.h"

namespace rdgram::rv {

namespace {

std::atomic<bool> stopping{false};

constexpr uint64_t wake_us = 5;   /* round interval while a CQ is armed */
constexpr uint64_t idle_us = 200; /* round interval otherwise, and the idle take-over */
/* A program thread that posted or polled this recently is active; while
 * one is, rounds are this far apart: the control work's timers (ARP/ND
 * retries of 100 ms and more) lose nothing, what cannot wait (a peer's
 * ARP/ND frame the program's receive burst handed over, an
 * ibv_create_ah) wakes the thread at once (service_wake), and a program
 * polling on the same CPU is not preempted: a wake-up there costs its
 * round trip microseconds (1 ms rounds made ib_send_lat's p99 21 us
 * against 2.5 to 4 us with none). */
constexpr uint64_t active_us = 50;
constexpr uint64_t active_sleep_us = 100000;

/* Wakes the service thread before its round is due (service_wake). */
int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
/* The service thread is in an active_sleep_us sleep (service_kick). */
std::atomic<bool> long_sleep{false};

} // namespace

void service_wake()
{
	const uint64_t one = 1;
	ssize_t r = write(wake_fd, &one, sizeof(one));
	(void)r;
}

void service_kick()
{
	if (long_sleep.load(std::memory_order_relaxed))
		service_wake();
}

void service_run()
{
	/* Sleeps of a few microseconds: the default 50 us timer slack would
	 * make every one of them 50 us. */
	prctl(PR_SET_TIMERSLACK, 1000UL);
	const uint64_t hz = rte_get_tsc_hz();
	const uint64_t idle = hz * idle_us / 1000000;
	const uint64_t active = hz * active_us / 1000000;
	rv_process &p = process();
	while (!stopping.load(std::memory_order_acquire)) {
		bool urgent = false, busy = false, pending_tx = false;
		const uint64_t now = rte_get_tsc_cycles();
		for (rv_device *d : p.devs) {
			{
				std::lock_guard<std::mutex> g(d->ctl);
				d->dev.poll(now);
			}
			/* A device with a NIC thread (kind mlx5): its queue is
			 * the NIC's; only the control work is done here. */
			if (d->nic != nullptr) {
				urgent |= d->ah_waiters.load(std::memory_order_relaxed) > 0;
				continue;
			}
			/* A program thread that posted or polled since the last
			 * round, or within active_us, drives the queue itself (it
			 * flushes staged frames and waiting sends at its next
			 * poll): leave it the CPU. */
			if (const uint64_t c = d->app_calls.load(std::memory_order_relaxed); c != d->seen_app) {
				d->seen_app = c;
				d->app_seen_at = now;
			}
			if (const uint64_t c = d->rx_polls.load(std::memory_order_relaxed); c != d->seen_rx) {
				d->seen_rx = c;
				d->rx_seen_at = now;
			}
			const bool app = now - d->app_seen_at < active;
			const bool armed = d->armed_cqs.load(std::memory_order_relaxed) > 0 ||
					   d->ah_waiters.load(std::memory_order_relaxed) > 0;
			const bool tx = d->backlog.load(std::memory_order_relaxed) > 0 ||
					d->tx_staged.load(std::memory_order_relaxed);
			busy |= app;
			pending_tx |= tx;
			urgent |= armed || (tx && !app);
			if ((armed || (!app && (tx || now - d->rx_seen_at > idle))) &&
			    dp_trylock(*d)) {
				while (progress(*d) == soft::soft_queue::max_burst)
					;
				dp_unlock(*d);
			}
		}
		/* Long rounds only while nothing waits for the port: frames
		 * staged by a program that may stop polling go within idle_us. */
		const uint64_t us = urgent ? wake_us : busy && !pending_tx ? active_sleep_us : idle_us;
		long_sleep.store(us == active_sleep_us, std::memory_order_relaxed);
		const timespec ts{long(us / 1000000), long(us % 1000000 * 1000)};
		pollfd pfd{wake_fd, POLLIN, 0};
		if (ppoll(&pfd, wake_fd >= 0 ? 1 : 0, &ts, nullptr) == 1) {
			uint64_t v;
			ssize_t r = read(wake_fd, &v, sizeof(v));
			(void)r;
		}
	}
}

void service_stop()
{
	stopping.store(true, std::memory_order_release);
	service_wake();
}

} // namespace rdgram::rv
