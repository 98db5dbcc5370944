/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "verbs_device.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <endian.h>
#include <hwloc/openfabrics-verbs.h>

#include "rdgram/log.h"

namespace rdgram::verbs {

namespace {

/* The first active port of an open device, or 0. */
uint8_t first_active_port(ibv_context *ctx, uint8_t want)
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

/* /sys/class/infiniband/<dev>/device/numa_node, or -1. */
int sysfs_numa_node(const char *dev)
{
	char path[256];
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/numa_node", dev);
	FILE *f = fopen(path, "r");
	if (f == nullptr)
		return -1;
	int n = -1;
	if (fscanf(f, "%d", &n) != 1)
		n = -1;
	fclose(f);
	return n;
}

/* Opens the device named want (any when empty) with an active port (port
 * want_port, any when 0). */
ibv_context *open_matching(const std::string &want, uint8_t want_port, uint8_t *port,
			   ibv_device **which, std::string *why)
{
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	if (list == nullptr) {
		*why = std::string("no RDMA device (ibv_get_device_list: ") + strerror(errno) + ")";
		return nullptr;
	}
	ibv_context *found = nullptr;
	bool named = false;
	for (int i = 0; i < n && found == nullptr; i++) {
		if (!want.empty() && want != ibv_get_device_name(list[i]))
			continue;
		named = true;
		ibv_context *ctx = ibv_open_device(list[i]);
		if (ctx == nullptr)
			continue;
		uint8_t p = first_active_port(ctx, want_port);
		if (p != 0) {
			found = ctx;
			*port = p;
			if (which != nullptr)
				*which = list[i];
		} else {
			ibv_close_device(ctx);
		}
	}
	if (found == nullptr) {
		if (n == 0)
			*why = "no RDMA device (ibv_get_device_list found none)";
		else if (!want.empty() && !named)
			*why = "no RDMA device named " + want;
		else
			*why = "no RDMA device with an active port";
	}
	/* ibv_open_device holds its own reference to the device. */
	ibv_free_device_list(list);
	if (which != nullptr && found == nullptr)
		*which = nullptr;
	return found;
}

} // namespace

bool find_active_port(const std::string &want, std::string *name, uint8_t *port, std::string *why)
{
	ibv_context *ctx = open_matching(want, 0, port, nullptr, why);
	if (ctx == nullptr)
		return false;
	*name = ibv_get_device_name(ctx->device);
	ibv_close_device(ctx);
	return true;
}

verbs_device::~verbs_device() { close(); }

void verbs_device::locate(ibv_device *dev)
{
	int node = sysfs_numa_node(ibv_get_device_name(dev));
	cpus_.clear();
	if (cfg_.topology != nullptr) {
		hwloc_bitmap_t set = hwloc_bitmap_alloc();
		if (set != nullptr && hwloc_ibv_get_device_cpuset(cfg_.topology, dev, set) == 0) {
			unsigned cpu;
			hwloc_bitmap_foreach_begin(cpu, set) cpus_.push_back(cpu);
			hwloc_bitmap_foreach_end();
			/* No node in sysfs (-1: none reported): the NUMA node
			 * whose CPUs include the device's local CPUs. */
			if (node < 0) {
				hwloc_obj_t o = nullptr;
				while ((o = hwloc_get_next_obj_by_type(cfg_.topology, HWLOC_OBJ_NUMANODE, o)) !=
				       nullptr)
					if (o->cpuset != nullptr && hwloc_bitmap_isincluded(set, o->cpuset)) {
						node = int(o->os_index);
						break;
					}
			}
		}
		if (set != nullptr)
			hwloc_bitmap_free(set);
	}
	attr_.numa_node = node < 0 ? 0 : node;
}

int verbs_device::query_port()
{
	ibv_device_attr da{};
	if (int e = ibv_query_device(ctx_, &da); e != 0) {
		err_ = std::string("ibv_query_device: ") + strerror(e);
		return e;
	}
	port_query q;
	q.port_num = port_;
	if (int e = ibv_query_port(ctx_, port_, &q.pa); e != 0) {
		err_ = std::string("ibv_query_port: ") + strerror(e);
		return e;
	}
	q.dev_max_ah = da.max_ah;
	q.table_cap = cfg_.max_ah;
	__be16 pk = 0xffff;
	/* P_Key table entry 0 (the QPs use pkey_index 0). */
	if (ibv_query_pkey(ctx_, port_, 0, &pk) == 0)
		q.pkey0 = be16toh(pk);
	q.numa_node = attr_.numa_node;

	/* The whole table at once: every valid entry of every port, with its
	 * type (ibv_query_gid_table(3), rdma-core >= 31). */
	size_t cap = size_t(q.pa.gid_tbl_len > 0 ? q.pa.gid_tbl_len : 1) * da.phys_port_cnt;
	std::vector<ibv_gid_entry> ents(cap);
	ssize_t got = ibv_query_gid_table(ctx_, ents.data(), ents.size(), 0);
	if (got < 0) {
		/* Older kernels: one entry at a time (ibv_query_gid_ex(3)); an
		 * empty index fails with ENODATA. */
		got = 0;
		for (int i = 0; i < q.pa.gid_tbl_len; i++) {
			ibv_gid_entry e{};
			if (ibv_query_gid_ex(ctx_, port_, uint32_t(i), &e, 0) == 0)
				ents[size_t(got++)] = e;
		}
	}
	q.gids = ents.data();
	q.ngids = size_t(got);
	if (int e = translate_port(q, &attr_, &kinds_); e != 0) {
		err_ = "port reports an active MTU that is not an IB MTU";
		return e;
	}
	return 0;
}

int verbs_device::open(const verbs_config &cfg)
{
	close();
	cfg_ = cfg;
	if (cfg.max_ah == 0) {
		err_ = "max_ah must be at least 1";
		return EINVAL;
	}
	ibv_device *dev = nullptr;
	ctx_ = open_matching(cfg.device, cfg.port_num, &port_, &dev, &err_);
	if (ctx_ == nullptr)
		return ENODEV;
	name_ = ibv_get_device_name(ctx_->device);
	locate(ctx_->device);
	if (int e = query_port(); e != 0) {
		close();
		return e;
	}
	pd_ = ibv_alloc_pd(ctx_);
	if (pd_ == nullptr) {
		int e = errno ? errno : ENOMEM;
		err_ = std::string("ibv_alloc_pd: ") + strerror(e);
		close();
		return e;
	}
	std::vector<int> nodes = cfg.av_nodes;
	if (nodes.empty())
		nodes.push_back(attr_.numa_node);
	if (int e = ahs_.init(attr_.max_ah, nodes.data(), unsigned(nodes.size()), cfg.qsbr); e != 0) {
		err_ = "AH table allocation failed";
		close();
		return e;
	}
	live_.assign(attr_.max_ah, nullptr);
	RDGRAM_LOG(verbs, INFO, "%s port %u: %s, MTU %u, max_ah %u, NUMA node %d", name_.c_str(), port_,
		   attr_.link == link_layer::ethernet ? "RoCE" : "InfiniBand", attr_.active_mtu, attr_.max_ah,
		   attr_.numa_node);
	return 0;
}

void verbs_device::close()
{
	/* Every AH still live or waiting: no queue exists any more, so no
	 * poll thread can post with them. */
	for (ibv_ah *ah : live_)
		if (ah != nullptr)
			ibv_destroy_ah(ah);
	live_.clear();
	for (const auto &r : retired_)
		ibv_destroy_ah(r.ah);
	retired_.clear();
	ahs_.fini();
	for (auto &p : pools_)
		for (ibv_mr *mr : p.mrs)
			ibv_dereg_mr(mr);
	pools_.clear();
	mrs_ = mr_map{};
	if (pd_ != nullptr) {
		ibv_dealloc_pd(pd_);
		pd_ = nullptr;
	}
	if (ctx_ != nullptr) {
		ibv_close_device(ctx_);
		ctx_ = nullptr;
	}
	port_ = 0;
	kinds_.clear();
	cpus_.clear();
	attr_ = port_attr{};
}

ah_handle verbs_device::create_ah(const ibv_ah_attr &attr, int *err)
{
	if (attr.port_num != 1 || (attr_.grh_required && !attr.is_global) ||
	    (attr.is_global && attr.grh.sgid_index >= attr_.gids.size())) {
		*err = EINVAL;
		return ah_null;
	}
	uint32_t slot;
	if (!ahs_.reserve(&slot)) {
		*err = ENOMEM;
		return ah_null;
	}
	ibv_ah_attr a = attr;
	a.port_num = port_;
	errno = 0;
	ibv_ah *ah = ibv_create_ah(pd_, &a);
	if (ah == nullptr) {
		ahs_.unreserve(slot);
		*err = errno != 0 ? errno : ENOMEM;
		return ah_null;
	}
	ahs_.av_at(slot).ah = ah;
	live_[slot] = ah;
	*err = 0;
	return ahs_.publish(slot);
}

int verbs_device::destroy_ah(ah_handle h)
{
	if (int rc = ahs_.retire(h); rc != 0)
		return rc;
	ibv_ah *ah = live_[h.slot];
	live_[h.slot] = nullptr;
	if (cfg_.qsbr == nullptr) {
		/* No poll thread reads the table: destroy now. */
		if (ibv_destroy_ah(ah) != 0)
			destroy_errors_++;
		return 0;
	}
	retired_.push_back(retired{ah, rte_rcu_qsbr_start(cfg_.qsbr)});
	return 0;
}

void verbs_device::reclaim()
{
	ahs_.reclaim();
	while (!retired_.empty() && rte_rcu_qsbr_check(cfg_.qsbr, retired_.front().token, false) == 1) {
		/* A failure leaves nothing to retry with: count it. */
		if (ibv_destroy_ah(retired_.front().ah) != 0)
			destroy_errors_++;
		retired_.pop_front();
	}
}

namespace {
struct reg_ctx {
	ibv_pd *pd;
	std::vector<ibv_mr *> *mrs;
	mr_map *map;
	int err;
};
void reg_chunk(rte_mempool *, void *opaque, rte_mempool_memhdr *h, unsigned)
{
	auto *c = static_cast<reg_ctx *>(opaque);
	if (c->err != 0)
		return;
	ibv_mr *mr = ibv_reg_mr(c->pd, h->addr, h->len, IBV_ACCESS_LOCAL_WRITE);
	if (mr == nullptr) {
		c->err = errno != 0 ? errno : ENOMEM;
		return;
	}
	c->mrs->push_back(mr);
	if (int e = c->map->add(reinterpret_cast<uintptr_t>(h->addr), h->len, mr->lkey); e != 0)
		c->err = e;
}
} // namespace

int verbs_device::register_mempool(rte_mempool *mp)
{
	if (pd_ == nullptr || mp == nullptr)
		return EINVAL;
	for (const auto &p : pools_)
		if (p.mp == mp)
			return 0;
	pool_mrs pm{mp, {}};
	mr_map map = mrs_;
	reg_ctx c{pd_, &pm.mrs, &map, 0};
	rte_mempool_mem_iter(mp, reg_chunk, &c);
	if (c.err != 0) {
		for (ibv_mr *mr : pm.mrs)
			ibv_dereg_mr(mr);
		err_ = std::string("registering mempool ") + mp->name + ": " + strerror(c.err);
		return c.err;
	}
	mrs_ = map;
	pools_.push_back(std::move(pm));
	return 0;
}

int verbs_device::create_queue(const verbs_queue_config &cfg, verbs_queue &q, int socket)
{
	if (ctx_ == nullptr || cfg.pool == nullptr || cfg.sq_depth == 0 || cfg.rq_depth == 0 ||
	    cfg.signal_every == 0 || cfg.signal_every > cfg.sq_depth || cfg.recv_batch == 0 ||
	    cfg.recv_batch > verbs_queue::max_burst || cfg.recv_batch > cfg.rq_depth) {
		err_ = "queue: pool missing or sizes out of range";
		return EINVAL;
	}
	/* The receive buffer: 40-byte GRH area + the MTU. */
	if (rte_pktmbuf_data_room_size(cfg.pool) < RTE_PKTMBUF_HEADROOM + wire::grh_len + attr_.active_mtu) {
		err_ = "queue: pool buffers smaller than headroom + 40 (GRH) + MTU";
		return EINVAL;
	}
	if (int e = register_mempool(cfg.pool); e != 0)
		return e;

	verbs_queue_parts p;
	auto fail = [&](const char *what, int e) {
		err_ = std::string(what) + ": " + strerror(e);
		if (p.qp != nullptr)
			ibv_destroy_qp(p.qp);
		if (p.send_cq != nullptr)
			ibv_destroy_cq(p.send_cq);
		if (p.recv_cq != nullptr)
			ibv_destroy_cq(p.recv_cq);
		return e;
	};
	p.send_cq = ibv_create_cq(ctx_, int(cfg.sq_depth), nullptr, nullptr, 0);
	if (p.send_cq == nullptr)
		return fail("ibv_create_cq (send)", errno ? errno : ENOMEM);
	p.recv_cq = ibv_create_cq(ctx_, int(cfg.rq_depth), nullptr, nullptr, 0);
	if (p.recv_cq == nullptr)
		return fail("ibv_create_cq (recv)", errno ? errno : ENOMEM);

	ibv_qp_init_attr ia{};
	ia.send_cq = p.send_cq;
	ia.recv_cq = p.recv_cq;
	ia.qp_type = IBV_QPT_UD;
	ia.sq_sig_all = 0; /* selective signalling */
	ia.cap.max_send_wr = cfg.sq_depth;
	ia.cap.max_recv_wr = cfg.rq_depth;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = cfg.max_inline;
	p.qp = ibv_create_qp(pd_, &ia);
	if (p.qp == nullptr && cfg.max_inline != 0) {
		/* Providers refuse an inline size they cannot do (EINVAL);
		 * go without inline rather than fail. */
		ia.cap.max_inline_data = 0;
		p.qp = ibv_create_qp(pd_, &ia);
	}
	if (p.qp == nullptr)
		return fail("ibv_create_qp (UD)", errno ? errno : ENOMEM);
	/* ibv_create_qp(3) writes the actual capabilities back. */
	p.sq_depth = ia.cap.max_send_wr;
	p.rq_depth = ia.cap.max_recv_wr;
	p.tx.max_inline = ia.cap.max_inline_data;

	/* UD: INIT (P_Key index, port, Q_Key), RTR, RTS (send PSN):
	 * ibv_modify_qp(3)'s required attributes per transition. */
	ibv_qp_attr qa{};
	qa.qp_state = IBV_QPS_INIT;
	qa.pkey_index = 0;
	qa.port_num = port_;
	qa.qkey = cfg.qkey;
	if (int e = ibv_modify_qp(p.qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	    e != 0)
		return fail("ibv_modify_qp INIT", e);
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTR;
	if (int e = ibv_modify_qp(p.qp, &qa, IBV_QP_STATE); e != 0)
		return fail("ibv_modify_qp RTR", e);
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTS;
	qa.sq_psn = cfg.sq_psn & 0xffffff;
	if (int e = ibv_modify_qp(p.qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN); e != 0)
		return fail("ibv_modify_qp RTS", e);

	p.qpn = p.qp->qp_num;
	p.qkey = cfg.qkey;
	p.ops = &ibv_ops;
	p.ahs = ahs_.for_socket(socket == SOCKET_ID_ANY ? ahs_.replica(0).socket() : socket);
	p.mrs = mrs_;
	p.rx_pool = cfg.pool;
	p.ethernet = attr_.link == link_layer::ethernet;
	p.recv_batch = cfg.recv_batch;
	p.tx.mtu = attr_.active_mtu;
	p.tx.signal_every = cfg.signal_every < p.sq_depth ? cfg.signal_every : p.sq_depth;
	if (int e = q.attach(p); e != 0)
		return fail("queue attach", e);
	q.post_recvs();
	if (q.rx_posted() == 0)
		return fail("posting receive buffers", ENOMEM);
	return 0;
}

void verbs_device::destroy_queue(verbs_queue &q)
{
	const verbs_queue_parts &p = q.parts();
	if (p.qp == nullptr)
		return;
	/* Error state: the device flushes every posted WR with a completion
	 * (IBV_WC_WR_FLUSH_ERR), which returns the receive buffers. */
	ibv_qp_attr qa{};
	qa.qp_state = IBV_QPS_ERR;
	if (ibv_modify_qp(p.qp, &qa, IBV_QP_STATE) == 0) {
		/* Bounded: a flush completion that never comes must not hang
		 * the control thread. */
		for (unsigned idle = 0; idle < 1000 && (q.rx_posted() != 0 || q.tx_outstanding() != 0);)
			idle = q.drain_once() != 0 ? 0 : idle + 1;
	}
	ibv_destroy_qp(p.qp);
	/* The QP is gone: the device reads no send buffer and writes no
	 * receive buffer any more; free those no completion gave back. */
	q.release_tx();
	q.release_rx();
	ibv_destroy_cq(p.send_cq);
	ibv_destroy_cq(p.recv_cq);
	q.detach();
}

} // namespace rdgram::verbs
