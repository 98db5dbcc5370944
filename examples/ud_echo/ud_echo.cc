/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * ud_echo: a UD echo server on any DPDK port, through rdgram's software
 * RoCEv2 driver. Every datagram that reaches QP --qpn goes back to the QP
 * that sent it, in its own mbuf (the 40-byte GRH area stripped). The reply
 * address handle is derived from the completion as ibv_init_ah_from_wc(3)
 * does and created once per sender by the control thread (ah_client): the
 * poll loop never waits for ARP/ND or for an AH.
 *
 *   ud_echo [EAL args] -- --ip A.B.C.D [--ip ...] [--port DEVARGS]
 *           [--qpn N] [--qkey K] [--seconds S] [--idle S]
 *
 * --port: a DPDK device (default: the first ethdev port, e.g. one given with
 * --vdev); --ip: the port's addresses (its GID table, up to 4 per family);
 * --seconds: stop after S seconds (0: at SIGINT/SIGTERM); --idle: stop once
 * S seconds pass without a datagram after the first one. Without EAL
 * arguments the EAL gets rdgram's container defaults (default_eal_args).
 * One lcore: the main thread polls, the control thread runs beside it.
 */
#include <getopt.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

struct options {
	std::string port;
	std::vector<wire::gid> ips;
	uint32_t qpn = 0x100, qkey = 0x11111111;
	double seconds = 0, idle = 0;
};

bool parse(const std::vector<std::string> &args, options &o)
{
	std::vector<char *> argv{const_cast<char *>("ud_echo")};
	for (const std::string &a : args)
		argv.push_back(const_cast<char *>(a.c_str()));
	argv.push_back(nullptr);
	static const option longopts[] = {{"port", required_argument, nullptr, 'p'},
					  {"ip", required_argument, nullptr, 'i'},
					  {"qpn", required_argument, nullptr, 'q'},
					  {"qkey", required_argument, nullptr, 'k'},
					  {"seconds", required_argument, nullptr, 's'},
					  {"idle", required_argument, nullptr, 'd'},
					  {nullptr, 0, nullptr, 0}};
	optind = 1;
	for (int c; (c = getopt_long(int(argv.size()) - 1, argv.data(), "", longopts, nullptr)) != -1;) {
		wire::gid g;
		switch (c) {
		case 'p': o.port = optarg; break;
		case 'i':
			if (!parse_ip(optarg, &g)) {
				fprintf(stderr, "ud_echo: --ip %s: not an IPv4 or IPv6 address\n", optarg);
				return false;
			}
			o.ips.push_back(g);
			break;
		case 'q': o.qpn = uint32_t(strtoul(optarg, nullptr, 0)); break;
		case 'k': o.qkey = uint32_t(strtoul(optarg, nullptr, 0)); break;
		case 's': o.seconds = atof(optarg); break;
		case 'd': o.idle = atof(optarg); break;
		default: return false;
		}
	}
	if (o.ips.empty()) {
		fprintf(stderr, "usage: ud_echo [EAL args] -- --ip ADDR [--ip ADDR...] [--port DEVARGS] "
				"[--qpn N] [--qkey K] [--seconds S] [--idle S]\n");
		return false;
	}
	return true;
}

/* The port: a device probed now, or the first port the EAL made. */
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

/* The poll loop: receive, answer each datagram, let the AH client send what
 * waited for its AH, report quiescence. No syscall, lock or allocation. */
struct echo_stats {
	uint64_t received = 0, echoed = 0, tx_full = 0;
};

