/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The soft devices: the EAL and the ports (started once per process by the
 * first ibv_get_device_list), the device list, and the attributes the soft
 * kind reports (device_attr, port_attr). The verbs on a device are the
 * front's (rv_verbs.cc); its operations are the soft kind's
 * (rv_soft_ops.cc).
 */
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <rte_alarm.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>

#include "soft_port.h"
#include "rdgram/config.h"
#include "rv.h"
#include "rv_mlx5_nic.h"
#include "rv_api.h"
#include "rv_kernel.h"

namespace rdgram {
void register_tsan_mempool(); /* dataplane/src/tsan_mempool.cc */
}

namespace rdgram::rv {

/* The ops every soft device's verbs_device points at; only a name
 * (libibverbs' own functions never reach it, and a provider's
 * direct-verbs calls find it is not theirs). */
const pabi::verbs_device_ops rv_device_ops = {.name = "rdgram"};

namespace {

std::string cpu_list()
{
	cpu_set_t s;
	if (sched_getaffinity(0, sizeof(s), &s) != 0)
		return "0";
	std::string out;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &s)) {
			if (!out.empty())
				out += ',';
			out += std::to_string(c);
		}
	return out.empty() ? "0" : out;
}

bool has_arg(const std::vector<std::string> &a, std::initializer_list<const char *> names)
{
	for (const auto &x : a)
		for (const char *n : names)
			if (x == n || x.rfind(std::string(n) + "=", 0) == 0)
				return true;
	return false;
}

/* The EAL's arguments: the config's, or these defaults, plus what lets
 * several programs run side by side and leaves their threads alone. */
/* The EAL's runtime directories of rdgram-verbs processes that are gone
 * (killed before their exit could remove them): empty with --no-shconf,
 * but one per killed process would pile up. */
void remove_stale_runtime_dirs()
{
	const char *base = geteuid() == 0 ? "/var/run/dpdk" : getenv("XDG_RUNTIME_DIR");
	if (base == nullptr)
		return;
	DIR *dir = opendir(base);
	if (dir == nullptr)
		return;
	const std::string pfx = "rdgram-verbs-";
	while (dirent *e = readdir(dir)) {
		const std::string n = e->d_name;
		if (n.rfind(pfx, 0) != 0)
			continue;
		char *end;
		const long pid = strtol(n.c_str() + pfx.size(), &end, 10);
		if (*end != '\0' || pid <= 0 || (kill(pid_t(pid), 0) != 0 && errno == ESRCH))
			rmdir((std::string(base) + "/" + n).c_str());
	}
	closedir(dir);
}

std::vector<std::string> eal_args(const rv_config &c)
{
	std::vector<std::string> a{"rdgram-verbs"};
	if (c.eal_args.empty())
		a.insert(a.end(), {"--no-huge", "--no-pci", "-m", "256", "--no-telemetry", "--log-level=critical"});
	else
		a.insert(a.end(), c.eal_args.begin(), c.eal_args.end());
	/* The main lcore is the service thread; it floats over the CPUs the
	 * process may use, as the program's own threads do (rte_eal_init
	 * pins only the thread that calls it, and that is ours). */
	if (!has_arg(a, {"-l", "-c", "--lcores"}))
		a.insert(a.end(), {"--lcores", "0@(" + cpu_list() + ")"});
	/* No shared configuration (nothing a secondary process could attach
	 * to, no files), and a prefix of its own per process. */
	if (!has_arg(a, {"--in-memory", "--no-shconf", "--proc-type"}))
		a.push_back("--no-shconf");
	if (!has_arg(a, {"--file-prefix"}))
		a.push_back("--file-prefix=rdgram-verbs-" + std::to_string(getpid()));
	return a;
}

wire::gid link_local(const rte_ether_addr &m)
{
	wire::gid g{};
	g.raw[0] = 0xfe;
	g.raw[1] = 0x80;
	g.raw[8] = m.addr_bytes[0] ^ 0x02;
	g.raw[9] = m.addr_bytes[1];
	g.raw[10] = m.addr_bytes[2];
	g.raw[11] = 0xff;
	g.raw[12] = 0xfe;
	g.raw[13] = m.addr_bytes[3];
	g.raw[14] = m.addr_bytes[4];
	g.raw[15] = m.addr_bytes[5];
	return g;
}

ibv_mtu mtu_enum(uint32_t b)
{
	switch (b) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	default: return IBV_MTU_4096;
	}
}

