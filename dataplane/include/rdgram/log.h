/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram's rte_log types, one per component: "rdgram.ah", "rdgram.soft",
 * "rdgram.ctl", "rdgram.runtime", "rdgram.telemetry", "rdgram.app",
 * "rdgram.verbs", "rdgram.mlx5", "rdgram.efa". Registered once
 * (register_log_types; rdgram::runtime does it at start) with
 * rte_log_register_type_and_pick_level at level INFO, so EAL's
 * --log-level=rdgram.*:debug (or rdgram.soft:warning) selects them. Until
 * registration the types are RTE_LOGTYPE_USER1 (DPDK's default user type).
 *
 * What goes where: WARNING for something the operator should act on (a
 * neighbour that never answered, a queue overflowing), INFO for rare state
 * changes (a device opened, a neighbour's MAC changed, a group joined),
 * DEBUG for routine control-path events. Control path only: rte_log
 * formats and writes (a syscall); poll threads count, they do not log.
 */
#ifndef RDGRAM_LOG_H
#define RDGRAM_LOG_H

#include <cstdint>

#include <rte_log.h>

namespace rdgram::telemetry {

/* (Any thread; idempotent.) */
void register_log_types();
extern int logtype_ah, logtype_soft, logtype_ctl, logtype_runtime, logtype_telemetry, logtype_app, logtype_verbs,
	logtype_mlx5, logtype_efa;

/* True for the 1st, 2nd, 4th, 8th, ... occurrence n (n >= 1): how a
 * repeating condition is logged without flooding. */
constexpr bool log_occurrence(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

} // namespace rdgram::telemetry

/* RDGRAM_LOG(ah, WARNING, "slot %u leaked", s): rte_log at RTE_LOG_<level>
 * on the component's log type, prefixed with the type's name. */
#define RDGRAM_LOG(comp, level, fmt, ...)                                                                  \
	rte_log(RTE_LOG_##level, ::rdgram::telemetry::logtype_##comp, "rdgram." #comp ": " fmt "\n",       \
		##__VA_ARGS__)

#endif
