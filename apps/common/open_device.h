/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The open of an app's device, written once for every app and driver:
 *
 *   - device_owner<Dev> is what owns it: on the soft driver the DPDK port
 *     with the device on it (soft::port: probe or adopt, start, close),
 *     on verbs, mlx5 and EFA the device itself; device_of() is the Dev
 *     the app's queues are made on.
 *   - open_device<Dev>(rt, request, owner, &err) opens either from what
 *     the app read: the port table (soft, docs/PORTS.md) or the [rdma]
 *     settings (the RDMA drivers), and err is the one line that says why
 *     it failed (no app prefix):
 *
 *       device_owner<Dev> o;
 *       std::string err;
 *       if (int rc = open_device<Dev>(rt, {.port = &c.port, .rdma = &c.rdma, .queues = n}, o, &err); rc != 0) {
 *               fprintf(stderr, "rdgram-x: %s\n", err.c_str());
 *               return 1;
 *       }
 *
 *   - On the soft driver the device's control poller runs where the
 *     request's setup.control says: control_host(rt) for the runtime's
 *     control thread, nothing when an AH service on the device runs it.
 *
 * Dev is the device type apps::with_driver hands the app (driver.h).
 * Control path: the caller's thread (the apps whose ranks or nodes open
 * devices while the control thread polls open the RDMA drivers there,
 * through control_thread::call).
 */
#ifndef RDGRAM_APPS_OPEN_DEVICE_H
#define RDGRAM_APPS_OPEN_DEVICE_H

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>

#include "driver.h"
#include "rdgram/runtime.h"
#include "rdma_config.h"
#include "soft_port.h"

namespace rdgram::apps {

/* What the open takes beyond the [rdma] keys. */
struct rdma_open {
	uint32_t max_ah;                /* AH table slots (each driver caps it by the device's) */
	std::optional<uint32_t> qkey;   /* the queues' default Q_Key; unset: the driver's */
	uint32_t nb_mbufs = 0;          /* the device's mempool; 0: the driver's default */
};

/* Opens dev on k's device and port with o. 0 or an errno value (ENODEV:
 * no such device or no active port); dev.error() says more. */
template <class Dev> int open_rdma_device(runtime &rt, const rdma_device_config &k, const rdma_open &o, Dev &dev)
{
#if RDGRAM_HAVE_DRIVER_VERBS
	if constexpr (std::is_same_v<Dev, verbs::verbs_device>) {
		verbs::verbs_config vc;
		vc.device = k.device;
		vc.port_num = uint8_t(k.port);
		vc.max_ah = o.max_ah;
		vc.qsbr = rt.qsbr();
		vc.topology = rt.topology();
		vc.qkey = o.qkey.value_or(vc.qkey);
		if (o.nb_mbufs != 0)
			vc.nb_mbufs = o.nb_mbufs;
		return dev.open(vc);
	}
#endif
#if RDGRAM_HAVE_DRIVER_MLX5
	if constexpr (std::is_same_v<Dev, mlx5::mlx5_device>) {
		mlx5::mlx5_config mc;
		mc.device = k.device;
		mc.port_num = uint8_t(k.port);
		mc.max_ah = o.max_ah;
		mc.qsbr = rt.qsbr();
		mc.qkey = o.qkey.value_or(mc.qkey);
		if (o.nb_mbufs != 0)
			mc.nb_mbufs = o.nb_mbufs;
		return dev.open(mc);
	}
#endif
#if RDGRAM_HAVE_DRIVER_EFA
	if constexpr (std::is_same_v<Dev, efa::efa_device>) {
		/* One port; its queues UD (the apps' traffic is datagrams;
		 * SRD is reliable, another test). */
		efa::efa_config ec;
		ec.device_name = k.device;
		ec.max_ah = std::min(o.max_ah, ec.max_ah); /* an ahn is 16 bits */
		ec.qsbr = rt.qsbr();
		ec.qkey = o.qkey.value_or(ec.qkey);
		if (o.nb_mbufs != 0)
			ec.nb_mbufs = o.nb_mbufs;
		return dev.open(ec);
	}
#endif
	(void)rt, (void)k, (void)o, (void)dev;
	return ENOTSUP;
}

/* The line (no app prefix, no newline) after open_rdma_device returned
 * rc: "driver verbs: cannot open RDMA device 'rxe0' port 1: <dev.error()>
 * (<strerror(rc)>)". */
template <class Dev> std::string rdma_open_error(const Dev &dev, const rdma_device_config &k, int rc)
{
	std::string s = std::string("driver ") + dev.driver_name() + ": cannot open RDMA device '" +
			(k.device.empty() ? "(the first usable)" : k.device) + "'";
	if (k.port != 0)
		s += " port " + std::to_string(k.port);
	return s + ": " + dev.error() + " (" + strerror(rc) + ")";
}

/* Where a soft device's control poller runs in an app: the runtime's
 * control thread. */
inline soft::poller_host control_host(runtime &rt)
{
	soft::poller_host h;
	h.add = [&rt](soft::poller_host::poll_fn f, void *a) { return rt.ctl().add_poller(f, a); };
	h.remove = [&rt](soft::poller_host::poll_fn f, void *a) { rt.ctl().remove_poller(f, a); };
	return h;
}

/* What owns an app's device: the soft driver's port, or the RDMA device. */
template <class Dev> using device_owner = std::conditional_t<is_soft<Dev>, soft::port, Dev>;

/* The device of an owner. */
template <class Dev> Dev &device_of(device_owner<Dev> &o)
{
	if constexpr (is_soft<Dev>)
		return o.device();
	else
		return o;
}

/* What open_device opens. */
struct device_request {
	/* soft: the port table; its DPDK port is probed from its devargs,
	 * unless adopt names a port the app made itself (adopt >= 0). */
	const soft::port_config *port = nullptr;
	int adopt = -1;
	/* soft: queue pairs (the table's `queues` wins when it gives them),
	 * and what the app adds at start (its QSBR, AV nodes, neighbours,
	 * adjust). setup.qsbr unset: the runtime's. */
	uint16_t queues = 1;
	soft::port_setup setup;
	/* verbs, mlx5, EFA: the [rdma] device and what the open takes. */
	const rdma_device_config *rdma = nullptr;
	rdma_open rdma_opts{.max_ah = 1024};
};

/* Opens o from r: soft, the port (probed or adopted, unless o has its
 * port already: an app that placed its poll threads by the port's NUMA
 * node between probe and start), then started; the RDMA drivers,
 * r.rdma's device. 0, or an errno value with
 * *err one line (soft: "port NAME: <reason>"; the others:
 * rdma_open_error's). Nothing stays open on failure. */
template <class Dev> int open_device(runtime &rt, device_request r, device_owner<Dev> &o, std::string *err)
{
	if constexpr (is_soft<Dev>) {
		if (r.port == nullptr) {
			*err = "no port table";
			return EINVAL;
		}
		if (!o.has_port()) {
			const int rc = r.adopt >= 0 ? o.adopt(*r.port, uint16_t(r.adopt), r.queues, err)
						    : o.probe(*r.port, r.queues, err);
			if (rc != 0)
				return rc;
		}
		if (r.setup.qsbr == nullptr)
			r.setup.qsbr = rt.qsbr();
		return o.start(r.setup, err);
	} else {
		if (r.rdma == nullptr) {
			*err = "no [rdma] settings";
			return EINVAL;
		}
		int rc = open_rdma_device(rt, *r.rdma, r.rdma_opts, o);
		if (rc != 0)
			*err = rdma_open_error(o, *r.rdma, rc);
		return rc;
	}
}

} // namespace rdgram::apps

#endif
