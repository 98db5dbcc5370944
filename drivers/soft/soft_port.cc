/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "soft_port.h"

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include <dirent.h>
#include <net/if.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/if_packet.h>

#include <map>

#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_kvargs.h>


namespace rdgram::soft {

/* A net_memif pair whose two ends open at the same moment (two programs
 * started together, or one end closing while the other connects) races in
 * DPDK 22.11's memif PMD (drivers/net/memif/memif_socket.c):
 *   - the server's PMD listens on its socket from its probe but takes a
 *     client only once its port is started; a client whose INIT arrives in
 *     between is sent away ("ID 0 not found"), and a client never connects
 *     again by itself: its link stays down for good;
 *   - the server's close unregisters its listener while a client's
 *     connection may be running it: the unregister fails (EAGAIN) and the
 *     listener is left on a closed socket ("Failed to accept connection
 *     request on socket fd -1", then a crash);
 *   - a client whose start finds no socket yet fails (EPERM).
 * The server's side: the EAL's interrupt thread, which runs the PMD's
 * socket handlers, is held in a callback of ours from before the probe
 * until the port is started, and again while it closes. The client's side:
 * its start is tried again for memif_client_wait_ms. */
/* Holding the EAL's interrupt thread: a callback of its, on an eventfd of
 * ours, that waits until released (not an alarm: the alarm list is the
 * EAL's to run). */
struct intr_hold {
	std::mutex mu;
	std::condition_variable cv;
	bool entered = false, released = false, exited = false;
	int efd = -1;
	rte_intr_handle *ih = nullptr;
};

namespace {

constexpr unsigned memif_client_wait_ms = 3000;

bool is_memif(const std::string &devargs, bool server)
{
	return devargs.rfind("net_memif", 0) == 0 && (devargs.find("role=server") != std::string::npos) == server;
}

void intr_hold_cb(void *arg)
{
	auto *h = static_cast<intr_hold *>(arg);
	uint64_t v;
	ssize_t r = read(h->efd, &v, sizeof(v));
	(void)r;
	std::unique_lock<std::mutex> l(h->mu);
	h->entered = true;
	h->cv.notify_all();
	h->cv.wait(l, [h] { return h->released; });
	h->exited = true;
	h->cv.notify_all();
}

void free_intr_hold(intr_hold *h)
{
	if (h->ih != nullptr)
		rte_intr_instance_free(h->ih);
	if (h->efd >= 0)
		::close(h->efd);
	delete h;
}

/* The interrupt thread held (nullptr when it could not be: then nothing
 * is held, as before this guard). */
intr_hold *hold_intr_thread()
{
	auto *h = new intr_hold;
	h->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	h->ih = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
	if (h->efd < 0 || h->ih == nullptr || rte_intr_fd_set(h->ih, h->efd) != 0 ||
	    rte_intr_type_set(h->ih, RTE_INTR_HANDLE_EXT) != 0 ||
	    rte_intr_callback_register(h->ih, intr_hold_cb, h) != 0) {
		free_intr_hold(h);
		return nullptr;
	}
	const uint64_t one = 1;
	ssize_t w = write(h->efd, &one, sizeof(one));
	(void)w;
	std::unique_lock<std::mutex> l(h->mu);
	h->cv.wait_for(l, std::chrono::seconds(1), [h] { return h->entered; });
	return h;
}

void release_intr_thread(intr_hold *h)
{
	if (h == nullptr)
		return;
	std::unique_lock<std::mutex> l(h->mu);
	h->released = true;
	h->cv.notify_all();
	/* The callback's last touch of h is the unlock after exited: waited
	 * for here under h->mu, an order ThreadSanitizer sees (the EAL's own,
	 * under its inline-asm spinlock, it cannot). */
	if (h->entered)
		h->cv.wait(l, [h] { return h->exited; });
	l.unlock();
	rte_intr_callback_unregister_sync(h->ih, intr_hold_cb, h);
	free_intr_hold(h);
}

/* Stops (when the device started it: DPDK logs the stop of a port never
 * started, and refuses to close a started one) and closes the ethdev, and removes its device when it was
 * probed here. */
void close_ethdev(uint16_t port_id, bool probed, bool started)
{
	if (!rte_eth_dev_is_valid_port(port_id))
		return;
	rte_eth_dev_info info{};
	rte_device *rd = rte_eth_dev_info_get(port_id, &info) == 0 ? info.device : nullptr;
	if (started) {
		flush_kernel_tx(port_id);
		rte_eth_dev_stop(port_id);
	}
	rte_eth_dev_close(port_id);
	if (probed && rd != nullptr)
		rte_dev_remove(rd);
}

/* Per AF_PACKET socket of this process (by inode), the ring-full drops
 * read from it so far. */
std::mutex ring_drops_mu;
std::map<uint64_t, uint64_t> ring_drops;

/* f(fd, inode, ifindex) for each AF_PACKET socket of this process
 * (/proc/self/fd, getsockname). */
template <class F> void for_each_packet_socket(F &&f)
{
	DIR *d = opendir("/proc/self/fd");
	if (d == nullptr)
		return;
	while (dirent *e = readdir(d)) {
		char path[300], link[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		const ssize_t n = readlink(path, link, sizeof(link) - 1);
		unsigned long long ino = 0;
		if (n <= 0)
			continue;
		link[n] = 0;
		if (sscanf(link, "socket:[%llu]", &ino) != 1)
			continue;
		const int fd = atoi(e->d_name);
		sockaddr_ll sll{};
		socklen_t len = sizeof(sll);
		if (getsockname(fd, reinterpret_cast<sockaddr *>(&sll), &len) == 0 && sll.sll_family == AF_PACKET)
			f(fd, uint64_t(ino), sll.sll_ifindex);
	}
	closedir(d);
}

/* The frames that found the ring of one of this process's AF_PACKET
 * sockets bound to ifindex full, since each socket opened (packet(7)
 * PACKET_STATISTICS: tp_drops, which reading resets, hence the running
 * sums; DPDK 22.11's net_af_packet never reads it). Such a frame counts
 * there only: not in sk_drops, nor in any interface counter. */
uint64_t packet_ring_drops(int ifindex)
{
	uint64_t drops = 0;
	std::lock_guard<std::mutex> g(ring_drops_mu);
	std::map<uint64_t, uint64_t> live;
	for_each_packet_socket([&](int fd, uint64_t ino, int ix) {
		uint64_t &sum = live[ino];
		if (auto it = ring_drops.find(ino); it != ring_drops.end())
			sum = it->second;
		tpacket_stats st{};
		socklen_t sl = sizeof(st);
		if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &sl) == 0)
			sum += st.tp_drops;
		if (ix == ifindex)
			drops += sum;
	});
	/* Closed sockets' sums go: their inode numbers may come back. */
	ring_drops.swap(live);
	return drops;
}

} // namespace

