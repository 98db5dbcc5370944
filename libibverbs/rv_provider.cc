/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Provider devices (rv_kernel.h): libibverbs' half of the provider
 * interface, IBVERBS_PRIVATE_34, written from its documented behaviour.
 *
 * - Loading: a provider library's constructor calls
 *   verbs_register_driver_34 with its verbs_device_ops; every call is
 *   recorded (also those of a provider the program loaded itself, before
 *   any device list). provider_attach dlopens the kernel's provider,
 *   builds the sysfs device a Linux host would show for the port,
 *   matches it (ABI version, match table, match_device) and has the
 *   provider allocate its device.
 * - Contexts: ibv_open_device opens the emulated character device (the
 *   kernel's open gives the cmd_fd) and calls the provider's
 *   alloc_context, which calls back _verbs_init_and_alloc_context,
 *   verbs_set_ops and the ibv_cmd_* commands (rv_uverbs.cc).
 * - The provider kind's rv_ops: the front's checked verbs sent on to the
 *   provider's operations (rdma-core's get_ops()). The data path is the
 *   provider's own functions in ibv_context_ops, as verbs_set_ops puts
 *   them there.
 */
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>

#include <dlfcn.h>
#include <fnmatch.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "rv.h"
#include "rv_api.h"
#include "rv_kernel.h"
#include "rv_mlx5_nic.h"

