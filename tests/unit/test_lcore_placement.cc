/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Where a rank's lcores go among its task's CPUs (lcore_placement.h): the
 * CPU list syntax, the plan's arithmetic (distinct blocks while CPUs
 * suffice, an even spread when they do not) and the EAL arguments it
 * rewrites.
 */
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "lcore_placement.h"

using namespace rdgram::apps;

namespace {

std::vector<unsigned> range(unsigned lo, unsigned n)
{
	std::vector<unsigned> v;
	for (unsigned i = 0; i < n; i++)
		v.push_back(lo + i);
	return v;
}

} // namespace

TEST(CpuList, ParseAndFormat)
{
	std::vector<unsigned> v;
	ASSERT_TRUE(parse_cpu_list("0-3,8,10-11", &v));
	EXPECT_EQ(v, (std::vector<unsigned>{0, 1, 2, 3, 8, 10, 11}));
	EXPECT_EQ(format_cpu_list(v), "0-3,8,10-11");
	ASSERT_TRUE(parse_cpu_list("5,1,5,2", &v));
	EXPECT_EQ(v, (std::vector<unsigned>{1, 2, 5}));
	EXPECT_EQ(format_cpu_list(v), "1-2,5");
	for (const char *bad : {"", ",", "1,", "3-1", "a", "1-", "-1", "99999", "0x3", "1 ,2"})
		EXPECT_FALSE(parse_cpu_list(bad, &v)) << bad;
	EXPECT_EQ(format_cpu_list({}), "");
}

/* While CPUs suffice every local rank has its own: no CPU carries two
 * lcores, for every size up to the CPUs. */
TEST(PlanLcores, DistinctWhileCpusSuffice)
{
	const std::vector<unsigned> cpus = {2, 3, 4, 5, 8, 9, 10, 11};
	for (unsigned lcores = 1; lcores <= 4; lcores++)
		for (unsigned size = 1; size * lcores <= cpus.size(); size++) {
			std::set<unsigned> used;
			for (unsigned r = 0; r < size; r++) {
				const lcore_plan p = plan_lcores(cpus, lcores, r, size);
				ASSERT_EQ(p.cpus.size(), lcores);
				EXPECT_FALSE(p.shared);
				for (unsigned c : p.cpus) {
					EXPECT_TRUE(used.insert(c).second) << "CPU " << c << " twice, size " << size;
					EXPECT_NE(std::find(cpus.begin(), cpus.end(), c), cpus.end());
				}
			}
		}
	/* Blocks in order: local rank 1 of 4, 2 lcores each: the 3rd and 4th CPUs. */
	EXPECT_EQ(plan_lcores(cpus, 2, 1, 4).cpus, (std::vector<unsigned>{4, 5}));
}

/* When they do not: shared, and the local ranks' j-th lcores spread
 * evenly (each CPU within one of the others), a rank's own lcores on
 * distinct CPUs while it has no more lcores than there are CPUs. */
TEST(PlanLcores, EvenSpreadWhenShared)
{
	for (unsigned n = 1; n <= 5; n++)
		for (unsigned lcores = 1; lcores <= 3; lcores++)
			for (unsigned size = 1; size <= 33; size++) {
				if (size_t(lcores) * size <= n)
					continue;
				const std::vector<unsigned> cpus = range(0, n);
				std::vector<std::map<unsigned, unsigned>> per_j(lcores);
				for (unsigned r = 0; r < size; r++) {
					const lcore_plan p = plan_lcores(cpus, lcores, r, size);
					ASSERT_EQ(p.cpus.size(), lcores);
					EXPECT_TRUE(p.shared);
					for (unsigned j = 0; j < lcores; j++)
						per_j[j][p.cpus[j]]++;
					if (lcores <= n) {
						EXPECT_EQ(std::set<unsigned>(p.cpus.begin(), p.cpus.end()).size(), lcores);
					}
				}
				for (unsigned j = 0; j < lcores; j++) {
					unsigned lo = size, hi = 0;
					for (unsigned c = 0; c < n; c++) {
						lo = std::min(lo, per_j[j][c]);
						hi = std::max(hi, per_j[j][c]);
					}
					EXPECT_LE(hi - lo, 1u) << "n " << n << " lcores " << lcores << " size " << size;
				}
			}
	/* 8 ranks of -l 0,1 on 2 CPUs: the poll lcores (index 1) 4 on each. */
	EXPECT_EQ(plan_lcores({0, 1}, 2, 0, 8).cpus, (std::vector<unsigned>{0, 1}));
	EXPECT_EQ(plan_lcores({0, 1}, 2, 1, 8).cpus, (std::vector<unsigned>{1, 0}));
}

