/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * ahn_peer: EFA-style receive attribution between two processes over
 * net_memif (run by tests/integration/ahn_memif.sh, one process per role,
 * each with its own EAL and --file-prefix).
 *
 *   --role sender:   a soft device with --addrs source addresses and --qps
 *                    QPs; every (address, QP) is one peer with its own
 *                    random connection id. It sends --rounds rounds, one
 *                    datagram per peer each, --gap-ms apart, then FIN.
 *                    Each payload carries its truth: address index, QPN,
 *                    connection id, round.
 *   --role receiver: a soft device with report_ahn (wc.slid = our ahn for
 *                    the sender's address, 0xFFFF when we have none), an
 *                    AH registry and ahn_attrib on the control thread, and
 *                    this thread as the poll thread. Each datagram is
 *                    attributed and checked against its payload; at FIN
 *                    (or the timeout) it prints one line of counts:
 *
 *   ahn_peer: received R expected E unknown U attributed A misattributed M
 *     peers P/T attributed_peers AP first_unknown FU first_ffff FF
 *     ahs_created C requests Q duplicates D
 *
 *   P/T: peers heard from / peers the sender has; AP: peers attributed at
 *   least once; FU: peers whose first datagram was unknown; FF: addresses
 *   whose first datagram carried 0xFFFF (the AH did not exist yet).
 *
 * Every loop is bounded by --timeout. Exit 0 when the run completed (the
 * script judges the counts), 1 on a failure seen here, 2 for usage/set-up.
 */
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_random.h>

#include "rdgram/ahn_attrib.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "tool_cpu.h"
#include "soft_device.h"

using namespace rdgram;
using namespace rdgram::soft;

namespace {

constexpr uint32_t magic_data = 0x61686e31, magic_fin = 0x61686e46; /* "ahn1", "ahnF" */
constexpr uint32_t recv_qpn = 0x700, qkey = 0x600df00d, base_qpn = 0x500;

struct options {
	std::string role, socket;
	unsigned addrs = 4, qps = 2, rounds = 10, gap_ms = 30;
	double timeout_s = 30;
};

/* What each datagram says about its sender. */
struct payload {
	uint32_t magic;
	uint32_t addr; /* index of the sender's source address */
	uint32_t qpn;
	uint32_t connid;
	uint32_t round;
	uint32_t peers; /* how many peers the sender has (FIN) */
	uint32_t sent;  /* data datagrams sent (FIN) */
};

wire::gid sender_addr(unsigned i)
{
	wire::gid g;
	char s[32];
	snprintf(s, sizeof(s), "10.77.0.%u", 10 + i);
	parse_ip(s, &g);
	return g;
}
wire::gid receiver_addr()
{
	wire::gid g;
	parse_ip("10.77.0.1", &g);
	return g;
}
rte_ether_addr mac_of(bool receiver)
{
	rte_ether_addr m{};
	parse_mac(receiver ? "02:00:00:00:77:01" : "02:00:00:00:77:02", &m);
	return m;
}

double now_s() { return double(rte_get_tsc_cycles()) / double(rte_get_tsc_hz()); }

bool parse(int argc, char **argv, options &o)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		const std::string k = argv[i], v = argv[i + 1];
		if (k == "--role")
			o.role = v;
		else if (k == "--socket")
			o.socket = v;
		else if (k == "--addrs")
			o.addrs = unsigned(atoi(v.c_str()));
		else if (k == "--qps")
			o.qps = unsigned(atoi(v.c_str()));
		else if (k == "--rounds")
			o.rounds = unsigned(atoi(v.c_str()));
		else if (k == "--gap-ms")
			o.gap_ms = unsigned(atoi(v.c_str()));
		else if (k == "--timeout")
			o.timeout_s = atof(v.c_str());
		else {
			fprintf(stderr, "ahn_peer: unknown option %s\n", k.c_str());
			return false;
		}
	}
	if ((o.role != "sender" && o.role != "receiver") || o.socket.empty() || o.addrs == 0 || o.addrs > 200 ||
	    o.qps == 0 || o.qps > 8 || o.rounds == 0) {
		fprintf(stderr, "usage: ahn_peer --role sender|receiver --socket PATH [--addrs N<=200] [--qps N<=8] "
				"[--rounds N] [--gap-ms MS] [--timeout S]\n");
		return false;
	}
	return true;
}