namespace {

/* The interface index of a net_af_packet port (its iface= devarg); 0 for
 * any other port. */
unsigned af_packet_ifindex(uint16_t port_id)
{
	rte_eth_dev_info di{};
	if (rte_eth_dev_info_get(port_id, &di) != 0 || di.driver_name == nullptr ||
	    strcmp(di.driver_name, "net_af_packet") != 0 || di.device == nullptr)
		return 0;
	const rte_devargs *da = rte_dev_devargs(di.device);
	if (da == nullptr || da->args == nullptr)
		return 0;
	std::string iface;
	if (rte_kvargs *kv = rte_kvargs_parse(da->args, nullptr); kv != nullptr) {
		if (const char *v = rte_kvargs_get(kv, "iface"); v != nullptr)
			iface = v;
		rte_kvargs_free(kv);
	}
	return iface.empty() ? 0 : if_nametoindex(iface.c_str());
}

} // namespace

int port_stats(uint16_t port_id, rte_eth_stats *st)
{
	if (const int rc = rte_eth_stats_get(port_id, st); rc != 0)
		return rc;
	if (const unsigned ix = af_packet_ifindex(port_id); ix != 0)
		st->imissed += packet_ring_drops(int(ix));
	return 0;
}

void flush_kernel_tx(uint16_t port_id, unsigned timeout_ms)
{
	const unsigned ix = af_packet_ifindex(port_id);
	if (ix == 0)
		return;
	for_each_packet_socket([&](int fd, uint64_t, int ifindex) {
		if (ifindex != int(ix))
			return;
		/* A blocking kick (tpacket_snd without MSG_DONTWAIT): every
		 * frame the TX ring holds is sent, waiting for room in the
		 * socket's send buffer, up to the timeout. */
		timeval tv{};
		tv.tv_sec = time_t(timeout_ms / 1000);
		tv.tv_usec = suseconds_t((timeout_ms % 1000) * 1000);
		if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0)
			(void)sendto(fd, nullptr, 0, 0, nullptr, 0);
	});
}