TEST(PlanLcores, Degenerate)
{
	EXPECT_TRUE(plan_lcores({}, 2, 0, 1).cpus.empty());
	/* An unknown local size: the rank alone. */
	EXPECT_EQ(plan_lcores({0, 1, 2, 3}, 2, 5, 0).cpus, (std::vector<unsigned>{0, 1}));
}

TEST(PlaceEal, RewritesDashL)
{
	std::vector<std::string> eal = {"-l", "0,1", "--no-huge", "--no-pci"};
	std::string line;
	ASSERT_TRUE(place_eal_lcores(&eal, 1, 2, range(0, 4), range(0, 4), &line));
	EXPECT_EQ(eal, (std::vector<std::string>{"--lcores", "0@2,1@3", "--no-huge", "--no-pci"}));
	EXPECT_EQ(line, "placement: local rank 1 of 2, the task's CPUs 0-3 (every local rank's): lcores 0,1 on CPUs "
			"2,3; no CPU shared with another local rank");

	eal = {"--no-huge", "-l0-1"};
	ASSERT_TRUE(place_eal_lcores(&eal, 3, 8, range(0, 2), range(0, 2), &line));
	EXPECT_EQ(eal, (std::vector<std::string>{"--no-huge", "--lcores", "0@1,1@0"}));
	EXPECT_NE(line.find("16 lcores on 2 CPUs: local ranks share CPUs"), std::string::npos) << line;

	/* No lcore option: lcores 0 and 1. */
	eal = {"--no-huge"};
	ASSERT_TRUE(place_eal_lcores(&eal, 0, 2, range(0, 4), range(0, 4), &line));
	EXPECT_EQ(eal, (std::vector<std::string>{"--no-huge", "--lcores", "0@0,1@1"}));
}

TEST(PlaceEal, BoundByTheLauncher)
{
	/* mpirun --bind-to core gave this task CPU 5 of 0-7: both lcores
	 * there, whatever the local rank. */
	std::vector<std::string> eal = {"-l", "0,1"};
	std::string line;
	ASSERT_TRUE(place_eal_lcores(&eal, 5, 8, {5}, range(0, 8), &line));
	EXPECT_EQ(eal, (std::vector<std::string>{"--lcores", "0@5,1@5"}));
	EXPECT_NE(line.find("bound by the launcher to CPUs 5"), std::string::npos) << line;
	EXPECT_NE(line.find("more lcores than CPUs: they share"), std::string::npos) << line;
	/* Without -l the EAL takes the task's CPUs itself. */
	eal = {"--no-huge"};
	ASSERT_TRUE(place_eal_lcores(&eal, 5, 8, {4, 5}, range(0, 8), &line));
	EXPECT_EQ(eal, (std::vector<std::string>{"--no-huge"}));
}

TEST(PlaceEal, LeftAlone)
{
	std::string line;
	for (std::vector<std::string> eal : std::vector<std::vector<std::string>>{
		     {"--lcores", "0@3,1@4"}, {"--lcores=0@3"}, {"-c", "0x3"}, {"-c0x3"}}) {
		const auto before = eal;
		ASSERT_TRUE(place_eal_lcores(&eal, 1, 2, range(0, 4), range(0, 4), &line));
		EXPECT_EQ(eal, before);
		EXPECT_NE(line.find("as given"), std::string::npos) << line;
	}
	std::vector<std::string> eal = {"-l", "0,1"};
	ASSERT_TRUE(place_eal_lcores(&eal, -1, -1, range(0, 4), range(0, 4), &line));
	EXPECT_EQ(eal, (std::vector<std::string>{"-l", "0,1"}));
	EXPECT_NE(line.find("no local rank"), std::string::npos);
	eal = {"-l", "0,,1"};
	EXPECT_FALSE(place_eal_lcores(&eal, 0, 2, range(0, 4), range(0, 4), &line));
	EXPECT_EQ(line, "placement: -l 0,,1: expected a list of lcore ids such as 0,1 or 0-3");
}
