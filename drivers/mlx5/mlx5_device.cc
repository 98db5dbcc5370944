/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/mlx5 control path (see mlx5_device.h). Never run on hardware.
 */
#include "mlx5_device.h"

#include <cerrno>
#include <cstring>

#include <rte_mbuf.h>

#include "ibv_device.h"
#include "mlx5_caps.h"
#include "rdgram/log.h"
#include "rdgram/tsan.h"

namespace rdgram::mlx5 {

namespace {

uint32_t pow2_at_least(uint32_t v)
{
	uint32_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

} // namespace

mlx5_device::~mlx5_device() { close(); }

int mlx5_device::fail(int e, const std::string &what)
{
	err_ = what + ": " + strerror(e);
	close();
	return e;
}

int mlx5_device::find_device(std::string *name)
{
	int n = 0;
	ibv_device **list = ibv_get_device_list(&n);
	if (list == nullptr)
		return errno != 0 ? errno : ENOSYS;
	int rc = n == 0 ? ENOSYS : ENODEV;
	for (int i = 0; i < n; i++)
		if (mlx5dv_is_supported(list[i])) {
			*name = ibv_get_device_name(list[i]);
			rc = 0;
			break;
		}
	ibv_free_device_list(list);
	return rc;
}

int mlx5_device::open(const mlx5_config &cfg)
{
	close();
	if (!qps_.empty())
		return EBUSY; /* close refused: error() says why */
	cfg_ = cfg;
	/* The device named, or the first mlx5dv_is_supported accepts, with
	 * cfg.port_num ACTIVE (drivers/common/ibv). DevX, for the one
	 * capability verbs does not report (mlx5_caps.h); a plain context
	 * when DevX is refused (an old kernel, or no permission for a DevX
	 * UID). */
	ibv::device_match m;
	m.name = cfg.device;
	m.port = cfg.port_num;
	m.kind = "mlx5";
	m.accept_device = [](ibv_device *d) { return mlx5dv_is_supported(d); };
	m.open = [this](ibv_device *d) {
		mlx5dv_context_attr dattr{};
		dattr.flags = MLX5DV_CONTEXT_FLAGS_DEVX;
		ibv_context *c = mlx5dv_open_device(d, &dattr);
		if (c != nullptr) {
			compact_note_.clear();
			return c;
		}
		compact_note_ = std::string("no DevX context (") + strerror(errno) + ")";
		return ibv_open_device(d);
	};
	uint8_t port = 0;
	int err = 0;
	ctx_ = ibv::open_device(m, &port, &err, &err_);
	if (ctx_ == nullptr) {
		close();
		return err;
	}
	cfg_.port_num = port;

	compact_av_ = false;
	if (compact_note_.empty()) {
		uint8_t in[query_hca_cap_in_len];
		std::vector<uint8_t> out(query_hca_cap_out_len);
		build_query_hca_cap(in);
		uint32_t syndrome = 0;
		if (int rc = mlx5dv_devx_general_cmd(ctx_, in, sizeof(in), out.data(), out.size()); rc != 0)
			compact_note_ = std::string("QUERY_HCA_CAP: ") + strerror(rc);
		else if (parse_hca_cap_compact_av(out.data(), out.size(), &compact_av_, &syndrome) != 0)
			compact_note_ = "QUERY_HCA_CAP failed, syndrome " + std::to_string(syndrome);
	}

	/* Port facts, GID table, NUMA node: drivers/common/ibv's answers. */
	ibv::port_facts f;
	if (int e = ibv::query_port(ctx_, port, cfg.max_ah, ibv::numa_node(ctx_->device, nullptr, nullptr), &f,
				    &err_);
	    e != 0) {
		close();
		return e;
	}
	attr_ = std::move(f.attr);
	max_sge_ = f.dev.max_sge > 0 ? uint32_t(f.dev.max_sge) : 1;

	pd_ = ibv_alloc_pd(ctx_);
	if (pd_ == nullptr)
		return fail(errno ? errno : ENOMEM, "ibv_alloc_pd");
	/* A thread domain: the QP gets a BlueFlame register of its own, so
	 * doorbells need no lock (rdma-core mlx5: bf->need_lock = 0). */
	ibv_td_init_attr tda{};
	td_ = ibv_alloc_td(ctx_, &tda);
	if (td_ == nullptr)
		return fail(errno ? errno : ENOTSUP, "ibv_alloc_td");
	ibv_parent_domain_init_attr pda{};
	pda.pd = pd_;
	pda.td = td_;
	pdom_ = ibv_alloc_parent_domain(ctx_, &pda);
	if (pdom_ == nullptr)
		return fail(errno ? errno : ENOTSUP, "ibv_alloc_parent_domain");

	const int socket = attr_.numa_node;
	const uint32_t mtu = cfg.mtu != 0 && cfg.mtu < attr_.active_mtu ? cfg.mtu : attr_.active_mtu;
	/* The device's mempool (drivers/common/ibv device_pool). */
	if (int e = ibv::device_pool(cfg.pool, cfg.nb_mbufs, mtu, socket, "rdgram_mlx5_", &mp_, &own_mp_, &err_);
	    e != 0) {
		close();
		return e;
	}
	/* One MR per memory chunk of the pool (ibv_reg_mr(3)). */
	if (int e = ibv::register_mempool(pd_, mp_, &mrs_, &mr_tab_, &err_); e != 0) {
		close();
		return e;
	}

	uint32_t cap = cfg.max_ah;
	if (attr_.max_ah != 0 && cap > attr_.max_ah)
		cap = attr_.max_ah;
	std::vector<int> nodes = cfg.av_nodes;
	if (nodes.empty())
		nodes.push_back(socket);
	if (int e = ahs_.init(cap, nodes.data(), unsigned(nodes.size()), cfg.qsbr); e != 0)
		return fail(e, "AH table");
	ah_of_slot_.assign(cap, nullptr);
	RDGRAM_LOG(mlx5, INFO, "%s port %u: %s, MTU %u, AH table %u, NUMA node %d, compact AV %s%s%s",
		   ibv_get_device_name(ctx_->device), unsigned(cfg.port_num),
		   attr_.link == link_layer::ethernet ? "RoCE" : "InfiniBand", attr_.active_mtu, cap, socket,
		   compact_av_ ? "yes" : "no", compact_note_.empty() ? "" : ": ", compact_note_.c_str());
	return 0;
}

void mlx5_device::destroy_hw_qp(hw_qp &h)
{
	if (h.qp != nullptr)
		ibv_destroy_qp(h.qp);
	if (h.scq != nullptr)
		ibv_destroy_cq(h.scq);
	if (h.rcq != nullptr)
		ibv_destroy_cq(h.rcq);
	h = hw_qp{};
}

int mlx5_device::setup_qp(uint32_t sq_wrs, uint32_t rq_wrs, uint32_t max_inline, uint32_t qkey, hw_qp *out,
			  rings *r, uint32_t *inline_got, uint32_t *sge_got)
{
	hw_qp h;
	/* The device stays open: a failure frees this queue's objects only. */
	auto fail = [&](int e, const char *what) {
		destroy_hw_qp(h);
		err_ = std::string(what) + ": " + strerror(e);
		return e;
	};
	const int cqe = int(pow2_at_least(sq_wrs > rq_wrs ? sq_wrs : rq_wrs));
	h.scq = ibv_create_cq(ctx_, cqe, nullptr, nullptr, 0);
	h.rcq = ibv_create_cq(ctx_, cqe, nullptr, nullptr, 0);
	if (h.scq == nullptr || h.rcq == nullptr)
		return fail(errno ? errno : ENOMEM, "ibv_create_cq");
	ibv_qp_init_attr qa{};
	qa.send_cq = h.scq;
	qa.recv_cq = h.rcq;
	qa.qp_type = IBV_QPT_UD;
	qa.sq_sig_all = 0;
	qa.cap.max_send_wr = sq_wrs;
	qa.cap.max_recv_wr = rq_wrs;
	/* rdma-core (mlx5_calc_send_wqe) sizes every WQE of the QP for the
	 * larger of the full gather list and the inline limit, and refuses
	 * more SGEs than fit its largest descriptor (EINVAL); the device's
	 * max_sge, which it reports for RC's smaller overhead, bounds the
	 * request, and so does what the data path's DS can express. */
	uint32_t sge = cfg_.max_send_sge != 0 ? cfg_.max_send_sge : 1;
	if (sge > max_sge_)
		sge = max_sge_;
	if (sge > mlx5_queue::max_send_sge_limit)
		sge = mlx5_queue::max_send_sge_limit;
	qa.cap.max_send_sge = sge;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = max_inline;
	ibv_qp_init_attr_ex qx{};
	qx.send_cq = qa.send_cq;
	qx.recv_cq = qa.recv_cq;
	qx.qp_type = qa.qp_type;
	qx.cap = qa.cap;
	qx.pd = pdom_;
	qx.comp_mask = IBV_QP_INIT_ATTR_PD;
	h.qp = ibv_create_qp_ex(ctx_, &qx);
	if (h.qp == nullptr)
		return fail(errno ? errno : ENOMEM, "ibv_create_qp_ex (UD)");
	*inline_got = qx.cap.max_inline_data;
	/* What the QP was created with (rdma-core keeps the request as
	 * sq.max_gs and refuses a WR with more SGEs). */
	*sge_got = qx.cap.max_send_sge != 0 ? qx.cap.max_send_sge : sge;
	if (*sge_got > mlx5_queue::max_send_sge_limit)
		*sge_got = mlx5_queue::max_send_sge_limit;

	ibv_qp_attr a{};
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = cfg_.port_num;
	a.qkey = qkey;
	if (int e = ibv_modify_qp(h.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY); e)
		return fail(e, "ibv_modify_qp INIT");
	a = ibv_qp_attr{};
	a.qp_state = IBV_QPS_RTR;
	if (int e = ibv_modify_qp(h.qp, &a, IBV_QP_STATE); e)
		return fail(e, "ibv_modify_qp RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (int e = ibv_modify_qp(h.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN); e)
		return fail(e, "ibv_modify_qp RTS");

	mlx5dv_qp dq{};
	mlx5dv_cq ds{}, dr{};
	mlx5dv_obj obj{};
	obj.qp.in = h.qp;
	obj.qp.out = &dq;
	obj.cq.in = h.scq;
	obj.cq.out = &ds;
	if (int e = mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ); e)
		return fail(e, "mlx5dv_init_obj(QP, send CQ)");
	obj = mlx5dv_obj{};
	obj.cq.in = h.rcq;
	obj.cq.out = &dr;
	if (int e = mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ); e)
		return fail(e, "mlx5dv_init_obj(recv CQ)");
	if (ds.cqe_size != 64 || dr.cqe_size != 64)
		return fail(ENOTSUP, "CQE size is not 64 (MLX5_CQE_SIZE)");

