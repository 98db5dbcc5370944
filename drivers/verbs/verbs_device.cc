/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "verbs_device.h"

#include <cerrno>
#include <cstring>

#include <rte_mbuf.h>

#include "ibv_device.h"
#include "rdgram/log.h"
#include "rdgram/tsan.h"

namespace rdgram::verbs {

bool find_active_port(const std::string &want, std::string *name, uint8_t *port, std::string *why)
{
	ibv::device_match m;
	m.name = want;
	int err = 0;
	ibv_context *ctx = ibv::open_device(m, port, &err, why);
	if (ctx == nullptr)
		return false;
	*name = ibv_get_device_name(ctx->device);
	ibv_close_device(ctx);
	return true;
}

verbs_device::~verbs_device() { close(); }

int verbs_device::query_port(int numa)
{
	ibv::port_facts f;
	if (int e = ibv::query_port(ctx_, port_, cfg_.max_ah, numa, &f, &err_); e != 0)
		return e;
	attr_ = std::move(f.attr);
	kinds_ = std::move(f.kinds);
	return 0;
}

int verbs_device::open(const verbs_config &cfg)
{
	close();
	if (nqueues_ != 0)
		return EBUSY; /* close refused: error() says why */
	cfg_ = cfg;
	if (cfg.max_ah == 0) {
		err_ = "max_ah must be at least 1";
		return EINVAL;
	}
	ibv::device_match m;
	m.name = cfg.device;
	m.port = cfg.port_num;
	int err = 0;
	ctx_ = ibv::open_device(m, &port_, &err, &err_);
	if (ctx_ == nullptr)
		return err;
	name_ = ibv_get_device_name(ctx_->device);
	const int numa = ibv::numa_node(ctx_->device, cfg.topology, &cpus_);
	if (int e = query_port(numa); e != 0) {
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
	/* The device's mempool: a receive buffer is the 40-byte GRH area
	 * + the MTU (drivers/common/ibv device_pool). */
	if (int e = ibv::device_pool(cfg.pool, cfg.nb_mbufs, attr_.active_mtu, attr_.numa_node, "rdgram_verbs", &mp_,
				     &own_mp_, &err_);
	    e != 0) {
		close();
		return e;
	}
	if (int e = register_mempool(mp_); e != 0) {
		close();
		return e;
	}
	RDGRAM_LOG(verbs, INFO, "%s port %u: %s, MTU %u, max_ah %u, NUMA node %d", name_.c_str(), port_,
		   attr_.link == link_layer::ethernet ? "RoCE" : "InfiniBand", attr_.active_mtu, attr_.max_ah,
		   attr_.numa_node);
	return 0;
}

void verbs_device::close()
{
	if (nqueues_ != 0) {
		/* Their QPs hold the PD and the pool's MRs, and their rings
		 * hold the pool's mbufs: freeing any of it now would pull it
		 * from under them. */
		err_ = "close: " + std::to_string(nqueues_) + " queue(s) still alive (destroy_queue first)";
		RDGRAM_LOG(verbs, ERR, "%s", err_.c_str());
		return;
	}
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
	mrs_ = lkey_map{};
	if (mp_ != nullptr && own_mp_)
		rte_mempool_free(mp_);
	mp_ = nullptr;
	own_mp_ = false;
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

int verbs_device::register_mempool(rte_mempool *mp)
{
	if (pd_ == nullptr || mp == nullptr)
		return EINVAL;
	for (const auto &p : pools_)
		if (p.mp == mp)
			return 0;
	/* All or nothing (drivers/common/ibv): on failure mrs_ is as it
	 * was and no MR is left behind. */
	pool_mrs pm{mp, {}};
	if (int e = ibv::register_mempool(pd_, mp, &pm.mrs, &mrs_, &err_); e != 0)
		return e;
	pools_.push_back(std::move(pm));
	return 0;
}

int verbs_device::create_queue(const queue_params &qp, verbs_queue &q)
{
	struct {
		uint32_t qkey, sq_psn, sq_depth, rq_depth, max_inline, signal_every, recv_batch;
	} cfg = {
		qp.qkey != 0 ? qp.qkey : cfg_.qkey,
		cfg_.sq_psn,
		qp.sq_depth != 0 ? qp.sq_depth : cfg_.sq_depth,
		qp.rq_depth != 0 ? qp.rq_depth : cfg_.rq_depth,
		qp.max_inline != 0 ? qp.max_inline : cfg_.max_inline,
		qp.signal_every != 0 ? qp.signal_every : cfg_.signal_every,
		qp.recv_batch != 0 ? qp.recv_batch : cfg_.recv_batch,
	};
	auto refuse = [this](const char *field, uint32_t v, const std::string &why) {
		err_ = std::string("queue_params.") + field + " = " + std::to_string(v) + ": " + why;
		return EINVAL;
	};
	if (cfg.sq_depth == 0 || cfg.rq_depth == 0)
		return refuse(cfg.sq_depth == 0 ? "sq_depth" : "rq_depth", 0, "verbs_config's default is 0 too");
	if (cfg.signal_every == 0 || cfg.signal_every > cfg.sq_depth)
		return refuse("signal_every", cfg.signal_every,
			      "must be 1..sq_depth (" + std::to_string(cfg.sq_depth) +
				      "): a full SQ must hold a signalled send");
	if (cfg.recv_batch == 0 || cfg.recv_batch > verbs_queue::max_burst || cfg.recv_batch > cfg.rq_depth)
		return refuse("recv_batch", cfg.recv_batch,
			      "must be 1..min(rq_depth " + std::to_string(cfg.rq_depth) + ", verbs_queue::max_burst " +
				      std::to_string(verbs_queue::max_burst) + ")");
	/* After the checks of p alone: they hold on a closed device too. */
	if (ctx_ == nullptr || mp_ == nullptr) {
		err_ = "create_queue: the device is not open";
		return ENODEV;
	}
	if (q.qp() != nullptr) {
		err_ = "create_queue: the queue has a QP (destroy_queue first)";
		return EBUSY;
	}

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
	p.ahs = ahs_.for_socket(qp.socket == SOCKET_ID_ANY ? ahs_.replica(0).socket() : qp.socket);
	p.mrs = mrs_;
	p.rx_pool = mp_;
	p.ethernet = attr_.link == link_layer::ethernet;
	p.recv_batch = cfg.recv_batch;
	p.tx.mtu = attr_.active_mtu;
	p.tx.signal_every = cfg.signal_every < p.sq_depth ? cfg.signal_every : p.sq_depth;
	if (int e = q.attach(p); e != 0)
		return fail("queue attach", e);
	q.post_recvs();
	if (q.rx_posted() == 0) {
		q.detach();
		return fail("posting receive buffers", ENOMEM);
	}
	nqueues_++;
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
	nqueues_--;
}

} // namespace rdgram::verbs
