/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The accounting invariant (issue 7, item 4), checked at the end of every
 * integration and fault test:
 *
 *   - loopback paths: messages sent = received + dropped, every drop under a
 *     named reason (the send side's pending-queue and TX reasons, the
 *     receive side's RX reasons, and any the test itself counts);
 *   - every mbuf back in its pool (rte_mempool_in_use_count == 0, caches
 *     included);
 *   - every AH destroyed at shutdown (device::live_ahs() == 0, read on the
 *     control thread);
 *   - no thread left running: every worker lcore back in WAIT (the test
 *     joined it with rte_eal_wait_lcore), and any control thread the test
 *     started stopped and joined.
 *
 * Usage: fill an accounting object, then check() (GoogleTest assertions)
 * prints one summary line, the figures docs/RELIABILITY.md quotes:
 *
 *   accounting <name>: sent N, received N, dropped N (reason n, ...), leaked mbufs 0, AHs 0, threads 0
 */
#ifndef RDGRAM_TESTS_ACCOUNTING_H
#define RDGRAM_TESTS_ACCOUNTING_H

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mempool.h>

#include "rdgram/ah_service.h"
#include "rdgram/control.h"
#include "rdgram/device.h"
#include "rdgram/stats.h"

namespace rdgram::test {

class accounting {
public:
	explicit accounting(std::string name) : name_(std::move(name)) {}

	/* Messages the application handed over and the sender accepted (a WR
	 * tx_burst or send_burst took), and messages delivered to the
	 * application at the receiver. */
	void sent(uint64_t n) { sent_ += n; }
	void received(uint64_t n) { received_ += n; }
	/* Messages still waiting somewhere at the end (must be 0 once the test
	 * has drained everything; reported, and counted as missing if not). */
	void in_flight(uint64_t n) { in_flight_ += n; }

	/* Drops by reason: the sender queue's TX reasons, the receiver queue's
	 * RX reasons, an AH client's pending-queue reasons, or one of the
	 * test's own (e.g. a message it gave up on, by name). */
	/* By the rule of stats.h: the counters of kind drop, tx_ ones of a
	 * sender's set, rx_ ones of a receiver's (any driver's set). */
	template <counter_set S> void sender(const S &c)
	{
		c.for_each([&](const xstat_name &n, uint64_t v) {
			if (n.kind == counter_kind::drop && n.tx())
				drop(n.name, v);
		});
	}
	template <counter_set S> void receiver(const S &c)
	{
		c.for_each([&](const xstat_name &n, uint64_t v) {
			if (n.kind == counter_kind::drop && n.rx())
				drop(n.name, v);
		});
	}
	void client(const ah_client_counters &c)
	{
#define X(name, desc) drop(#name, c.name);
		RDGRAM_PEND_DROPS(X)
#undef X
	}
	void drop(const char *reason, uint64_t n)
	{
		if (n == 0)
			return;
		for (auto &d : drops_)
			if (d.first == reason) {
				d.second += n;
				return;
			}
		drops_.emplace_back(reason, n);
	}

	/* Resources that must be back at the end. */
	void pool(const rte_mempool *mp)
	{
		if (mp != nullptr)
			pools_.push_back(mp);
	}
	/* Live AHs of a device, read on its control thread by the caller (the
	 * count is control-thread state). */
	void live_ahs(uint32_t n) { live_ahs_ += n; }
	/* A control thread the test started: it must be stopped (joined). */
	void control(const control_thread &ctl) { ctls_.push_back(&ctl); }

	/* Checks the invariant with GoogleTest assertions and prints the
	 * summary line. loopback: every message sent is accounted for at the
	 * receiver or as a drop (false for tests whose traffic leaves the
	 * process). Returns whether everything held. */
	bool check(bool loopback = true)
	{
		uint64_t dropped = 0;
		for (auto &d : drops_)
			dropped += d.second;
		uint64_t mbufs = 0;
		for (const rte_mempool *mp : pools_)
			mbufs += rte_mempool_in_use_count(mp);
		unsigned threads = 0;
		unsigned lc;
		RTE_LCORE_FOREACH_WORKER(lc)
		{
			threads += rte_eal_get_lcore_state(lc) == RUNNING;
		}
		for (const control_thread *c : ctls_)
			threads += c->running();

		bool ok = true;
		if (loopback) {
			EXPECT_EQ(sent_, received_ + dropped + in_flight_)
				<< name_ << ": sent != received + dropped (by reason)";
			ok &= sent_ == received_ + dropped + in_flight_;
		}
		EXPECT_EQ(in_flight_, 0u) << name_ << ": messages still waiting at the end";
		EXPECT_EQ(mbufs, 0u) << name_ << ": mbufs not back in their pools";
		EXPECT_EQ(live_ahs_, 0u) << name_ << ": AHs alive after shutdown";
		EXPECT_EQ(threads, 0u) << name_ << ": threads still running";
		ok &= in_flight_ == 0 && mbufs == 0 && live_ahs_ == 0 && threads == 0;

		std::string why;
		for (auto &d : drops_)
			why += (why.empty() ? "" : ", ") + d.first + " " + std::to_string(d.second);
		printf("accounting %s: sent %" PRIu64 ", received %" PRIu64 ", dropped %" PRIu64 "%s%s%s, leaked mbufs %" PRIu64
		       ", AHs %u, threads %u%s\n",
		       name_.c_str(), sent_, received_, dropped, why.empty() ? "" : " (", why.c_str(),
		       why.empty() ? "" : ")", mbufs, live_ahs_, threads, ok ? "" : "  ACCOUNTING FAILED");
		fflush(stdout);
		return ok;
	}

	const std::string &name() const { return name_; }

	uint64_t dropped(const char *reason) const
	{
		for (auto &d : drops_)
			if (d.first == reason)
				return d.second;
		return 0;
	}

private:
	std::string name_;
	uint64_t sent_ = 0, received_ = 0, in_flight_ = 0;
	std::vector<std::pair<std::string, uint64_t>> drops_;
	std::vector<const rte_mempool *> pools_;
	uint32_t live_ahs_ = 0;
	std::vector<const control_thread *> ctls_;
};

} // namespace rdgram::test

#endif
