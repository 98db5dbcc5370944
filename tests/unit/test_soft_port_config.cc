/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The port table ([port] or [[port]], drivers/soft/soft_config_toml.h) as
 * every app reads it: the same ranges and the same "file:line:column: key
 * '...': expected ..." error text in rdgram-perf, rdgram-fwd, rdgram-coll,
 * rdgram-mcast and rdgram-verbs' file (load_port_file), values applied,
 * renamed keys named with their new name, and rdgram-ah's [ah] keys.
 */
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>
#include <unistd.h>

#include <gtest/gtest.h>

#include "ah_app.h"
#include "coll_config.h"
#include "fwd_config.h"
#include "mcast.h"
#include "perf_config.h"
#include "rdgram/config.h"
#include "soft_config_toml.h"
#include "soft_device.h"

using namespace rdgram;

namespace {

/* Loads text with load(path) and returns the error, the file's path
 * written as "F" ("" when it loads). */
template <typename Load>
std::string error_of(const std::string &text, Load load)
{
	char path[] = "/tmp/rdgram_softcfg_XXXXXX";
	const int fd = mkstemp(path);
	EXPECT_GE(fd, 0);
	FILE *f = fdopen(fd, "w");
	fputs(text.c_str(), f);
	fclose(f);
	std::string e;
	try {
		load(path);
	} catch (const config_error &x) {
		e = x.what();
	}
	unlink(path);
	for (size_t at; (at = e.find(path)) != std::string::npos;)
		e.replace(at, strlen(path), "F");
	return e;
}

std::string perf_err(const std::string &port_body)
{
	return error_of("[port]\n" + port_body, [](const std::string &p) {
		perf::perf_config c;
		perf::load_perf_config(p, c);
	});
}

std::string fwd_err(const std::string &port_body)
{
	return error_of("[[port]]\n" + port_body, [](const std::string &p) {
		fwd::fwd_config c;
		fwd::load_fwd_config(p, c);
	});
}

/* rdgram-fwd's [[port]] is an array of tables: its keys are port[0].X. */
std::string in_fwd(std::string want)
{
	for (size_t at; (at = want.find("'port.")) != std::string::npos;)
		want.replace(at, 6, "'port[0].");
	return want;
}

/* The same bad values in rdgram-perf's [port] and rdgram-fwd's [[port]]:
 * the text each app gave before the soft driver read them (but for the
 * key's path). */
TEST(SoftPortConfig, RangesAndErrorsAlikeInEveryPort)
{
	struct bad {
		const char *body, *perf;
	} cases[] = {
		{"mtu = 1500\n", "F:2:7: key 'port.mtu': expected one of 256, 512, 1024, 2048, 4096, got 1500"},
		{"mtu = 128\n", "F:2:7: key 'port.mtu': expected an integer from 256 to 4096, got 128"},
		{"mtu = 8192\n", "F:2:7: key 'port.mtu': expected an integer from 256 to 4096, got 8192"},
		{"mtu = \"4096\"\n", "F:2:7: key 'port.mtu': expected an integer from 256 to 4096, got \"4096\""},
		{"pkey = 0\n", "F:2:8: key 'port.pkey': expected an integer from 1 to 65535, got 0"},
		{"pkey = 0x10000\n", "F:2:8: key 'port.pkey': expected an integer from 1 to 65535, got 65536"},
		{"max_ah = 0\n", "F:2:10: key 'port.max_ah': expected an integer from 1 to 16777216, got 0"},
		{"max_ah = 16777217\n",
		 "F:2:10: key 'port.max_ah': expected an integer from 1 to 16777216, got 16777217"},
		{"resolve = 1\n", "F:2:11: key 'port.resolve': expected true or false, got 1"},
		{"vlan = 0\n", "F:2:8: key 'port.vlan': expected an integer from 1 to 4094, got 0"},
		{"vlan = 4095\n", "F:2:8: key 'port.vlan': expected an integer from 1 to 4094, got 4095"},
		{"ecn = \"on\"\n", "F:2:7: key 'port.ecn': expected true or false, got \"on\""},
		{"mtus = 4096\n", "F:2:1: unknown key 'port.mtus'"},
	};
	for (const auto &b : cases) {
		EXPECT_EQ(perf_err(b.body), b.perf) << b.body;
		EXPECT_EQ(fwd_err(b.body), in_fwd(b.perf)) << b.body;
	}
}

/* rdgram-perf's neighbour keys; rdgram-fwd, which refused them as unknown,
 * now takes them with the same ranges. */
TEST(SoftPortConfig, NeighbourKeys)
{
	struct bad {
		const char *body, *want;
	} cases[] = {
		{"neigh_ttl_ms = 0\n", "F:2:16: key 'port.neigh_ttl_ms': expected an integer from 1 to 86400000, got 0"},
		{"neigh_ttl_ms = 86400001\n",
		 "F:2:16: key 'port.neigh_ttl_ms': expected an integer from 1 to 86400000, got 86400001"},
		{"neigh_retry_ms = 60001\n",
		 "F:2:18: key 'port.neigh_retry_ms': expected an integer from 1 to 60000, got 60001"},
		{"neigh_retries = 0\n", "F:2:17: key 'port.neigh_retries': expected an integer from 1 to 100, got 0"},
		{"neigh_retries = 101\n", "F:2:17: key 'port.neigh_retries': expected an integer from 1 to 100, got 101"},
		{"neigh_fail_hold_ms = -1\n",
		 "F:2:22: key 'port.neigh_fail_hold_ms': expected an integer from 0 to 86400000, got -1"},
	};
	for (const auto &b : cases) {
		EXPECT_EQ(perf_err(b.body), b.want) << b.body;
		EXPECT_EQ(fwd_err(b.body), in_fwd(b.want)) << b.body;
	}
}

TEST(SoftPortConfig, ValuesApplied)
{
	const std::string body = "mtu = 1024\npkey = 0x8001\nmax_ah = 4096\nresolve = false\n"
				 "neigh_ttl_ms = 500\nneigh_retry_ms = 20\nneigh_retries = 7\nneigh_fail_hold_ms = 0\n"
				 "vlan = 4094\necn = true\n";
	perf::perf_config pc;
	EXPECT_EQ(error_of("[port]\n" + body, [&](const std::string &p) { perf::load_perf_config(p, pc); }), "");
	perf::select_port(pc); /* the side's port table: its settings are pc's */
	fwd::fwd_config fc;
	EXPECT_EQ(error_of("[[port]]\n" + body, [&](const std::string &p) { fwd::load_fwd_config(p, fc); }), "");
	ASSERT_EQ(fc.ports.size(), 1u);
	const soft::soft_port_params *got[] = {&pc, &fc.ports[0]};
	for (const soft::soft_port_params *g : got) {
		EXPECT_EQ(g->mtu, 1024u);
		EXPECT_EQ(g->pkey, 0x8001);
		EXPECT_EQ(g->max_ah, 4096u);
		EXPECT_FALSE(g->resolve);
		EXPECT_EQ(g->neigh_ttl_ms, 500u);
		EXPECT_EQ(g->neigh_retry_ms, 20u);
		EXPECT_EQ(g->neigh_retries, 7u);
		EXPECT_EQ(g->neigh_fail_hold_ms, 0u);
		EXPECT_EQ(g->vlan, 4094);
		EXPECT_TRUE(g->ecn);
	}
	/* Absent keys: the soft driver's defaults, in every app. */
	const soft::soft_config dflt;
	const soft::soft_port_params fresh[] = {perf::perf_config(), fwd::port_config()};
	for (const auto &f : fresh) {
		EXPECT_EQ(f.mtu, dflt.mtu);
		EXPECT_EQ(f.pkey, dflt.pkey);
		EXPECT_EQ(f.max_ah, dflt.max_ah);
		EXPECT_EQ(f.resolve, dflt.resolve);
		EXPECT_EQ(f.neigh_ttl_ms, dflt.neigh_ttl_ms);
		EXPECT_EQ(f.neigh_retry_ms, dflt.neigh_retry_ms);
		EXPECT_EQ(f.neigh_retries, dflt.neigh_retries);
		EXPECT_EQ(f.neigh_fail_hold_ms, dflt.neigh_fail_hold_ms);
		EXPECT_EQ(f.vlan, 0) << "untagged unless asked";
		EXPECT_FALSE(f.ecn);
	}
}

/* rdgram-coll's and rdgram-ah's [port]: the soft port's ranges and text,
 * and rdgram-ah's own default AH table. */
TEST(SoftPortConfig, OtherAppsTables)
{
	auto coll = [](const std::string &text) {
		return error_of(text, [](const std::string &p) {
			coll::coll_config c;
			coll::load_coll_config(p, c);
		});
	};
	EXPECT_EQ(coll("[port]\nmtu = 128\n"), "F:2:7: key 'port.mtu': expected an integer from 256 to 4096, got 128");
	EXPECT_EQ(coll("[port]\nmtu = 1024\n"), "");
	ahtool::ah_app_config ac;
	auto ah = [&](const std::string &text) {
		ac = ahtool::ah_app_config{};
		return error_of(text, [&](const std::string &p) { ahtool::load_ah_config(p, ac); });
	};
	EXPECT_EQ(ah("[port]\nmax_ah = 0\n"), "F:2:10: key 'port.max_ah': expected an integer from 1 to 16777216, got 0");
	EXPECT_EQ(ah("[port]\nneigh_ttl_ms = 0\n"),
		  "F:2:16: key 'port.neigh_ttl_ms': expected an integer from 1 to 86400000, got 0");
	EXPECT_EQ(ah("[port]\nvlan = 0\n"), "F:2:8: key 'port.vlan': expected an integer from 1 to 4094, got 0");
	EXPECT_EQ(ah("[ah]\nworkers = 1\n"), "");
	EXPECT_EQ(ac.port.max_ah, 1u << 20) << "rdgram-ah's own AH table when [port] gives none";
	EXPECT_TRUE(ac.port.devargs.empty()) << "no table: its own net_ring pair";
	EXPECT_EQ(ah("[port]\nmax_ah = 1024\nneigh_ttl_ms = 10\n"), "");
	EXPECT_EQ(ac.port.max_ah, 1024u);
	EXPECT_EQ(ac.port.neigh_ttl_ms, 10u);
	EXPECT_EQ(ah("[ah]\nto = [\"10.0.0.2\", \"fd00::2\"]\nping_qpn = 0x101\n"), "");
	ASSERT_EQ(ac.to.size(), 2u);
	EXPECT_EQ(format_gid(ac.to[1]), "fd00::2");
	EXPECT_EQ(ac.ping_qpn, 0x101u);
	EXPECT_EQ(ah("[ah]\nto = [\"239.1.1.1\"]\n"),
		  "F:2:6: key 'ah.to': expected unicast IPv4 or IPv6 addresses, got an array");
	coll::coll_config cc;
	EXPECT_EQ(error_of("[port]\nvlan = 78\necn = true\n", [&](const std::string &p) { coll::load_coll_config(p, cc); }),
		  "");
	EXPECT_EQ(cc.port.vlan, 78);
	EXPECT_TRUE(cc.port.ecn);
	EXPECT_EQ(cc.port.mtu, 2048u) << "rdgram-coll's own default MTU when [port] gives none";
}

/* One port table, written once, loaded by every app's loader. */
const char *one_port = "[[port]]\n"
		       "name = \"edge\"\n"
		       "devargs = \"net_memif0,role=server,socket=/tmp/x.sock\"\n"
		       "mac = \"02:00:00:00:00:0a\"\n"
		       "addresses = [\"10.0.0.1\", \"fd00::1\"]\n"
		       "neighbours = [{ ip = \"10.0.0.2\", mac = \"02:00:00:00:00:0b\" }]\n"
		       "vlan = 78\n"
		       "ecn = true\n"
		       "mtu = 1024\n"
		       "mbufs = 4095\n";

void expect_one_port(const soft::port_config &p)
{
	EXPECT_EQ(p.name, "edge");
	EXPECT_EQ(p.devargs, "net_memif0,role=server,socket=/tmp/x.sock");
	EXPECT_TRUE(p.set_mac);
	EXPECT_EQ(p.mac.addr_bytes[5], 0x0a);
	ASSERT_EQ(p.addresses.size(), 2u);
	EXPECT_TRUE(p.addresses[0].is_v4_mapped());
	EXPECT_FALSE(p.addresses[1].is_v4_mapped());
	ASSERT_EQ(p.neighbours.size(), 1u);
	EXPECT_EQ(p.neighbours[0].mac.addr_bytes[5], 0x0b);
	EXPECT_EQ(p.vlan, 78);
	EXPECT_TRUE(p.ecn);
	EXPECT_EQ(p.mtu, 1024u);
	EXPECT_EQ(p.nb_mbufs, 4095u);
}

/* Each app's loader on text: the error ("" when it loads) and the first
 * port table it took. */
struct app_loader {
	const char *app;
	std::function<std::string(const std::string &text, soft::port_config *)> load;
};

std::vector<app_loader> loaders()
{
	return {
		{"rdgram-perf",
		 [](const std::string &t, soft::port_config *out) {
			 perf::perf_config c;
			 std::string e = error_of(t, [&](const std::string &p) { perf::load_perf_config(p, c); });
			 c.mode = "server";
			 if (e.empty() && !c.ports.empty())
				 perf::select_port(c);
			 *out = c.port;
			 return e;
		 }},
		{"rdgram-fwd",
		 [](const std::string &t, soft::port_config *out) {
			 fwd::fwd_config c;
			 std::string e = error_of(t, [&](const std::string &p) { fwd::load_fwd_config(p, c); });
			 if (!c.ports.empty())
				 *out = c.ports[0];
			 return e;
		 }},
		{"rdgram-coll",
		 [](const std::string &t, soft::port_config *out) {
			 coll::coll_config c;
			 std::string e = error_of(t, [&](const std::string &p) { coll::load_coll_config(p, c); });
			 *out = c.port;
			 return e;
		 }},
		{"rdgram-mcast",
		 [](const std::string &t, soft::port_config *out) {
			 mcast::mcast_config c;
			 std::string e = error_of(t, [&](const std::string &p) { mcast::load_mcast_config(p, c); });
			 *out = c.port;
			 return e;
		 }},
		{"rdgram-ah",
		 [](const std::string &t, soft::port_config *out) {
			 ahtool::ah_app_config c;
			 std::string e = error_of(t, [&](const std::string &p) { ahtool::load_ah_config(p, c); });
			 *out = c.port;
			 return e;
		 }},
		{"rdgram-verbs",
		 [](const std::string &t, soft::port_config *out) {
			 soft::port_file f;
			 std::string e = error_of(t, [&](const std::string &p) {
				 f = soft::load_port_file(p, soft::verbs_port_rules());
			 });
			 if (!f.ports.empty())
				 *out = f.ports[0];
			 return e;
		 }},
	};
}

TEST(PortTable, OneTableEveryApp)
{
	for (const app_loader &l : loaders()) {
		soft::port_config p;
		std::string text = one_port;
		if (std::string(l.app) == "rdgram-fwd")
			text += "qps = [{ qpn = 0x100 }]\n";
		EXPECT_EQ(l.load(text, &p), "") << l.app;
		expect_one_port(p);
	}
}

/* The same bad table gives the same line in every app. */
TEST(PortTable, SameErrorEveryApp)
{
	const std::string base = "[[port]]\nname = \"a\"\ndevargs = \"net_ring0\"\naddresses = [\"10.0.0.1\"]\n";
	struct bad {
		std::string text, want;
	} cases[] = {
		{"[[port]]\nvdev = \"net_ring0\"\n",
		 "F:2:1: unknown key 'port[0].vdev': the port's DPDK device is 'devargs'"},
		{"[[port]]\ndevice = \"net_ring0\"\n",
		 "F:2:1: unknown key 'port[0].device': the port's DPDK device is 'devargs' ('device' names an RDMA "
		 "device, in [rdma])"},
		{"[port]\nport = \"net_ring0\"\n",
		 "F:2:1: unknown key 'port.port': the port's DPDK device is 'devargs' ('port' is an RDMA port number, "
		 "in [rdma])"},
		{base + "[[port]]\nname = \"a\"\ndevargs = \"net_ring1\"\naddresses = [\"10.0.0.2\"]\n",
		 "F:6:8: key 'port[1].name': expected a port name not used twice, got \"a\""},
		{base + "neighbours = [{ ip = \"fd00::2\", mac = \"02:00:00:00:00:02\" }]\n",
		 "F:5:22: key 'port[0].neighbours[0].ip': expected an address of a family the port has (its "
		 "addresses are IPv4 only), got \"fd00::2\""},
		{base + "addresses2 = 1\n", "F:5:1: unknown key 'port[0].addresses2'"},
		{"[[port]]\nname = \"a b\"\n",
		 "F:2:8: key 'port[0].name': expected a port name of letters, digits, '_', '-' and '.', got \"a b\""},
		{"[port]\ndevargs = \"\"\n", "F:2:11: key 'port.devargs': expected the port's DPDK device, not empty, got \"\""},
	};
	for (const bad &b : cases)
		for (const app_loader &l : loaders()) {
			soft::port_config p;
			EXPECT_EQ(l.load(b.text, &p), b.want) << l.app << ": " << b.text;
		}
}

/* rdgram-verbs' devices need devargs and addresses: the line names the key
 * and the table. */
TEST(PortTable, VerbsNeedsDevargsAndAddresses)
{
	soft::port_config p;
	const app_loader v = loaders().back();
	EXPECT_EQ(v.load("[[port]]\naddresses = [\"10.0.0.1\"]\n", &p),
		  "F:1:1: key 'port[0].devargs': expected the port's DPDK device (net_memif0,role=server,..., "
		  "net_af_packet0,iface=..., or a port given to the EAL with --vdev or -a)");
	EXPECT_EQ(v.load("[[port]]\ndevargs = \"net_ring0\"\n", &p),
		  "F:1:1: key 'port[0].addresses': expected the port's IPv4 and IPv6 addresses (its GID table)");
	EXPECT_EQ(v.load("[eal]\nargs = []\n", &p),
		  "F:1:1: no [[port]]: give one table per device, with its devargs and addresses");
	/* An app that makes its ports in another mode: the line once the mode
	 * asks for devargs. */
	EXPECT_EQ(soft::need_devargs(soft::port_config{}), "no [port] table with devargs, the port's DPDK device");
}

/* Keys other tables used for the port: one line naming the new one. */
TEST(PortTable, OldKeysNameTheNewOnes)
{
	EXPECT_EQ(error_of("[server]\nvdev = \"net_ring0\"\n",
			   [](const std::string &p) {
				   perf::perf_config c;
				   perf::load_perf_config(p, c);
			   }),
		  "F:2:1: unknown key 'server.vdev': the port's DPDK device is 'devargs', in [port] or in a [[port]] "
		  "named after the side");
	EXPECT_EQ(error_of("[job]\nport = \"net_ring0\"\n",
			   [](const std::string &p) {
				   coll::coll_config c;
				   coll::load_coll_config(p, c);
			   }),
		  "F:2:1: unknown key 'job.port': the port's DPDK device is 'devargs', in [port]");
	EXPECT_EQ(error_of("[job]\nmtu = 1024\n",
			   [](const std::string &p) {
				   coll::coll_config c;
				   coll::load_coll_config(p, c);
			   }),
		  "F:2:1: unknown key 'job.mtu': the port's settings are in [port] (mtu)");
	EXPECT_EQ(error_of("[mcast]\naddresses = [\"10.0.0.1\"]\n",
			   [](const std::string &p) {
				   mcast::mcast_config c;
				   mcast::load_mcast_config(p, c);
			   }),
		  "F:2:1: unknown key 'mcast.addresses': the port's settings are in [port] (addresses)");
	/* rdgram-ah's [ah] had the port's settings before [port]. */
	for (const char *k : {"max_ah = 1024", "neigh_ttl_ms = 10", "vlan = 78", "ecn = true"}) {
		const std::string key(k, strcspn(k, " "));
		EXPECT_EQ(error_of(std::string("[ah]\n") + k + "\n",
				   [](const std::string &p) {
					   ahtool::ah_app_config c;
					   ahtool::load_ah_config(p, c);
				   }),
			  "F:2:1: unknown key 'ah." + key + "': the port's settings are in [port] (" + key + ")");
	}
	EXPECT_EQ(error_of("[ah]\ndevargs = \"net_ring0\"\n",
			   [](const std::string &p) {
				   ahtool::ah_app_config c;
				   ahtool::load_ah_config(p, c);
			   }),
		  "F:2:1: unknown key 'ah.devargs': the port's DPDK device is 'devargs', in [port]");
}

/* rdgram-perf: each side runs on the [[port]] named after it, else the
 * first; its MAC and address of the peer's family are the side's. */
TEST(PortTable, PerfSidePorts)
{
	perf::perf_config c;
	ASSERT_EQ(error_of("[[port]]\nname = \"server\"\ndevargs = \"net_memif0,role=server\"\n"
			   "[[port]]\nname = \"client\"\ndevargs = \"net_memif0,role=client\"\n"
			   "mac = \"02:00:00:00:00:0c\"\naddresses = [\"fd00::9\", \"10.0.0.9\"]\n",
			   [&](const std::string &p) { perf::load_perf_config(p, c); }),
		  "");
	c.mode = "client";
	perf::select_port(c);
	EXPECT_EQ(c.port.devargs, "net_memif0,role=client");
	EXPECT_EQ(c.client.mac.addr_bytes[5], 0x0c);
	EXPECT_EQ(format_gid(c.client.address), "10.0.0.9") << "the address of the server's family";
	perf::perf_config s = c;
	s.mode = "server";
	perf::select_port(s);
	EXPECT_EQ(s.port.devargs, "net_memif0,role=server");
}

} // namespace
