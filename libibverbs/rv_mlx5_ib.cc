/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * mlx5_ib in user space: the emulated kernel driver of the mlx5 device
 * kind (rv_kernel.h). Written from the uAPI (<rdma/mlx5-abi.h>,
 * <rdma/ib_user_verbs.h>, <rdma/mlx5_user_ioctl_cmds.h>) and from what
 * libmlx5 v44 does with each answer; it shares nothing with rdgram's own
 * mlx5 driver (drivers/mlx5), which it exists to judge.
 *
 * What a ConnectX-5 behind mlx5_ib answers, as far as rdgram emulates it
 * (docs/HARDWARE.md lists each guess):
 * - The device: PCI 15b3:1017 (ConnectX-5), IEEE vendor 0x02c9, one
 *   Ethernet (RoCE) port. No DEVX: the DEVX objects are absent from the
 *   ioctl tree (EPROTONOSUPPORT), and a ucontext asking for DEVX is
 *   refused (EINVAL), so libmlx5 retries without it and every consumer
 *   takes its non-DEVX path.
 * - The ucontext in the legacy static-UAR mode: the request's bfregs are
 *   allocated at once (tot_bfregs != 0), whatever MLX5_LIB_CAP_DYN_UAR
 *   says, as a kernel from before dynamic UARs. The UAR pages are pages
 *   of the context's cmd_fd, a memfd: libmlx5 maps them at
 *   (command << 8 | index) pages (MLX5_MMAP_GET_REGULAR_PAGES_CMD 0, NC 3,
 *   the legacy dynamic ALLOC_WC 6), and BlueFlame writes land there.
 * - The GID table: the port's, RoCE v2 only (a real port lists RoCE v1
 *   and v2 per address), in a table of 256 entries.
 * Cold path: commands only.
 */
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include <chrono>
#include <functional>
#include <thread>

#include <infiniband/mlx5dv.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/mlx5-abi.h>
#include <rdma/mlx5_user_ioctl_cmds.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rte_cycles.h>

#include "rv.h"
#include "rv_kernel.h"
#include "rv_mlx5_nic.h"
#include "soft_port.h"

