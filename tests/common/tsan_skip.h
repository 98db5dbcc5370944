/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * For the concurrency suite's scale tests whose work runs on one thread
 * (a 100k storm inside one control-thread call, a table filled by the test
 * thread): ThreadSanitizer has nothing to check there beyond the hand-offs
 * that the suite's real concurrency tests already cover, and each costs
 * seconds of the CI budget under it. They still run in build/ and under
 * ASan+UBSan.
 */
#ifndef RDGRAM_TEST_TSAN_SKIP_H
#define RDGRAM_TEST_TSAN_SKIP_H

#include <gtest/gtest.h>

#include "rdgram/tsan.h"

#define RDGRAM_SKIP_SINGLE_THREADED_UNDER_TSAN()                                                   \
	do {                                                                                       \
		if (RDGRAM_TSAN)                                                                   \
			GTEST_SKIP() << "single-threaded work: not run under TSan (runs in build/ " \
					"and under ASan+UBSan)";                                     \
	} while (0)

#endif
