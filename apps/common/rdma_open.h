/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The open of an RDMA device (verbs, mlx5, EFA) from an app's [rdma]
 * settings, written once for every app, and the one line that says why
 * it failed:
 *
 *   rdma_open o{.max_ah = c.max_ah};
 *   if (int rc = open_rdma_device(rt, c.rdma, o, dev); rc != 0) {
 *           fprintf(stderr, "rdgram-x: %s\n", rdma_open_error(dev, c.rdma, rc).c_str());
 *           return 1;
 *   }
 *
 * Dev is the device type apps::with_driver hands the app (driver.h); the
 * soft driver has no [rdma] device (ENOTSUP). Control path: the caller's
 * thread (the apps whose ranks or nodes open devices while the control
 * thread polls run it there, through control_thread::call).
 */
#ifndef RDGRAM_APPS_RDMA_OPEN_H
#define RDGRAM_APPS_RDMA_OPEN_H

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

} // namespace rdgram::apps

#endif