void close_port(rv_device &d)
{
	if (d.queue_up) {
		d.dev.destroy_queue(d.q);
		d.queue_up = false;
	}
	/* The port goes first (soft::port::stop), then, every mbuf counted
	 * back (the port's queues gave theirs back at close, and what waits in
	 * the control rings goes back with the device), the device and its
	 * pool. */
	d.port.stop();
	if (rte_mempool *mp = d.dev.mempool(); mp != nullptr) {
		const unsigned out = mp->size - rte_mempool_avail_count(mp) - d.dev.control_frames();
		if (out != 0)
			logf("port %s: %u mbufs not back in the pool at close", d.cfg.name.c_str(), out);
	}
	d.port.close();
}

/* Opens one [[port]] (soft::port, which also steps around net_memif's
 * races when two programs open the two ends at once); 0 or an errno
 * value with the reason printed. */
int open_port(rv_device &d, unsigned index)
{
	const rv_port_config &pc = d.cfg;
	std::string err;
	if (int rc = d.port.probe(pc, 1, &err); rc != 0) {
		logf("%s", err.c_str());
		return rc;
	}
	if (pc.set_mac)
		d.mac = pc.mac;
	else
		rte_eth_macaddr_get(d.port.port_id(), &d.mac);
	/* The GID table as rxe lists a RoCE v2 port's: the link-local GID
	 * from the MAC first, then the port's addresses. */
	d.gids.push_back(link_local(d.mac));
	for (const auto &a : pc.addresses)
		if (!(a == d.gids[0]))
			d.gids.push_back(a);
	soft::port_setup s;
	s.adjust = [&d](soft::soft_config &sc) {
		sc.mac = d.mac;
		sc.addresses = d.gids;
		/* An AH to one of our own GIDs is delivered in software
		 * (post_send): its AV needs no ARP/ND. */
		for (const auto &g : d.gids)
			sc.neighbours.push_back({g, d.mac});
	};
	if (d.port.start(s, &err) != 0) {
		logf("%s", err.c_str());
		close_port(d);
		return ENODEV;
	}
	if (d.dev.create_queue({.index = 0, .socket = d.port.socket()}, d.q) != 0) {
		logf("port %s: %s", pc.name.c_str(), d.dev.error().c_str());
		close_port(d);
		return ENODEV;
	}
	d.queue_up = true;

	d.mtu_enum = mtu_enum(pc.mtu);
	uint8_t eui[8];
	memcpy(eui, d.gids[0].raw + 8, 8);
	memcpy(&d.guid_be, eui, 8);

	ibv_device &v = d.ib.vd.device;
	v.node_type = IBV_NODE_CA;
	v.transport_type = IBV_TRANSPORT_IB;
	snprintf(v.name, sizeof(v.name), "%s", pc.name.c_str());
	snprintf(v.dev_name, sizeof(v.dev_name), "uverbs%u", index);
	snprintf(v.dev_path, sizeof(v.dev_path), "/sys/class/infiniband_verbs/uverbs%u", index);
	snprintf(v.ibdev_path, sizeof(v.ibdev_path), "/sys/class/infiniband/%s", pc.name.c_str());
	d.ib.vd.ops = &rv_device_ops;
	d.ib.ops = &soft_ops;
	d.ib.node_guid_be = d.guid_be;
	d.ib.listed = &v;
	rte_spinlock_init(&d.dp);
	return 0;
}

struct starter {
	std::mutex mu;
	std::condition_variable cv;
	bool done = false;
	int rc = 0;
};

/* The service thread's start: the EAL (on this thread, so that only it
 * is pinned), then the ports; then it serves (rv_service.cc). */
void eal_thread(rv_config cfg, starter *st)
{
	remove_stale_runtime_dirs();
	/* TSan builds: pools made by the soft driver use the mempool handler
	 * that tells ThreadSanitizer about each hand-off (tsan_mempool.cc);
	 * registered before the EAL, as runtime::init does. */
	register_tsan_mempool();
	std::vector<std::string> args = eal_args(cfg);
	std::vector<char *> argv;
	for (auto &a : args)
		argv.push_back(a.data());
	argv.push_back(nullptr);
	int rc = 0;
	if (rte_eal_init(int(args.size()), argv.data()) < 0) {
		rc = rte_errno != 0 ? rte_errno : EINVAL;
		logf("EAL: %s (arguments:%s)", rte_strerror(rc), [&] {
			std::string s;
			for (auto &a : args)
				s += " " + a;
			return s;
		}().c_str());
	}
	rv_process &p = process();
	if (rc == 0) {
		for (size_t i = 0; i < cfg.ports.size(); i++) {
			auto *d = new rv_device;
			d->cfg = cfg.ports[i];
			if (int e = open_port(*d, unsigned(i)); e != 0) {
				rc = e;
				delete d;
				break;
			}
			/* A provider device whose provider cannot be loaded
			 * (missing, another private ABI) is left out, with
			 * one line: the other devices are not its hostages. */
			if (d->cfg.kind == "mlx5" && mlx5_attach(*d, unsigned(i)) != 0) {
				close_port(*d);
				delete d;
				continue;
			}
			p.devs.push_back(d);
		}
		if (rc != 0) {
			/* All or nothing: nothing of a failed start is left
			 * (memif sockets, af_packet sockets, pools, the EAL's
			 * runtime directory). */
			for (auto *d : p.devs) {
				close_port(*d);
				delete d;
			}
			p.devs.clear();
			rmdir(rte_eal_get_runtime_dir()); /* no rte_eal_cleanup: stop_all */
		}
	}
	{
		/* Notified under the lock: the waiter's stack holds st, and it
		 * returns (destroying st) as soon as it can take the lock. */
		std::lock_guard<std::mutex> g(st->mu);
		st->rc = rc;
		st->done = true;
		st->cv.notify_all();
	}
	if (rc == 0)
		service_run();
}

