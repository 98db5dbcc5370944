/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * ah_stream: creates the address handles of N peers ahead of time, then
 * streams UD datagrams to them round robin and counts the echoes (run
 * ud_echo on the other side), through rdgram's software RoCEv2 driver on
 * any DPDK port.
 *
 *   ah_stream [EAL args] -- --ip A.B.C.D --peer A.B.C.D [--peer ...]
 *             [--port DEVARGS] [--qpn N] [--qkey K] [--count M]
 *             [--size BYTES] [--window W] [--seconds S]
 *
 * The AHs come from ah_service::create_ah_batch (the "AH storm" an HPC job
 * makes at start: neighbour resolution for every peer at once, the caller
 * sleeping meanwhile) on the main thread, while the poll thread already
 * polls the queue (ARP/ND frames go out and come in through it); a peer
 * whose neighbour did not answer in time is asked again. Then the
 * poll thread sends --count datagrams to each peer's QP --qpn, keeping at
 * most --window unanswered, and stops when every echo is back or after
 * --seconds. Exit status 0 when every datagram came back.
 * Two lcores (EAL -l with two CPUs): main and one poll worker.
 */
#include <getopt.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <rdgram/ah_service.h>
#include <rdgram/config.h>
#include <rdgram/drivers/soft_device.h>
#include <rdgram/runtime.h>

using namespace rdgram;

