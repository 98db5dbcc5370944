/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf over an RDMA device: the verbs driver (any rdma-core
 * provider) or the mlx5 direct-verbs driver, selected by [perf] driver.
 * The poll loops are perf_tests.h's templates, instantiated with
 * verbs_queue or mlx5_queue.
 */
#ifndef RDGRAM_PERF_RDMA_H
#define RDGRAM_PERF_RDMA_H

#include <cstdint>

#include "perf_config.h"
#include "rdgram/runtime.h"

namespace rdgram::perf {

/* Runs the server or client side of c.test on c.driver ("verbs" or
 * "mlx5") after the runtime is up. Returns the process exit status: 0,
 * 1 (the device did not open, or the test failed or timed out; one line
 * on stderr says which), 2 (a setting these drivers cannot run). */
int run_rdma(runtime &rt, const perf_config &c, uint64_t deadline);

} // namespace rdgram::perf

#endif