int probe_port(const std::string &devargs, uint16_t *port, std::string *err, bool *probed)
{
	if (probed != nullptr)
		*probed = false;
	const std::string name = devargs.substr(0, devargs.find(','));
	if (rte_eth_dev_get_port_by_name(name.c_str(), port) == 0)
		return 0; /* given to the EAL (--vdev, -a) */
	if (int rc = rte_dev_probe(devargs.c_str()); rc < 0) {
		/* DPDK 22.11's net_af_packet joins the PACKET_FANOUT group
		 * (getpid() ^ ifindex) & 0xffff: two processes in one network
		 * namespace can collide, and the probe then fails. */
		const bool afp = devargs.rfind("net_af_packet", 0) == 0 || devargs.rfind("eth_af_packet", 0) == 0;
		*err = "cannot probe '" + devargs + "': " + strerror(-rc);
		if (afp)
			*err += " (if the PMD said PACKET_FANOUT: another process of this namespace has the same "
				"fanout group, (pid ^ ifindex) & 0xffff; give the veths other ifindexes, as "
				"tests/integration/lib.sh fabric_up does)";
		return -rc;
	}
	if (rte_eth_dev_get_port_by_name(name.c_str(), port) != 0) {
		*err = "'" + devargs + "' created no ethdev port named '" + name + "'";
		return ENODEV;
	}
	if (probed != nullptr)
		*probed = true;
	return 0;
}

int resolve_ah(soft_device &dev, const ibv_ah_attr &attr, uint64_t deadline,
	       const std::function<void(const std::function<void()> &)> &on_ctl, const std::function<void()> &step,
	       ah_handle *out)
{
	int rc = 0;
	for (;;) {
		on_ctl([&] { rc = dev.prepare_ah(attr); });
		if (rc != EINPROGRESS)
			break;
		if (int64_t(rte_rdtsc() - deadline) >= 0)
			return ETIMEDOUT;
		step();
	}
	if (rc != 0)
		return rc;
	int e = 0;
	on_ctl([&] { *out = dev.create_ah(attr, &e); });
	return e;
}

int port::socket() const
{
	const int s = have_port_ ? rte_eth_dev_socket_id(port_id_) : SOCKET_ID_ANY;
	return s >= 0 ? s : SOCKET_ID_ANY;
}

int port::check_queues(std::string *err)
{
	/* One queue pair per poll thread: say so before the PMD refuses the
	 * configuration in its own words. */
	rte_eth_dev_info di{};
	if (rte_eth_dev_info_get(port_id_, &di) == 0 && (di.max_rx_queues < nq_ || di.max_tx_queues < nq_)) {
		*err = "port " + cfg_.name + ": " + std::to_string(nq_) + " queue pairs (one per poll thread), the port offers " +
		       std::to_string(di.max_rx_queues) + " RX and " + std::to_string(di.max_tx_queues) + " TX (PMD " +
		       (di.driver_name != nullptr ? di.driver_name : "?") +
		       "; net_pcap opens one queue per rx_pcap= and tx_pcap=)";
		close();
		return EINVAL;
	}
	return 0;
}

