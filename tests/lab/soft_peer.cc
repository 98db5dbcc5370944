/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * soft_peer: the host's end of the wire tests against rxe
 * (tests/lab/soft_rxe.sh): rdgram's soft RoCEv2 driver on the lab's tap,
 * sending to a QP of rxe in the guest (tests/lab/verbs_peer.cc) from an
 * IPv4 and an IPv6 address, with bad datagrams among the good ones, and
 * checking what comes back.
 *
 *   soft_peer --port DEVARGS --mac MAC --ip4 A --ip6 A6 --peer-mac MAC
 *             --peer4 B --peer6 B6 --ready FILE --count N [--echo] [--bad]
 *             [--timeout S]
 *
 * DEVARGS is the DPDK port to the guest: net_af_packet on the lab's tap, or
 * net_vhost on QEMU's vhost-user socket (no kernel networking on the host
 * side at all). It starts the port, then waits, polling, for FILE
 * (verbs_peer's "qpn 0x... qkey 0x..."), resolves both
 * peers by ARP and ND through the driver (the answers must carry
 * --peer-mac), then per family sends N good datagrams (tag 0x60 + i in
 * byte 0, lengths up to the rxe MTU). With --bad, between the first five
 * good ones go one of each kind rxe must drop: a wrong ICRC (tag 0xb1), a
 * wrong Q_Key (0xb2), a wrong P_Key (0xb3) and an unknown destination QPN
 * (0xb4). With --echo every good datagram must come back, byte for byte,
 * from the peer's QPN and the peer's GID of that family to ours.
 *
 * The soft device sends through a net_ring pair whose far end this program
 * forwards to and from that port (a bump in the wire): that is
 * where the ICRC of a 0xb1 frame is spoiled after the driver computed it.
 * The wrong P_Key comes from a second soft device configured with that
 * partition (static neighbours, send only). Frames from the tap that are
 * not for our MAC (the kernel's own TCP on the tap) are not passed in.
 *
 * Exit 0 when everything held, 1 otherwise, 2 for a usage or set-up error.
 */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_ring.h>
#include <rte_udp.h>
#include <unistd.h>

#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "tool_cpu.h"
#include "soft_device.h"

using namespace rdgram;
using namespace rdgram::soft;

namespace {

constexpr uint32_t our_qpn = 0x100;
constexpr uint32_t our_qkey = 0x11111111;
constexpr uint16_t bad_pkey = 0x9234; /* not the default partition (0x7fff/0xffff) */
constexpr uint32_t no_such_qpn = 0xfffff0;
enum : uint8_t { tag_good = 0x60, tag_icrc = 0xb1, tag_qkey = 0xb2, tag_pkey = 0xb3, tag_qpn = 0xb4 };

struct options {
	std::string port, ready;
	rte_ether_addr mac{}, peer_mac{};
	wire::gid ip4{}, ip6{}, peer4{}, peer6{};
	unsigned count = 8;
	bool echo = false, bad = false;
	double timeout_s = 30;
};

double now_s() { return double(rte_get_timer_cycles()) / double(rte_get_timer_hz()); }

bool parse(int argc, char **argv, options &o)
{
	unsigned have = 0;
	for (int i = 1; i < argc; i++) {
		const std::string k = argv[i];
		if (k == "--echo" || k == "--bad") {
			(k == "--echo" ? o.echo : o.bad) = true;
			continue;
		}
		if (i + 1 >= argc)
			return false;
		const std::string v = argv[++i];
		bool ok = true;
		if (k == "--port")
			o.port = v, have |= 1;
		else if (k == "--mac")
			ok = parse_mac(v, &o.mac), have |= 2;
		else if (k == "--ip4")
			ok = parse_ip(v, &o.ip4) && o.ip4.is_v4_mapped(), have |= 4;
		else if (k == "--ip6")
			ok = parse_ip(v, &o.ip6) && !o.ip6.is_v4_mapped(), have |= 8;
		else if (k == "--peer-mac")
			ok = parse_mac(v, &o.peer_mac), have |= 16;
		else if (k == "--peer4")
			ok = parse_ip(v, &o.peer4) && o.peer4.is_v4_mapped(), have |= 32;
		else if (k == "--peer6")
			ok = parse_ip(v, &o.peer6) && !o.peer6.is_v4_mapped(), have |= 64;
		else if (k == "--ready")
			o.ready = v, have |= 128;
		else if (k == "--count")
			o.count = unsigned(atoi(v.c_str()));
		else if (k == "--timeout")
			o.timeout_s = atof(v.c_str());
		else
			ok = false;
		if (!ok) {
			fprintf(stderr, "soft_peer: bad option %s %s\n", k.c_str(), v.c_str());
			return false;
		}
	}
	return have == 255 && o.count >= 5 && o.count <= 200;
}

/* A net_ring pair: the driver's end and the wire's end. */
struct ring_pair {
	uint16_t dev_port = 0, wire_port = 0;
	int make(const char *name)
	{
		char a[32], b[32];
		snprintf(a, sizeof(a), "%s_a", name);
		snprintf(b, sizeof(b), "%s_b", name);
		rte_ring *r0 = rte_ring_create(a, 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
		rte_ring *r1 = rte_ring_create(b, 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (r0 == nullptr || r1 == nullptr)
			return -1;
		snprintf(a, sizeof(a), "%s_dev", name);
		snprintf(b, sizeof(b), "%s_wire", name);
		const int d = rte_eth_from_rings(a, &r0, 1, &r1, 1, SOCKET_ID_ANY);
		const int w = rte_eth_from_rings(b, &r1, 1, &r0, 1, SOCKET_ID_ANY);
		if (d < 0 || w < 0)
			return -1;
		dev_port = uint16_t(d);
		wire_port = uint16_t(w);
		return 0;
	}
};

/* The RoCEv2 payload's first byte of an Ethernet frame, or -1. */
int roce_tag(const uint8_t *f, uint32_t len, uint32_t *icrc_off)
{
	if (len < 14)
		return -1;
	const uint16_t et = uint16_t(f[12] << 8 | f[13]);
	uint32_t l4;
	if (et == RTE_ETHER_TYPE_IPV4 && len >= 14 + 20 && f[14 + 9] == IPPROTO_UDP)
		l4 = 14 + uint32_t(f[14] & 0xf) * 4;
	else if (et == RTE_ETHER_TYPE_IPV6 && len >= 14 + 40 && f[14 + 6] == IPPROTO_UDP)
		l4 = 14 + 40;
	else
		return -1;
	if (len < l4 + 8 + 12 + 8 + 1 + 4 || f[l4 + 2] != 0x12 || f[l4 + 3] != 0xb7) /* UDP 4791 */
		return -1;
	*icrc_off = len - 4;
	return f[l4 + 8 + 12 + 8];
}

struct peer {
	runtime &rt;
	const options &o;
	uint16_t afp;
	ring_pair good, badp;
	soft_device dev, pdev;
	soft_queue q, pq;
	unsigned tid = 0;
	uint64_t from_tap = 0, to_tap = 0, not_ours = 0, spoiled = 0;

	/* One turn: the bump in the wire both ways, both queues. */
	void pump(std::vector<recv_wc> *got = nullptr)
	{
		rte_mbuf *m[32];
		uint16_t n = rte_eth_rx_burst(afp, 0, m, 32);
		uint16_t keep = 0;
		for (uint16_t i = 0; i < n; i++) {
			const auto *e = rte_pktmbuf_mtod(m[i], const rte_ether_hdr *);
			if (rte_is_same_ether_addr(&e->dst_addr, &o.mac) || rte_is_multicast_ether_addr(&e->dst_addr))
				m[keep++] = m[i];
			else {
				not_ours++;
				rte_pktmbuf_free(m[i]);
			}
		}
		from_tap += keep;
		uint16_t sent = rte_eth_tx_burst(good.wire_port, 0, m, keep);
		for (uint16_t i = sent; i < keep; i++)
			rte_pktmbuf_free(m[i]);
		for (uint16_t port : {good.wire_port, badp.wire_port}) {
			n = rte_eth_rx_burst(port, 0, m, 32);
			for (uint16_t i = 0; i < n; i++) {
				uint32_t off = 0;
				auto *f = rte_pktmbuf_mtod(m[i], uint8_t *);
				if (roce_tag(f, m[i]->data_len, &off) == tag_icrc) {
					f[off + 3] ^= 0x01;
					spoiled++;
				}
			}
			sent = rte_eth_tx_burst(afp, 0, m, n);
			to_tap += sent;
			for (uint16_t i = sent; i < n; i++)
				rte_pktmbuf_free(m[i]);
		}
		recv_wc wc[32];
		n = q.rx_burst(wc, 32);
		for (uint16_t i = 0; i < n; i++) {
			if (got != nullptr)
				got->push_back(wc[i]);
			else
				rte_pktmbuf_free(wc[i].mbuf);
		}
		q.tx_flush();
		pq.tx_flush();
		rte_rcu_qsbr_quiescent(rt.qsbr(), tid);
	}
	ah_handle resolve(soft_device &d, const wire::gid &to, uint8_t sgid_index, const char *what)
	{
		ibv_ah_attr a{};
		a.is_global = 1;
		a.port_num = 1;
		a.grh.hop_limit = 64;
		a.grh.sgid_index = sgid_index;
		memcpy(a.grh.dgid.raw, to.raw, 16);
		const double t0 = now_s();
		int rc = -1;
		rt.ctl().call([&] { rc = d.prepare_ah(a); });
		while (rc == EINPROGRESS && now_s() - t0 < o.timeout_s) {
			for (int i = 0; i < 20; i++) {
				pump();
				rte_delay_us_block(50);
			}
			rt.ctl().call([&] { rc = d.prepare_ah(a); });
		}
		if (rc != 0) {
			fprintf(stderr, "FAIL: %s: neighbour resolution gave %s\n", what, strerror(rc));
			return ah_null;
		}
		int err = 0;
		ah_handle h = ah_null;
		rt.ctl().call([&] { h = d.create_ah(a, &err); });
		if (err != 0) {
			fprintf(stderr, "FAIL: %s: create_ah: %s\n", what, strerror(err));
			return ah_null;
		}
		const soft_av *av = d.ahs().lookup(h);
		if (av == nullptr || memcmp(av->hdr, o.peer_mac.addr_bytes, 6) != 0) {
			fprintf(stderr, "FAIL: %s: resolved to another MAC than the guest's\n", what);
			return ah_null;
		}
		printf("%s: resolved in %.1f ms\n", what, (now_s() - t0) * 1e3);
		return h;
	}
	bool send(soft_queue &sq, ah_handle h, uint32_t qpn, uint32_t qkey, const std::vector<uint8_t> &pay)
	{
		rte_mbuf *m = rte_pktmbuf_alloc(dev.mempool());
		if (m == nullptr)
			return false;
		memcpy(rte_pktmbuf_append(m, uint16_t(pay.size())), pay.data(), pay.size());
		send_wr w{h, qpn, qkey, m, nullptr, 0, 0, 0};
		const double t0 = now_s();
		while (sq.tx_burst(&w, 1) == 0) {
			pump();
			if (now_s() - t0 > 1) {
				rte_pktmbuf_free(m);
				return false;
			}
		}
		pump();
		return true;
	}
};

std::vector<uint8_t> payload(uint8_t tag, unsigned i, uint32_t mtu)
{
	const size_t len = 16 + (size_t(i) * 197) % (mtu - 16);
	std::vector<uint8_t> p(len);
	for (size_t k = 0; k < len; k++)
		p[k] = uint8_t(k * 7 + i);
	p[0] = tag;
	p[1] = uint8_t(i);
	return p;
}

/* verbs_peer's ready file, once it exists (it is renamed into place
 * whole). */
bool read_ready(const std::string &path, uint32_t *qpn, uint32_t *qkey)
{
	FILE *f = fopen(path.c_str(), "r");
	if (f == nullptr)
		return false;
	const int n = fscanf(f, "qpn %x qkey %x", qpn, qkey);
	fclose(f);
	return n == 2;
}

int run(const options &o, runtime &rt)
{
	const std::string name = o.port.substr(0, o.port.find(','));
	uint16_t afp;
	if (rte_eth_dev_get_port_by_name(name.c_str(), &afp) != 0) {
		fprintf(stderr, "soft_peer: no port %s\n", name.c_str());
		return 2;
	}
	peer p{rt, o, afp, {}, {}, {}, {}, {}, {}};
	if (p.good.make("sp_good") != 0 || p.badp.make("sp_pkey") != 0) {
		fprintf(stderr, "soft_peer: cannot make the net_ring pairs\n");
		return 2;
	}
	/* The tap's port and the wire ends of the rings: one queue each. */
	rte_mempool *tap_mp = rte_pktmbuf_pool_create("sp_tap", 4095, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
	const auto start = [tap_mp](uint16_t port) {
		rte_eth_conf conf{};
		return tap_mp != nullptr && rte_eth_dev_configure(port, 1, 1, &conf) == 0 &&
		       rte_eth_rx_queue_setup(port, 0, 512, SOCKET_ID_ANY, nullptr, tap_mp) == 0 &&
		       rte_eth_tx_queue_setup(port, 0, 512, SOCKET_ID_ANY, nullptr) == 0 && rte_eth_dev_start(port) == 0;
	};
	if (!start(afp) || !start(p.good.wire_port) || !start(p.badp.wire_port)) {
		fprintf(stderr, "soft_peer: cannot start %s or a ring's wire end\n", o.port.c_str());
		return 2;
	}
	soft_config c;
	c.port_id = p.good.dev_port;
	c.set_mac = true;
	c.mac = o.mac;
	c.addresses = {o.ip4, o.ip6};
	c.mtu = 1024; /* rxe's on a 1500-byte link */
	c.nb_mbufs = 4095;
	c.qsbr = rt.qsbr();
	if (p.dev.open(c) != 0) {
		fprintf(stderr, "soft_peer: open: %s\n", p.dev.error().c_str());
		return 2;
	}
	soft_config pc = c;
	pc.port_id = p.badp.dev_port;
	pc.pkey = bad_pkey;
	pc.resolve = false;
	pc.neighbours = {{o.peer4, o.peer_mac}, {o.peer6, o.peer_mac}};
	pc.nb_mbufs = 1023;
	if (p.pdev.open(pc) != 0) {
		fprintf(stderr, "soft_peer: open (P_Key device): %s\n", p.pdev.error().c_str());
		return 2;
	}
	p.dev.create_queue({.index = 0}, p.q);
	p.q.add_qp(our_qpn, our_qkey);
	p.pdev.create_queue({.index = 0}, p.pq);
	p.pq.add_qp(our_qpn, our_qkey);
	rt.ctl().add_poller(&soft_device::control_poller, &p.dev);
	rt.ctl().add_poller(&soft_device::control_poller, &p.pdev);
	p.tid = rte_lcore_id();
	poll_thread_online(rt.qsbr(), p.tid);

	/* The guest's peer, polling meanwhile (ARP, ND and the link's other
	 * traffic keep being answered or counted). */
	uint32_t peer_qpn = 0, peer_qkey = 0;
	const double tw = now_s();
	while (!read_ready(o.ready, &peer_qpn, &peer_qkey)) {
		if (now_s() - tw > o.timeout_s) {
			fprintf(stderr, "FAIL: %s never appeared (the guest's verbs_peer did not start)\n",
				o.ready.c_str());
			poll_thread_offline(rt.qsbr(), p.tid);
			rt.ctl().remove_poller(&soft_device::control_poller, &p.dev);
			rt.ctl().remove_poller(&soft_device::control_poller, &p.pdev);
			p.dev.close();
			p.pdev.close();
			return 1;
		}
		for (int i = 0; i < 200; i++) {
			p.pump();
			rte_delay_us_block(100);
		}
	}
	printf("peer: QPN 0x%x Q_Key 0x%x\n", peer_qpn, peer_qkey);

	bool ok = true;
	unsigned echoes_ok = 0, echoes_bad = 0, sent_good = 0, sent_bad = 0;
	std::vector<recv_wc> got;
	const wire::gid peers[2] = {o.peer4, o.peer6};
	const wire::gid ours[2] = {o.ip4, o.ip6};
	const char *fam[2] = {"IPv4", "IPv6"};
	std::vector<ah_handle> ahs;
	for (int f = 0; f < 2 && ok; f++) {
		const ah_handle h = p.resolve(p.dev, peers[f], uint8_t(f), f == 0 ? "ARP" : "ND");
		ah_handle hp = ah_null;
		if (h != ah_null) {
			ahs.push_back(h);
			int err = 0;
			ibv_ah_attr a{};
			a.is_global = 1;
			a.port_num = 1;
			a.grh.hop_limit = 64;
			a.grh.sgid_index = uint8_t(f);
			memcpy(a.grh.dgid.raw, peers[f].raw, 16);
			rt.ctl().call([&] { hp = p.pdev.create_ah(a, &err); });
		}
		if (h == ah_null || hp == ah_null) {
			ok = false;
			break;
		}
		for (unsigned i = 0; i < o.count; i++) {
			ok &= p.send(p.q, h, peer_qpn, peer_qkey, payload(uint8_t(tag_good + (i & 0x1f)), i, 1024));
			sent_good++;
			if (!o.bad || i >= 4)
				continue;
			const uint8_t tags[4] = {tag_icrc, tag_qkey, tag_pkey, tag_qpn};
			const auto bp = payload(tags[i], i, 1024);
			switch (tags[i]) {
			case tag_icrc:
				ok &= p.send(p.q, h, peer_qpn, peer_qkey, bp);
				break;
			case tag_qkey:
				ok &= p.send(p.q, h, peer_qpn, peer_qkey ^ 0x1, bp);
				break;
			case tag_pkey:
				ok &= p.send(p.pq, hp, peer_qpn, peer_qkey, bp);
				break;
			default:
				ok &= p.send(p.q, h, no_such_qpn, peer_qkey, bp);
				break;
			}
			sent_bad++;
		}
		rt.ctl().call([&] { p.pdev.destroy_ah(hp); });
		printf("%s: sent %u good%s\n", fam[f], o.count, o.bad ? " and 4 bad (ICRC, Q_Key, P_Key, QPN)" : "");
		if (!o.echo)
			continue;
		/* Every good datagram of this family, back. */
		const double t0 = now_s();
		std::vector<bool> seen(o.count, false);
		unsigned fam_ok = 0;
		while (fam_ok < o.count && now_s() - t0 < o.timeout_s) {
			got.clear();
			p.pump(&got);
			for (const recv_wc &r : got) {
				const uint8_t *d = rte_pktmbuf_mtod_offset(r.mbuf, const uint8_t *, wire::grh_len);
				const uint32_t len = r.byte_len - wire::grh_len;
				const unsigned i = len >= 2 ? d[1] : 0;
				const auto want = payload(uint8_t(tag_good + (i & 0x1f)), i, 1024);
				const bool good = len >= 2 && i < o.count && !seen[i] && len == want.size() &&
						  memcmp(d, want.data(), len) == 0 && r.src_qp == peer_qpn &&
						  r.sgid == peers[f] && r.dgid == ours[f] && r.qp_num == our_qpn;
				if (good) {
					seen[i] = true;
					fam_ok++;
				} else {
					echoes_bad++;
					printf("bad echo: len %u src_qp 0x%x sgid %s dgid %s\n", len, r.src_qp,
					       format_gid(r.sgid).c_str(), format_gid(r.dgid).c_str());
				}
				rte_pktmbuf_free(r.mbuf);
			}
		}
		printf("%s: %u of %u echoes back, byte for byte, from QPN 0x%x and %s\n", fam[f], fam_ok, o.count,
		       peer_qpn, format_gid(peers[f]).c_str());
		echoes_ok += fam_ok;
		ok &= fam_ok == o.count;
	}
	for (int i = 0; i < 200; i++)
		p.pump();

	printf("sent %u good, %u bad; echoes back %u good, %u bad; wire: %lu frames to the tap (%lu ICRCs spoiled), "
	       "%lu from it, %lu not ours\n",
	       sent_good, sent_bad, echoes_ok, echoes_bad, (unsigned long)p.to_tap, (unsigned long)p.spoiled,
	       (unsigned long)p.from_tap, (unsigned long)p.not_ours);
	printf("counters:");
	p.q.counters().for_each([](const xstat_name &n, uint64_t v) {
		if (v != 0)
			printf(" %s=%lu", n.name, (unsigned long)v);
	});
	printf("\n");
	/* The link also carries what is not RoCE at all (the host kernel's
	 * MLD reports and router solicitations on the tap): those reasons
	 * are not losses. Every other drop is. */
	const soft::soft_counters &k = p.q.counters();
	if (k.rx_drops() - k.rx_not_ip - k.rx_not_udp - k.rx_not_roce != 0 || k.tx_drops() != 0) {
		fprintf(stderr, "FAIL: the soft driver dropped datagrams (counters above)\n");
		ok = false;
	}
	if (echoes_bad != 0)
		ok = false;
	if (o.bad && p.spoiled != 2) {
		fprintf(stderr, "FAIL: %lu ICRCs spoiled, expected 2\n", (unsigned long)p.spoiled);
		ok = false;
	}
	rt.ctl().call([&] {
		for (ah_handle h : ahs)
			p.dev.destroy_ah(h);
	});
	poll_thread_offline(rt.qsbr(), p.tid);
	rt.ctl().remove_poller(&soft_device::control_poller, &p.dev);
	rt.ctl().remove_poller(&soft_device::control_poller, &p.pdev);
	p.dev.close();
	p.pdev.close();
	for (uint16_t port : {afp, p.good.wire_port, p.badp.wire_port})
		rte_eth_dev_stop(port);
	fflush(stdout);
	return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
	options o;
	if (!parse(argc, argv, o)) {
		fprintf(stderr, "usage: soft_peer --port DEVARGS --mac MAC --ip4 A --ip6 A6 --peer-mac MAC --peer4 B "
				"--peer6 B6 --ready FILE --count N(5..200) [--echo] [--bad] [--timeout S]\n");
		return 2;
	}
	const std::string lcore = test::allowed_cpu();
	std::vector<std::string> eal = default_eal_args(512, lcore);
	eal.push_back("--vdev=" + o.port);
	eal.push_back("--log-level=pmd.net.af_packet:warning");
	eal.push_back("--log-level=pmd.net.vhost:warning");
	runtime rt;
	if (rt.init(eal, argv[0]) != 0) {
		fprintf(stderr, "soft_peer: %s\n", rt.error().c_str());
		return 2;
	}
	const int rc = run(o, rt);
	rt.fini();
	return rc;
}
