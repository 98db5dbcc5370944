/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/common/ibv without an RDMA device: the answers its header
 * promises for the lkey map's bounds, the NUMA node of a device whose sysfs
 * says unknown, and the reason open_device gives when no device qualifies.
 * (The port facts' translation is tested in test_verbs_logic.cc; the
 * verbs calls themselves run on rxe in the lab, lab_verbs_hw.)
 */
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <rte_memory.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ibv_device.h"
#include "ibv_lkey_map.h"

using namespace rdgram::ibv;

namespace {

TEST(IbvLkeyMap, BoundsNearTheTopOfTheAddressSpaceDoNotWrap)
{
	lkey_map m;
	/* The last 4 KiB below the top: [top - 0x1000, top). */
	const uintptr_t top = UINTPTR_MAX - 15;
	ASSERT_EQ(m.add(top - 0x1000, 0x1000, 7), 0);
	uint32_t k = 0;
	EXPECT_TRUE(m.lookup(top - 64, 64, &k)); /* ends exactly at the end */
	EXPECT_EQ(k, 7u);
	/* a + len wraps past zero: an unchecked a + len <= end would take it. */
	EXPECT_FALSE(m.lookup(top - 8, 64, &k));
	EXPECT_FALSE(lkey_map::inside(top - 0x1000, top, top - 8, 64));
	EXPECT_FALSE(lkey_map::inside(top - 0x1000, top, top + 4, 1)); /* past the end */
	EXPECT_TRUE(lkey_map::inside(top - 0x1000, top, top, 0));
	/* A range that would wrap is refused when added. */
	EXPECT_EQ(m.add(UINTPTR_MAX - 8, 64, 9), EINVAL);
}

TEST(IbvLkeyMap, LastRangeIsTheLastHitAndClearForgets)
{
	lkey_map m;
	uintptr_t s = 0, e = 0;
	uint32_t k = 0;
	EXPECT_FALSE(m.last_range(&s, &e, &k));
	ASSERT_EQ(m.add(0x20000, 0x1000, 2), 0);
	ASSERT_EQ(m.add(0x10000, 0x1000, 1), 0);
	ASSERT_TRUE(m.lookup(uintptr_t(0x20010), 16, &k));
	ASSERT_TRUE(m.last_range(&s, &e, &k));
	EXPECT_EQ(s, 0x20000u);
	EXPECT_EQ(e, 0x21000u);
	EXPECT_EQ(k, 2u);
	ASSERT_TRUE(m.lookup(uintptr_t(0x10010), 16, &k));
	ASSERT_TRUE(m.last_range(&s, &e, &k));
	EXPECT_EQ(k, 1u);
	m.clear();
	EXPECT_EQ(m.size(), 0u);
	EXPECT_FALSE(m.last_range(&s, &e, &k));
	EXPECT_FALSE(m.lookup(uintptr_t(0x10010), 16, &k));
}

/* A device whose sysfs directory is a temporary one (ibdev_path). */
struct fake_device {
	ibv_device dev{};
	std::string dir;
	fake_device()
	{
		char tmpl[] = "/tmp/rdgram_ibv_XXXXXX";
		const char *d = mkdtemp(tmpl);
		EXPECT_NE(d, nullptr);
		dir = d != nullptr ? d : "/nonexistent";
		snprintf(dev.name, sizeof(dev.name), "rdgram_no_such_dev");
		snprintf(dev.ibdev_path, sizeof(dev.ibdev_path), "%s", dir.c_str());
		mkdir((dir + "/device").c_str(), 0700);
	}
	~fake_device()
	{
		unlink((dir + "/device/numa_node").c_str());
		rmdir((dir + "/device").c_str());
		rmdir(dir.c_str());
	}
	void numa(const char *text)
	{
		FILE *f = fopen((dir + "/device/numa_node").c_str(), "w");
		ASSERT_NE(f, nullptr);
		fputs(text, f);
		fclose(f);
	}
};

TEST(IbvNuma, SysfsNodeOrNoPreference)
{
	fake_device d;
	/* No numa_node file: unknown. */
	EXPECT_EQ(numa_node(&d.dev, nullptr, nullptr), SOCKET_ID_ANY);
	d.numa("1\n");
	EXPECT_EQ(numa_node(&d.dev, nullptr, nullptr), 1);
	d.numa("0\n");
	EXPECT_EQ(numa_node(&d.dev, nullptr, nullptr), 0);
	/* sysfs's "unknown" is -1; rdgram's answer is SOCKET_ID_ANY, not 0. */
	d.numa("-1\n");
	EXPECT_EQ(numa_node(&d.dev, nullptr, nullptr), SOCKET_ID_ANY);
	d.numa("garbage");
	EXPECT_EQ(numa_node(&d.dev, nullptr, nullptr), SOCKET_ID_ANY);
}

TEST(IbvNuma, UnknownWithATopologyIsTheNodeOfTheLocalCpus)
{
	/* hwloc_ibv_get_device_cpuset answers the whole machine for a device
	 * whose local_cpus it cannot read (this fake one): the node whose
	 * CPUs include them all exists only on a one-node machine; on any
	 * other there is none, and the answer is no preference. */
	hwloc_topology_t topo;
	ASSERT_EQ(hwloc_topology_init(&topo), 0);
	ASSERT_EQ(hwloc_topology_load(topo), 0);
	const int nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
	const int want = nodes == 1 ? int(hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, 0)->os_index)
				    : SOCKET_ID_ANY;
	fake_device d;
	d.numa("-1\n");
	std::vector<unsigned> cpus{99};
	EXPECT_EQ(numa_node(&d.dev, topo, &cpus), want) << nodes << " NUMA node(s)";
	EXPECT_EQ(int(cpus.size()), hwloc_bitmap_weight(hwloc_topology_get_complete_cpuset(topo)));
	d.numa("2\n");
	EXPECT_EQ(numa_node(&d.dev, topo, &cpus), 2); /* sysfs wins when it knows */
	hwloc_topology_destroy(topo);
}

TEST(IbvOpen, NoSuchDeviceIsEnodevWithItsReason)
{
	device_match m;
	m.name = "rdgram_no_such_dev";
	m.kind = "mlx5";
	uint8_t port = 0;
	int err = 0;
	std::string why;
	EXPECT_EQ(open_device(m, &port, &err, &why), nullptr);
	EXPECT_EQ(err, ENODEV);
	/* "no mlx5 device named rdgram_no_such_dev" where devices exist;
	 * "no mlx5 device (...)" where there are none, as here. */
	EXPECT_EQ(why.rfind("no mlx5 device", 0), 0u) << why;
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	if (list != nullptr && n > 0) {
		EXPECT_NE(why.find("named rdgram_no_such_dev"), std::string::npos) << why;
	}
	if (list != nullptr)
		ibv_free_device_list(list);
}

} // namespace