namespace {

struct options {
	std::string port;
	wire::gid ip{};
	bool ip_given = false;
	std::vector<wire::gid> peers;
	uint32_t qpn = 0x100, qkey = 0x11111111;
	uint32_t local_qpn = 0x200;
	uint64_t count = 1000;
	uint32_t size = 64, window = 64;
	double seconds = 10;
};

bool parse(const std::vector<std::string> &args, options &o)
{
	std::vector<char *> argv{const_cast<char *>("ah_stream")};
	for (const std::string &a : args)
		argv.push_back(const_cast<char *>(a.c_str()));
	argv.push_back(nullptr);
	static const option longopts[] = {
		{"port", required_argument, nullptr, 'p'},  {"ip", required_argument, nullptr, 'i'},
		{"peer", required_argument, nullptr, 'P'},  {"qpn", required_argument, nullptr, 'q'},
		{"qkey", required_argument, nullptr, 'k'},  {"count", required_argument, nullptr, 'n'},
		{"size", required_argument, nullptr, 'z'},  {"window", required_argument, nullptr, 'w'},
		{"seconds", required_argument, nullptr, 's'}, {nullptr, 0, nullptr, 0}};
	optind = 1;
	for (int c; (c = getopt_long(int(argv.size()) - 1, argv.data(), "", longopts, nullptr)) != -1;) {
		wire::gid g;
		switch (c) {
		case 'p': o.port = optarg; break;
		case 'i':
		case 'P':
			if (!parse_ip(optarg, &g)) {
				fprintf(stderr, "ah_stream: %s: not an IPv4 or IPv6 address\n", optarg);
				return false;
			}
			if (c == 'i') {
				o.ip = g;
				o.ip_given = true;
			} else {
				o.peers.push_back(g);
			}
			break;
		case 'q': o.qpn = uint32_t(strtoul(optarg, nullptr, 0)); break;
		case 'k': o.qkey = uint32_t(strtoul(optarg, nullptr, 0)); break;
		case 'n': o.count = strtoull(optarg, nullptr, 0); break;
		case 'z': o.size = uint32_t(strtoul(optarg, nullptr, 0)); break;
		case 'w': o.window = uint32_t(strtoul(optarg, nullptr, 0)); break;
		case 's': o.seconds = atof(optarg); break;
		default: return false;
		}
	}
	if (!o.ip_given || o.peers.empty() || o.size < 8 || o.window == 0) {
		fprintf(stderr, "usage: ah_stream [EAL args] -- --ip ADDR --peer ADDR [--peer ADDR...] "
				"[--port DEVARGS] [--qpn N] [--qkey K] [--count M] [--size BYTES >= 8] "
				"[--window W >= 1] [--seconds S]\n");
		return false;
	}
	return true;
}

int find_port(const std::string &devargs, uint16_t *port)
{
	if (devargs.empty()) {
		*port = rte_eth_find_next_owned_by(0, RTE_ETH_DEV_NO_OWNER);
		return *port < RTE_MAX_ETHPORTS ? 0 : ENODEV;
	}
	const std::string name = devargs.substr(0, devargs.find(','));
	if (rte_eth_dev_get_port_by_name(name.c_str(), port) == 0)
		return 0;
	if (int rc = rte_dev_probe(devargs.c_str()); rc < 0)
		return -rc;
	return rte_eth_dev_get_port_by_name(name.c_str(), port) == 0 ? 0 : ENODEV;
}

/* Shared by main and the poll worker. */
struct stream {
	soft::soft_queue q;
	rte_rcu_qsbr *qs = nullptr;
	const options *o = nullptr;
	std::vector<ah_handle> ah; /* one per peer, set before go */
	std::atomic<bool> go{false}, quit{false};
	/* Poll worker only until it returns. */
	std::vector<uint64_t> sent, echoed;
	uint64_t alloc_failed = 0, unexpected = 0;
};

/* The payload: the peer's index and the message's sequence number. */
struct msg_hdr {
	uint32_t peer, seq;
};

int poll_main(void *arg)
{
	stream &s = *static_cast<stream *>(arg);
	const options &o = *s.o;
	const unsigned tid = rte_lcore_id();
	const size_t npeers = o.peers.size();
	poll_thread_online(s.qs, tid);
	constexpr uint16_t burst = soft::soft_queue::max_burst;
	recv_wc wc[burst];
	send_wr wr[burst];
	/* Before go: only poll, so that neighbour resolution moves on. */
	while (!s.go.load(std::memory_order_acquire) && !s.quit.load(std::memory_order_relaxed)) {
		const uint16_t n = s.q.rx_burst(wc, burst);
		for (uint16_t i = 0; i < n; i++)
			rte_pktmbuf_free(wc[i].mbuf);
		s.q.tx_flush();
		rte_rcu_qsbr_quiescent(s.qs, tid);
	}
	const uint64_t total = o.count * npeers;
	const uint64_t end = rte_get_tsc_cycles() + uint64_t(o.seconds * double(rte_get_tsc_hz()));
	uint64_t nsent = 0, nback = 0;
	size_t next = 0; /* round robin */
	rte_mempool *mp = s.q.mempool();
	while (nback < total && rte_get_tsc_cycles() < end && !s.quit.load(std::memory_order_relaxed)) {
		/* Send while the window has room. */
		uint16_t m = 0;
		while (m < burst && nsent + m < total && nsent + m - nback < o.window) {
			const size_t p = next;
			next = next + 1 == npeers ? 0 : next + 1;
			if (s.sent[p] == o.count)
				continue;
			rte_mbuf *mb = rte_pktmbuf_alloc(mp);
			if (mb == nullptr) {
				s.alloc_failed++;
				break;
			}
			char *d = rte_pktmbuf_append(mb, uint16_t(o.size));
			memset(d, 0, o.size);
			const msg_hdr h{uint32_t(p), uint32_t(s.sent[p])};
			memcpy(d, &h, sizeof(h));
			wr[m] = send_wr{};
			wr[m].ah = s.ah[p];
			wr[m].remote_qpn = o.qpn;
			wr[m].remote_qkey = o.qkey;
			wr[m].mbuf = mb;
			s.sent[p]++;
			m++;
		}
		uint16_t t = s.q.tx_burst(wr, m);
		if (t < m) { /* the port is full: push, and give back what stays */
			s.q.tx_flush();
			t = uint16_t(t + s.q.tx_burst(wr + t, uint16_t(m - t)));
			for (uint16_t i = t; i < m; i++) {
				const msg_hdr *h = rte_pktmbuf_mtod(wr[i].mbuf, const msg_hdr *);
				s.sent[h->peer]--;
				rte_pktmbuf_free(wr[i].mbuf);
			}
		}
		nsent += t;
		s.q.tx_flush();
		/* Echoes: the GRH area, then our payload. */
		const uint16_t n = s.q.rx_burst(wc, burst);
		for (uint16_t i = 0; i < n; i++) {
			msg_hdr h{UINT32_MAX, 0};
			if (wc[i].byte_len >= 40 + sizeof(h))
				memcpy(&h, rte_pktmbuf_mtod_offset(wc[i].mbuf, const void *, 40), sizeof(h));
			if (h.peer < npeers && memcmp(wc[i].sgid.raw, o.peers[h.peer].raw, 16) == 0) {
				s.echoed[h.peer]++;
				nback++;
			} else {
				s.unexpected++;
			}
			rte_pktmbuf_free(wc[i].mbuf);
		}
		rte_rcu_qsbr_quiescent(s.qs, tid);
	}
	s.q.tx_flush();
	poll_thread_offline(s.qs, tid);
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	const split_args sa = split_command_line(argc, argv);
	options o;
	if (!parse(sa.app, o))
		return 2;
	runtime rt;
	if (rt.init(sa.eal_given ? sa.eal : std::vector<std::string>{}, argv[0]) != 0) {
		fprintf(stderr, "ah_stream: %s\n", rt.error().c_str());
		return 1;
	}
	int status = 0;
	{
		uint16_t port;
		if (int rc = find_port(o.port, &port); rc != 0) {
			fprintf(stderr, "ah_stream: no port '%s': %s\n", o.port.c_str(), strerror(rc));
			return 1;
		}
		const unsigned main_lcore = rte_get_main_lcore();
		unsigned worker = RTE_MAX_LCORE;
		for (const lcore_cpu &l : rt.poll_lcores(rte_eth_dev_socket_id(port)))
			if (l.lcore != main_lcore) {
				worker = l.lcore;
				break;
			}
		if (worker == RTE_MAX_LCORE) {
			fprintf(stderr, "ah_stream: needs two lcores (EAL -l with two CPUs)\n");
			return 2;
		}
		soft::soft_device dev;
		soft::soft_config sc;
		sc.port_id = port;
		sc.addresses = {o.ip};
		sc.qsbr = rt.qsbr();
		if (dev.open(sc) != 0) {
			fprintf(stderr, "ah_stream: %s\n", dev.error().c_str());
			return 1;
		}
		ah_service svc;
		ah_service_config asc;
		asc.qsbr = rt.qsbr();
		asc.socket = int(rte_lcore_to_socket_id(worker));
		if (int rc = svc.start(dev, rt.ctl(), asc); rc != 0) {
			fprintf(stderr, "ah_stream: AH service: %s\n", strerror(rc));
			return 1;
		}
		auto s = std::make_unique<stream>();
		s->qs = rt.qsbr();
		s->o = &o;
		s->sent.assign(o.peers.size(), 0);
		s->echoed.assign(o.peers.size(), 0);
		dev.create_queue({.index = 0, .socket = asc.socket}, s->q);
		s->q.add_qp(o.local_qpn, o.qkey);
		if (launch_on_lcore(poll_main, s.get(), worker) != 0) {
			fprintf(stderr, "ah_stream: cannot launch the poll lcore\n");
			return 1;
		}

		/* ARP/ND requests sent before the link is up are lost: wait for it
		 * (a port that never reports a link is tried anyway). */
		for (int i = 0; i < int(o.seconds * 100); i++) {
			rte_eth_link link{};
			if (rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_UP)
				break;
			rte_delay_us_sleep(10000);
		}

		/* Every peer's AH, ahead of the first datagram. */
		std::vector<ibv_ah_attr> attrs(o.peers.size());
		for (size_t i = 0; i < o.peers.size(); i++) {
			ibv_ah_attr &a = attrs[i];
			a = ibv_ah_attr{};
			a.is_global = 1;
			a.port_num = 1;
			a.grh.sgid_index = 0;
			a.grh.hop_limit = 64;
			memcpy(a.grh.dgid.raw, o.peers[i].raw, 16);
		}
		s->ah.assign(o.peers.size(), ah_null);
		std::vector<int> errs(o.peers.size());
		const uint64_t hz = rte_get_tsc_hz(), t0 = rte_get_tsc_cycles();
		unsigned made = svc.create_ah_batch(attrs.data(), unsigned(attrs.size()), s->ah.data(), errs.data());
		/* A neighbour that did not answer its ARP/ND requests in time
		 * (ETIMEDOUT: the peer not up yet, a loaded machine) is asked
		 * again, the failed ones in one batch, until --seconds. */
		const uint64_t give_up = t0 + uint64_t(o.seconds * double(hz));
		while (made < attrs.size() && rte_get_tsc_cycles() < give_up) {
			std::vector<size_t> again;
			for (size_t i = 0; i < attrs.size(); i++)
				if (errs[i] == ETIMEDOUT)
					again.push_back(i);
			if (again.empty())
				break;
			rte_delay_us_sleep(100000);
			std::vector<ibv_ah_attr> a2;
			for (size_t i : again)
				a2.push_back(attrs[i]);
			std::vector<ah_handle> h2(again.size(), ah_null);
			std::vector<int> e2(again.size());
			made += svc.create_ah_batch(a2.data(), unsigned(a2.size()), h2.data(), e2.data());
			for (size_t j = 0; j < again.size(); j++) {
				s->ah[again[j]] = h2[j];
				errs[again[j]] = e2[j];
			}
		}
		const double ms = double(rte_get_tsc_cycles() - t0) * 1e3 / double(hz);
		printf("ah_stream: %u of %zu AHs created in %.1f ms\n", made, attrs.size(), ms);
		for (size_t i = 0; i < attrs.size(); i++)
			if (errs[i] != 0)
				fprintf(stderr, "ah_stream: peer %s: %s\n", format_gid(o.peers[i]).c_str(), strerror(errs[i]));
		if (made == attrs.size())
			s->go.store(true, std::memory_order_release);
		else
			s->quit.store(true, std::memory_order_relaxed);
		wait_on_lcore(worker);

		uint64_t sent = 0, back = 0;
		for (size_t i = 0; i < o.peers.size(); i++) {
			printf("ah_stream: peer %s: sent %lu, echoed %lu\n", format_gid(o.peers[i]).c_str(),
			       (unsigned long)s->sent[i], (unsigned long)s->echoed[i]);
			sent += s->sent[i];
			back += s->echoed[i];
		}
		const auto &k = s->q.counters();
		printf("ah_stream: sent %lu, echoed %lu of %lu, unexpected %lu, mbuf alloc failed %lu, driver drops "
		       "rx %lu tx %lu\n",
		       (unsigned long)sent, (unsigned long)back, (unsigned long)(o.count * o.peers.size()),
		       (unsigned long)s->unexpected, (unsigned long)s->alloc_failed, (unsigned long)k.rx_drops(),
		       (unsigned long)k.tx_drops());
		if (made != attrs.size() || back != o.count * o.peers.size())
			status = 1;
		for (ah_handle h : s->ah)
			if (!(h == ah_null))
				svc.destroy_ah(h);
		svc.stop();
		dev.close();
	}
	rt.fini();
	return status;
}
