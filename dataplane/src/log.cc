/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "rdgram/log.h"

#include <mutex>

namespace rdgram::telemetry {

int logtype_ah = RTE_LOGTYPE_USER1, logtype_soft = RTE_LOGTYPE_USER1, logtype_ctl = RTE_LOGTYPE_USER1,
    logtype_runtime = RTE_LOGTYPE_USER1, logtype_telemetry = RTE_LOGTYPE_USER1, logtype_app = RTE_LOGTYPE_USER1,
    logtype_verbs = RTE_LOGTYPE_USER1, logtype_mlx5 = RTE_LOGTYPE_USER1, logtype_efa = RTE_LOGTYPE_USER1;

void register_log_types()
{
	static std::once_flag once;
	std::call_once(once, [] {
		auto reg = [](const char *name, int *out) {
			const int t = rte_log_register_type_and_pick_level(name, RTE_LOG_INFO);
			if (t >= 0)
				*out = t;
		};
		reg("rdgram.ah", &logtype_ah);
		reg("rdgram.soft", &logtype_soft);
		reg("rdgram.ctl", &logtype_ctl);
		reg("rdgram.runtime", &logtype_runtime);
		reg("rdgram.telemetry", &logtype_telemetry);
		reg("rdgram.app", &logtype_app);
		reg("rdgram.verbs", &logtype_verbs);
		reg("rdgram.mlx5", &logtype_mlx5);
		reg("rdgram.efa", &logtype_efa);
	});
}

} // namespace rdgram::telemetry
