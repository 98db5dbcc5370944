/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * NEVER RUN ON HARDWARE: see efa_datapath.h.
 */
#include "efa_device.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <rte_mbuf.h>

#include "ibv_device.h"
#include "rdgram/log.h"
#include "rdgram/tsan.h"

namespace rdgram::efa {

namespace {

std::string gid_text(const uint8_t *raw)
{
	char b[INET6_ADDRSTRLEN];
	if (inet_ntop(AF_INET6, raw, b, sizeof(b)) == nullptr)
		return "?";
	return b;
}

std::string errno_text(const char *what, int e)
{
	return std::string(what) + ": " + strerror(e);
}

bool is_efa(ibv_context *ctx, efadv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	return efadv_query_device(ctx, a, sizeof(*a)) == 0;
}

} // namespace

std::string explain_create_einval(const ibv_ah_attr &a, const port_attr &port)
{
	if (a.port_num != 1)
		return "ibv_create_ah: EINVAL: port_num " + std::to_string(a.port_num) +
		       ": an EFA device has one port, 1";
	if (!a.is_global)
		return "ibv_create_ah: EINVAL: is_global is 0: EFA addresses are GIDs, an AH needs "
		       "the GRH (is_global = 1, grh.dgid = the peer's GID)";
	if (a.grh.sgid_index >= port.gids.size())
		return "ibv_create_ah: EINVAL: sgid_index " + std::to_string(a.grh.sgid_index) +
		       " is past the GID table (" + std::to_string(port.gids.size()) + " entries)";
	const uint8_t *d = a.grh.dgid.raw;
	static const uint8_t zero[16] = {};
	if (memcmp(d, zero, 16) == 0)
		return "ibv_create_ah: EINVAL: grh.dgid is zero";
	if (d[0] == 0xff)
		return "ibv_create_ah: EINVAL: grh.dgid " + gid_text(d) + " is multicast, which EFA does not carry";
	return "ibv_create_ah: EINVAL: the device refused grh.dgid " + gid_text(d) + " (source GID " +
	       gid_text(port.gids[a.grh.sgid_index].raw) +
	       "): most likely not an EFA address this interface can reach (another subnet or "
	       "availability zone, or the address of no EFA interface), or a PD that is not this device's";
}

efa_device::~efa_device() { close(); }

std::vector<std::string> efa_device::list()
{
	std::vector<std::string> out;
	int n = 0;
	ibv_device **devs = ibv_get_device_list(&n);
	if (devs == nullptr)
		return out;
	for (int i = 0; i < n; i++) {
		ibv_context *ctx = ibv_open_device(devs[i]);
		if (ctx == nullptr)
			continue;
		efadv_device_attr a;
		if (is_efa(ctx, &a))
			out.emplace_back(ibv_get_device_name(devs[i]));
		ibv_close_device(ctx);
	}
	ibv_free_device_list(devs);
	return out;
}

int efa_device::init_ahs(const efa_config &cfg, int socket)
{
	uint32_t cap = std::min<uint32_t>(cfg.max_ah, 0xffff);
	if (attr_.max_ah != 0)
		cap = std::min(cap, attr_.max_ah);
	if (cap == 0) {
		err_ = "max_ah is 0";
		return EINVAL;
	}
	attr_.max_ah = cap;
	std::vector<int> nodes = cfg.av_nodes;
	if (nodes.empty())
		nodes.push_back(socket);
	int e = ahs_.init(cap, nodes.data(), unsigned(nodes.size()), cfg.qsbr);
	if (e != 0) {
		err_ = "AH table allocation failed";
		return e;
	}
	live_ah_.assign(cap, nullptr);
	qs_ = cfg.qsbr;
	return 0;
}

int efa_device::open(const efa_config &cfg)
{
	close();
	if (nqueues_ != 0)
		return EBUSY; /* close refused: error() says why */
	/* The device named, or the first that answers efadv_query_device
	 * (it answers EOPNOTSUPP for other providers), with port 1 ACTIVE
	 * (drivers/common/ibv). */
	efadv_device_attr ea{};
	ibv::device_match m;
	m.name = cfg.device_name;
	m.port = 1;
	m.kind = "EFA";
	m.accept_context = [&ea](ibv_context *c) { return is_efa(c, &ea); };
	uint8_t port_num = 0;
	int err = 0;
	ctx_ = ibv::open_device(m, &port_num, &err, &err_);
	if (ctx_ == nullptr)
		return err;
	name_ = ibv_get_device_name(ctx_->device);
	const int socket = ibv::numa_node(ctx_->device, nullptr, nullptr);

	caps_.max_sq_wr = ea.max_sq_wr;
	caps_.max_rq_wr = ea.max_rq_wr;
	caps_.max_sq_sge = ea.max_sq_sge;
	caps_.max_rq_sge = ea.max_rq_sge;
	caps_.inline_buf_size = ea.inline_buf_size;
	caps_.max_rdma_size = ea.max_rdma_size;
	caps_.device_caps = ea.device_caps;
	caps_.rdma_read = (ea.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_READ) != 0;
	caps_.rnr_retry = (ea.device_caps & EFADV_DEVICE_ATTR_CAPS_RNR_RETRY) != 0;
	caps_.cq_with_sgid = (ea.device_caps & EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID) != 0;

	/* Port facts, GID table: drivers/common/ibv's answers. */
	ibv::port_facts f;
	if (int e = ibv::query_port(ctx_, port_num, cfg.max_ah, socket, &f, &err_); e != 0) {
		close();
		return e;
	}
	attr_ = std::move(f.attr);
	/* EFA reports link layer "unspecified"; its AHs are GID-addressed
	 * with a GRH, like RoCE: ethernet-like for the AH layer. */
	attr_.link = link_layer::ethernet;
	attr_.grh_required = true;
	/* The EFA kernel driver reports its MTU (the largest message) in
	 * max_msg_sz; active_mtu is only the nearest IB enum value. */
	if (f.port.max_msg_sz != 0)
		attr_.active_mtu = f.port.max_msg_sz;
	attr_.lid = f.port.lid;
	static const wire::gid no_gid{};
	if (std::all_of(attr_.gids.begin(), attr_.gids.end(),
			[](const wire::gid &g) { return memcmp(g.raw, no_gid.raw, 16) == 0; })) {
		err_ = "port 1 has no GID";
		close();
		return ENODEV;
	}
	pd_ = ibv_alloc_pd(ctx_);
	if (pd_ == nullptr) {
		const int e = errno ? errno : ENOMEM;
		err_ = errno_text("ibv_alloc_pd", e);
		close();
		return e;
	}
	own_pd_ = true;
	ops_ = verbs_ah_ops;
	if (int e = init_ahs(cfg, socket); e != 0) {
		close();
		return e;
	}
	cfg_ = cfg;
	/* The device's mempool: a receive buffer is the 40-byte GRH area
	 * + the MTU (SRD posts 40 bytes in, the same size; drivers/common/ibv
	 * device_pool). */
	if (int e = ibv::device_pool(cfg.pool, cfg.nb_mbufs, attr_.active_mtu, socket, "rdgram_efa", &mp_, &own_mp_,
				     &err_);
	    e != 0) {
		close();
		return e;
	}
	if (int e = register_mempool(mp_); e != 0) {
		close();
		return e;
	}
	RDGRAM_LOG(efa, INFO, "%s: max_ah %u, NUMA node %d", name_.c_str(), port().max_ah, socket);
	return 0;
}

int efa_device::open_with(const efa_ah_ops &ops, ibv_pd *pd, const port_attr &port, const efa_config &cfg)
{
	close();
	if (nqueues_ != 0)
		return EBUSY; /* close refused: error() says why */
	if (ops.create_ah == nullptr || ops.query_ah == nullptr || ops.destroy_ah == nullptr) {
		err_ = "open_with: every AH operation is needed";
		return EINVAL;
	}
	ops_ = ops;
	pd_ = pd;
	own_pd_ = false;
	attr_ = port;
	name_ = "efa-ops";
	cfg_ = cfg;
	return init_ahs(cfg, port.numa_node);
}

void efa_device::close()
{
	/* Queues hold QPs and CQs on this context: the caller destroys them
	 * first (destroy_queue); otherwise the PD and context stay busy. */
	if (nqueues_ != 0) {
		/* Their QPs hold the PD and the pool's MRs, and their slots
		 * hold the pool's mbufs: freeing any of it now would pull it
		 * from under them. */
		err_ = "close: " + std::to_string(nqueues_) + " queue(s) still alive (destroy_queue first)";
		RDGRAM_LOG(efa, ERR, "%s", err_.c_str());
		return;
	}
	/* Every AH still in the device: live ones, then those waiting for a
	 * grace period (no poll thread runs any more). */
	for (ibv_ah *&ah : live_ah_)
		if (ah != nullptr) {
			destroy_now(ah);
			ah = nullptr;
		}
	live_ah_.clear();
	for (const dead_ah &d : dead_)
		destroy_now(d.ah);
	dead_.clear();
	ahs_.fini();
	qs_ = nullptr;
	for (efa_mr_set &s : mrs_)
		for (ibv_mr *mr : s.mr)
			ibv_dereg_mr(mr);
	mrs_.clear();
	mr_map_.clear();
	if (mp_ != nullptr && own_mp_)
		rte_mempool_free(mp_);
	mp_ = nullptr;
	own_mp_ = false;
	if (pd_ != nullptr && own_pd_)
		ibv_dealloc_pd(pd_);
	pd_ = nullptr;
	own_pd_ = false;
	if (ctx_ != nullptr)
		ibv_close_device(ctx_);
	ctx_ = nullptr;
	caps_ = efa_caps{};
	attr_ = port_attr{};
	ops_ = verbs_ah_ops;
}

void efa_device::destroy_now(ibv_ah *ah)
{
	if (int rc = ops_.destroy_ah(ah); rc != 0)
		err_ = errno_text("ibv_destroy_ah", rc); /* the device keeps the entry; nothing else to do */
}

ah_handle efa_device::create_ah(const ibv_ah_attr &attr, int *err)
{
	uint32_t slot;
	if (ahs_.capacity() == 0) {
		err_ = "device not open";
		*err = EINVAL;
		return ah_null;
	}
	if (!ahs_.reserve(&slot)) {
		err_ = "AH table full (" + std::to_string(ahs_.capacity()) + " slots live or in their grace period)";
		*err = ENOMEM;
		return ah_null;
	}
	ibv_ah_attr a = attr; /* ibv_create_ah takes it non-const */
	errno = 0;
	ibv_ah *ah = ops_.create_ah(pd_, &a);
	if (ah == nullptr) {
		const int e = errno != 0 ? errno : EIO;
		ahs_.unreserve(slot);
		if (e == EINVAL)
			err_ = explain_create_einval(attr, attr_);
		else if (e == ENOMEM)
			err_ = "ibv_create_ah: ENOMEM: the device's AH table is full (the registry evicts and retries once)";
		else
			err_ = errno_text("ibv_create_ah", e);
		*err = e; /* unchanged: the registry acts on ENOMEM */
		return ah_null;
	}
	uint16_t ahn = ahn_unknown;
	if (int rc = query_ahn(ops_, ah, sizeof(efadv_ah_attr), &ahn); rc != 0) {
		err_ = errno_text("efadv_query_ah", rc);
		destroy_now(ah);
		ahs_.unreserve(slot);
		*err = rc;
		return ah_null;
	}
	efa_av &av = ahs_.av_at(slot);
	av.ah = ah;
	av.ahn = ahn;
	live_ah_[slot] = ah;
	*err = 0;
	return ahs_.publish(slot);
}

int efa_device::destroy_ah(ah_handle h)
{
	if (h.slot >= ahs_.capacity())
		return EINVAL;
	/* Validates the handle (stale, destroyed twice: EINVAL) before the
	 * library sees anything. */
	if (int rc = ahs_.retire(h); rc != 0)
		return rc;
	/* The slot's AV stays as it is: a poll thread that looked it up before
	 * the retire may read it until its next quiescent state. The control
	 * path's own record moves to dead_ (or the AH goes now, with no poll
	 * threads to wait for). */
	ibv_ah *ah = live_ah_[h.slot];
	live_ah_[h.slot] = nullptr;
	if (qs_ == nullptr) {
		const int rc = ops_.destroy_ah(ah);
		if (rc != 0)
			err_ = errno_text("ibv_destroy_ah", rc);
		return rc;
	}
	dead_.push_back(dead_ah{ah, rte_rcu_qsbr_start(qs_)});
	return 0;
}

void efa_device::reclaim()
{
	ahs_.reclaim();
	while (!dead_.empty() && rte_rcu_qsbr_check(qs_, dead_.front().token, false) == 1) {
		destroy_now(dead_.front().ah);
		dead_.pop_front();
	}
}

uint32_t efa_device::reclaim_pending() const
{
	return std::max(uint32_t(dead_.size()), ahs_.retired_waiting());
}

uint16_t efa_device::ahn_of(ah_handle h) const
{
	if (ahs_.capacity() == 0)
		return ahn_unknown;
	const efa_av *av = ahs_.lookup(h);
	return av != nullptr ? av->ahn : ahn_unknown;
}

const efa_device::efa_mr_set *efa_device::mrs_of(const rte_mempool *mp) const
{
	for (const efa_mr_set &s : mrs_)
		if (s.mp == mp)
			return &s;
	return nullptr;
}

int efa_device::register_mempool(rte_mempool *mp)
{
	if (ctx_ == nullptr) {
		err_ = "no verbs context (device opened with open_with)";
		return ENODEV;
	}
	if (mp == nullptr)
		return EINVAL;
	if (mrs_of(mp) != nullptr)
		return 0;
	efa_mr_set s;
	s.mp = mp;
	/* All or nothing (drivers/common/ibv): on failure mr_map_ is as it
	 * was and no MR is left behind. */
	if (int e = ibv::register_mempool(pd_, mp, &s.mr, &mr_map_, &err_); e != 0)
		return e;
	mrs_.push_back(std::move(s));
	return 0;
}

int efa_device::create_queue(const queue_params &p, efa_queue &q)
{
	auto refuse = [this](const char *field, uint32_t v, const std::string &why) {
		err_ = std::string("queue_params.") + field + " = " + std::to_string(v) + ": " + why;
		return EINVAL;
	};
	const uint32_t qkey = p.qkey != 0 ? p.qkey : cfg_.qkey;
	if (qkey & 0x80000000u) /* a controlled Q_Key needs privilege (IBA 10.2.5) */
		return refuse("qkey", qkey, "the high bit makes it a controlled Q_Key (IBA 10.2.5)");
	if (p.signal_every > 1)
		return refuse("signal_every", p.signal_every,
			      "every EFA send is signalled (libefa 44 refuses unsignalled send WRs)");
	const uint32_t batch = p.recv_batch != 0 ? p.recv_batch : cfg_.recv_batch;
	if (batch == 0 || batch > efa_queue::max_recv_batch)
		return refuse("recv_batch", batch,
			      "must be 1.." + std::to_string(efa_queue::max_recv_batch) + " (efa_queue::max_recv_batch)");
	/* After the checks of p alone: they hold on a closed device too. */
	if (ctx_ == nullptr || mp_ == nullptr) {
		err_ = ctx_ == nullptr && pd_ != nullptr ? "no verbs context (device opened with open_with)"
							 : "create_queue: the device is not open";
		return ENODEV;
	}
	if (q.ready()) {
		err_ = "create_queue: the queue is live (destroy_queue first)";
		return EBUSY;
	}
	/* Explicit sizes past the device's caps are refused; the config's
	 * defaults are capped. */
	if (p.sq_depth > caps_.max_sq_wr)
		return refuse("sq_depth", p.sq_depth, "above the device's max_sq_wr " + std::to_string(caps_.max_sq_wr));
	if (p.rq_depth > caps_.max_rq_wr)
		return refuse("rq_depth", p.rq_depth, "above the device's max_rq_wr " + std::to_string(caps_.max_rq_wr));
	if (p.max_inline > caps_.inline_buf_size)
		return refuse("max_inline", p.max_inline,
			      "above the device's inline_buf_size " + std::to_string(caps_.inline_buf_size));
	const bool srd = cfg_.srd;
	const uint32_t mtu = attr_.active_mtu;
	const uint32_t sq = p.sq_depth != 0 ? p.sq_depth : std::min(cfg_.sq_depth, caps_.max_sq_wr);
	const uint32_t rq = p.rq_depth != 0 ? p.rq_depth : std::min(cfg_.rq_depth, caps_.max_rq_wr);
	if (sq == 0 || rq == 0) {
		err_ = "efa_config sq_depth and rq_depth must be at least 1";
		return EINVAL;
	}
	const uint32_t want_inline = p.max_inline != 0 ? p.max_inline : cfg_.max_inline;
	const uint32_t max_inline =
		want_inline != 0 ? std::min<uint32_t>(want_inline, caps_.inline_buf_size) : caps_.inline_buf_size;

	ibv_cq_ex *scq = nullptr, *rcq = nullptr;
	ibv_qp *qp = nullptr;
	efadv_cq *dv = nullptr;
	auto fail = [&](const char *what, int e) {
		if (qp != nullptr)
			ibv_destroy_qp(qp);
		if (rcq != nullptr)
			ibv_destroy_cq(ibv_cq_ex_to_cq(rcq));
		if (scq != nullptr)
			ibv_destroy_cq(ibv_cq_ex_to_cq(scq));
		err_ = errno_text(what, e);
		return e;
	};

	/* Send CQ: wr_id and status only (always available). */
	ibv_cq_init_attr_ex ca{};
	ca.cqe = sq;
	ca.wc_flags = 0;
	scq = ibv_create_cq_ex(ctx_, &ca);
	if (scq == nullptr)
		return fail("ibv_create_cq_ex (send)", errno ? errno : ENOMEM);
	/* Receive CQ: what recv_wc reports, and the sender's GID for
	 * receives from unknown AHs where the device can give it. */
	ca = ibv_cq_init_attr_ex{};
	ca.cqe = rq;
	ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_IMM;
	if (caps_.cq_with_sgid) {
		efadv_cq_init_attr ea{};
		ea.comp_mask = 0;
		ea.wc_flags = EFADV_WC_EX_WITH_SGID;
		rcq = efadv_create_cq(ctx_, &ca, &ea, sizeof(ea));
		if (rcq != nullptr)
			dv = efadv_cq_from_ibv_cq_ex(rcq);
	} else {
		rcq = ibv_create_cq_ex(ctx_, &ca);
	}
	if (rcq == nullptr)
		return fail("create receive CQ", errno ? errno : ENOMEM);

	ibv_qp_init_attr_ex qa{};
	qa.send_cq = ibv_cq_ex_to_cq(scq);
	qa.recv_cq = ibv_cq_ex_to_cq(rcq);
	qa.cap.max_send_wr = sq;
	qa.cap.max_recv_wr = rq;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = max_inline;
	qa.pd = pd_;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	if (srd) {
		qa.qp_type = IBV_QPT_DRIVER;
		efadv_qp_init_attr ea{};
		ea.comp_mask = 0;
		ea.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
		qp = efadv_create_qp_ex(ctx_, &qa, &ea, sizeof(ea));
	} else {
		qa.qp_type = IBV_QPT_UD;
		qp = ibv_create_qp_ex(ctx_, &qa);
	}
	if (qp == nullptr)
		return fail(srd ? "efadv_create_qp_ex (SRD)" : "ibv_create_qp_ex (UD)", errno ? errno : ENOMEM);
	ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	if (qpx == nullptr)
		return fail("ibv_qp_to_qp_ex", EOPNOTSUPP);

	/* RESET -> INIT -> RTR -> RTS, as a UD QP (ibv_modify_qp(3)); SRD
	 * takes the same attributes plus the RNR retry count where the device
	 * supports it. */
	ibv_qp_attr m{};
	m.qp_state = IBV_QPS_INIT;
	m.pkey_index = 0;
	m.port_num = 1;
	m.qkey = qkey;
	if (int rc = ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY); rc != 0)
		return fail("ibv_modify_qp (INIT)", rc);
	m = ibv_qp_attr{};
	m.qp_state = IBV_QPS_RTR;
	if (int rc = ibv_modify_qp(qp, &m, IBV_QP_STATE); rc != 0)
		return fail("ibv_modify_qp (RTR)", rc);
	m = ibv_qp_attr{};
	m.qp_state = IBV_QPS_RTS;
	m.sq_psn = 0;
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (srd && caps_.rnr_retry) {
		m.rnr_retry = cfg_.rnr_retry;
		mask |= IBV_QP_RNR_RETRY;
	}
	if (int rc = ibv_modify_qp(qp, &m, mask); rc != 0)
		return fail("ibv_modify_qp (RTS)", rc);

