/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Poll-core placement on hwloc synthetic topologies with several NUMA nodes
 * (this machine has one).
 */
#include <algorithm>
#include <cerrno>

#include <gtest/gtest.h>
#include <hwloc.h>

#include "rdgram/runtime.h"

using namespace rdgram;

namespace {

struct topo {
	hwloc_topology_t t;
	explicit topo(const char *synthetic)
	{
		hwloc_topology_init(&t);
		EXPECT_EQ(hwloc_topology_set_synthetic(t, synthetic), 0);
		EXPECT_EQ(hwloc_topology_load(t), 0);
	}
	~topo() { hwloc_topology_destroy(t); }
};

TEST(Placement, NumaOfCpu)
{
	topo tp("pack:2 numa:1 core:4 pu:1"); /* cpus 0-3 node 0, 4-7 node 1 */
	EXPECT_EQ(numa_of_cpu(tp.t, 0), 0);
	EXPECT_EQ(numa_of_cpu(tp.t, 3), 0);
	EXPECT_EQ(numa_of_cpu(tp.t, 4), 1);
	EXPECT_EQ(numa_of_cpu(tp.t, 7), 1);
	EXPECT_EQ(numa_of_cpu(tp.t, 99), -1);
}

TEST(Placement, DeviceLocalCoresFirst)
{
	topo tp("pack:2 numa:1 core:4 pu:1");
	std::vector<lcore_cpu> c = {{0, 0}, {1, 1}, {2, 5}, {3, 6}, {4, 2}};
	auto o = order_by_numa(tp.t, 1, c);
	ASSERT_EQ(o.size(), 5u);
	EXPECT_EQ(o[0].lcore, 2u);
	EXPECT_EQ(o[1].lcore, 3u);
	EXPECT_EQ(o[2].lcore, 0u);
	auto o0 = order_by_numa(tp.t, 0, c);
	EXPECT_EQ(o0[0].lcore, 0u);
	EXPECT_EQ(o0[1].lcore, 1u);
	EXPECT_EQ(o0[2].lcore, 4u);
	auto any = order_by_numa(tp.t, -1, c);
	EXPECT_EQ(any[0].lcore, 0u);
}

TEST(Placement, FourNodesWithSmt)
{
	topo tp("pack:2 numa:2 core:2 pu:2"); /* 4 nodes x 4 PUs */
	std::vector<lcore_cpu> c;
	for (unsigned i = 0; i < 16; i++)
		c.push_back({i, i});
	auto o = order_by_numa(tp.t, 3, c);
	for (unsigned i = 0; i < 4; i++)
		EXPECT_EQ(numa_of_cpu(tp.t, o[i].cpu), 3);
	EXPECT_NE(numa_of_cpu(tp.t, o[4].cpu), 3);
}

TEST(RuntimeArgs, SplitAtDoubleDash)
{
	const char *argv[] = {"app", "-l", "0,1", "--", "-s", "64"};
	auto s = split_command_line(6, const_cast<char **>(argv));
	EXPECT_TRUE(s.eal_given);
	EXPECT_EQ(s.eal, (std::vector<std::string>{"-l", "0,1"}));
	EXPECT_EQ(s.app, (std::vector<std::string>{"-s", "64"}));
	const char *argv2[] = {"app", "-s", "64"};
	auto s2 = split_command_line(3, const_cast<char **>(argv2));
	EXPECT_FALSE(s2.eal_given);
	EXPECT_EQ(s2.app.size(), 2u);
}

TEST(RuntimeArgs, ContainerDefaults)
{
	auto a = default_eal_args(512, "3");
	auto has = [&](const std::string &x) { return std::find(a.begin(), a.end(), x) != a.end(); };
	EXPECT_TRUE(has("--no-pci"));
	EXPECT_TRUE(has("3"));
	if (hugepages_available())
		EXPECT_TRUE(has("--in-memory"));
	else
		EXPECT_TRUE(has("--no-huge") && has("--no-shconf") && !has("--in-memory"));
}

TEST(RuntimeArgs, CaptureChoice)
{
	capture_mode m = capture_mode::off;
	EXPECT_EQ(parse_capture_mode("auto", &m), 0);
	EXPECT_EQ(m, capture_mode::automatic);
	EXPECT_EQ(parse_capture_mode("on", &m), 0);
	EXPECT_EQ(m, capture_mode::on);
	EXPECT_EQ(parse_capture_mode("off", &m), 0);
	EXPECT_EQ(m, capture_mode::off);
	EXPECT_EQ(parse_capture_mode("yes", &m), EINVAL);

	std::string why;
	EXPECT_TRUE(eal_args_allow_capture({"-l", "0,1", "--file-prefix=x"}, &why));
	EXPECT_FALSE(eal_args_allow_capture({"-l", "0", "--no-huge", "-m", "64"}, &why));
	EXPECT_EQ(why, "the EAL arguments say --no-huge");
	EXPECT_FALSE(eal_args_allow_capture({"--in-memory"}, &why));
	EXPECT_FALSE(eal_args_allow_capture({"--no-shconf"}, &why));

	/* off: today's container defaults, whatever the machine has. */
	const eal_defaults off = default_eal_setup(512, "3", true, capture_mode::off);
	EXPECT_FALSE(off.shared);
	EXPECT_EQ(off.args, default_eal_args(512, "3"));
	/* auto: shared exactly when hugepages_for_capture says so, else the
	 * off defaults with its reason. */
	const eal_defaults a = default_eal_setup(512, "3", true, capture_mode::automatic);
	auto has = [&](const std::string &x) { return std::find(a.args.begin(), a.args.end(), x) != a.args.end(); };
	std::string dir, no;
	const bool can = hugepages_for_capture(160, &dir, &no);
	EXPECT_EQ(a.shared, can);
	if (a.shared) {
		EXPECT_TRUE(has("--huge-dir=" + dir));
		EXPECT_FALSE(has("--no-huge") || has("--no-shconf") || has("--in-memory"));
		EXPECT_TRUE(std::any_of(a.args.begin(), a.args.end(),
					[](const std::string &x) { return x.starts_with("--socket-limit=512"); }));
		EXPECT_TRUE(a.why_not.empty());
	} else {
		EXPECT_EQ(a.args, off.args);
		EXPECT_EQ(a.why_not, no);
		EXPECT_FALSE(a.why_not.empty());
	}
}

TEST(RuntimeArgs, QuietEalUnlessAsked)
{
	const auto q = eal_quiet_log_args();
	ASSERT_FALSE(q.empty());
	/* A type registered after the options are parsed (telemetry's) takes
	 * the first pattern it matches: the specific one must come first. */
	EXPECT_EQ(q.front(), "--log-level=lib.telemetry,error");
	auto a = default_eal_args(512, "3");
	for (const auto &o : q)
		EXPECT_NE(std::find(a.begin(), a.end(), o), a.end()) << o;
	EXPECT_TRUE(has_eal_log_level(a));
	auto v = default_eal_args(512, "3", false);
	EXPECT_FALSE(has_eal_log_level(v));
	EXPECT_TRUE(has_eal_log_level({"-l", "0", "--log-level", "lib.eal:error"}));
	EXPECT_TRUE(has_eal_log_level({"--log-level=8"}));
	EXPECT_FALSE(has_eal_log_level({"-l", "0", "--log-levels=8", "--no-huge"}));
}

} // namespace