/* Never destroyed: a static std::thread still joinable when the C++
 * runtime's exit handlers run (before this library's destructor) would
 * call std::terminate. */
std::thread &svc_thread = *new std::thread;

} // namespace

rv_process &process()
{
	static rv_process *p = new rv_process; /* never freed: used from destructors */
	return *p;
}

void logf(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "rdgram-verbs: %s\n", buf);
}

void refuse(const char *verb, const char *why, int e)
{
	static std::atomic<bool> said{false};
	if (!said.exchange(true))
		logf("%s is not offered (%s); the program's own error path follows", verb, why);
	errno = e;
}

int start()
{
	rv_process &p = process();
	std::lock_guard<std::mutex> g(p.mu);
	if (p.started)
		return p.start_errno;
	p.started = true;
	const char *path = getenv(config_env);
	if (path == nullptr || *path == '\0') {
		logf("%s is not set: no devices (run the program under rdgram-verbs -c FILE)", config_env);
		p.start_errno = ENODEV;
		return p.start_errno;
	}
	rv_config cfg;
	try {
		cfg = load_config(path);
	} catch (const std::exception &e) {
		logf("%s", e.what());
		p.start_errno = EINVAL;
		return p.start_errno;
	}
	starter st;
	svc_thread = std::thread(eal_thread, cfg, &st);
	std::unique_lock<std::mutex> l(st.mu);
	st.cv.wait(l, [&] { return st.done; });
	if (st.rc != 0) {
		l.unlock();
		svc_thread.join();
	}
	p.start_errno = st.rc;
	return st.rc;
}

/* RDGRAM_VERBS_STATS=1: every non-zero counter of each device at exit,
 * the soft queue's (traffic, drops by reason) and the library's own. */