namespace rdgram::rv {

/* A provider device: the rv_device's provider side. */
struct rv_provider_dev {
	const rv_kernel *kern;
	const pabi::verbs_device_ops *ops;
	void *dl;
	rv_provider_sysfs sysfs;
	pabi::verbs_device *vdev;
};

namespace {

/* Every verbs_register_driver_34 call of the process, in order.
 * Constant-initialised: a provider linked into the program registers
 * from its constructor, which may run before this library's. */
constexpr int max_registered = 32;
const pabi::verbs_device_ops *registered[max_registered];
std::atomic<int> nregistered{0};

/* The context provider_open is making on this thread: the provider's
 * alloc_context adopts it in _verbs_init_and_alloc_context. */
thread_local rv_context *pending = nullptr;

const pabi::verbs_device_ops *find_registered(const char *name)
{
	const int n = std::min(nregistered.load(std::memory_order_acquire), max_registered);
	for (int i = n - 1; i >= 0; i--)
		if (registered[i] != nullptr && registered[i]->name != nullptr && strcmp(registered[i]->name, name) == 0)
			return registered[i];
	return nullptr;
}

/* The match table's entry for the device (libibverbs' matching: PCI IDs,
 * modalias patterns, driver IDs). */
const pabi::verbs_match_ent *match_table(const pabi::verbs_device_ops &ops, const pabi::verbs_sysfs_dev &s,
					 const rv_kernel &k)
{
	for (const pabi::verbs_match_ent *e = ops.match_table; e->kind != pabi::match_sentinel; e++) {
		switch (e->kind) {
		case pabi::match_pci:
			if (e->vendor == k.pci_vendor && e->device == k.pci_device)
				return e;
			break;
		case pabi::match_modalias:
			if (e->u.modalias != nullptr && fnmatch(e->u.modalias, s.modalias, 0) == 0)
				return e;
			break;
		case pabi::match_driver_id:
			if (e->u.driver_id == s.driver_id)
				return e;
			break;
		default:
			break;
		}
	}
	return nullptr;
}

rv_provider_dev *prov_of(rv_context *c) { return reinterpret_cast<rv_device *>(c->dev)->prov; }

/* ---- the provider kind's operations: the front's verbs, on to the
 * provider (a null provider entry: EOPNOTSUPP, as rdma-core's dummy
 * ops) ---- */

const pabi::verbs_context_ops &pops(ibv_context *c) { return ctx_of(c)->prov; }

int p_open_context(rv_context *) { return 0; }

void p_free_context(rv_context *c)
{
	ibv_context *ctx = &c->vctx->context;
	if (c->prov.free_context != nullptr)
		c->prov.free_context(ctx); /* ends in verbs_uninit_context: c goes */
}

int p_query_device_ex(ibv_context *ctx, ibv_device_attr_ex *a)
{
	memset(a, 0, sizeof(*a));
	if (pops(ctx).query_device_ex == nullptr)
		return EOPNOTSUPP;
	return pops(ctx).query_device_ex(ctx, nullptr, a, sizeof(*a));
}

int p_query_port(ibv_context *ctx, uint8_t port, ibv_port_attr *a)
{
	if (pops(ctx).query_port == nullptr)
		return EOPNOTSUPP;
	return pops(ctx).query_port(ctx, port, a);
}

/* The GID and P_Key tables are the kernel's (libibverbs reads them from
 * sysfs or the GID ioctls, never from the provider). */
int p_query_gid(ibv_context *ctx, uint8_t port, uint32_t index, ibv_gid_entry *e)
{
	rv_context *c = ctx_of(ctx);
	return prov_of(c)->kern->query_gid(c, port, index, e);
}

int p_query_pkey(ibv_context *ctx, uint8_t port, uint16_t index, __be16 *pkey)
{
	rv_context *c = ctx_of(ctx);
	return prov_of(c)->kern->query_pkey(c, port, index, pkey);
}

template <typename T> T *refused_null(const char *verb)
{
	refuse(verb, "the provider does not offer it");
	return nullptr;
}

ibv_pd *p_alloc_pd(ibv_context *ctx)
{
	if (pops(ctx).alloc_pd == nullptr)
		return refused_null<ibv_pd>("ibv_alloc_pd");
	ibv_pd *pd = pops(ctx).alloc_pd(ctx);
	if (pd != nullptr)
		pd->context = ctx;
	return pd;
}

int p_dealloc_pd(ibv_pd *pd)
{
	auto f = pops(pd->context).dealloc_pd;
	return f == nullptr ? EOPNOTSUPP : f(pd);
}

ibv_mr *p_reg_mr(ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned access)
{
	auto f = pops(pd->context).reg_mr;
	if (f == nullptr)
		return refused_null<ibv_mr>("ibv_reg_mr");
	ibv_mr *mr = f(pd, addr, length, iova, int(access));
	if (mr != nullptr) {
		mr->context = pd->context;
		mr->pd = pd;
		mr->addr = addr;
		mr->length = length;
	}
	return mr;
}

int p_dereg_mr(ibv_mr *mr)
{
	auto f = pops(mr->context).dereg_mr;
	return f == nullptr ? EOPNOTSUPP : f(reinterpret_cast<pabi::verbs_mr *>(mr));
}

ibv_cq *p_create_cq(ibv_context *ctx, int cqe, void *cq_context, ibv_comp_channel *channel, int comp_vector)
{
	auto f = pops(ctx).create_cq;
	if (f == nullptr)
		return refused_null<ibv_cq>("ibv_create_cq");
	ibv_cq *cq = f(ctx, cqe, channel, comp_vector);
	if (cq != nullptr)
		verbs_init_cq_impl(cq, ctx, channel, cq_context);
	return cq;
}

int p_resize_cq(ibv_cq *cq, int cqe)
{
	auto f = pops(cq->context).resize_cq;
	return f == nullptr ? EOPNOTSUPP : f(cq, cqe);
}

int p_destroy_cq(ibv_cq *cq)
{
	auto f = pops(cq->context).destroy_cq;
	if (f == nullptr)
		return EOPNOTSUPP;
	ibv_comp_channel *ch = cq->channel;
	const int rc = f(cq);
	if (rc == 0 && ch != nullptr) {
		auto *rc_ch = reinterpret_cast<rv_channel *>(ch);
		std::lock_guard<std::mutex> g(rc_ch->mu);
		rc_ch->ncq--;
	}
	return rc;
}

ibv_qp *p_create_qp(ibv_pd *pd, ibv_qp_init_attr *attr)
{
	auto f = pops(pd->context).create_qp;
	if (f == nullptr)
		return refused_null<ibv_qp>("ibv_create_qp");
	ibv_qp *qp = f(pd, attr);
	if (qp != nullptr) {
		qp->context = pd->context;
		qp->qp_context = attr->qp_context;
		qp->pd = pd;
		qp->send_cq = attr->send_cq;
		qp->recv_cq = attr->recv_cq;
		qp->srq = attr->srq;
		qp->qp_type = attr->qp_type;
		qp->state = IBV_QPS_RESET;
		qp->events_completed = 0;
		pthread_mutex_init(&qp->mutex, nullptr);
		pthread_cond_init(&qp->cond, nullptr);
	}
	return qp;
}

int p_modify_qp(ibv_qp *qp, ibv_qp_attr *attr, int mask)
{
	auto f = pops(qp->context).modify_qp;
	if (f == nullptr)
		return EOPNOTSUPP;
	const int rc = f(qp, attr, mask);
	if (rc == 0 && (mask & IBV_QP_STATE))
		qp->state = attr->qp_state;
	return rc;
}

int p_query_qp(ibv_qp *qp, ibv_qp_attr *attr, int mask, ibv_qp_init_attr *init)
{
	auto f = pops(qp->context).query_qp;
	return f == nullptr ? EOPNOTSUPP : f(qp, attr, mask, init);
}

int p_destroy_qp(ibv_qp *qp)
{
	auto f = pops(qp->context).destroy_qp;
	return f == nullptr ? EOPNOTSUPP : f(qp);
}

int p_attach_mcast(ibv_qp *qp, const ibv_gid *gid, uint16_t lid)
{
	auto f = pops(qp->context).attach_mcast;
	return f == nullptr ? EOPNOTSUPP : f(qp, gid, lid);
}

int p_detach_mcast(ibv_qp *qp, const ibv_gid *gid, uint16_t lid)
{
	auto f = pops(qp->context).detach_mcast;
	return f == nullptr ? EOPNOTSUPP : f(qp, gid, lid);
}

ibv_ah *p_create_ah(ibv_pd *pd, ibv_ah_attr *attr)
{
	auto f = pops(pd->context).create_ah;
	if (f == nullptr)
		return refused_null<ibv_ah>("ibv_create_ah");
	ibv_ah *ah = f(pd, attr);
	if (ah != nullptr) {
		ah->context = pd->context;
		ah->pd = pd;
	}
	return ah;
}

int p_destroy_ah(ibv_ah *ah)
{
	auto f = pops(ah->context).destroy_ah;
	return f == nullptr ? EOPNOTSUPP : f(ah);
}

/* The provider's SRQ, with libibverbs' fields of it (ibv_create_srq in
 * verbs.c). */
ibv_srq *p_create_srq(ibv_pd *pd, ibv_srq_init_attr *attr)
{
	auto f = pops(pd->context).create_srq;
	if (f == nullptr)
		return refused_null<ibv_srq>("ibv_create_srq");
	ibv_srq *srq = f(pd, attr);
	if (srq != nullptr) {
		srq->context = pd->context;
		srq->srq_context = attr->srq_context;
		srq->pd = pd;
		srq->events_completed = 0;
		pthread_mutex_init(&srq->mutex, nullptr);
		pthread_cond_init(&srq->cond, nullptr);
	}
	return srq;
}

int p_modify_srq(ibv_srq *srq, ibv_srq_attr *attr, int mask)
{
	auto f = pops(srq->context).modify_srq;
	return f == nullptr ? EOPNOTSUPP : f(srq, attr, mask);
}

int p_query_srq(ibv_srq *srq, ibv_srq_attr *attr)
{
	auto f = pops(srq->context).query_srq;
	return f == nullptr ? EOPNOTSUPP : f(srq, attr);
}

int p_destroy_srq(ibv_srq *srq)
{
	auto f = pops(srq->context).destroy_srq;
	return f == nullptr ? EOPNOTSUPP : f(srq);
}

int p_init_ah_from_wc(ibv_context *, uint8_t, ibv_wc *, ibv_grh *, ibv_ah_attr *)
{
	refuse("ibv_init_ah_from_wc", "not yet on provider devices");
	return EOPNOTSUPP;
}

/* ---- refusals for the data-path entries a provider leaves empty ---- */

int no_poll_cq(ibv_cq *, int, ibv_wc *) { return -1; }

/* ibv_poll_cq on a device with a NIC thread: the provider's poll, and
 * when the CQ is empty one NIC round on this thread, then the provider's
 * poll again. The NIC thread alone would do the same work, but a program
 * busy-polling on a CPU it shares with that thread keeps it waiting for
 * the scheduler; this way a polling program drives its own device, as on
 * the soft kind. Consumers that read CQEs without ibv_poll_cq (UCX,
 * mlx5dv) are served by the NIC thread. */
int nic_poll_cq(ibv_cq *cq, int n, ibv_wc *wc)
{
	rv_context *c = ctx_of(cq->context);
	int got = c->prov.poll_cq(cq, n, wc);
	if (got != 0)
		return got;
	if (m5::assist(*reinterpret_cast<rv_device *>(c->dev)))
		got = c->prov.poll_cq(cq, n, wc);
	return got;
}
int no_req_notify_cq(ibv_cq *, int) { return EOPNOTSUPP; }
int no_post_send(ibv_qp *, ibv_send_wr *wr, ibv_send_wr **bad)
{
	*bad = wr;
	return EOPNOTSUPP;
}
int no_post_recv(ibv_qp *, ibv_recv_wr *wr, ibv_recv_wr **bad)
{
	*bad = wr;
	return EOPNOTSUPP;
}

/* libibverbs' ibv_create_cq_ex entry (verbs_context.create_cq_ex): the
 * provider's, then the CQ's library fields. */
ibv_cq_ex *lib_create_cq_ex(ibv_context *ctx, ibv_cq_init_attr_ex *attr)
{
	auto f = pops(ctx).create_cq_ex;
	if (f == nullptr) {
		refuse("ibv_create_cq_ex", "the provider does not offer it");
		return nullptr;
	}
	ibv_cq_ex *cq = f(ctx, attr);
	if (cq != nullptr)
		verbs_init_cq_impl(ibv_cq_ex_to_cq(cq), ctx, attr->channel, attr->cq_context);
	return cq;
}

void fill_device(pabi::verbs_device &vd, const pabi::verbs_sysfs_dev &s, const pabi::verbs_device_ops *ops,
		 unsigned index)
{
	vd.ops = ops;
	vd.refcount = 1;
	vd.sysfs = const_cast<pabi::verbs_sysfs_dev *>(&s);
	ibv_device &v = vd.device;
	v.node_type = s.node_type;
	v.transport_type = IBV_TRANSPORT_IB;
	snprintf(v.name, sizeof(v.name), "%s", s.ibdev_name);
	snprintf(v.dev_name, sizeof(v.dev_name), "%s", s.sysfs_name);
	snprintf(v.dev_path, sizeof(v.dev_path), "/sys/class/infiniband_verbs/uverbs%u", index);
	snprintf(v.ibdev_path, sizeof(v.ibdev_path), "%s", s.ibdev_path);
}

} // namespace

void verbs_init_cq_impl(ibv_cq *cq, ibv_context *ctx, ibv_comp_channel *channel, void *cq_context)
{
	cq->context = ctx;
	cq->channel = channel;
	cq->cq_context = cq_context;
	cq->comp_events_completed = 0;
	cq->async_events_completed = 0;
	pthread_mutex_init(&cq->mutex, nullptr);
	pthread_cond_init(&cq->cond, nullptr);
	if (channel != nullptr) {
		auto *ch = reinterpret_cast<rv_channel *>(channel);
		std::lock_guard<std::mutex> g(ch->mu);
		ch->ncq++;
	}
}

const rv_ops provider_ops = {
	.kind = "mlx5",
	.provider = true,
	.qp_types = 1u << IBV_QPT_UD,
	.qp_init_attr_mask = IBV_QP_INIT_ATTR_PD,
	.qp_create_flags = 0,
	/* The largest inline a UD WQE of max_sq_desc_sz (1024) bytes holds
	 * after its control (16), datagram (48) and inline header (4): the
	 * provider sizes the WQE and refuses past it itself. */
	.max_inline_data = 1024 - 16 - 48 - 4,
	.open_context = p_open_context,
	.free_context = p_free_context,
	.query_device_ex = p_query_device_ex,
	.query_port = p_query_port,
	.query_gid = p_query_gid,
	.query_pkey = p_query_pkey,
	.alloc_pd = p_alloc_pd,
	.dealloc_pd = p_dealloc_pd,
	.reg_mr = p_reg_mr,
	.dereg_mr = p_dereg_mr,
	.create_cq = p_create_cq,
	.resize_cq = p_resize_cq,
	.destroy_cq = p_destroy_cq,
	.poll_cq = nullptr,
	.req_notify_cq = nullptr,
	.create_qp = p_create_qp,
	.modify_qp = p_modify_qp,
	.query_qp = p_query_qp,
	.destroy_qp = p_destroy_qp,
	.post_send = nullptr,
	.post_recv = nullptr,
	.attach_mcast = p_attach_mcast,
	.detach_mcast = p_detach_mcast,
	.create_ah = p_create_ah,
	.destroy_ah = p_destroy_ah,
	.init_ah_from_wc = p_init_ah_from_wc,
	.create_srq = p_create_srq,
	.modify_srq = p_modify_srq,
	.query_srq = p_query_srq,
	.destroy_srq = p_destroy_srq,
	/* Called straight from the context's ops (verbs.h's inline
	 * ibv_post_srq_recv): the provider's. */
	.post_srq_recv = nullptr,
};

const rv_kernel *kernel_of(ibv_context *c)
{
	rv_context *rc = ctx_of(c);
	if (rc == nullptr || !rc->ops->provider)
		return nullptr;
	return prov_of(rc)->kern;
}

int provider_attach(rv_device &d, unsigned index, const rv_kernel &k)
{
	const char *name = d.cfg.name.c_str();
	const char *lib = getenv(k.provider_env);
	if (lib == nullptr || *lib == '\0')
		lib = k.provider_lib;
	void *dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (dl == nullptr) {
		logf("port %s: kind %s: cannot load the provider %s (%s); the port is left out", name,
		     d.cfg.kind.c_str(), lib, dlerror());
		return ENOENT;
	}
	const pabi::verbs_device_ops *ops = find_registered(k.provider_name);
	if (ops == nullptr) {
		logf("port %s: kind %s: %s registered no '%s' provider at IBVERBS_PRIVATE_%d; the port is left out",
		     name, d.cfg.kind.c_str(), lib, k.provider_name, pabi::version);
		dlclose(dl);
		return ENOENT;
	}
	auto *p = new rv_provider_dev{};
	p->kern = &k;
	p->ops = ops;
	p->dl = dl;
	p->sysfs.owner = &d.ib;
	pabi::verbs_sysfs_dev &s = p->sysfs.dev;
	s.flags = 3; /* modalias and node GUID read */
	snprintf(s.sysfs_name, sizeof(s.sysfs_name), "uverbs%u", index);
	s.sysfs_cdev = makedev(231, 192 + index); /* infiniband_verbs' char major, as the kernel numbers them */
	snprintf(s.ibdev_name, sizeof(s.ibdev_name), "%s", name);
	/* rdgram-verbs' sysfs-like tree with the PCI ids UCX reads, when it
	 * made one (apps/rdgram-verbs/main.cc); else where a host's would be. */
	const char *tree = getenv("RDGRAM_VERBS_SYSFS");
	snprintf(s.ibdev_path, sizeof(s.ibdev_path), "%s/class/infiniband/%s", tree != nullptr ? tree : "/sys",
		 name);
	snprintf(s.modalias, sizeof(s.modalias), "%s", k.modalias);
	s.node_guid = d.guid_be;
	s.driver_id = k.driver_id;
	s.node_type = IBV_NODE_CA;
	s.ibdev_idx = int(index);
	s.num_ports = 1;
	s.abi_ver = k.abi_ver;
	clock_gettime(CLOCK_REALTIME, &s.time_created);

	const char *why = nullptr;
	if (k.abi_ver < ops->match_min_abi_version || k.abi_ver > ops->match_max_abi_version)
		why = "the driver ABI version is outside the provider's range";
	else if (ops->match_table != nullptr && (s.match = match_table(*ops, s, k)) == nullptr)
		why = "the provider's match table does not list the device";
	else if (ops->match_device != nullptr && !ops->match_device(&s))
		why = "the provider's match_device refused the device";
	else if (ops->alloc_device == nullptr || (p->vdev = ops->alloc_device(&s)) == nullptr)
		why = "the provider's alloc_device failed";
	if (why != nullptr) {
		logf("port %s: kind %s: %s (%s, PCI %04x:%04x, ABI %u); the port is left out", name, d.cfg.kind.c_str(),
		     why, lib, k.pci_vendor, k.pci_device, k.abi_ver);
		delete p;
		/* The provider stays loaded: its registration is recorded. */
		return ENODEV;
	}
	if (int e = m5::start(d); e != 0) {
		logf("port %s: kind %s: the NIC thread did not start (%s); the port is left out", name,
		     d.cfg.kind.c_str(), strerror(e));
		delete p;
		return e;
	}
	fill_device(*p->vdev, s, ops, index);
	d.prov = p;
	d.ib.ops = &provider_ops;
	d.ib.listed = &p->vdev->device;
	return 0;
}

ibv_context *provider_open(ibv_device *device, void *private_data)
{
	rv_ibdev *ib = ibdev_of(device);
	rv_provider_dev *p = reinterpret_cast<rv_device *>(ib)->prov;
	auto *c = new (std::nothrow) rv_context{};
	if (c == nullptr) {
		errno = ENOMEM;
		return nullptr;
	}
	c->dev = ib;
	c->ops = ib->ops;
	int fd = -1;
	if (int e = p->kern->open(c, &fd); e != 0) {
		delete c;
		errno = e;
		return nullptr;
	}
	pending = c;
	verbs_context *v = p->ops->alloc_context(device, fd, private_data);
	rv_context *left = pending; /* not adopted: the provider failed early */
	pending = nullptr;
	if (v == nullptr) {
		const int e = errno != 0 ? errno : EINVAL;
		if (left != nullptr) {
			p->kern->release(left);
			delete left;
			close(fd);
		}
		errno = e;
		return nullptr;
	}
	/* libibverbs' own entries (rdma-core's set_lib_ops): the front's
	 * ibv_query_port, the library's ibv_create_cq_ex. */
	v->query_port = rv_query_port_ex;
	v->create_cq_ex = lib_create_cq_ex;
	ibv_context_ops &o = v->context.ops;
	if (o.poll_cq == nullptr)
		o.poll_cq = no_poll_cq;
	else if (reinterpret_cast<rv_device *>(ib)->nic != nullptr)
		o.poll_cq = nic_poll_cq;
	if (o.req_notify_cq == nullptr)
		o.req_notify_cq = no_req_notify_cq;
	if (o.post_send == nullptr)
		o.post_send = no_post_send;
	if (o.post_recv == nullptr)
		o.post_recv = no_post_recv;
	if (o.post_srq_recv == nullptr)
		o.post_srq_recv = rv_post_srq_recv;
	if (o.alloc_mw == nullptr)
		o.alloc_mw = rv_alloc_mw;
	if (o.bind_mw == nullptr)
		o.bind_mw = rv_bind_mw;
	if (o.dealloc_mw == nullptr)
		o.dealloc_mw = rv_dealloc_mw;
	if (v->context.async_fd < 0)
		v->context.async_fd = eventfd(0, EFD_CLOEXEC);
	c = ctx_of(&v->context);
	if (int rc = c->ops->query_device_ex(&v->context, &c->attr); rc != 0) {
		c->ops->free_context(c);
		errno = rc;
		return nullptr;
	}
	return &v->context;
}

int kernel_refuse(const char *kernel, const char *what, int e)
{
	/* Once per (what) per process: a short list of names seen. */
	static std::mutex mu;
	static const char *said[64];
	static unsigned nsaid = 0;
	{
		std::lock_guard<std::mutex> g(mu);
		for (unsigned i = 0; i < nsaid; i++)
			if (said[i] == what || strcmp(said[i], what) == 0)
				return e;
		if (nsaid < 64)
			said[nsaid++] = what;
	}
	logf("%s refused by the emulated %s (%s)", what, kernel, strerrorname_np(e));
	return e;
}

} // namespace rdgram::rv