bool wait_link_up(uint16_t port, double deadline)
{
	rte_eth_link l{};
	while (now_s() < deadline) {
		if (rte_eth_link_get_nowait(port, &l) == 0 && l.link_status == RTE_ETH_LINK_UP)
			return true;
		rte_delay_us_sleep(10000);
	}
	return false;
}

struct endpoint {
	runtime &rt;
	soft_device dev;
	soft_queue q;
	unsigned tid = rte_lcore_id();

	explicit endpoint(runtime &r) : rt(r) {}
	int open(const options &o, bool receiver)
	{
		uint16_t port;
		if (rte_eth_dev_get_port_by_name("net_memif0", &port) != 0) {
			fprintf(stderr, "ahn_peer: no net_memif0 port\n");
			return 2;
		}
		soft_config c;
		c.port_id = port;
		c.set_mac = true;
		c.mac = mac_of(receiver);
		c.resolve = false; /* static neighbours: the test is about ahns */
		c.nb_mbufs = 4095;
		c.qsbr = rt.qsbr();
		if (receiver) {
			c.addresses = {receiver_addr()};
			for (unsigned i = 0; i < o.addrs; i++)
				c.neighbours.push_back({sender_addr(i), mac_of(false)});
			c.report_ahn = true;
			c.max_ah = 1024;
		} else {
			for (unsigned i = 0; i < o.addrs; i++)
				c.addresses.push_back(sender_addr(i));
			c.neighbours = {{receiver_addr(), mac_of(true)}};
		}
		if (dev.open(c) != 0) {
			fprintf(stderr, "ahn_peer: open: %s\n", dev.error().c_str());
			return 2;
		}
		dev.create_queue({.index = 0}, q);
		if (receiver) {
			q.add_qp(recv_qpn, qkey);
		} else {
			for (unsigned j = 0; j < o.qps; j++)
				q.add_qp(base_qpn + j, qkey);
		}
		if (!wait_link_up(port, now_s() + o.timeout_s)) {
			fprintf(stderr, "ahn_peer: memif link never came up\n");
			return 2;
		}
		return 0;
	}
};

/* ---- sender ---- */

int run_sender(const options &o, runtime &rt)
{
	endpoint ep(rt);
	if (int rc = ep.open(o, false); rc != 0)
		return rc;
	std::vector<ah_handle> ah(o.addrs);
	for (unsigned i = 0; i < o.addrs; i++) {
		ibv_ah_attr a{};
		a.is_global = 1;
		a.port_num = 1;
		a.grh.hop_limit = 64;
		a.grh.sgid_index = uint8_t(i);
		const wire::gid r = receiver_addr();
		memcpy(a.grh.dgid.raw, r.raw, 16);
		int err = 0;
		rt.ctl().call([&] { ah[i] = ep.dev.create_ah(a, &err); });
		if (err != 0) {
			fprintf(stderr, "ahn_peer: sender create_ah: %s\n", strerror(err));
			return 1;
		}
	}
	/* A random connection id per peer (libfabric: a random Q_Key per
	 * endpoint), never 0 (ahn_map::any_connid). */
	std::vector<uint32_t> connid(o.addrs * o.qps);
	for (auto &c : connid)
		c = uint32_t(rte_rand() % 0xfffffffeu) + 1;
	const double deadline = now_s() + o.timeout_s;
	uint32_t sent = 0;
	int rc = 0;
	auto send_one = [&](unsigned i, unsigned j, const payload &p) {
		ep.q.select_send_qp(j);
		send_wr w{ah[i], recv_qpn, qkey, nullptr, &p, sizeof(p), 0, send_inline};
		while (ep.q.tx_burst(&w, 1) == 0) {
			ep.q.tx_flush();
			if (now_s() > deadline)
				return false;
		}
		ep.q.tx_flush();
		return true;
	};
	auto idle = [&](double secs) {
		const double until = now_s() + secs;
		recv_wc wc[32];
		while (now_s() < until) {
			const uint16_t n = ep.q.rx_burst(wc, 32);
			for (uint16_t k = 0; k < n; k++)
				rte_pktmbuf_free(wc[k].mbuf);
			ep.q.tx_flush();
			rte_rcu_qsbr_quiescent(rt.qsbr(), ep.tid);
		}
	};
	poll_thread_online(rt.qsbr(), ep.tid);
	for (unsigned r = 0; r < o.rounds && rc == 0; r++) {
		for (unsigned i = 0; i < o.addrs && rc == 0; i++)
			for (unsigned j = 0; j < o.qps; j++) {
				payload p{magic_data, i, base_qpn + j, connid[i * o.qps + j], r, 0, 0};
				if (!send_one(i, j, p)) {
					fprintf(stderr, "ahn_peer: sender timed out\n");
					rc = 1;
					break;
				}
				sent++;
			}
		idle(o.gap_ms / 1000.0);
	}
	/* FIN a few times (UD: any one of them ends the receiver's run). */
	for (int k = 0; k < 5 && rc == 0; k++) {
		payload p{magic_fin, 0, base_qpn, 0, 0, o.addrs * o.qps, sent};
		send_one(0, 0, p);
		idle(0.01);
	}
	printf("ahn_peer: sender sent %u datagrams from %u peers (%u addresses x %u QPs)\n", sent, o.addrs * o.qps,
	       o.addrs, o.qps);
	poll_thread_offline(rt.qsbr(), ep.tid);
	rt.ctl().call([&] {
		for (ah_handle h : ah)
			ep.dev.destroy_ah(h);
	});
	ep.dev.close();
	return rc;
}

