/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * toml++'s implementation, compiled into fuzz_config (every other file of
 * that target sees the declarations only: TOML_HEADER_ONLY=0) so that the
 * TOML parser is instrumented for coverage and ASan like rdgram's code,
 * rather than taken uninstrumented from libtomlplusplus.so.
 */
#define TOML_IMPLEMENTATION
#include <toml++/toml.h>