	rings &rg = *r;
	rg = rings{};
	rg.sq_buf = static_cast<uint8_t *>(dq.sq.buf);
	rg.sq_wqe_cnt = dq.sq.wqe_cnt;
	rg.sq_stride = dq.sq.stride;
	rg.rq_buf = static_cast<uint8_t *>(dq.rq.buf);
	rg.rq_wqe_cnt = dq.rq.wqe_cnt;
	rg.rq_stride = dq.rq.stride;
	rg.dbrec = reinterpret_cast<volatile uint32_t *>(dq.dbrec);
	rg.bf_reg = static_cast<uint8_t *>(dq.bf.reg);
	rg.bf_size = dq.bf.size;
	rg.qpn = h.qp->qp_num;
	auto cqr = [](const mlx5dv_cq &c) {
		cq_ring r;
		r.buf = static_cast<uint8_t *>(c.buf);
		r.cqe_cnt = c.cqe_cnt;
		r.cqe_size = c.cqe_size;
		r.dbrec = reinterpret_cast<volatile uint32_t *>(c.dbrec);
		r.uar = c.cq_uar;
		r.cqn = c.cqn;
		return r;
	};
	rg.scq = cqr(ds);
	rg.rcq = cqr(dr);
	*out = h;
	return 0;
}

void mlx5_device::close()
{
	if (!qps_.empty()) {
		/* Their QPs hold the PD and the pool's MRs, and their rings
		 * hold the pool's mbufs: freeing any of it now would pull it
		 * from under them. */
		err_ = "close: " + std::to_string(qps_.size()) + " queue(s) still alive (destroy_queue first)";
		RDGRAM_LOG(mlx5, ERR, "%s", err_.c_str());
		return;
	}
	for (size_t i = 0; i < ah_of_slot_.size(); i++)
		if (ah_of_slot_[i] != nullptr)
			ibv_destroy_ah(ah_of_slot_[i]);
	ah_of_slot_.clear();
	ahs_.fini();
	for (ibv_mr *mr : mrs_)
		ibv_dereg_mr(mr);
	mrs_.clear();
	mr_tab_.clear();
	if (pdom_ != nullptr)
		ibv_dealloc_pd(pdom_);
	if (td_ != nullptr)
		ibv_dealloc_td(td_);
	if (pd_ != nullptr)
		ibv_dealloc_pd(pd_);
	pdom_ = nullptr;
	td_ = nullptr;
	pd_ = nullptr;
	if (mp_ != nullptr && own_mp_)
		rte_mempool_free(mp_);
	mp_ = nullptr;
	own_mp_ = false;
	if (ctx_ != nullptr)
		ibv_close_device(ctx_);
	ctx_ = nullptr;
}

int mlx5_device::create_queue(const queue_params &p, mlx5_queue &q)
{
	auto refuse = [this](const char *field, uint32_t v, const std::string &why) {
		err_ = std::string("queue_params.") + field + " = " + std::to_string(v) + ": " + why;
		return EINVAL;
	};
	const uint32_t sq = p.sq_depth != 0 ? p.sq_depth : cfg_.sq_wrs;
	const uint32_t rq = p.rq_depth != 0 ? p.rq_depth : cfg_.rq_wrs;
	const uint32_t max_inline = p.max_inline != 0 ? p.max_inline : cfg_.max_inline;
	const uint32_t signal_every = p.signal_every != 0 ? p.signal_every : cfg_.signal_every;
	const uint32_t batch = p.recv_batch != 0 ? p.recv_batch : cfg_.recv_batch;
	const uint32_t qkey = p.qkey != 0 ? p.qkey : cfg_.qkey;
	if (sq == 0 || rq == 0)
		return refuse(sq == 0 ? "sq_depth" : "rq_depth", 0, "0 here and in mlx5_config");
	if (signal_every == 0 || signal_every >= sq)
		return refuse("signal_every", signal_every,
			      "must be 1..sq_depth - 1 (" + std::to_string(sq - 1) +
				      "): a full SQ must hold a signalled WQE");
	if (batch == 0 || batch > rq)
		return refuse("recv_batch", batch, "must be 1..rq_depth (" + std::to_string(rq) + ")");
	if (max_inline > max_inline_limit)
		return refuse("max_inline", max_inline,
			      "a UD WQE's DS (6 bits of 16-byte units) carries at most " +
				      std::to_string(max_inline_limit) + " inline bytes");
	/* After the checks of p alone: they hold on a closed device too. */
	if (ctx_ == nullptr || mp_ == nullptr) {
		err_ = "create_queue: the device is not open";
		return ENODEV;
	}
	for (const hw_qp &h : qps_)
		if (h.q == &q) {
			err_ = "create_queue: the queue is bound to QP " + std::to_string(h.qp->qp_num) +
			       " already (destroy_queue first)";
			return EBUSY;
		}
	hw_qp h;
	rings r{};
	uint32_t inline_got = 0, sge_got = 1;
	if (int e = setup_qp(sq, rq, max_inline, qkey, &h, &r, &inline_got, &sge_got); e != 0)
		return e;
	queue_config c;
	c.qkey = qkey;
	c.roce = attr_.link == link_layer::ethernet;
	c.mtu = cfg_.mtu != 0 && cfg_.mtu < attr_.active_mtu ? cfg_.mtu : attr_.active_mtu;
	c.max_inline = inline_got;
	c.max_send_sge = sge_got;
	c.signal_every = signal_every;
	c.signal_last = cfg_.signal_last;
	c.use_bf = cfg_.use_bf;
	c.rq_refill_batch = batch;
	/* Queried at open (mlx5_caps.h); the data path uses it only for AHs
	 * without a GRH. */
	c.compact_av = compact_av_ && cfg_.compact_av;
	c.socket = p.socket;
	if (int e = q.attach(r, c, mp_, mr_tab_, &ahs_); e != 0) {
		destroy_hw_qp(h);
		err_ = std::string("queue attach: ") + strerror(e) +
		       (e == EINVAL ? " (rings as the data path cannot use them, or signal_every " +
					      std::to_string(signal_every) + " times the largest WQE's blocks not below the SQ's " +
					      std::to_string(r.sq_wqe_cnt) + " blocks)"
				    : std::string());
		return e;
	}
	q.post_recvs();
	h.q = &q;
	qps_.push_back(h);
	return 0;
}

void mlx5_device::destroy_queue(mlx5_queue &q)
{
	for (size_t i = 0; i < qps_.size(); i++) {
		if (qps_[i].q != &q)
			continue;
		hw_qp h = qps_[i];
		qps_.erase(qps_.begin() + long(i));
		/* The QP first: afterwards the device reads no send buffer
		 * and writes no receive buffer; then the rings' mbufs go back
		 * and the CQs can go. */
		ibv_destroy_qp(h.qp);
		h.qp = nullptr;
		q.detach();
		destroy_hw_qp(h);
		return;
	}
}

int mlx5_device::provider_av(const ibv_ah_attr &attr, mlx5_av *out)
{
	ibv_ah_attr a = attr;
	ibv_ah *ah = ibv_create_ah(pd_, &a);
	if (ah == nullptr)
		return errno ? errno : EINVAL;
	mlx5dv_ah dah{};
	mlx5dv_obj obj{};
	obj.ah.in = ah;
	obj.ah.out = &dah;
	int rc = mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH);
	if (rc == 0) {
		memset(out, 0, sizeof(*out));
		memcpy(&out->wqe, dah.av, sizeof(out->wqe));
		out->global = attr.is_global ? 1 : 0;
	}
	ibv_destroy_ah(ah);
	return rc;
}