int port::probe(const port_config &pc, uint16_t queues, std::string *err)
{
	close();
	cfg_ = pc;
	nq_ = pc.queues != 0 ? pc.queues : queues;
	if (is_memif(pc.devargs, true))
		hold_ = hold_intr_thread(); /* until start() is done */
	std::string why;
	if (int rc = probe_port(pc.devargs, &port_id_, &why, &probed_); rc != 0) {
		*err = "port " + pc.name + ": " + why;
		return rc;
	}
	have_port_ = true;
	return check_queues(err);
}

int port::adopt(const port_config &pc, uint16_t port_id, uint16_t queues, std::string *err)
{
	close();
	cfg_ = pc;
	cfg_.devargs.clear(); /* not ours to probe again */
	nq_ = pc.queues != 0 ? pc.queues : queues;
	if (!rte_eth_dev_is_valid_port(port_id)) {
		*err = "port " + pc.name + ": no DPDK port " + std::to_string(port_id);
		return ENODEV;
	}
	port_id_ = port_id;
	have_port_ = true;
	probed_ = false;
	return check_queues(err);
}

int port::start(const port_setup &s, std::string *err)
{
	if (!have_port_ || started_) {
		*err = "port " + cfg_.name + (started_ ? ": started already" : ": not probed");
		return EINVAL;
	}
	soft_config sc(cfg_); /* mtu, pkey, max_ah, neighbour resolution, vlan, ecn, steer */
	sc.port_id = port_id_;
	sc.set_mac = cfg_.set_mac;
	sc.mac = cfg_.mac;
	sc.addresses = cfg_.addresses;
	sc.neighbours = cfg_.neighbours;
	sc.neighbours.insert(sc.neighbours.end(), s.neighbours.begin(), s.neighbours.end());
	sc.nb_mbufs = cfg_.nb_mbufs;
	sc.nb_queues = nq_;
	sc.qsbr = s.qsbr;
	sc.av_nodes = s.av_nodes;
	if (s.adjust)
		s.adjust(sc);
	nq_ = sc.nb_queues;
	int rc = dev_.open(sc);
	/* A memif client whose server is not there yet: again, for a while. */
	const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(memif_client_wait_ms);
	while (rc != 0 && is_memif(cfg_.devargs, false) && std::chrono::steady_clock::now() < until) {
		close_ethdev(port_id_, probed_, dev_.port_started());
		dev_.close();
		std::this_thread::sleep_for(std::chrono::milliseconds(20));
		std::string why;
		if (probe_port(cfg_.devargs, &port_id_, &why, &probed_) != 0)
			continue;
		sc.port_id = port_id_;
		rc = dev_.open(sc);
	}
	release_intr_thread(hold_);
	hold_ = nullptr;
	if (rc != 0) {
		*err = "port " + cfg_.name + ": " + dev_.error() +
		       (is_memif(cfg_.devargs, false) ? " (a memif client needs its server end running: start that "
							 "program first)"
						      : "");
		close();
		return rc;
	}
	started_ = true;
	if (s.control.add) {
		if (int e = s.control.add(&soft_device::control_poller, &dev_); e != 0) {
			*err = "port " + cfg_.name + ": its control poller: " + strerror(e);
			close();
			return e;
		}
		host_ = s.control;
		polled_ = true;
	}
	return 0;
}

void port::stop()
{
	/* Off the control thread first: its poller answers ARP on queue 0
	 * and walks the neighbour table, both gone with the port. */
	if (polled_ && host_.remove)
		host_.remove(&soft_device::control_poller, &dev_);
	polled_ = false;
	host_ = {};
	/* The port goes before the pool its queues hold mbufs of
	 * (soft_device::close frees that pool); a memif server's with the
	 * interrupt thread held (its listener must not run meanwhile). */
	if (have_port_) {
		if (hold_ == nullptr && is_memif(cfg_.devargs, true))
			hold_ = hold_intr_thread();
		close_ethdev(port_id_, probed_, dev_.port_started());
	}
	release_intr_thread(hold_);
	hold_ = nullptr;
	have_port_ = probed_ = false;
}

void port::close()
{
	stop();
	dev_.close(); /* also what a failed open left (its pool) */
	started_ = false;
}

} // namespace rdgram::soft