void print_stats(rv_device &d)
{
	fprintf(stderr, "rdgram-verbs: %s counters:\n", d.cfg.name.c_str());
	d.q.counters().for_each([](const xstat_name &n, uint64_t v) {
		if (v != 0)
			fprintf(stderr, "  %-24s %12llu  %s\n", n.name, (unsigned long long)v, n.desc);
	});
#define RV_PRINT(n, desc)                                                                              \
	if (d.drops.n != 0)                                                                            \
		fprintf(stderr, "  %-24s %12llu  %s\n", #n, (unsigned long long)d.drops.n, desc);
	RV_DROPS(RV_PRINT)
#undef RV_PRINT
}

void stop_all()
{
	rv_process &p = process();
	std::lock_guard<std::mutex> g(p.mu);
	if (!svc_thread.joinable())
		return;
	service_stop();
	svc_thread.join();
	for (auto *d : p.devs)
		m5::stop(*d);
	const char *st = getenv("RDGRAM_VERBS_STATS");
	if (st != nullptr && *st != '\0' && *st != '0')
		for (auto *d : p.devs) {
			print_stats(*d);
			m5::print_counters(*d);
		}
	/* The ports are closed on the EAL's interrupt thread, as an alarm:
	 * DPDK 22.11's net_memif handles a peer's disconnect there and frees
	 * the same regions its close frees, without a lock; closing from
	 * here while the peer (another port of this process, or a peer
	 * process exiting too) disconnects freed them twice. */
	std::atomic<bool> done{false};
	struct closer {
		rv_process *p;
		std::atomic<bool> *done;
	} c{&p, &done};
	auto close_all = [](void *arg) {
		auto *cl = static_cast<closer *>(arg);
		for (auto *d : cl->p->devs)
			close_port(*d);
		cl->done->store(true, std::memory_order_release);
	};
	if (rte_eal_alarm_set(1, close_all, &c) == 0) {
		for (int i = 0; i < 5000 && !done.load(std::memory_order_acquire); i++)
			usleep(1000);
	}
	if (!done.load(std::memory_order_acquire)) {
		rte_eal_alarm_cancel(close_all, &c);
		if (!done.load(std::memory_order_acquire))
			for (auto *d : p.devs)
				close_port(*d);
	}
	/* No rte_eal_cleanup: in DPDK 22.11 it frees the interrupt
	 * sources while the EAL's interrupt thread still runs (a SIGSEGV in
	 * rte_intr_fd_get at exit), and the process's memory goes with the
	 * process. What would outlive it is the runtime directory
	 * (/var/run/dpdk/<prefix>): empty with --no-shconf, but left. */
	rmdir(rte_eal_get_runtime_dir());
}

/* Device attributes as ibv_query_device(3) reports them. */
void device_attr(const rv_device &d, ibv_device_attr &a)
{
	memset(&a, 0, sizeof(a));
	snprintf(a.fw_ver, sizeof(a.fw_ver), "rdgram 0.1");
	a.node_guid = d.guid_be;
	a.sys_image_guid = d.guid_be;
	a.max_mr_size = ~0ull;
	a.page_size_cap = 0xfffff000;
	/* Neither Mellanox's nor Amazon's: perftest then takes the plain
	 * verbs path. rxe's own vendor ID. */
	a.vendor_id = 0xffffff;
	a.vendor_part_id = 0;
	a.hw_ver = 0;
	a.max_qp = int(soft::soft_queue::max_qps);
	a.max_qp_wr = 16384;
	a.device_cap_flags = IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN;
	a.max_sge = int(rv_max_sge);
	a.max_sge_rd = 0;
	a.max_cq = 16384;
	a.max_cqe = 1 << 20;
	a.max_mr = int(rv_max_mrs);
	a.max_pd = 1 << 16;
	a.max_qp_rd_atom = 0;
	a.max_ee_rd_atom = 0;
	a.max_res_rd_atom = 0;
	a.max_qp_init_rd_atom = 0;
	a.max_ee_init_rd_atom = 0;
	a.atomic_cap = IBV_ATOMIC_NONE;
	a.max_ah = int(d.cfg.max_ah);
	a.max_mcast_grp = int(soft::soft_queue::max_mcast);
	a.max_mcast_qp_attach = 1;
	a.max_total_mcast_qp_attach = int(soft::soft_queue::max_mcast);
	a.max_pkeys = 1;
	a.local_ca_ack_delay = 15;
	a.phys_port_cnt = 1;
}

void port_attr(const rv_device &d, ibv_port_attr &a)
{
	memset(&a, 0, sizeof(a));
	a.state = IBV_PORT_ACTIVE;
	a.max_mtu = d.mtu_enum;
	a.active_mtu = d.mtu_enum;
	/* A table with room, as a NIC's: the port's GIDs first, then empty
	 * entries (ibv_query_gid(3) reads them as zero GIDs). */
	a.gid_tbl_len = int(std::max<size_t>(d.gids.size(), rv_gid_tbl_len));
	a.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_DEVICE_MGMT_SUP | IBV_PORT_VENDOR_CLASS_SUP;
	a.max_msg_sz = 1u << 31;
	a.pkey_tbl_len = 1;
	a.lid = 0;
	a.sm_lid = 0;
	a.max_vl_num = 1;
	a.active_width = 2;                /* 4X */
	a.active_speed = 32;               /* EDR: 4X EDR is 100 Gb/s */
	a.phys_state = 5;                  /* LinkUp */
	a.link_layer = IBV_LINK_LAYER_ETHERNET;
}

} // namespace rdgram::rv

using namespace rdgram::rv;

__attribute__((destructor)) static void rv_fini()
{
	stop_all();
}

extern "C" {

RV_EXPORT ibv_device **ibv_get_device_list(int *num)
{
	int rc = start();
	rv_process &p = process();
	size_t n = rc == 0 ? p.devs.size() : 0;
	auto **l = static_cast<ibv_device **>(calloc(n + 1, sizeof(ibv_device *)));
	if (l == nullptr) {
		errno = ENOMEM;
		return nullptr;
	}
	for (size_t i = 0; i < n; i++)
		l[i] = p.devs[i]->ib.listed;
	if (num != nullptr)
		*num = int(n);
	if (rc != 0)
		errno = rc;
	return l;
}
RV_PIN(ibv_get_device_list);

RV_EXPORT void ibv_free_device_list(ibv_device **list)
{
	free(list);
}
RV_PIN(ibv_free_device_list);

RV_EXPORT int ibv_get_device_index(ibv_device *device)
{
	rv_process &p = process();
	for (size_t i = 0; i < p.devs.size(); i++)
		if (p.devs[i]->ib.listed == device)
			return int(i);
	return -1;
}

} /* extern "C" */