	q.qp_ = qp;
	q.qpx_ = qpx;
	q.scq_ = scq;
	q.rcq_ = rcq;
	q.dv_ = dv;
	q.ahs_ = ahs_.for_socket(p.socket == SOCKET_ID_ANY ? ahs_.replica(0).socket() : p.socket);
	q.mrs_ = mr_map_;
	q.mp_ = mp_;
	q.qpn_ = qp->qp_num;
	q.qkey_ = qkey;
	q.mtu_ = mtu;
	q.max_inline_ = max_inline;
	q.rx_len_ = srd ? mtu : uint32_t(wire::grh_len) + mtu;
	q.batch_ = batch;
	q.srd_ = srd;
	q.gid_ = attr_.gids[0];
	q.tx_slot_.assign(sq, nullptr);
	q.tx_free_.resize(sq);
	for (uint32_t i = 0; i < sq; i++)
		q.tx_free_[i] = sq - 1 - i;
	q.tx_nfree_ = sq;
	q.tx_outstanding_ = 0;
	q.rx_slot_.assign(rq, nullptr);
	q.rx_free_.resize(rq);
	for (uint32_t i = 0; i < rq; i++)
		q.rx_free_[i] = rq - 1 - i;
	q.rx_nfree_ = rq;
	q.ctr_ = efa_counters{};
	q.post_recvs();
	nqueues_++;
	return 0;
}

void efa_device::destroy_queue(efa_queue &q)
{
	if (!q.ready())
		return;
	/* The QP first: afterwards the device writes no buffer of ours. */
	ibv_destroy_qp(q.qp_);
	ibv_destroy_cq(ibv_cq_ex_to_cq(q.rcq_));
	ibv_destroy_cq(ibv_cq_ex_to_cq(q.scq_));
	q.release();
	nqueues_--;
}

} // namespace rdgram::efa