/* ---- receiver ---- */

uint64_t cookie_of(uint32_t addr_lo, uint32_t qpn, uint32_t connid)
{
	return uint64_t(addr_lo & 0xff) << 56 | uint64_t(qpn & 0xffffff) << 32 | connid;
}
uint64_t cookie_cb(void *, const ahn_sender &s) { return cookie_of(s.sgid.raw[15], s.qpn, s.connid); }

int run_receiver(const options &o, runtime &rt)
{
	endpoint ep(rt);
	if (int rc = ep.open(o, true); rc != 0)
		return rc;
	ah_registry *reg = nullptr;
	ahn_attrib at;
	ahn_attrib_client cl;
	int rc = -1;
	rt.ctl().call([&] {
		reg = new ah_registry(ep.dev, 1024);
		ahn_attrib_config c;
		c.max_peers = 1024;
		c.max_senders = 256;
		c.qsbr = rt.qsbr();
		c.cookie_of = cookie_cb;
		rc = at.init(ep.dev, *reg, c);
		if (rc == 0)
			rc = at.add_client(cl, ahn_attrib_client_config{});
	});
	if (rc != 0 || at.start(rt.ctl()) != 0) {
		fprintf(stderr, "ahn_peer: ahn_attrib set-up: %s\n", strerror(rc));
		return 2;
	}
	const unsigned n_peers = o.addrs * o.qps;
	struct peer_seen {
		bool seen, attributed, first_unknown;
	};
	std::vector<peer_seen> seen(n_peers, peer_seen{});
	std::vector<bool> addr_seen(o.addrs, false);
	uint64_t received = 0, unknown = 0, attributed = 0, mis = 0, first_ffff = 0, bad = 0;
	uint32_t expected = 0;
	bool fin = false;
	const double deadline = now_s() + o.timeout_s;
	poll_thread_online(rt.qsbr(), ep.tid);
	recv_wc wc[32];
	while (!fin && now_s() < deadline) {
		const uint16_t n = ep.q.rx_burst(wc, 32);
		const uint64_t now = rte_get_tsc_cycles();
		for (uint16_t k = 0; k < n; k++) {
			payload p{};
			if (wc[k].byte_len >= 40 + sizeof(p))
				memcpy(&p, rte_pktmbuf_mtod_offset(wc[k].mbuf, void *, 40), sizeof(p));
			if (p.magic == magic_fin) {
				fin = true;
				expected = p.sent;
			} else if (p.magic != magic_data || p.addr >= o.addrs || p.qpn < base_qpn ||
				   p.qpn >= base_qpn + o.qps || !(wc[k].sgid == sender_addr(p.addr)) ||
				   wc[k].src_qp != p.qpn) {
				bad++; /* not what the sender says it sent */
			} else {
				received++;
				const unsigned pi = p.addr * o.qps + (p.qpn - base_qpn);
				if (!addr_seen[p.addr]) {
					addr_seen[p.addr] = true;
					first_ffff += wc[k].slid == ahn_map::ahn_unknown;
				}
				const ahn_attribution r = cl.attribute(wc[k], p.connid, now);
				const bool first = !seen[pi].seen;
				seen[pi].seen = true;
				if (r.peer == ahn_map::nil) {
					unknown++;
					if (first)
						seen[pi].first_unknown = true;
				} else if (r.cookie != cookie_of(sender_addr(p.addr).raw[15], p.qpn, p.connid)) {
					mis++;
					fprintf(stderr, "ahn_peer: datagram of address %u qpn %#x attributed to cookie %#" PRIx64 "\n",
						p.addr, p.qpn, r.cookie);
				} else {
					attributed++;
					seen[pi].attributed = true;
				}
			}
			rte_pktmbuf_free(wc[k].mbuf);
		}
		ep.q.tx_flush();
		rte_rcu_qsbr_quiescent(rt.qsbr(), ep.tid);
	}
	poll_thread_offline(rt.qsbr(), ep.tid);
	at.stop();
	ahn_attrib_stats st{};
	rt.ctl().call([&] { st = at.stats(); });
	unsigned heard = 0, attr_peers = 0, first_unknown = 0;
	for (const auto &s : seen) {
		heard += s.seen;
		attr_peers += s.attributed;
		first_unknown += s.first_unknown;
	}
	const ahn_attrib_counters &c = cl.counters();
	printf("ahn_peer: received %" PRIu64 " expected %u unknown %" PRIu64 " attributed %" PRIu64
	       " misattributed %" PRIu64 " peers %u/%u attributed_peers %u first_unknown %u first_ffff %" PRIu64
	       " ahs_created %" PRIu64 " requests %" PRIu64 " duplicates %" PRIu64 "\n",
	       received, expected, unknown, attributed, mis, heard, n_peers, attr_peers, first_unknown, first_ffff,
	       st.ahs_created, st.requests, st.duplicates);
	printf("ahn_peer: by_ahn %" PRIu64 " by_gid %" PRIu64 " previous %" PRIu64 " asked %" PRIu64
	       " ask_ring_full %" PRIu64 " failed %" PRIu64 " busy %" PRIu64 " bad %" PRIu64 " fin %d\n",
	       c.by_ahn, c.by_gid, c.previous, c.asked, c.ask_ring_full, st.failed, st.busy, bad, int(fin));
	rt.ctl().call([&] {
		at.remove_client(cl);
		at.fini();
		delete reg;
	});
	cl.fini();
	ep.dev.close();
	return fin && bad == 0 && mis == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
	options o;
	if (!parse(argc, argv, o))
		return 2;
	/* One lcore: the receiver the first CPU we may use, the sender the
	 * last (two busy pollers on one CPU would take turns by time slice).
	 * This thread polls; the control thread runs off it. */
	const bool receiver = o.role == "receiver";
	const std::string lcore = test::allowed_cpu(!receiver);
	std::vector<std::string> eal = default_eal_args(256, lcore);
	eal.push_back(std::string("--vdev=net_memif0,role=") + (receiver ? "server" : "client") +
		      ",id=0,socket=" + o.socket + ",socket-abstract=no");
	eal.push_back("--log-level=pmd.net.memif:warning");
	runtime rt;
	if (rt.init(eal, argv[0]) != 0) {
		fprintf(stderr, "ahn_peer: %s\n", rt.error().c_str());
		return 2;
	}
	const int rc = receiver ? run_receiver(o, rt) : run_sender(o, rt);
	rt.fini();
	return rc;
}