ah_handle mlx5_device::create_ah(const ibv_ah_attr &attr, int *err)
{
	if (attr.port_num != cfg_.port_num || (!attr.is_global && attr_.grh_required)) {
		*err = EINVAL;
		return ah_null;
	}
	uint32_t slot;
	if (!ahs_.reserve(&slot)) {
		*err = ENOMEM;
		return ah_null;
	}
	mlx5_av &av = ahs_.av_at(slot);
	ibv_ah *ah = nullptr;
	int rc = EOPNOTSUPP;
	if (attr_.link == link_layer::infiniband && cfg_.syscall_free_ib_av)
		rc = build_ib_av(attr, attr_.grh_required, &av);
	if (rc == EOPNOTSUPP) {
		/* The provider's AV (on RoCE: the kernel resolves the MAC,
		 * which may block; this runs on the control thread). */
		ibv_ah_attr a = attr;
		ah = ibv_create_ah(pd_, &a);
		if (ah == nullptr) {
			rc = errno ? errno : EINVAL;
		} else {
			mlx5dv_ah dah{};
			mlx5dv_obj obj{};
			obj.ah.in = ah;
			obj.ah.out = &dah;
			rc = mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH);
			if (rc == 0) {
				memset(&av, 0, sizeof(av));
				memcpy(&av.wqe, dah.av, sizeof(av.wqe));
				av.global = attr.is_global ? 1 : 0;
			}
		}
	}
	if (rc != 0) {
		if (ah != nullptr)
			ibv_destroy_ah(ah);
		ahs_.unreserve(slot);
		*err = rc;
		return ah_null;
	}
	ah_of_slot_[slot] = ah;
	*err = 0;
	return ahs_.publish(slot);
}

int mlx5_device::destroy_ah(ah_handle h)
{
	int rc = ahs_.retire(h);
	if (rc != 0)
		return rc;
	/* The device keeps no reference to an AH: a WQE carries a copy of
	 * the AV. The provider object can go now; the table slot waits for
	 * its grace period. */
	if (ah_of_slot_[h.slot] != nullptr) {
		ibv_destroy_ah(ah_of_slot_[h.slot]);
		ah_of_slot_[h.slot] = nullptr;
	}
	return 0;
}

} // namespace rdgram::mlx5
