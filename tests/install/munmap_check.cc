/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Which munmap() the process's global scope gives, the one a PMD loaded as
 * a plugin (dlopen) binds to: rdgram's guard (dataplane/src/burst_guard.cc)
 * must win over libc's. Linked with librdgram.so the guard lives in the
 * library, which comes before libc in the search order; linked with
 * librdgram.a it lives in the executable, which must export it (the flag
 * rdgram.pc's Libs.private carries). argv[1]: "shared" or "static", where
 * the definition must be found.
 */
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include <rdgram/burst_guard.h>

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	/* What a soft queue references (attach: slot_for; here the counter
	 * beside it in burst_guard.o), so that the link keeps librdgram.so
	 * (--as-needed) or takes the guard's object from librdgram.a. */
	volatile uint64_t w = rdgram::burst_guard::waits();
	(void)w;
	void *f = dlsym(RTLD_DEFAULT, "munmap");
	Dl_info di{};
	if (f == nullptr || dladdr(f, &di) == 0 || di.dli_fname == nullptr) {
		printf("munmap: not found in the global scope\n");
		return 1;
	}
	Dl_info mi{};
	dladdr(reinterpret_cast<void *>(&main), &mi);
	const bool in_exe = mi.dli_fname != nullptr && strcmp(di.dli_fname, mi.dli_fname) == 0;
	const bool in_lib = strstr(di.dli_fname, "librdgram.so") != nullptr;
	printf("munmap resolves to %s (%s)\n", di.dli_fname, in_exe ? "the executable" : in_lib ? "librdgram.so" : "elsewhere");
	if (strcmp(argv[1], "shared") == 0)
		return in_lib ? 0 : 1;
	return in_exe ? 0 : 1;
}
