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
 *
 * Before the exec it gives the program the files a Linux host with these
 * devices would have and rdgram's library cannot fake from inside the
 * program: /dev/infiniband/uverbsN (UCX lists a device only when that
 * node is a character device) and, for a kind = "mlx5" port, a sysfs-like
 * tree with the PCI ids UCX reads through ibv_device.ibdev_path. Both live
 * in a private mount namespace (give_device_nodes below); where the
 * program may not have one, one line says so and the program runs
 * without them.
 */
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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

/* Where the sysfs-like tree of the devices is, inside the namespace
 * (the library reads RDGRAM_VERBS_SYSFS: libibverbs/rv_provider.cc). */
constexpr const char *sysfs_env = "RDGRAM_VERBS_SYSFS";
constexpr const char *sysfs_root = "/dev/rdgram/sys";

/* The staging point of the namespace's tmpfs: /tmp, shadowed only until
 * the overlay is up, then detached (the program sees its /tmp). */
constexpr const char *stage = "/tmp";

bool write_file(const std::string &path, const std::string &text)
{
	const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0)
		return false;
	const bool ok = write(fd, text.data(), text.size()) == ssize_t(text.size());
	close(fd);
	return ok;
}

bool make_dirs(const std::string &path)
{
	for (size_t at = 1; at != std::string::npos;) {
		at = path.find('/', at + 1);
		const std::string d = path.substr(0, at);
		if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST)
			return false;
	}
	return true;
}

/* Under root (the overlay's upper layer, seen as /dev): infiniband/uverbsN
 * as the kernel numbers them (char 231:192+N, uverbs_dev_init), and for an
 * mlx5 port N what sysfs shows of a ConnectX-5 PF that UCX reads
 * (uct_ib_device_get_sysfs_path: realpath of ibdev_path, two components
 * up, a file "device" there; then "vendor" and "device"):
 *   rdgram/sys/devices/pci0d9a:00/0d9a:00:00.N/{vendor,device}
 *   rdgram/sys/devices/pci0d9a:00/0d9a:00:00.N/infiniband/NAME/
 *   rdgram/sys/class/infiniband/NAME -> ../../devices/.../infiniband/NAME
 * PCI domain 0d9a, so no bus address of this host's own devices is
 * named. */
bool make_tree(const std::string &root, const rdgram::soft::port_file &pf)
{
	if (!make_dirs(root + "/infiniband") || !make_dirs(root + "/rdgram/sys/class/infiniband"))
		return false;
	for (size_t n = 0; n < pf.ports.size(); n++) {
		const std::string node = root + "/infiniband/uverbs" + std::to_string(n);
		if (mknod(node.c_str(), S_IFCHR | 0666, makedev(231, 192 + unsigned(n))) != 0 ||
		    chmod(node.c_str(), 0666) != 0)
			return false;
		const auto &p = pf.ports[n];
		if (p.kind != "mlx5")
			continue;
		char bdf[32];
		snprintf(bdf, sizeof(bdf), "0d9a:00:00.%zu", n);
		const std::string pci = std::string("devices/pci0d9a:00/") + bdf;
		const std::string ib = pci + "/infiniband/" + p.name;
		if (!make_dirs(root + "/rdgram/sys/" + ib) ||
		    !write_file(root + "/rdgram/sys/" + pci + "/vendor", "0x15b3\n") ||
		    !write_file(root + "/rdgram/sys/" + pci + "/device", "0x1017\n") ||
		    symlink(("../../" + ib).c_str(), (root + "/rdgram/sys/class/infiniband/" + p.name).c_str()) != 0)
			return false;
	}
	return true;
}

/* The mounts of /dev (shm, pts, mqueue, hugepages, ...) seen under old,
 * bound again on the overlaid /dev: an overlay does not carry its lower
 * layer's submounts. */
bool rebind_submounts(const std::string &old)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (f == nullptr)
		return false;
	std::vector<std::string> subs;
	char line[4096];
	while (fgets(line, sizeof(line), f) != nullptr) {
		char mnt[PATH_MAX];
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		const std::string m = mnt;
		if (m.size() > old.size() + 1 && m.compare(0, old.size() + 1, old + "/") == 0 &&
		    m.find('/', old.size() + 1) == std::string::npos)
			subs.push_back(m.substr(old.size()));
	}
	fclose(f);
	for (const auto &s : subs)
		if (mount((old + s).c_str(), ("/dev" + s).c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
			return false;
	return true;
}

/* Gives the program /dev/infiniband/uverbsN for every port and the
 * sysfs-like tree of its mlx5 ports: a private mount namespace
 * (unshare(CLONE_NEWNS), private propagation) whose /dev is an overlay of
 * the real /dev and a tmpfs holding the new files. Nothing outside the
 * namespace sees them; they go when the program's last process exits.
 * Returns "" or what failed (errno set). Not needed, and not made, when
 * every node exists already and no port is an mlx5 one. */
std::string give_device_nodes(const rdgram::soft::port_file &pf)
{
	bool need = false;
	for (size_t n = 0; n < pf.ports.size(); n++) {
		struct stat st;
		const std::string node = "/dev/infiniband/uverbs" + std::to_string(n);
		if (pf.ports[n].kind == "mlx5" || stat(node.c_str(), &st) != 0 || !S_ISCHR(st.st_mode))
			need = true;
	}
	if (!need)
		return "";
	if (unshare(CLONE_NEWNS) != 0)
		return "unshare(CLONE_NEWNS)";
	if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
		return "making / private";
	if (mount("rdgram-verbs", stage, "tmpfs", MS_NOSUID, "mode=755") != 0)
		return std::string("a tmpfs on ") + stage;
	const std::string st = stage;
	bool overlaid = false;
	/* A failure leaves the program the namespace's mounts as they were:
	 * the real /dev and /tmp. */
	auto undo = [&](std::string what) {
		const int e = errno;
		if (overlaid)
			umount2("/dev", MNT_DETACH);
		umount2(stage, MNT_DETACH);
		errno = e;
		return what;
	};
	const mode_t old_mask = umask(022);
	const bool made = make_dirs(st + "/up") && make_dirs(st + "/work") && make_dirs(st + "/old") &&
			  make_tree(st + "/up", pf);
	umask(old_mask);
	if (!made)
		return undo("making the device nodes and tree");
	if (mount("/dev", (st + "/old").c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
		return undo("binding /dev");
	const std::string opts = "lowerdir=/dev,upperdir=" + st + "/up,workdir=" + st + "/work";
	if (mount("rdgram-verbs", "/dev", "overlay", 0, opts.c_str()) != 0)
		return undo("an overlay on /dev");
	overlaid = true;
	if (!rebind_submounts(st + "/old"))
		return undo("binding /dev's mounts again");
	if (umount2(stage, MNT_DETACH) != 0)
		return undo(std::string("detaching the tmpfs from ") + stage);
	setenv(sysfs_env, sysfs_root, 1);
	return "";
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
	rdgram::soft::port_file pf;
	try {
		pf = rdgram::soft::load_port_file(cfg, rdgram::soft::verbs_port_rules());
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
	unsetenv(sysfs_env);
	if (const std::string what = give_device_nodes(pf); !what.empty())
		fprintf(stderr,
			"rdgram-verbs: no private /dev/infiniband for %s (%s: %s): it sees no uverbsN nodes and "
			"no PCI ids (UCX lists no device); run as root, or see rdgram-verbs(1)\n",
			argv[i], what.c_str(), strerror(errno));
	execvp(argv[i], argv + i);
	fprintf(stderr, "rdgram-verbs: cannot run %s: %s\n", argv[i], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
