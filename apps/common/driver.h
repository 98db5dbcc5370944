/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The one way an app names its driver and runs a loop templated on it.
 *
 * An app's config names the driver once ("soft", "verbs", "mlx5", "efa");
 * parse_driver turns the name into a driver_kind, or says in one line why
 * it cannot (unknown name, or a driver meson did not build: meson's own
 * reason). with_driver then calls the app's generic lambda with the device
 * type, so the poll loop is instantiated once per built driver, on its
 * queue type (Dev::queue_type), with no virtual call:
 *
 *   driver_kind k;
 *   if (parse_driver(c.driver, &k, &err) != 0) { print err; return 2; }
 *   return with_driver(k, [&](auto tag) {
 *           using Dev = typename decltype(tag)::type;
 *           return run_app<Dev>(rt, c);
 *   });
 *
 * An app that cannot serve a driver says so in one line from inside its
 * lambda (if constexpr on Dev) and returns 2.
 *
 * Which drivers were built comes from meson (drivers/meson.build:
 * RDGRAM_HAVE_DRIVER_<NAME>, or RDGRAM_DRIVER_<NAME>_REASON with meson's
 * reason); an app depends on rdgram_drivers_dep (or rdgram_workers_dep).
 */
#ifndef RDGRAM_APPS_DRIVER_H
#define RDGRAM_APPS_DRIVER_H

#include <cerrno>
#include <string>
#include <string_view>
#include <type_traits>

#include "soft_device.h"
#if RDGRAM_HAVE_DRIVER_VERBS
#include "verbs_device.h"
#endif
#if RDGRAM_HAVE_DRIVER_MLX5
#include "mlx5_device.h"
#endif
#if RDGRAM_HAVE_DRIVER_EFA
#include "efa_device.h"
#endif

namespace rdgram::apps {

enum class driver_kind { soft, verbs, mlx5, efa };

inline constexpr const char *driver_name(driver_kind k)
{
	switch (k) {
	case driver_kind::soft:
		return "soft";
	case driver_kind::verbs:
		return "verbs";
	case driver_kind::mlx5:
		return "mlx5";
	case driver_kind::efa:
		return "efa";
	}
	return "?";
}

/* Whether meson built driver k; when not, *why (if given) is meson's
 * reason. */
inline bool driver_built(driver_kind k, const char **why = nullptr)
{
	const char *r = nullptr;
	switch (k) {
	case driver_kind::soft:
		break;
	case driver_kind::verbs:
#if !RDGRAM_HAVE_DRIVER_VERBS
		r = RDGRAM_DRIVER_VERBS_REASON;
#endif
		break;
	case driver_kind::mlx5:
#if !RDGRAM_HAVE_DRIVER_MLX5
		r = RDGRAM_DRIVER_MLX5_REASON;
#endif
		break;
	case driver_kind::efa:
#if !RDGRAM_HAVE_DRIVER_EFA
		r = RDGRAM_DRIVER_EFA_REASON;
#endif
		break;
	}
	if (why != nullptr)
		*why = r;
	return r == nullptr;
}

/* name -> *k. 0; EINVAL: no such driver (err lists the names); ENOTSUP:
 * a driver this build lacks (err: "driver mlx5 was not built: <meson's
 * reason>"). err gets no prefix: the caller adds its app's name. */
inline int parse_driver(std::string_view name, driver_kind *k, std::string *err)
{
	for (driver_kind d : {driver_kind::soft, driver_kind::verbs, driver_kind::mlx5, driver_kind::efa}) {
		if (name != driver_name(d))
			continue;
		const char *why;
		if (!driver_built(d, &why)) {
			*err = "driver " + std::string(name) + " was not built: " + why;
			return ENOTSUP;
		}
		*k = d;
		return 0;
	}
	*err = "unknown driver \"" + std::string(name) + "\" (soft, verbs, mlx5 or efa)";
	return EINVAL;
}

/* The device type of a driver, for with_driver's callback. */
template <class Dev>
struct driver_tag {
	using type = Dev;
};

/* f(driver_tag<Dev>{}) for k's device type; k must be a built driver
 * (parse_driver said 0). f returns one type for every driver. */
template <class F>
auto with_driver(driver_kind k, F &&f) -> decltype(f(driver_tag<soft::soft_device>{}))
{
	switch (k) {
#if RDGRAM_HAVE_DRIVER_VERBS
	case driver_kind::verbs:
		return f(driver_tag<verbs::verbs_device>{});
#endif
#if RDGRAM_HAVE_DRIVER_MLX5
	case driver_kind::mlx5:
		return f(driver_tag<mlx5::mlx5_device>{});
#endif
#if RDGRAM_HAVE_DRIVER_EFA
	case driver_kind::efa:
		return f(driver_tag<efa::efa_device>{});
#endif
	default:
		return f(driver_tag<soft::soft_device>{});
	}
}

/* For if constexpr in an app's templated code. */
template <class Dev>
inline constexpr bool is_soft = std::is_same_v<Dev, soft::soft_device>;

} // namespace rdgram::apps

#endif