TEST(Placement, ReplicaPerNodeWithPollThreads)
{
	topo tp("pack:2 numa:2 core:2 pu:2"); /* 4 nodes x 4 PUs */
	/* Poll lcores on nodes 2, 0, 2, 0: two replicas, first-seen order. */
	std::vector<lcore_cpu> poll = {{0, 8}, {1, 1}, {2, 9}, {3, 2}};
	auto r = replica_nodes(tp.t, poll);
	ASSERT_EQ(r.size(), 2u);
	EXPECT_EQ(r[0], 2);
	EXPECT_EQ(r[1], 0);
	/* All on one node: one replica. */
	r = replica_nodes(tp.t, {{0, 4}, {1, 5}, {2, 7}});
	ASSERT_EQ(r.size(), 1u);
	EXPECT_EQ(r[0], 1);
	/* A CPU outside the topology: "any node". */
	r = replica_nodes(tp.t, {{0, 99}});
	ASSERT_EQ(r.size(), 1u);
	EXPECT_EQ(r[0], -1);
}

TEST(Placement, ReplicaNodesFromXmlTopology)
{
	/* Two packages, one NUMA node each, exported to XML and read back:
	 * the same logic on an XML topology. */
	topo syn("pack:2 numa:1 core:2 pu:1");
	char *xml = nullptr;
	int len = 0;
	ASSERT_EQ(hwloc_topology_export_xmlbuffer(syn.t, &xml, &len, 0), 0);
	hwloc_topology_t t;
	hwloc_topology_init(&t);
	ASSERT_EQ(hwloc_topology_set_xmlbuffer(t, xml, len), 0);
	ASSERT_EQ(hwloc_topology_load(t), 0);
	hwloc_free_xmlbuffer(syn.t, xml);
	auto r = replica_nodes(t, {{0, 3}, {1, 0}, {2, 2}});
	ASSERT_EQ(r.size(), 2u);
	EXPECT_EQ(r[0], 1);
	EXPECT_EQ(r[1], 0);
	hwloc_topology_destroy(t);
}
