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

#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/mlx5-abi.h>
#include <rdma/mlx5_user_ioctl_cmds.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rv.h"
#include "rv_kernel.h"

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
constexpr uint32_t gid_tbl_len = 256; /* roce_address_table_size */
constexpr uint64_t fw_ver = (uint64_t(16) << 32) | (uint64_t(0) << 16) | 0;

/* The state of one open of the device (a ucontext once allocated). */
struct mlx5_uctx {
	bool allocated = false;
	uint32_t tot_bfregs = 0;
	uint32_t cqe_version = 0;
};

mlx5_uctx &uctx(rv_context *c) { return *static_cast<mlx5_uctx *>(c->kern); }
rv_device &dev(rv_context *c) { return *reinterpret_cast<rv_device *>(c->dev); }

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
	c->kern = u;
	*cmd_fd = fd;
	return 0;
}

void m_release(rv_context *c)
{
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
	b.max_srq = 0; /* no SRQ yet */
	b.max_srq_wr = 0;
	b.max_srq_sge = 0;
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
};

} // namespace rdgram::rv