namespace rdgram::rv {

namespace {

/* The uAPI structs as libmlx5 v44 was built against them. */
static_assert(sizeof(mlx5_ib_alloc_ucontext_req_v2) == 32);
static_assert(sizeof(mlx5_ib_alloc_ucontext_resp) == 72);
static_assert(sizeof(mlx5_ib_query_device_resp) == 104);
static_assert(sizeof(ib_uverbs_ex_query_device_resp) == 304);
static_assert(sizeof(ib_uverbs_get_context_resp) == 8);

/* libmlx5's UAR mmap offsets, in pages: the command in bits 8..15, the
 * index in bits 0..7 (get_uar_mmap_offset). */
constexpr unsigned mmap_cmd_shift = 8;
/* The memfd spans every command's 256 pages for commands 0..7: sparse,
 * only the pages libmlx5 touches take memory. */
constexpr size_t uar_file_pages = size_t(8) << mmap_cmd_shift;
/* At most 256 static UAR pages (libmlx5 keeps 256 in its context),
 * 2 non-fast-path bfregs each (MLX5_NON_FP_BFREGS_PER_UAR). */
constexpr uint32_t bfregs_per_uar = 2;
constexpr uint32_t max_bfregs = 256 * bfregs_per_uar;
/* bfregs for thread domains (libmlx5's legacy dynamic UARs, mapped with
 * ALLOC_WC at indices below num_dyn_bfregs / 2): the kernel's
 * MLX5_MIN_DYN_BFREGS, so indices stay within one command's 256 pages. */
constexpr uint32_t num_dyn_bfregs = 512;

/* The device's limits as query_device reports them, in a ConnectX-5's
 * shape (one port, UD, no atomics, no memory windows). */
constexpr uint32_t log_max_qp = 18;
constexpr uint32_t max_qp_wr = 1u << 15; /* log_max_qp_sz */
constexpr uint32_t max_sge = 30;
constexpr uint32_t gid_tbl_len = 256;
/* An SRQ WQE is at most max_rq_desc_sz (512) bytes: the next segment and
 * 31 data segments. */
constexpr uint32_t max_srq_wr = max_qp_wr - 1;
constexpr uint32_t max_srq_sge = 512 / 16 - 1; /* roce_address_table_size */
constexpr uint64_t fw_ver = (uint64_t(16) << 32) | (uint64_t(0) << 16) | 0;

/* The state of one open of the device (a ucontext once allocated). */
struct mlx5_uctx {
	bool allocated = false;
	uint32_t tot_bfregs = 0;
	uint32_t cqe_version = 0;
	/* The memfd's pages, mapped here too: the NIC reads the CQ arm
	 * doorbells that land in the UAR pages. */
	uint8_t *uar_map = nullptr;
	size_t uar_len = 0;
	unsigned uar_slots[2] = {~0u, ~0u}; /* its two watched words in the NIC */
	uint32_t pds = 0; /* PD handles handed out */
};

mlx5_uctx &uctx(rv_context *c) { return *static_cast<mlx5_uctx *>(c->kern); }
rv_device &dev(rv_context *c) { return *reinterpret_cast<rv_device *>(c->dev); }

/* The NIC watches the CQ doorbell word (MLX5_CQ_DOORBELL) of the first
 * UAR page, where libmlx5 rings a CQ's arm: mapped with the regular
 * (command 0) or the non-cached (command 3) mmap command. */
void watch_uar(rv_context *c)
{
	mlx5_uctx &u = uctx(c);
	m5::nic *n = dev(c).nic;
	if (n == nullptr)
		return;
	const size_t page = size_t(sysconf(_SC_PAGESIZE));
	const unsigned cmds[2] = {MLX5_IB_MMAP_REGULAR_PAGE, MLX5_IB_MMAP_NC_PAGE};
	rv_device &d = dev(c);
	dp_lock(d);
	for (unsigned k = 0; k < 2; k++)
		for (unsigned i = 0; i < m5::max_uars; i++)
			if (n->uar_db[i] == nullptr) {
				n->uar_db[i] = reinterpret_cast<const uint64_t *>(
					u.uar_map + (size_t(cmds[k]) << mmap_cmd_shift) * page + MLX5_CQ_DOORBELL);
				n->uar_seen[i] = 0;
				u.uar_slots[k] = i;
				break;
			}
	dp_unlock(d);
}

void unwatch_uar(rv_context *c)
{
	mlx5_uctx &u = uctx(c);
	m5::nic *n = dev(c).nic;
	if (n == nullptr)
		return;
	rv_device &d = dev(c);
	dp_lock(d);
	for (unsigned s : u.uar_slots)
		if (s < m5::max_uars)
			n->uar_db[s] = nullptr;
	dp_unlock(d);
}

int m_open(rv_context *c, int *cmd_fd)
{
	const int fd = memfd_create("rdgram-mlx5-uverbs", MFD_CLOEXEC);
	if (fd < 0)
		return errno;
	const long page = sysconf(_SC_PAGESIZE);
	if (ftruncate(fd, off_t(uar_file_pages) * page) != 0) {
		const int e = errno;
		close(fd);
		return e;
	}
	auto *u = new (std::nothrow) mlx5_uctx;
	if (u == nullptr) {
		close(fd);
		return ENOMEM;
	}
	u->uar_len = uar_file_pages * size_t(page);
	void *map = mmap(nullptr, u->uar_len, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		const int e = errno;
		delete u;
		close(fd);
		return e;
	}
	u->uar_map = static_cast<uint8_t *>(map);
	c->kern = u;
	*cmd_fd = fd;
	watch_uar(c);
	return 0;
}

void m_release(rv_context *c)
{
	unwatch_uar(c);
	if (uctx(c).uar_map != nullptr)
		munmap(uctx(c).uar_map, uctx(c).uar_len);
	delete static_cast<mlx5_uctx *>(c->kern);
	c->kern = nullptr;
}

int m_alloc_ucontext(rv_context *c, const void *in, size_t inlen, void *out, size_t outlen)
{
	mlx5_uctx &u = uctx(c);
	if (u.allocated)
		return EINVAL; /* one ucontext per open of the device */
	/* The request: the v0 layout (two counts) or v2 and its successors
	 * (anything longer must be zero past what this driver knows). */
	mlx5_ib_alloc_ucontext_req_v2 req{};
	if (inlen < 2 * sizeof(uint32_t))
		return EINVAL;
	memcpy(&req, in, std::min(inlen, sizeof(req)));
	for (size_t i = sizeof(req); i < inlen; i++)
		if (static_cast<const uint8_t *>(in)[i] != 0)
			return EOPNOTSUPP;
	if (req.flags & MLX5_IB_ALLOC_UCTX_DEVX)
		return kernel_refuse("mlx5_ib", "alloc_ucontext with DEVX (a ConnectX without log_max_uctx)", EINVAL);
	if (req.flags != 0 || req.comp_mask != 0 || req.reserved0 != 0 || req.reserved1 != 0 || req.reserved2 != 0)
		return EOPNOTSUPP;
	uint32_t total = (req.total_num_bfregs + bfregs_per_uar - 1) / bfregs_per_uar * bfregs_per_uar;
	total = std::max(total, bfregs_per_uar);
	if (total > max_bfregs)
		return ENOMEM;
	if (req.num_low_latency_bfregs > total - 1)
		return EINVAL;

	mlx5_ib_alloc_ucontext_resp r{};
	r.qp_tab_size = 1u << log_max_qp;
	r.bf_reg_size = 512;
	r.tot_bfregs = total;
	r.cache_line_size = 64;
	r.max_sq_desc_sz = 1024;
	r.max_rq_desc_sz = 512;
	r.max_send_wqebb = max_qp_wr;
	r.max_recv_wr = max_qp_wr;
	r.max_srq_recv_wr = max_qp_wr;
	r.num_ports = 1;
	r.flow_action_flags = 0;
	r.comp_mask = 0; /* no core clock page, no dump-fill mkey, no ECE */
	r.cqe_version = uint8_t(std::min<uint32_t>(req.max_cqe_version, 1));
	r.cmds_supp_uhw = MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE | MLX5_USER_CMDS_SUPP_UHW_CREATE_AH;
	r.eth_min_inline = MLX5_USER_INLINE_MODE_NONE; /* a ConnectX-5 needs no L2 header inline */
	r.clock_info_versions = 0;
	r.hca_core_clock_offset = 0;
	r.log_uar_size = 12; /* 4 KiB UARs */
	r.num_uars_per_page = 1;
	r.num_dyn_bfregs = num_dyn_bfregs;
	r.dump_fill_mkey = 0;
	r.response_length = uint32_t(std::min(outlen, sizeof(r)));
	memcpy(out, &r, std::min(outlen, sizeof(r)));
	u.allocated = true;
	u.tot_bfregs = total;
	u.cqe_version = r.cqe_version;
	return 0;
}

int m_query_device(rv_context *c, ib_uverbs_ex_query_device_resp *core, void *out, size_t outlen)
{
	const rv_device &d = dev(c);
	ib_uverbs_query_device_resp &b = core->base;
	b.fw_ver = fw_ver;
	b.node_guid = d.guid_be;
	b.sys_image_guid = d.guid_be;
	b.max_mr_size = ~0ull;
	b.page_size_cap = ~0xfffull;
	b.vendor_id = 0x02c9; /* Mellanox's IEEE OUI */
	b.vendor_part_id = 4119; /* ConnectX-5 */
	b.hw_ver = 0;
	b.max_qp = 1u << log_max_qp;
	b.max_qp_wr = max_qp_wr;
	b.device_cap_flags = IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN;
	b.max_sge = max_sge;
	b.max_sge_rd = 0;
	b.max_cq = 1u << 24;
	b.max_cqe = (1u << 22) - 1;
	b.max_mr = 1u << 24;
	b.max_pd = 1u << 24;
	b.max_qp_rd_atom = 0;
	b.max_ee_rd_atom = 0;
	b.max_res_rd_atom = 0;
	b.max_qp_init_rd_atom = 0;
	b.max_ee_init_rd_atom = 0;
	b.atomic_cap = IBV_ATOMIC_NONE;
	b.max_ee = 0;
	b.max_rdd = 0;
	b.max_mw = 0;
	b.max_raw_ipv6_qp = 0;
	b.max_raw_ethy_qp = 0;
	b.max_mcast_grp = 1u << 21;
	b.max_mcast_qp_attach = 240;
	b.max_total_mcast_qp_attach = 240u << 21;
	b.max_ah = d.cfg.max_ah;
	b.max_fmr = 0;
	b.max_map_per_fmr = 0;
	b.max_srq = 1u << 23;                 /* log_max_srq */
	b.max_srq_wr = max_srq_wr;            /* (1 << log_max_srq_sz) - 1 */
	b.max_srq_sge = max_srq_sge;
	b.max_pkeys = 1;
	b.local_ca_ack_delay = 16;
	b.phys_port_cnt = 1;
	/* The extended part: none of ODP, timestamps, RSS, TM, moderation,
	 * device memory. */
	core->comp_mask = 0;
	core->device_cap_flags_ex = 0;
	/* The driver's part: no TSO, RSS, CQE compression, packet pacing,
	 * multi-packet WQEs, striding RQ, tunnel offloads. */
	if (outlen > 0) {
		mlx5_ib_query_device_resp r{};
		r.response_length = uint32_t(std::min(outlen, sizeof(r)));
		memcpy(out, &r, std::min(outlen, sizeof(r)));
	}
	return 0;
}

int m_query_port(rv_context *c, uint8_t port_num, ibv_port_attr *a)
{
	if (port_num != 1)
		return EINVAL;
	const rv_device &d = dev(c);
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = d.mtu_enum;
	a->gid_tbl_len = int(gid_tbl_len);
	/* ib_uverbs adds IP_BASED_GIDS for a RoCE port (ip_gids). */
	a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	a->max_msg_sz = 1u << 30; /* log_max_msg */
	a->bad_pkey_cntr = 0;
	a->qkey_viol_cntr = 0;
	a->pkey_tbl_len = 1;
	a->lid = 0;
	a->sm_lid = 0;
	a->lmc = 0;
	a->max_vl_num = 0; /* mlx5_ib sets none on an Ethernet port */
	a->sm_sl = 0;
	a->subnet_timeout = 0;
	a->init_type_reply = 0;
	a->active_width = 2;  /* 4X */
	a->active_speed = 32; /* EDR: a 100GbE port's 4X EDR */
	a->phys_state = 5;    /* LinkUp */
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	a->flags = IBV_QPF_GRH_REQUIRED;
	a->port_cap_flags2 = 0;
	return 0;
}

int m_query_gid(rv_context *c, uint8_t port_num, uint32_t index, ibv_gid_entry *e)
{
	const rv_device &d = dev(c);
	if (port_num != 1 || index >= gid_tbl_len)
		return EINVAL;
	if (index >= d.gids.size())
		return ENODATA;
	memset(e, 0, sizeof(*e));
	memcpy(e->gid.raw, d.gids[index].raw, 16);
	e->gid_index = index;
	e->port_num = port_num;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	e->ndev_ifindex = 0;
	return 0;
}

int m_query_pkey(rv_context *c, uint8_t port_num, uint16_t index, __be16 *pkey)
{
	if (port_num != 1 || index != 0)
		return EINVAL;
	*pkey = htobe16(dev(c).cfg.pkey);
	return 0;
}

/* ---- objects ---- */

m5::nic &nic_of(rv_context *c) { return *dev(c).nic; }

constexpr uint32_t max_cqe = (1u << 22) - 1;

bool pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

int m_alloc_pd(rv_context *c, uint32_t *handle, void *out, size_t outlen)
{
	mlx5_uctx &u = uctx(c);
	*handle = ++u.pds;
	mlx5_ib_alloc_pd_resp r{};
	r.pdn = *handle; /* a PD number of this context's, as the device's */
	memcpy(out, &r, std::min(outlen, sizeof(r)));
	return 0;
}

int m_dealloc_pd(rv_context *, uint32_t) { return 0; }

/* An MR is an address range and its access: the NIC checks each data
 * segment's lkey, address and length against it. */
int m_reg_mr(rv_context *c, uint32_t pd, uint64_t addr, uint64_t length, uint64_t, int access, uint32_t *handle,
	     uint32_t *lkey, uint32_t *rkey)
{
	if (length == 0 || addr + length < addr)
		return EINVAL;
	m5::nic &n = nic_of(c);
	auto *m = new (std::nothrow) m5::mr{};
	if (m == nullptr)
		return ENOMEM;
	rv_device &d = dev(c);
	dp_lock(d);
	unsigned slot = 1;
	while (slot < m5::max_mrs && n.mrs[slot] != nullptr)
		slot++;
	if (slot == m5::max_mrs) {
		dp_unlock(d);
		delete m;
		return ENOMEM;
	}
	/* mkey = index << 8 | a tag that is never 0: 0x100, libmlx5's
	 * MLX5_INVALID_LKEY, is not an lkey. */
	const uint32_t tag = 1 + (n.mr_serial++ % 255);
	m->lo = addr;
	m->hi = addr + length;
	m->lkey = slot << 8 | tag;
	m->pdn = pd;
	m->access = access;
	n.mrs[slot] = m;
	dp_unlock(d);
	*handle = slot;
	*lkey = m->lkey;
	*rkey = m->lkey;
	return 0;
}

int m_dereg_mr(rv_context *c, uint32_t handle)
{
	m5::nic &n = nic_of(c);
	if (handle == 0 || handle >= m5::max_mrs)
		return EINVAL;
	rv_device &d = dev(c);
	dp_lock(d);
	m5::mr *m = n.mrs[handle];
	n.mrs[handle] = nullptr;
	dp_unlock(d);
	if (m == nullptr)
		return EINVAL;
	delete m;
	return 0;
}

int m_create_cq(rv_context *c, ibv_cq *cq, uint32_t cqe, ibv_comp_channel *channel, const void *in, size_t inlen,
		void *out, size_t outlen, uint32_t *handle, uint32_t *cqe_out)
{
	mlx5_ib_create_cq req{};
	if (inlen < offsetof(mlx5_ib_create_cq, flags))
		return EINVAL;
	memcpy(&req, in, std::min(inlen, sizeof(req)));
	if (cqe == 0 || cqe > max_cqe)
		return EINVAL;
	if (req.cqe_size != 64 && req.cqe_size != 128)
		return EINVAL;
	if (req.cqe_comp_en != 0)
		return kernel_refuse("mlx5_ib", "create_cq with CQE compression", EOPNOTSUPP);
	if (req.flags & ~MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX)
		return kernel_refuse("mlx5_ib", "create_cq with 128-byte padding or real-time stamps", EOPNOTSUPP);
	/* The kernel's: entries = roundup_pow_of_two(cqe + 1). */
	uint32_t n = 1, log = 0;
	while (n < cqe + 1) {
		n <<= 1;
		log++;
	}
	auto *q = new (std::nothrow) m5::cq{};
	if (q == nullptr)
		return ENOMEM;
	q->buf = reinterpret_cast<uint8_t *>(uintptr_t(req.buf_addr));
	q->dbrec = reinterpret_cast<uint32_t *>(uintptr_t(req.db_addr));
	q->ncqe = n;
	q->log_ncqe = log;
	q->cqe_sz = req.cqe_size;
	q->chan = reinterpret_cast<rv_channel *>(channel);
	q->ibcq = cq;
	/* The ARM_DB word gets a value no arm writes, so that the first
	 * arm (sequence 0, consumer index 0: the word 0) is a change. */
	__atomic_store_n(&q->dbrec[m5::MLX5_CQ_ARM_DB], m5::arm_poison, __ATOMIC_RELEASE);
	q->arm_seen = m5::arm_poison;
	m5::nic &nc = nic_of(c);
	rv_device &d = dev(c);
	dp_lock(d);
	unsigned slot = 0;
	while (slot < m5::max_cqs && nc.cqs[slot] != nullptr)
		slot++;
	if (slot == m5::max_cqs) {
		dp_unlock(d);
		delete q;
		return ENOMEM;
	}
	q->cqn = slot + 1;
	nc.cqs[slot] = q;
	dp_unlock(d);
	mlx5_ib_create_cq_resp r{};
	r.cqn = q->cqn;
	memcpy(out, &r, std::min(outlen, sizeof(r)));
	*handle = slot;
	*cqe_out = n - 1;
	return 0;
}

int m_destroy_cq(rv_context *c, uint32_t handle, uint32_t *events)
{
	m5::nic &n = nic_of(c);
	if (handle >= m5::max_cqs)
		return EINVAL;
	rv_device &d = dev(c);
	dp_lock(d);
	m5::cq *q = n.cqs[handle];
	if (q == nullptr) {
		dp_unlock(d);
		return EINVAL;
	}
	for (m5::qp *p : n.qps)
		if (p != nullptr && (p->scq == q || p->rcq == q)) {
			dp_unlock(d);
			return EBUSY;
		}
	n.cqs[handle] = nullptr;
	dp_unlock(d);
	uint32_t ev = 0;
	if (q->chan != nullptr) {
		std::lock_guard<std::mutex> g(q->chan->mu);
		ev = q->events_reported;
	}
	*events = ev;
	delete q;
	return 0;
}

/* A UD QP. The QPN's low bits are its slot: the NIC finds it without a
 * search. */
int m_create_qp(rv_context *c, ibv_qp_init_attr_ex *a, const void *in, size_t inlen, void *out, size_t outlen,
		uint32_t *handle, uint32_t *qpn)
{
	if (a->qp_type != IBV_QPT_UD)
		return kernel_refuse("mlx5_ib", "create_qp of a type other than UD", EOPNOTSUPP);
	mlx5_ib_create_qp req{};
	if (inlen < offsetof(mlx5_ib_create_qp, sq_buf_addr))
		return EINVAL;
	memcpy(&req, in, std::min(inlen, sizeof(req)));
	/* Scatter-to-CQE is a hint the kernel drops without a word when the
	 * device cannot (and this one does not: receives go to the buffers). */
	const uint32_t known = MLX5_QP_FLAG_SIGNATURE | MLX5_QP_FLAG_BFREG_INDEX | MLX5_QP_FLAG_UAR_PAGE_INDEX |
			       MLX5_QP_FLAG_SCATTER_CQE | MLX5_QP_FLAG_ALLOW_SCATTER_CQE;
	if (req.flags & ~known)
		return kernel_refuse("mlx5_ib", "create_qp with driver flags (scatter-to-CQE, tunnel, ...)", EINVAL);
	if (!pow2(req.sq_wqe_count) || req.sq_wqe_count > max_qp_wr ||
	    (req.rq_wqe_count != 0 && (!pow2(req.rq_wqe_count) || req.rq_wqe_count > max_qp_wr)) ||
	    (req.rq_wqe_count != 0 && (req.rq_wqe_shift < 4 || req.rq_wqe_shift > 12)))
		return EINVAL;
	m5::nic &n = nic_of(c);
	auto *q = new (std::nothrow) m5::qp{};
	if (q == nullptr)
		return ENOMEM;
	auto *buf = reinterpret_cast<uint8_t *>(uintptr_t(req.buf_addr));
	q->rq = buf;
	q->rq_cnt = req.rq_wqe_count;
	q->rq_shift = req.rq_wqe_shift;
	q->sq = buf + (size_t(req.rq_wqe_count) << req.rq_wqe_shift);
	q->sq_cnt = req.sq_wqe_count;
	q->db = reinterpret_cast<uint32_t *>(uintptr_t(req.db_addr));
	q->uidx = req.uidx & 0xffffff;
	q->sq_sig_all = a->sq_sig_all != 0;
	q->cap = a->cap;
	rv_device &d = dev(c);
	dp_lock(d);
	m5::cq *scq = a->send_cq != nullptr && a->send_cq->handle < m5::max_cqs ? n.cqs[a->send_cq->handle] : nullptr;
	m5::cq *rcq = a->recv_cq != nullptr && a->recv_cq->handle < m5::max_cqs ? n.cqs[a->recv_cq->handle] : nullptr;
	/* With an SRQ the QP has no RQ of its own (libmlx5 asks for none). */
	m5::srq *srq = a->srq != nullptr && a->srq->handle < m5::max_srqs ? n.srqs[a->srq->handle] : nullptr;
	unsigned slot = 0;
	while (slot < m5::max_qps && n.qps[slot] != nullptr)
		slot++;
	if (scq == nullptr || rcq == nullptr || (a->srq != nullptr && (srq == nullptr || req.rq_wqe_count != 0)) ||
	    slot == m5::max_qps) {
		dp_unlock(d);
		delete q;
		return slot == m5::max_qps ? ENOMEM : EINVAL;
	}
	q->srq = srq;
	if (srq != nullptr)
		srq->users++;
	q->scq = scq;
	q->rcq = rcq;
	q->qpn = (n.qpn_serial++ << 3 | slot) & 0xffffff;
	if (q->qpn < 2)
		q->qpn = (n.qpn_serial++ << 3 | slot) & 0xffffff;
	n.qps[slot] = q;
	dp_unlock(d);
	mlx5_ib_create_qp_resp r{};
	/* The QP's bfreg: the one named (thread domains), else bfreg 1, a
	 * medium one, shared (guess: docs/HARDWARE.md). */
	r.bfreg_index = (req.flags & (MLX5_QP_FLAG_BFREG_INDEX | MLX5_QP_FLAG_UAR_PAGE_INDEX)) ? req.bfreg_index
	                : uctx(c).tot_bfregs > 1 ? 1 : 0;
	r.ece_options = 0;
	memcpy(out, &r, std::min(outlen, sizeof(r)));
	*handle = slot;
	*qpn = q->qpn;
	return 0;
}

m5::qp *qp_of(rv_context *c, ibv_qp *qp)
{
	if (qp->handle >= m5::max_qps)
		return nullptr;
	return nic_of(c).qps[qp->handle];
}

/* ib_modify_qp_is_ok for a UD QP: whether cur -> next is a transition,
 * and the attributes it requires and allows. */
bool ud_transition(ibv_qp_state cur, ibv_qp_state next, int *req, int *opt)
{
	*req = 0;
	*opt = 0;
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
		return true;
	const int qkey_opt = IBV_QP_CUR_STATE | IBV_QP_QKEY;
	switch (cur) {
	case IBV_QPS_RESET:
		*req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
		return next == IBV_QPS_INIT;
	case IBV_QPS_INIT:
		*opt = next == IBV_QPS_INIT ? IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY : IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
		return next == IBV_QPS_INIT || next == IBV_QPS_RTR;
	case IBV_QPS_RTR:
		*req = IBV_QP_SQ_PSN;
		*opt = qkey_opt;
		return next == IBV_QPS_RTS;
	case IBV_QPS_RTS:
		*opt = next == IBV_QPS_RTS ? qkey_opt : IBV_QP_EN_SQD_ASYNC_NOTIFY;
		return next == IBV_QPS_RTS || next == IBV_QPS_SQD;
	case IBV_QPS_SQD:
		*opt = next == IBV_QPS_RTS ? qkey_opt : IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
		return next == IBV_QPS_RTS || next == IBV_QPS_SQD;
	case IBV_QPS_SQE:
		*opt = qkey_opt;
		return next == IBV_QPS_RTS;
	default:
		return false;
	}
}

int m_modify_qp(rv_context *c, ibv_qp *ibqp, const ibv_qp_attr *attr, int mask)
{
	m5::nic &n = nic_of(c);
	rv_device &d = dev(c);
	m5::qp *q = qp_of(c, ibqp);
	if (q == nullptr)
		return EINVAL;
	dp_lock(d);
	const ibv_qp_state cur = (mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state : q->state;
	const ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	int req, opt;
	int rc = 0;
	if (!ud_transition(cur, next, &req, &opt) || (mask & req) != req ||
	    (mask & ~(req | opt | IBV_QP_STATE)) != 0)
		rc = EINVAL;
	else if ((mask & IBV_QP_PORT) && attr->port_num != 1)
		rc = EINVAL;
	else if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index != 0)
		rc = EINVAL;
	if (rc != 0) {
		dp_unlock(d);
		return rc;
	}
	if (mask & IBV_QP_QKEY)
		q->qkey = attr->qkey;
	if (mask & IBV_QP_PKEY_INDEX)
		q->pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		q->port = attr->port_num;
	if (mask & IBV_QP_SQ_PSN)
		q->sq_psn = attr->sq_psn & 0xffffff;
	auto reindex = [&] {
		for (m5::qp *p : n.qps) {
			if (p == nullptr)
				continue;
			p->sidx = -1;
			for (unsigned i = 0; i < d.q.nb_qps(); i++)
				if (d.q.qp(i)->qpn == p->qpn)
					p->sidx = int(i);
		}
	};
	if (next == IBV_QPS_RESET) {
		if (q->sidx >= 0) {
			d.q.remove_qp(q->qpn);
			reindex();
		}
		/* libmlx5 starts its counters and doorbell record at 0 again. */
		q->sq_ci = 0;
		q->rq_ci = 0;
	} else {
		if (q->sidx < 0) {
			rc = d.q.add_qp(q->qpn, q->qkey, geteuid() == 0);
			if (rc == 0)
				reindex();
		} else {
			d.q.qp(unsigned(q->sidx))->qkey = q->qkey;
		}
		if (rc == 0 && (mask & IBV_QP_SQ_PSN))
			d.q.qp(unsigned(q->sidx))->psn = q->sq_psn;
	}
	if (rc == 0) {
		q->state = next;
		if (next == IBV_QPS_ERR)
			m5::flush(n, *q);
	}
	dp_unlock(d);
	return rc;
}

int m_query_qp(rv_context *c, ibv_qp *ibqp, ibv_qp_attr *attr, int, ibv_qp_init_attr *init)
{
	m5::qp *q = qp_of(c, ibqp);
	if (q == nullptr)
		return EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = q->state;
	attr->cur_qp_state = q->state;
	attr->path_mtu = dev(c).mtu_enum;
	attr->qkey = q->qkey;
	attr->sq_psn = q->sq_psn;
	attr->pkey_index = q->pkey_index;
	attr->port_num = q->port;
	attr->cap = q->cap;
	attr->sq_draining = 0;
	if (init != nullptr) {
		memset(init, 0, sizeof(*init));
		init->qp_context = ibqp->qp_context;
		init->send_cq = ibqp->send_cq;
		init->recv_cq = ibqp->recv_cq;
		init->cap = q->cap;
		init->qp_type = IBV_QPT_UD;
		init->sq_sig_all = q->sq_sig_all;
	}
	return 0;
}

int m_destroy_qp(rv_context *c, uint32_t handle)
{
	m5::nic &n = nic_of(c);
	if (handle >= m5::max_qps)
		return EINVAL;
	rv_device &d = dev(c);
	dp_lock(d);
	m5::qp *q = n.qps[handle];
	if (q == nullptr) {
		dp_unlock(d);
		return EINVAL;
	}
	if (q->sidx >= 0)
		d.q.remove_qp(q->qpn);
	n.qps[handle] = nullptr;
	if (q->srq != nullptr)
		q->srq->users--;
	for (m5::qp *p : n.qps) {
		if (p == nullptr)
			continue;
		p->sidx = -1;
		for (unsigned i = 0; i < d.q.nb_qps(); i++)
			if (d.q.qp(i)->qpn == p->qpn)
				p->sidx = int(i);
	}
	dp_unlock(d);
	delete q;
	return 0;
}

/* A basic SRQ, sized as mlx5_ib does: max = roundup_pow_of_two(max_wr
 * + 1) WQEs of roundup_pow_of_two(max(32, 16 + 16 * max_sge)) bytes, the
 * answer's max_wr and max_sge what that holds. libmlx5 allocated its
 * buffer by the same rule. No XRC, no tag matching (the ioctl's
 * create_srq_ex is not offered). */
int m_create_srq(rv_context *c, ibv_srq_init_attr *a, const void *in, size_t inlen, void *out, size_t outlen,
		 uint32_t *handle, uint32_t *srqn)
{
	mlx5_ib_create_srq req{};
	if (inlen < offsetof(mlx5_ib_create_srq, uidx))
		return EINVAL;
	memcpy(&req, in, std::min(inlen, sizeof(req)));
	if (req.flags & ~uint32_t(MLX5_SRQ_FLAG_SIGNATURE))
		return EINVAL;
	if (req.reserved0 != 0 || req.reserved1 != 0)
		return EINVAL;
	if (a->attr.max_wr == 0 || a->attr.max_wr > max_srq_wr || a->attr.max_sge > max_srq_sge)
		return EINVAL;
	uint32_t max = 1;
	while (max < a->attr.max_wr + 1)
		max <<= 1;
	uint32_t desc = std::max<uint32_t>(32, 16 + 16 * a->attr.max_sge), size = 1, shift = 0;
	while (size < desc) {
		size <<= 1;
		shift++;
	}
	auto *s = new (std::nothrow) m5::srq{};
	if (s == nullptr)
		return ENOMEM;
	s->buf = reinterpret_cast<uint8_t *>(uintptr_t(req.buf_addr));
	s->db = reinterpret_cast<uint32_t *>(uintptr_t(req.db_addr));
	s->max = max;
	s->wqe_shift = shift;
	s->max_gs = (size - 16) / 16;
	s->limit = a->attr.srq_limit;
	m5::nic &n = nic_of(c);
	rv_device &d = dev(c);
	dp_lock(d);
	unsigned slot = 0;
	while (slot < m5::max_srqs && n.srqs[slot] != nullptr)
		slot++;
	if (slot == m5::max_srqs) {
		dp_unlock(d);
		delete s;
		return ENOMEM;
	}
	s->srqn = slot + 1;
	n.srqs[slot] = s;
	dp_unlock(d);
	mlx5_ib_create_srq_resp r{};
	r.srqn = s->srqn;
	memcpy(out, &r, std::min(outlen, sizeof(r)));
	a->attr.max_wr = max - 1;
	a->attr.max_sge = s->max_gs;
	*handle = slot;
	*srqn = s->srqn;
	return 0;
}

m5::srq *srq_at(rv_context *c, uint32_t handle)
{
	return handle < m5::max_srqs ? nic_of(c).srqs[handle] : nullptr;
}

/* mlx5_ib resizes no SRQ (IB_SRQ_MAX_WR is EINVAL); the limit is kept
 * (no SRQ_LIMIT_REACHED event is raised: no async event is). */
int m_modify_srq(rv_context *c, uint32_t handle, const ibv_srq_attr *attr, int mask)
{
	m5::srq *s = srq_at(c, handle);
	if (s == nullptr || (mask & IBV_SRQ_MAX_WR) || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		return EINVAL;
	if (mask & IBV_SRQ_LIMIT) {
		if (attr->srq_limit >= s->max)
			return EINVAL;
		s->limit = attr->srq_limit;
	}
	return 0;
}

int m_query_srq(rv_context *c, uint32_t handle, ibv_srq_attr *attr)
{
	m5::srq *s = srq_at(c, handle);
	if (s == nullptr)
		return EINVAL;
	attr->max_wr = s->max - 1;
	attr->max_sge = s->max_gs;
	attr->srq_limit = s->limit;
	return 0;
}

/* An SRQ a QP still receives from is busy (ib_uverbs' use count). */
int m_destroy_srq(rv_context *c, uint32_t handle)
{
	rv_device &d = dev(c);
	m5::nic &n = nic_of(c);
	if (handle >= m5::max_srqs)
		return EINVAL;
	dp_lock(d);
	m5::srq *s = n.srqs[handle];
	if (s == nullptr || s->users != 0) {
		dp_unlock(d);
		return s == nullptr ? EINVAL : EBUSY;
	}
	n.srqs[handle] = nullptr;
	dp_unlock(d);
	delete s;
	return 0;
}

/* create_ah on RoCE: the kernel resolves the destination's MAC
 * (rdma_resolve_ip: ARP/ND) and answers it as dmac; here the soft
 * driver's neighbour table does, and the soft AH it makes is what the
 * NIC sends to this AV with. */
int m_create_ah(rv_context *c, ibv_pd *, const ibv_ah_attr *attr, void *out, size_t outlen, uint32_t *handle)
{
	rv_device &d = dev(c);
	m5::nic &n = nic_of(c);
	if (!attr->is_global || attr->port_num != 1)
		return EINVAL;
	if (attr->grh.sgid_index >= d.gids.size())
		return EINVAL;
	const uint64_t deadline = rte_get_tsc_cycles() + rte_get_tsc_hz() *
								 ((uint64_t(d.cfg.neigh_retries) + 1) * d.cfg.neigh_retry_ms + 500) /
								 1000;
	bool waiting = false;
	ah_handle h{};
	const int rc = soft::resolve_ah(
		d.dev, *attr, deadline,
		[&d](const std::function<void()> &f) {
			std::lock_guard<std::mutex> g(d.ctl);
			d.dev.poll(rte_get_tsc_cycles());
			dp_lock(d);
			f();
			dp_unlock(d);
		},
		[&d, &waiting] {
			if (!waiting) {
				waiting = true;
				d.ah_waiters++;
				service_wake();
			}
			std::this_thread::sleep_for(std::chrono::microseconds(50));
		},
		&h);
	if (waiting)
		d.ah_waiters--;
	if (rc != 0)
		return rc;
	mlx5_ib_create_ah_resp r{};
	r.response_length = uint32_t(std::min(outlen, sizeof(r)));
	std::lock_guard<std::mutex> g(d.ctl);
	dp_lock(d);
	/* A free slot, else a retired one (its soft AH goes now). */
	unsigned slot = 0;
	while (slot < m5::max_avs && (n.avs[slot].refs != 0 || n.avs[slot].retired))
		slot++;
	if (slot == m5::max_avs) {
		slot = 0;
		while (slot < m5::max_avs && n.avs[slot].refs != 0)
			slot++;
	}
	if (slot == m5::max_avs) {
		d.dev.destroy_ah(h);
		dp_unlock(d);
		return ENOMEM;
	}
	if (n.avs[slot].retired) {
		d.dev.destroy_ah(n.avs[slot].h);
		n.avs[slot].retired = false;
	}
	const soft::soft_av *av = d.dev.ahs().replica(0).lookup(h);
	if (av != nullptr)
		memcpy(r.dmac, av->hdr, 6);
	m5::av_entry &e = n.avs[slot];
	memcpy(e.rgid, attr->grh.dgid.raw, 16);
	e.sgid_index = attr->grh.sgid_index;
	e.h = h;
	e.loop = false;
	for (const auto &gg : d.gids)
		e.loop |= memcmp(gg.raw, attr->grh.dgid.raw, 16) == 0;
	e.refs = 1;
	dp_unlock(d);
	memcpy(out, &r, std::min(outlen, sizeof(r)));
	*handle = slot;
	return 0;
}

int m_destroy_ah(rv_context *c, uint32_t handle)
{
	rv_device &d = dev(c);
	m5::nic &n = nic_of(c);
	if (handle >= m5::max_avs)
		return EINVAL;
	std::lock_guard<std::mutex> g(d.ctl);
	dp_lock(d);
	m5::av_entry &e = n.avs[handle];
	int rc = EINVAL;
	if (e.refs != 0) {
		/* Retired: the soft AH stays for the WQEs that carry its AV. */
		rc = 0;
		e.refs = 0;
		e.retired = true;
	}
	dp_unlock(d);
	return rc;
}

/* No ioctl method is offered yet: each is absent from the tree, as the
 * DEVX objects are on a ConnectX without DEVX (ib_uverbs answers
 * EPROTONOSUPPORT for a method it does not have). */
int m_ioctl(rv_context *, const ib_uverbs_ioctl_hdr *h)
{
	if (h->object_id == MLX5_IB_OBJECT_DEVX && h->method_id == MLX5_IB_METHOD_DEVX_OTHER)
		return kernel_refuse("mlx5_ib", "ioctl DEVX_OTHER (DEVX general commands: QUERY_HCA_CAP, ...)",
				     EPROTONOSUPPORT);
	/* One line per object: the names are the uAPI's numbers. */
	static char names[16][64];
	static unsigned n = 0;
	char buf[64];
	snprintf(buf, sizeof(buf), "ioctl object 0x%04x method 0x%04x", h->object_id, h->method_id);
	for (unsigned i = 0; i < n; i++)
		if (strcmp(names[i], buf) == 0)
			return kernel_refuse("mlx5_ib", names[i], EPROTONOSUPPORT);
	if (n < 16) {
		memcpy(names[n], buf, sizeof(buf));
		return kernel_refuse("mlx5_ib", names[n++], EPROTONOSUPPORT);
	}
	return EPROTONOSUPPORT;
}

} // namespace

const rv_kernel mlx5_ib = {
	.name = "mlx5_ib",
	.provider_lib = "libmlx5.so.1",
	.provider_name = "mlx5",
	.provider_env = "RDGRAM_VERBS_MLX5_PROVIDER",
	.pci_vendor = 0x15b3,
	.pci_device = 0x1017,
	/* The PCI modalias of a ConnectX-5 (class 0x020000, Ethernet). */
	.modalias = "pci:v000015B3d00001017sv000015B3sd00000008bc02sc00i00",
	.driver_id = RDMA_DRIVER_MLX5,
	.abi_ver = MLX5_IB_UVERBS_ABI_VERSION,
	.open = m_open,
	.release = m_release,
	.alloc_ucontext = m_alloc_ucontext,
	.query_device = m_query_device,
	.query_port = m_query_port,
	.query_gid = m_query_gid,
	.query_pkey = m_query_pkey,
	.ioctl = m_ioctl,
	.alloc_pd = m_alloc_pd,
	.dealloc_pd = m_dealloc_pd,
	.reg_mr = m_reg_mr,
	.dereg_mr = m_dereg_mr,
	.create_cq = m_create_cq,
	.destroy_cq = m_destroy_cq,
	.create_qp = m_create_qp,
	.modify_qp = m_modify_qp,
	.query_qp = m_query_qp,
	.destroy_qp = m_destroy_qp,
	.create_ah = m_create_ah,
	.destroy_ah = m_destroy_ah,
	.create_srq = m_create_srq,
	.modify_srq = m_modify_srq,
	.query_srq = m_query_srq,
	.destroy_srq = m_destroy_srq,
};

} // namespace rdgram::rv
