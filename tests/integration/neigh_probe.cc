/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * neigh_probe: the soft driver's ARP and ND against the Linux kernel (run by
 * tests/integration/netns_neigh.sh, which owns the namespace and the veth).
 *
 *   1. opens a soft device on net_af_packet over --iface, with no static
 *      neighbour, and resolves --peer4 by ARP and --peer6 by ND: both must
 *      give --expect (the kernel's interface MAC);
 *   2. sends one RoCEv2 datagram per family (payload byte 0 = 1) that the
 *      script's UDP listener in the namespace logs;
 *   3. writes --ready and waits: the script changes the kernel's MAC to
 *      --new-mac; the short TTL (--ttl-ms) makes the driver re-resolve in
 *      the background, and both live AVs must move to the new MAC in place
 *      (same handles);
 *   4. sends one more datagram per family (byte 0 = 2): only frames to the
 *      new MAC reach the kernel's socket.
 *
 * Every wait is bounded. Exit 0 when everything held, 1 otherwise, 2 for a
 * usage or set-up error.
 */
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <unistd.h>

#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "tool_cpu.h"
#include "soft_device.h"

using namespace rdgram;
using namespace rdgram::soft;

namespace {

struct options {
	std::string iface, ready;
	wire::gid ip4{}, peer4{}, ip6{}, peer6{};
	rte_ether_addr expect{}, new_mac{};
	uint32_t ttl_ms = 300;
	double timeout_s = 15;
};

double now_s() { return double(rte_get_tsc_cycles()) / double(rte_get_tsc_hz()); }

std::string mac_str(const uint8_t *m)
{
	char b[32];
	snprintf(b, sizeof(b), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
	return b;
}

bool parse(int argc, char **argv, options &o)
{
	bool have[8] = {};
	for (int i = 1; i + 1 < argc; i += 2) {
		const std::string k = argv[i], v = argv[i + 1];
		bool ok = true;
		if (k == "--iface")
			o.iface = v, have[0] = true;
		else if (k == "--ip4")
			ok = parse_ip(v, &o.ip4) && o.ip4.is_v4_mapped(), have[1] = true;
		else if (k == "--peer4")
			ok = parse_ip(v, &o.peer4) && o.peer4.is_v4_mapped(), have[2] = true;
		else if (k == "--ip6")
			ok = parse_ip(v, &o.ip6) && !o.ip6.is_v4_mapped(), have[3] = true;
		else if (k == "--peer6")
			ok = parse_ip(v, &o.peer6) && !o.peer6.is_v4_mapped(), have[4] = true;
		else if (k == "--expect")
			ok = parse_mac(v, &o.expect), have[5] = true;
		else if (k == "--new-mac")
			ok = parse_mac(v, &o.new_mac), have[6] = true;
		else if (k == "--ready")
			o.ready = v, have[7] = true;
		else if (k == "--ttl-ms")
			o.ttl_ms = uint32_t(atoi(v.c_str()));
		else if (k == "--timeout")
			o.timeout_s = atof(v.c_str());
		else
			ok = false;
		if (!ok) {
			fprintf(stderr, "neigh_probe: bad option %s %s\n", k.c_str(), v.c_str());
			return false;
		}
	}
	for (bool h : have)
		if (!h) {
			fprintf(stderr, "usage: neigh_probe --iface IF --ip4 A --peer4 B --ip6 A6 --peer6 B6 "
					"--expect MAC --new-mac MAC --ready FILE [--ttl-ms N] [--timeout S]\n");
			return false;
		}
	return o.ttl_ms > 0;
}

struct probe {
	runtime &rt;
	soft_device &dev;
	soft_queue &q;
	unsigned tid;
	uint32_t qpn = 0x42, qkey = 0x11111111;

	/* One turn of the poll loop: queue 0 must be polled, it carries the
	 * control thread's ARP/ND frames both ways. */
	void pump()
	{
		recv_wc wc[32];
		uint16_t n = q.rx_burst(wc, 32);
		for (uint16_t i = 0; i < n; i++)
			rte_pktmbuf_free(wc[i].mbuf);
		q.tx_flush();
		rte_rcu_qsbr_quiescent(rt.qsbr(), tid);
		rte_delay_us_block(100);
	}
	int prepare(const ibv_ah_attr &a)
	{
		int rc = -1;
		rt.ctl().call([&] { rc = dev.prepare_ah(a); });
		return rc;
	}
	neigh_stats stats()
	{
		neigh_stats s{};
		rt.ctl().call([&] { s = dev.neigh_stats(); });
		return s;
	}
	/* prepare_ah until settled; then create_ah. */
	ah_handle resolve(const wire::gid &peer, double timeout_s, const char *what)
	{
		ibv_ah_attr a{};
		a.is_global = 1;
		a.port_num = 1;
		a.grh.hop_limit = 64;
		a.grh.sgid_index = peer.is_v4_mapped() ? 0 : 1;
		memcpy(a.grh.dgid.raw, peer.raw, 16);
		const double t0 = now_s();
		int rc = prepare(a);
		while (rc == EINPROGRESS && now_s() - t0 < timeout_s) {
			for (int i = 0; i < 10; i++)
				pump();
			rc = prepare(a);
		}
		if (rc != 0) {
			fprintf(stderr, "FAIL: %s: prepare_ah gave %s after %.2f s\n", what, strerror(rc), now_s() - t0);
			return ah_null;
		}
		int err = 0;
		ah_handle h = ah_null;
		rt.ctl().call([&] { h = dev.create_ah(a, &err); });
		if (err != 0)
			fprintf(stderr, "FAIL: %s: create_ah: %s\n", what, strerror(err));
		else
			printf("%s: resolved in %.1f ms\n", what, (now_s() - t0) * 1e3);
		return h;
	}
	const uint8_t *av_mac(ah_handle h) { return dev.ahs().lookup(h) ? dev.ahs().lookup(h)->hdr : nullptr; }
	void send(ah_handle h, uint8_t phase)
	{
		uint8_t b[16]{};
		b[0] = phase;
		send_wr wr{h, 1, 0x11111111, nullptr, b, sizeof(b), 0, send_inline};
		const double t0 = now_s();
		while (q.tx_burst(&wr, 1) == 0 && now_s() - t0 < 1)
			pump();
		for (int i = 0; i < 20; i++)
			pump();
	}
};

int run(const options &o, runtime &rt)
{
	uint16_t port;
	if (rte_eth_dev_get_port_by_name("net_af_packet0", &port) != 0) {
		fprintf(stderr, "neigh_probe: no net_af_packet0 port (is the vdev argument right?)\n");
		return 2;
	}
	soft_device dev;
	soft_config c;
	c.port_id = port;
	c.addresses = {o.ip4, o.ip6};
	c.resolve = true;
	c.neigh_ttl_ms = o.ttl_ms;
	c.neigh_retry_ms = 100;
	c.neigh_retries = 3;
	c.neigh_fail_hold_ms = 500;
	c.nb_mbufs = 2047;
	c.qsbr = rt.qsbr();
	if (int rc = dev.open(c); rc != 0) {
		fprintf(stderr, "neigh_probe: open: %s\n", dev.error().c_str());
		return 2;
	}
	soft_queue q;
	dev.create_queue({.index = 0}, q);
	q.add_qp(0x42, 0x11111111);
	printf("rdgram on %s, MAC %s\n", o.iface.c_str(), mac_str(dev.mac().addr_bytes).c_str());
	rt.ctl().add_poller(&soft_device::control_poller, &dev);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(rt.qsbr(), tid);
	probe p{rt, dev, q, tid};
	bool ok = true;

	ah_handle h4 = p.resolve(o.peer4, o.timeout_s, "ARP");
	ah_handle h6 = p.resolve(o.peer6, o.timeout_s, "ND");
	const ah_handle hs[2] = {h4, h6};
	const char *fam[2] = {"ARP", "ND"};
	const soft_av *avs[2] = {nullptr, nullptr};
	for (int i = 0; i < 2; i++) {
		if (hs[i] == ah_null) {
			ok = false;
			continue;
		}
		avs[i] = dev.ahs().lookup(hs[i]);
		const uint8_t *m = p.av_mac(hs[i]);
		printf("%s: kernel MAC %s (expected %s)\n", fam[i], mac_str(m).c_str(), mac_str(o.expect.addr_bytes).c_str());
		if (memcmp(m, o.expect.addr_bytes, 6) != 0) {
			fprintf(stderr, "FAIL: %s resolved the wrong MAC\n", fam[i]);
			ok = false;
		}
		p.send(hs[i], 1);
	}

	if (ok) {
		/* Hand over to the script, which moves the kernel to the new MAC,
		 * then wait for the background re-resolution to follow it. */
		if (FILE *f = fopen(o.ready.c_str(), "w"))
			fclose(f);
		const double t0 = now_s();
		bool moved[2] = {false, false};
		while (!(moved[0] && moved[1]) && now_s() - t0 < o.timeout_s) {
			for (int i = 0; i < 2; i++) {
				const uint8_t *m = p.av_mac(hs[i]);
				moved[i] = m != nullptr && memcmp(m, o.new_mac.addr_bytes, 6) == 0;
			}
			p.pump();
		}
		for (int i = 0; i < 2; i++) {
			const uint8_t *m = p.av_mac(hs[i]);
			printf("%s: after the change: %s after %.2f s\n", fam[i], m ? mac_str(m).c_str() : "(stale handle)",
			       now_s() - t0);
			if (!moved[i]) {
				fprintf(stderr, "FAIL: %s: the AV did not move to %s\n", fam[i],
					mac_str(o.new_mac.addr_bytes).c_str());
				ok = false;
			}
			if (dev.ahs().lookup(hs[i]) != avs[i]) {
				fprintf(stderr, "FAIL: %s: the handle changed or went stale\n", fam[i]);
				ok = false;
			}
			p.send(hs[i], 2);
		}
	}

	const neigh_stats s = p.stats();
	printf("neigh:");
	s.for_each([](const char *name, uint64_t v) {
		if (v != 0)
			printf(" %s=%lu", name, (unsigned long)v);
	});
	printf("\nqueue:");
	q.counters().for_each([](const xstat_name &n, uint64_t v) {
		if (v != 0)
			printf(" %s=%lu", n.name, (unsigned long)v);
	});
	printf("\n");
	if (s.mac_changes < 2 && ok) {
		fprintf(stderr, "FAIL: mac_changes=%lu, expected one per family\n", (unsigned long)s.mac_changes);
		ok = false;
	}
	if (s.bad_frames != 0) {
		fprintf(stderr, "FAIL: the kernel's frames counted as malformed (%lu)\n", (unsigned long)s.bad_frames);
		ok = false;
	}

	rt.ctl().call([&] {
		for (ah_handle h : hs)
			if (h != ah_null)
				dev.destroy_ah(h);
	});
	poll_thread_offline(rt.qsbr(), tid);
	rt.ctl().remove_poller(&soft_device::control_poller, &dev);
	dev.close();
	fflush(stdout);
	return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
	options o;
	if (!parse(argc, argv, o))
		return 2;
	/* One lcore (the first CPU we may use): this thread polls; the control
	 * thread runs off it. */
	const std::string lcore = test::allowed_cpu();
	std::vector<std::string> eal = default_eal_args(256, lcore);
	eal.push_back("--vdev=net_af_packet0,iface=" + o.iface + ",qpairs=1,blocksz=4096,framesz=2048,framecnt=512");
	eal.push_back("--log-level=pmd.net.af_packet:warning");
	runtime rt;
	if (rt.init(eal, argv[0]) != 0) {
		fprintf(stderr, "neigh_probe: %s\n", rt.error().c_str());
		return 2;
	}
	int rc = run(o, rt);
	rt.fini();
	return rc;
}
