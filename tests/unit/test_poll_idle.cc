/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * poll_idle: no syscall before `spins` empty iterations in a row, none
 * after work(); yield and sleep counted; naps double from 1 us to the
 * bound; a nap really sleeps.
 */
#include <chrono>

#include <gtest/gtest.h>

#include "rdgram/poll_idle.h"

using namespace rdgram;

TEST(PollIdle, ParsesModes)
{
	idle_mode m = idle_mode::busy;
	EXPECT_TRUE(parse_idle_mode("yield", &m));
	EXPECT_EQ(m, idle_mode::yield);
	EXPECT_TRUE(parse_idle_mode("sleep", &m));
	EXPECT_EQ(m, idle_mode::sleep);
	EXPECT_TRUE(parse_idle_mode("busy", &m));
	EXPECT_EQ(m, idle_mode::busy);
	EXPECT_FALSE(parse_idle_mode("spin", &m));
	EXPECT_FALSE(parse_idle_mode("", &m));
	EXPECT_STREQ(idle_mode_name(idle_mode::sleep), "sleep");
}

TEST(PollIdle, BusyNeverEntersTheKernel)
{
	poll_idle p(poll_idle_config{idle_mode::busy, 0, 100});
	for (int i = 0; i < 100000; i++)
		p.idle();
	EXPECT_EQ(p.stats().empty, 100000u);
	EXPECT_EQ(p.stats().yields, 0u);
	EXPECT_EQ(p.stats().sleeps, 0u);
}

TEST(PollIdle, YieldsOnlyAfterSpinsInARow)
{
	poll_idle p(poll_idle_config{idle_mode::yield, 8, 100});
	for (int i = 0; i < 8; i++)
		p.idle();
	EXPECT_EQ(p.stats().yields, 0u);
	p.idle();
	EXPECT_EQ(p.stats().yields, 1u);
	p.idle();
	EXPECT_EQ(p.stats().yields, 2u);
	/* Work resets the run: 8 more free empty iterations. */
	p.work();
	for (int i = 0; i < 8; i++)
		p.idle();
	EXPECT_EQ(p.stats().yields, 2u);
	/* A loop that works every few iterations never yields. */
	for (int i = 0; i < 10000; i++) {
		if (i % 8 == 0)
			p.work();
		else
			p.idle();
	}
	EXPECT_EQ(p.stats().yields, 2u);
}

TEST(PollIdle, SleepNapsDoubleUpToTheBound)
{
	poll_idle p(poll_idle_config{idle_mode::sleep, 2, 10});
	p.idle();
	p.idle();
	EXPECT_EQ(p.stats().sleeps, 0u);
	/* Naps 1, 2, 4, 8, then 10 (the bound) every time: 25 + 3 x 10 us. */
	const auto t0 = std::chrono::steady_clock::now();
	for (int i = 0; i < 8; i++)
		p.idle();
	const auto dt = std::chrono::steady_clock::now() - t0;
	EXPECT_EQ(p.stats().sleeps, 8u);
	EXPECT_EQ(p.stats().slept_ns, (1u + 2 + 4 + 8 + 10 + 10 + 10 + 10) * 1000u);
	EXPECT_GE(std::chrono::duration_cast<std::chrono::microseconds>(dt).count(), 55);
	p.work();
	p.idle();
	p.idle();
	p.idle();
	EXPECT_EQ(p.stats().sleeps, 9u);
	EXPECT_EQ(p.stats().slept_ns, (55u + 1u) * 1000u); /* back to 1 us after work */
}

TEST(PollIdle, BoundIsClamped)
{
	poll_idle lo(poll_idle_config{idle_mode::sleep, 0, 0});
	EXPECT_EQ(lo.config().sleep_us, 1u);
	poll_idle hi(poll_idle_config{idle_mode::sleep, 0, 5000000});
	EXPECT_EQ(hi.config().sleep_us, 1000000u);
}