using namespace rdgram::rv;

extern "C" {

RV_EXPORT void verbs_register_driver_34(const pabi::verbs_device_ops *ops)
{
	const int i = nregistered.load(std::memory_order_relaxed);
	if (i >= max_registered)
		return;
	registered[i] = ops;
	nregistered.store(i + 1, std::memory_order_release);
}

RV_EXPORT void *_verbs_init_and_alloc_context(ibv_device *device, int cmd_fd, size_t alloc_size,
					      verbs_context *context_offset, uint32_t /* driver_id */)
{
	rv_context *c = pending;
	if (c == nullptr || alloc_size < sizeof(verbs_context)) {
		/* Not in a provider_open of ours (an import, or a provider
		 * called from elsewhere): no kernel behind the fd. */
		errno = EINVAL;
		return nullptr;
	}
	void *drv = calloc(1, alloc_size);
	if (drv == nullptr) {
		errno = ENOMEM;
		return nullptr;
	}
	auto *v = reinterpret_cast<verbs_context *>(static_cast<char *>(drv) +
						    reinterpret_cast<uintptr_t>(context_offset));
	pending = nullptr; /* adopted: verbs_uninit_context releases it */
	c->vctx = v;
	v->sz = sizeof(verbs_context);
	v->priv = reinterpret_cast<verbs_ex_private *>(c);
	ibv_context &ctx = v->context;
	ctx.device = device;
	ctx.cmd_fd = cmd_fd;
	ctx.async_fd = -1;
	ctx.num_comp_vectors = 1;
	ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
	pthread_mutex_init(&ctx.mutex, nullptr);
	return drv;
}

/* Records the provider's operations (merged: a later call overrides only
 * the entries it gives) and puts the ones verbs.h's inline verbs call
 * straight into the context, as libibverbs does. */
RV_EXPORT void verbs_set_ops(verbs_context *v, const pabi::verbs_context_ops *ops)
{
	rv_context *c = reinterpret_cast<rv_context *>(v->priv);
	pabi::verbs_context_ops &m = c->prov;
	ibv_context_ops &o = v->context.ops;
#define RV_KEEP(name)                                                                                  \
	if (ops->name != nullptr)                                                                      \
		m.name = ops->name;
	/* Kept only: the front calls them through the rv_ops. */
	RV_KEEP(alloc_pd)
	RV_KEEP(async_event)
	RV_KEEP(attach_mcast)
	RV_KEEP(cq_event)
	RV_KEEP(create_ah)
	RV_KEEP(create_cq)
	RV_KEEP(create_cq_ex)
	RV_KEEP(create_qp)
	RV_KEEP(create_srq)
	RV_KEEP(dealloc_pd)
	RV_KEEP(dereg_mr)
	RV_KEEP(destroy_ah)
	RV_KEEP(destroy_cq)
	RV_KEEP(destroy_qp)
	RV_KEEP(destroy_srq)
	RV_KEEP(detach_mcast)
	RV_KEEP(free_context)
	RV_KEEP(import_dm)
	RV_KEEP(import_mr)
	RV_KEEP(import_pd)
	RV_KEEP(modify_qp)
	RV_KEEP(modify_srq)
	RV_KEEP(query_ece)
	RV_KEEP(query_port)
	RV_KEEP(query_qp)
	RV_KEEP(query_qp_data_in_order)
	RV_KEEP(query_srq)
	RV_KEEP(reg_dmabuf_mr)
	RV_KEEP(reg_mr)
	RV_KEEP(rereg_mr)
	RV_KEEP(resize_cq)
	RV_KEEP(set_ece)
	RV_KEEP(unimport_dm)
	RV_KEEP(unimport_mr)
	RV_KEEP(unimport_pd)
#undef RV_KEEP
#define RV_SET(ptr, field, name)                                                                       \
	if (ops->name != nullptr) {                                                                    \
		m.name = ops->name;                                                                    \
		(ptr).field = ops->name;                                                               \
	}
	/* Called straight by verbs.h's inline verbs. */
	RV_SET(*v, advise_mr, advise_mr)
	RV_SET(*v, alloc_dm, alloc_dm)
	RV_SET(o, alloc_mw, alloc_mw)
	RV_SET(*v, alloc_null_mr, alloc_null_mr)
	RV_SET(*v, alloc_parent_domain, alloc_parent_domain)
	RV_SET(*v, alloc_td, alloc_td)
	RV_SET(*v, attach_counters_point_flow, attach_counters_point_flow)
	RV_SET(*v, create_counters, create_counters)
	RV_SET(o, bind_mw, bind_mw)
	RV_SET(*v, close_xrcd, close_xrcd)
	RV_SET(*v, ibv_create_flow, create_flow)
	RV_SET(*v, create_flow_action_esp, create_flow_action_esp)
	RV_SET(*v, create_qp_ex, create_qp_ex)
	RV_SET(*v, create_rwq_ind_table, create_rwq_ind_table)
	RV_SET(*v, create_srq_ex, create_srq_ex)
	RV_SET(*v, create_wq, create_wq)
	RV_SET(o, dealloc_mw, dealloc_mw)
	RV_SET(*v, dealloc_td, dealloc_td)
	RV_SET(*v, destroy_counters, destroy_counters)
	RV_SET(*v, ibv_destroy_flow, destroy_flow)
	RV_SET(*v, destroy_flow_action, destroy_flow_action)
	RV_SET(*v, destroy_rwq_ind_table, destroy_rwq_ind_table)
	RV_SET(*v, destroy_wq, destroy_wq)
	RV_SET(*v, free_dm, free_dm)
	RV_SET(*v, get_srq_num, get_srq_num)
	RV_SET(*v, modify_cq, modify_cq)
	RV_SET(*v, modify_flow_action_esp, modify_flow_action_esp)
	RV_SET(*v, modify_qp_rate_limit, modify_qp_rate_limit)
	RV_SET(*v, modify_wq, modify_wq)
	RV_SET(*v, open_qp, open_qp)
	RV_SET(*v, open_xrcd, open_xrcd)
	RV_SET(o, poll_cq, poll_cq)
	RV_SET(o, post_recv, post_recv)
	RV_SET(o, post_send, post_send)
	RV_SET(*v, post_srq_ops, post_srq_ops)
	RV_SET(o, post_srq_recv, post_srq_recv)
	RV_SET(*v, query_device_ex, query_device_ex)
	RV_SET(*v, query_rt_values, query_rt_values)
	RV_SET(*v, read_counters, read_counters)
	RV_SET(*v, reg_dm_mr, reg_dm_mr)
	RV_SET(o, req_notify_cq, req_notify_cq)
#undef RV_SET
	/* Old binaries' inline flow verbs look in the placeholders. */
	v->ABI_placeholder1 = reinterpret_cast<void (*)()>(v->ibv_create_flow);
	v->ABI_placeholder2 = reinterpret_cast<void (*)()>(v->ibv_destroy_flow);
}

RV_EXPORT void verbs_uninit_context(verbs_context *v)
{
	rv_context *c = reinterpret_cast<rv_context *>(v->priv);
	if (c != nullptr) {
		prov_of(c)->kern->release(c);
		delete c;
		v->priv = nullptr;
	}
	if (v->context.async_fd >= 0)
		close(v->context.async_fd);
	if (v->context.cmd_fd >= 0)
		close(v->context.cmd_fd);
	pthread_mutex_destroy(&v->context.mutex);
}

RV_EXPORT ibv_context *verbs_open_device(ibv_device *device, void *private_data)
{
	if (!ibdev_of(device)->ops->provider) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	return provider_open(device, private_data);
}

RV_EXPORT void verbs_init_cq(ibv_cq *cq, ibv_context *ctx, ibv_comp_channel *channel, void *cq_context)
{
	verbs_init_cq_impl(cq, ctx, channel, cq_context);
}

} /* extern "C" */