void poll_loop(soft::soft_queue &q, ah_client &cl, rte_rcu_qsbr *qs, unsigned tid, const options &o,
	       echo_stats &st)
{
	constexpr uint16_t burst = soft::soft_queue::max_burst;
	const uint64_t hz = rte_get_tsc_hz(), t0 = rte_get_tsc_cycles();
	const uint64_t end = o.seconds > 0 ? t0 + uint64_t(o.seconds * double(hz)) : UINT64_MAX;
	const uint64_t idle = o.idle > 0 ? uint64_t(o.idle * double(hz)) : UINT64_MAX;
	uint64_t last_rx = 0;
	recv_wc wc[burst];
	send_wr wr[burst];
	ah_key key[burst];
	while (!g_stop) {
		const uint64_t now = rte_get_tsc_cycles();
		if (now >= end || (last_rx != 0 && idle != UINT64_MAX && now - last_rx >= idle))
			break;
		const uint16_t n = q.rx_burst(wc, burst);
		uint16_t m = 0;
		for (uint16_t i = 0; i < n; i++) {
			if (cl.reply_key(wc[i], &key[m]) != 0) { /* counted in reply_bad_wc */
				rte_pktmbuf_free(wc[i].mbuf);
				continue;
			}
			rte_pktmbuf_adj(wc[i].mbuf, 40); /* the GRH area */
			wr[m] = send_wr{};
			wr[m].remote_qpn = wc[i].src_qp;
			wr[m].remote_qkey = o.qkey;
			wr[m].mbuf = wc[i].mbuf;
			m++;
		}
		if (n != 0) {
			st.received += n;
			last_rx = now;
		}
		uint16_t s = cl.send_burst(q, key, wr, m, now);
		if (s < m) { /* the port is full: push what is built, try once more */
			q.tx_flush();
			s = uint16_t(s + cl.send_burst(q, key + s, wr + s, uint16_t(m - s), now));
			for (uint16_t i = s; i < m; i++)
				rte_pktmbuf_free(wr[i].mbuf);
			st.tx_full += m - s;
		}
		st.echoed += s;
		cl.poll(q, now);
		q.tx_flush();
		rte_rcu_qsbr_quiescent(qs, tid);
	}
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
		fprintf(stderr, "ud_echo: %s\n", rt.error().c_str());
		return 1;
	}
	int status = 0;
	{
		uint16_t port;
		if (int rc = find_port(o.port, &port); rc != 0) {
			fprintf(stderr, "ud_echo: no port '%s': %s\n", o.port.c_str(), strerror(rc));
			return 1;
		}
		soft::soft_device dev;
		soft::soft_config sc;
		sc.port_id = port;
		sc.addresses = o.ips;
		sc.qsbr = rt.qsbr();
		if (dev.open(sc) != 0) {
			fprintf(stderr, "ud_echo: %s\n", dev.error().c_str());
			return 1;
		}
		/* The service's control-thread poller also runs the device's
		 * housekeeping (ARP/ND, AH reclamation). */
		ah_service svc;
		ah_service_config asc;
		asc.qsbr = rt.qsbr();
		asc.socket = int(rte_socket_id());
		if (int rc = svc.start(dev, rt.ctl(), asc); rc != 0) {
			fprintf(stderr, "ud_echo: AH service: %s\n", strerror(rc));
			return 1;
		}
		soft::soft_queue q;
		dev.create_queue({.index = 0, .socket = asc.socket}, q);
		q.add_qp(o.qpn, o.qkey);
		ah_client cl;
		ah_client_config cc;
		cc.mp = dev.mempool();
		cc.socket = asc.socket;
		if (int rc = svc.add_client(cl, cc); rc != 0) {
			fprintf(stderr, "ud_echo: reply path: %s\n", strerror(rc));
			return 1;
		}
		std::signal(SIGINT, on_stop);
		std::signal(SIGTERM, on_stop);
		printf("ud_echo: port %u, %zu address(es), QP 0x%x\n", port, o.ips.size(), o.qpn);
		fflush(stdout);

		const unsigned tid = rte_lcore_id();
		poll_thread_online(rt.qsbr(), tid);
		echo_stats st;
		poll_loop(q, cl, rt.qsbr(), tid, o, st);
		poll_thread_offline(rt.qsbr(), tid);

		const ah_client_counters &c = cl.counters();
		const auto &k = q.counters();
		printf("ud_echo: received %lu, echoed %lu, tx_full %lu, reply_bad_wc %lu, reply AH waits %lu, "
		       "driver drops rx %lu tx %lu\n",
		       (unsigned long)st.received, (unsigned long)st.echoed, (unsigned long)st.tx_full,
		       (unsigned long)c.reply_bad_wc, (unsigned long)c.misses, (unsigned long)k.rx_drops(),
		       (unsigned long)k.tx_drops());
		svc.remove_client(cl);
		cl.fini();
		svc.stop();
		dev.close();
	}
	rt.fini();
	return status;
}
