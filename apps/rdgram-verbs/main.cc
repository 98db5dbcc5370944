/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-verbs -c FILE [--] PROGRAM [ARGS...]: runs an unmodified verbs
 * program on rdgram's libibverbs.so.1 (rdgram-verbs(1), docs/VERBS.md).
 *
 * Checks FILE (exit 2 with "file:line:column: key ..." before the program
 * starts), then execs PROGRAM with LD_LIBRARY_PATH leading to the directory
 * of rdgram's libibverbs.so.1 and RDGRAM_VERBS_CONFIG naming FILE; the
 * library reads it again in the program's process, at its first
 * ibv_get_device_list.
 */
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "rdgram/config.h"
#include "soft_config_toml.h"

namespace {

/* The environment variable that tells rdgram's libibverbs the config's
 * path (libibverbs/rv_config.h). */
constexpr const char *config_env = "RDGRAM_VERBS_CONFIG";

const char *usage = "usage: rdgram-verbs -c FILE [--] PROGRAM [ARGS...]\n"
		    "Runs PROGRAM, an unmodified libibverbs program, with the verbs devices FILE\n"
		    "describes: one [[port]] (a DPDK port with rdgram's software RoCEv2 UD) per\n"
		    "device. See rdgram-verbs(1).\n";

bool has_lib(const std::string &dir)
{
	return !dir.empty() && access((dir + "/libibverbs.so.1").c_str(), R_OK) == 0;
}

/* Where rdgram's libibverbs.so.1 is: RDGRAM_VERBS_LIBDIR, else beside an
 * installed rdgram-verbs (<prefix>/bin -> <prefix>/<libdir>/rdgram), else
 * the build tree this binary was built in. */
std::string lib_dir()
{
	if (const char *e = getenv("RDGRAM_VERBS_LIBDIR"); e != nullptr && has_lib(e))
		return e;
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		std::string bin(exe);
		bin = bin.substr(0, bin.rfind('/'));
		const std::string inst = bin + "/../" RDGRAM_VERBS_REL_LIBDIR;
		if (has_lib(inst))
			return inst;
	}
	return RDGRAM_VERBS_BUILD_LIBDIR;
}

} // namespace

int main(int argc, char **argv)
{
	std::string cfg;
	int i = 1;
	for (; i < argc; i++) {
		const std::string a = argv[i];
		if (a == "-h" || a == "--help") {
			fputs(usage, stdout);
			return 0;
		}
		if (a == "-c" || a == "--config") {
			if (i + 1 == argc) {
				fprintf(stderr, "rdgram-verbs: %s needs a file\n%s", a.c_str(), usage);
				return 2;
			}
			cfg = argv[++i];
			continue;
		}
		if (a.rfind("--config=", 0) == 0) {
			cfg = a.substr(9);
			continue;
		}
		if (a == "--") {
			i++;
			break;
		}
		if (!a.empty() && a[0] == '-') {
			fprintf(stderr, "rdgram-verbs: unknown option %s\n%s", a.c_str(), usage);
			return 2;
		}
		break;
	}
	if (cfg.empty() || i == argc) {
		fprintf(stderr, "rdgram-verbs: %s\n%s", cfg.empty() ? "no config (-c FILE)" : "no program to run",
			usage);
		return 2;
	}
	try {
		rdgram::soft::load_port_file(cfg, rdgram::soft::verbs_port_rules());
	} catch (const std::exception &e) {
		fprintf(stderr, "rdgram-verbs: %s\n", e.what());
		return 2;
	}
	char abs[PATH_MAX];
	if (realpath(cfg.c_str(), abs) == nullptr) {
		fprintf(stderr, "rdgram-verbs: %s: %s\n", cfg.c_str(), strerror(errno));
		return 2;
	}
	const std::string dir = lib_dir();
	if (!has_lib(dir)) {
		fprintf(stderr, "rdgram-verbs: rdgram's libibverbs.so.1 is not in %s (set RDGRAM_VERBS_LIBDIR)\n",
			dir.c_str());
		return 2;
	}
	std::string ld = dir;
	if (const char *old = getenv("LD_LIBRARY_PATH"); old != nullptr && *old != '\0')
		ld += std::string(":") + old;
	setenv("LD_LIBRARY_PATH", ld.c_str(), 1);
	setenv(config_env, abs, 1);
	execvp(argv[i], argv + i);
	fprintf(stderr, "rdgram-verbs: cannot run %s: %s\n", argv[i], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
