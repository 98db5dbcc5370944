/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * apps/common/workers.h and driver.h: the lcores N workers get, the main
 * lcore among them, and the driver names.
 */
#include <atomic>
#include <thread>

#include <gtest/gtest.h>
#include <rte_lcore.h>

#include "driver.h"
#include "eal_env.h"
#include "workers.h"

using namespace rdgram;
using namespace rdgram::apps;

TEST(AppWorkers, PickPutsTheMainLcoreLast)
{
	const unsigned n = rte_lcore_count();
	ASSERT_GE(n, 2u);
	std::vector<lcore_cpu> l;
	std::string err;
	ASSERT_EQ(pick_workers(*test::g_rt, SOCKET_ID_ANY, 1, &l, &err), 0) << err;
	ASSERT_EQ(l.size(), 1u);
	EXPECT_NE(l[0].lcore, rte_get_main_lcore());
	ASSERT_EQ(pick_workers(*test::g_rt, SOCKET_ID_ANY, n, &l, &err), 0) << err;
	ASSERT_EQ(l.size(), n);
	EXPECT_EQ(l.back().lcore, rte_get_main_lcore());
	EXPECT_EQ(pick_workers(*test::g_rt, SOCKET_ID_ANY, n + 1, &l, &err), EINVAL);
	EXPECT_NE(err.find("--workers " + std::to_string(n + 1)), std::string::npos) << err;
	EXPECT_EQ(pick_workers(*test::g_rt, SOCKET_ID_ANY, 0, &l, &err), EINVAL);
}

namespace {
struct arg {
	std::atomic<bool> *stop;
	unsigned lcore = ~0u;
	uint64_t spins = 0;
	int rc = 0;
};
int spin(void *p)
{
	auto *a = static_cast<arg *>(p);
	a->lcore = rte_lcore_id();
	while (!a->stop->load(std::memory_order_acquire))
		a->spins++;
	return a->rc;
}
} // namespace

TEST(AppWorkers, RunIncludesTheMainLcoreAndTheWatch)
{
	std::vector<lcore_cpu> l;
	std::string err;
	ASSERT_EQ(pick_workers(*test::g_rt, SOCKET_ID_ANY, rte_lcore_count(), &l, &err), 0) << err;
	std::atomic<bool> stop{false};
	std::vector<arg> a(l.size());
	std::vector<void *> p;
	for (auto &x : a) {
		x.stop = &stop;
		p.push_back(&x);
	}
	a.back().rc = 7; /* the main lcore's worker */
	const std::thread::id caller = std::this_thread::get_id();
	bool watch_ran = false, watch_on_caller = true;
	int rc = run_workers(l, spin, p, [&](const std::atomic<unsigned> &running) {
		watch_ran = true;
		watch_on_caller = std::this_thread::get_id() == caller;
		EXPECT_EQ(running.load(), unsigned(l.size()));
		std::this_thread::sleep_for(std::chrono::milliseconds(20));
		stop.store(true, std::memory_order_release);
		while (running.load(std::memory_order_acquire) != 0)
			std::this_thread::yield();
	});
	EXPECT_EQ(rc, 7);
	EXPECT_TRUE(watch_ran);
	EXPECT_FALSE(watch_on_caller); /* the caller was a worker */
	for (size_t i = 0; i < l.size(); i++)
		EXPECT_EQ(a[i].lcore, l[i].lcore);
}

TEST(AppDriver, Names)
{
	driver_kind k;
	std::string err;
	EXPECT_EQ(parse_driver("soft", &k, &err), 0);
	EXPECT_EQ(k, driver_kind::soft);
	EXPECT_EQ(parse_driver("rxe", &k, &err), EINVAL);
	EXPECT_NE(err.find("unknown driver"), std::string::npos) << err;
	for (driver_kind d : {driver_kind::verbs, driver_kind::mlx5, driver_kind::efa}) {
		const char *why = nullptr;
		int rc = parse_driver(driver_name(d), &k, &err);
		if (driver_built(d, &why)) {
			EXPECT_EQ(rc, 0);
			EXPECT_EQ(k, d);
			EXPECT_EQ(with_driver(k, [](auto tag) { return std::string(typename decltype(tag)::type().driver_name()); }),
				  driver_name(d));
		} else {
			EXPECT_EQ(rc, ENOTSUP);
			EXPECT_NE(err.find(why), std::string::npos) << err;
		}
	}
}
