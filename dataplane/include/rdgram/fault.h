/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Fault injection: named fault points compiled into test
 * builds only.
 *
 * Why a define and not a meson option: the rdgram libraries are built once
 * and linked into both the applications and the tests, and CI has no time
 * for a second copy of them. So the hooks are macros that expand to nothing
 * unless RDGRAM_FAULT_INJECTION is defined, the libraries are built without
 * it (release applications carry no instruction of it), and the one fault
 * test binary (tests/fault/) compiles its own copy of the few small sources
 * that hold a hook (today dataplane/src/control.cc: 150 lines) with the
 * define. Its objects come before the static libraries on the link line, so
 * the linker never takes the hook-less copy out of the archive.
 *
 * Prefer real conditions to flags: mempool exhaustion (a small pool whose
 * buffers the receiver holds), a full TX ring (a net_ring nobody drains),
 * a silent neighbour (a peer that does not answer ARP) and a killed net_memif
 * peer need no hook at all, and tests/fault/ produces them for real. What
 * cannot be produced for real on demand has a point here:
 *
 *   control-thread stall: the control loop sleeps N ms at its next turn, as
 *     if one of its operations (ibv_create_ah on RoCE waits up to a second
 *     for ARP) had blocked. RDGRAM_FAULT_CONTROL_LOOP(self) in control.cc.
 *
 * The errno of AH creation is switched by the soft driver itself
 * (soft_device::inject_create_error(errno, count)): a branch on the control
 * path that unit tests built against the shared library already use, so it
 * stays in every build.
 */
#ifndef RDGRAM_FAULT_H
#define RDGRAM_FAULT_H

#ifdef RDGRAM_FAULT_INJECTION

#include <atomic>
#include <cstdint>
#include <ctime>

namespace rdgram::fault {

struct control_faults {
	/* Which control loop stalls (its control_thread), and for how long. */
	std::atomic<const void *> stall_target{nullptr};
	std::atomic<uint32_t> stall_ms{0};
	/* True while a stall runs; stalls completed. */
	std::atomic<bool> stalling{false};
	std::atomic<uint64_t> stalls{0};
};
inline control_faults control;

/* Arms a stall of ms milliseconds at the next turn of the loop of the
 * control thread ctl (a control_thread *). (Any thread.) */
inline void stall_control(const void *ctl, uint32_t ms)
{
	control.stall_ms.store(ms, std::memory_order_relaxed);
	control.stall_target.store(ctl, std::memory_order_release);
}
inline bool control_stalled() { return control.stalling.load(std::memory_order_acquire); }
inline uint64_t control_stalls() { return control.stalls.load(std::memory_order_acquire); }

/* The fault point in the control loop. (Control thread.) */
inline void control_loop_point(const void *self)
{
	const void *want = self;
	if (control.stall_target.load(std::memory_order_acquire) != self ||
	    !control.stall_target.compare_exchange_strong(want, nullptr, std::memory_order_acq_rel))
		return;
	const uint32_t ms = control.stall_ms.load(std::memory_order_relaxed);
	control.stalling.store(true, std::memory_order_release);
	timespec ts{time_t(ms / 1000), long(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0) {
	}
	control.stalls.fetch_add(1, std::memory_order_acq_rel);
	control.stalling.store(false, std::memory_order_release);
}

} // namespace rdgram::fault

#define RDGRAM_FAULT_CONTROL_LOOP(self) ::rdgram::fault::control_loop_point(self)

#else

#define RDGRAM_FAULT_CONTROL_LOOP(self) \
	do {                            \
	} while (0)

#endif

#endif
