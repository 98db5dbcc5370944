/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/common/ibv: the rdma-core glue (see ibv_device.h).
 */
#include "ibv_device.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <endian.h>
#include <hwloc/openfabrics-verbs.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_memory.h>

#include "rdgram/tsan.h"

namespace rdgram::ibv {

namespace {

/* The ACTIVE port of an open device: want, or the first when want is 0;
 * 0 when there is none. */
uint8_t active_port(ibv_context *ctx, uint8_t want)
{
	ibv_device_attr da{};
	if (ibv_query_device(ctx, &da) != 0)
		return 0;
	for (unsigned p = 1; p <= da.phys_port_cnt; p++) {
		if (want != 0 && p != want)
			continue;
		ibv_port_attr pa{};
		if (ibv_query_port(ctx, uint8_t(p), &pa) == 0 && pa.state == IBV_PORT_ACTIVE)
			return uint8_t(p);
	}
	return 0;
}

/* <ibdev_path>/device/numa_node, or -1 (unknown, or no such file). */
int sysfs_numa_node(ibv_device *dev)
{
	char path[IBV_SYSFS_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/device/numa_node", dev->ibdev_path);
	FILE *f = fopen(path, "r");
	if (f == nullptr)
		return -1;
	int n = -1;
	if (fscanf(f, "%d", &n) != 1)
		n = -1;
	fclose(f);
	return n;
}

} // namespace

ibv_context *open_device(const device_match &m, uint8_t *port, int *err, std::string *why)
{
	*err = ENODEV;
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	if (list == nullptr) {
		*why = std::string("no ") + m.kind + " device (ibv_get_device_list: " + strerror(errno) + ")";
		return nullptr;
	}
	const std::string port_text = m.port != 0 ? "active port " + std::to_string(m.port) : "active port";
	ibv_context *found = nullptr;
	std::string reason; /* why the named device did not qualify */
	for (int i = 0; i < n && found == nullptr; i++) {
		const std::string name = ibv_get_device_name(list[i]);
		if (!m.name.empty() && m.name != name)
			continue;
		const std::string not_kind = name + " is not an " + m.kind + " device";
		if (m.accept_device && !m.accept_device(list[i])) {
			reason = not_kind;
			continue;
		}
		errno = 0;
		ibv_context *ctx = m.open ? m.open(list[i]) : ibv_open_device(list[i]);
		if (ctx == nullptr) {
			reason = "opening " + name + ": " + strerror(errno != 0 ? errno : ENODEV);
			continue;
		}
		if (m.accept_context && !m.accept_context(ctx)) {
			ibv_close_device(ctx);
			reason = not_kind;
			continue;
		}
		const uint8_t p = active_port(ctx, m.port);
		if (p == 0) {
			ibv_close_device(ctx);
			reason = name + " has no " + port_text;
			continue;
		}
		found = ctx;
		*port = p;
	}
	if (found == nullptr) {
		if (n == 0)
			*why = std::string("no ") + m.kind + " device (ibv_get_device_list found none)";
		else if (!m.name.empty() && !reason.empty())
			*why = reason;
		else if (!m.name.empty())
			*why = std::string("no ") + m.kind + " device named " + m.name;
		else
			*why = std::string("no ") + m.kind + " device with an " + port_text;
	} else {
		*err = 0;
	}
	/* ibv_open_device holds its own reference to the device. */
	ibv_free_device_list(list);
	return found;
}

int query_port(ibv_context *ctx, uint8_t port_num, uint32_t table_cap, int numa_node, port_facts *out,
	       std::string *why)
{
	if (int e = ibv_query_device(ctx, &out->dev); e != 0) {
		*why = std::string("ibv_query_device: ") + strerror(e);
		return e;
	}
	port_query q;
	q.port_num = port_num;
	if (int e = ibv_query_port(ctx, port_num, &q.pa); e != 0) {
		*why = std::string("ibv_query_port: ") + strerror(e);
		return e;
	}
	out->port = q.pa;
	q.dev_max_ah = out->dev.max_ah;
	q.table_cap = table_cap;
	__be16 pk = 0xffff;
	/* P_Key table entry 0 (the QPs use pkey_index 0). */
	if (ibv_query_pkey(ctx, port_num, 0, &pk) == 0)
		q.pkey0 = be16toh(pk);
	q.numa_node = numa_node;

	/* The whole table at once: every valid entry of every port, with its
	 * type (ibv_query_gid_table(3), rdma-core >= 31). */
	const unsigned ports = out->dev.phys_port_cnt > 0 ? out->dev.phys_port_cnt : 1;
	size_t cap = size_t(q.pa.gid_tbl_len > 0 ? q.pa.gid_tbl_len : 1) * ports;
	std::vector<ibv_gid_entry> ents(cap);
	ssize_t got = ibv_query_gid_table(ctx, ents.data(), ents.size(), 0);
	if (got < 0) {
		/* Older kernels: one entry at a time (ibv_query_gid_ex(3)); an
		 * empty index fails with ENODATA. */
		got = 0;
		for (int i = 0; i < q.pa.gid_tbl_len; i++) {
			ibv_gid_entry e{};
			if (ibv_query_gid_ex(ctx, port_num, uint32_t(i), &e, 0) == 0)
				ents[size_t(got++)] = e;
		}
	}
	q.gids = ents.data();
	q.ngids = size_t(got);
	if (int e = translate_port(q, &out->attr, &out->kinds); e != 0) {
		*why = "port " + std::to_string(port_num) + " reports an active MTU (enum " +
		       std::to_string(int(q.pa.active_mtu)) + ") that is not an IB MTU";
		return e;
	}
	return 0;
}

int numa_node(ibv_device *dev, hwloc_topology_t topo, std::vector<unsigned> *cpus)
{
	int node = sysfs_numa_node(dev);
	if (cpus != nullptr)
		cpus->clear();
	if (topo == nullptr)
		return node >= 0 ? node : SOCKET_ID_ANY;
	hwloc_bitmap_t set = hwloc_bitmap_alloc();
	if (set != nullptr && hwloc_ibv_get_device_cpuset(topo, dev, set) == 0) {
		if (cpus != nullptr) {
			unsigned cpu;
			hwloc_bitmap_foreach_begin(cpu, set) cpus->push_back(cpu);
			hwloc_bitmap_foreach_end();
		}
		/* sysfs reports no node: the NUMA node whose CPUs include the
		 * device's local CPUs. */
		if (node < 0) {
			hwloc_obj_t o = nullptr;
			while ((o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o)) != nullptr)
				if (o->cpuset != nullptr && hwloc_bitmap_isincluded(set, o->cpuset)) {
					node = int(o->os_index);
					break;
				}
		}
	}
	if (set != nullptr)
		hwloc_bitmap_free(set);
	return node >= 0 ? node : SOCKET_ID_ANY;
}

namespace {
struct reg_ctx {
	ibv_pd *pd;
	std::vector<ibv_mr *> *mrs;
	lkey_map *map;
	int err;
};
void reg_chunk(rte_mempool *, void *opaque, rte_mempool_memhdr *h, unsigned)
{
	auto *c = static_cast<reg_ctx *>(opaque);
	if (c->err != 0)
		return;
	errno = 0;
	/* An int, as ibv_reg_mr takes: rdma-core's ibv_reg_mr macro ands the
	 * flags with IBV_ACCESS_OPTIONAL_RANGE, an enumerator of another enum,
	 * which C++20 deprecates between two enumeration types. */
	ibv_mr *mr = ibv_reg_mr(c->pd, h->addr, h->len, int(IBV_ACCESS_LOCAL_WRITE));
	if (mr == nullptr) {
		c->err = errno != 0 ? errno : ENOMEM;
		return;
	}
	c->mrs->push_back(mr);
	if (int e = c->map->add(reinterpret_cast<uintptr_t>(h->addr), h->len, mr->lkey); e != 0)
		c->err = e;
}
} // namespace

int register_mempool(ibv_pd *pd, rte_mempool *mp, std::vector<ibv_mr *> *mrs, lkey_map *map, std::string *why)
{
	if (pd == nullptr || mp == nullptr) {
		*why = "register_mempool: no PD or no mempool";
		return EINVAL;
	}
	std::vector<ibv_mr *> made;
	lkey_map m = *map;
	reg_ctx c{pd, &made, &m, 0};
	rte_mempool_mem_iter(mp, reg_chunk, &c);
	if (c.err != 0) {
		for (ibv_mr *mr : made)
			ibv_dereg_mr(mr);
		*why = std::string("registering mempool ") + mp->name + ": " +
		       (c.err == ENOSPC ? "more memory chunks than the lkey map holds (" +
						  std::to_string(lkey_map::max_chunks) + ")"
					: c.err == EEXIST ? std::string("a memory chunk overlaps one registered already")
							  : std::string("ibv_reg_mr: ") + strerror(c.err));
		return c.err;
	}
	*map = m;
	mrs->insert(mrs->end(), made.begin(), made.end());
	return 0;
}

int device_pool(rte_mempool *given, uint32_t nb_mbufs, uint32_t mtu, int socket, const char *prefix,
		rte_mempool **out, bool *owned, std::string *why)
{
	const uint32_t room = RTE_PKTMBUF_HEADROOM + 40 /* GRH */ + mtu;
	*out = nullptr;
	*owned = false;
	if (given != nullptr) {
		if (rte_pktmbuf_data_room_size(given) < room) {
			*why = "pool: data room " + std::to_string(rte_pktmbuf_data_room_size(given)) +
			       " is short of headroom + 40 (GRH) + MTU = " + std::to_string(room);
			return EINVAL;
		}
		*out = given;
		return 0;
	}
	if (room > UINT16_MAX) {
		*why = "MTU " + std::to_string(mtu) + " needs a data room over 65535: give a pool";
		return EINVAL;
	}
	static std::atomic<unsigned> seq{0};
	char name[RTE_MEMPOOL_NAMESIZE];
	snprintf(name, sizeof(name), "%s%u", prefix, seq.fetch_add(1));
	/* A per-lcore cache of 256, smaller for a small pool: DPDK refuses a
	 * cache over two thirds of the pool (EINVAL). */
	const unsigned cache = std::min(256u, nb_mbufs * 2 / 3);
	rte_mempool *mp = rte_pktmbuf_pool_create_by_ops(name, nb_mbufs, cache, 0, uint16_t(room), socket,
							 RDGRAM_MEMPOOL_OPS);
	if (mp == nullptr) {
		const int e = rte_errno ? rte_errno : ENOMEM;
		*why = std::string("mempool: ") + rte_strerror(e);
		return e;
	}
	*out = mp;
	*owned = true;
	return 0;
}

} // namespace rdgram::ibv
