/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The soft port's TOML keys (mtu, pkey, max_ah, resolve, neigh_*) as every
 * app reads them through drivers/soft/soft_config_toml.h: the same ranges
 * and the same "file:line:column: key '...': expected ..." error text in
 * rdgram-perf's [port], rdgram-fwd's [[port]], rdgram-coll's [job] mtu and
 * rdgram-ah's [ah] max_ah and neigh_ttl_ms, values applied, and the keys
 * an app has no use for refused.
 */
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

#include "ah_app.h"
#include "coll_config.h"
#include "fwd_config.h"
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

/* rdgram-coll's [job] mtu and rdgram-ah's [ah] max_ah and neigh_ttl_ms:
 * the soft port's ranges and text under those apps' tables. */
TEST(SoftPortConfig, OtherAppsTables)
{
	auto coll = [](const std::string &body) {
		return error_of("[job]\n" + body, [](const std::string &p) {
			coll::coll_config c;
			coll::load_coll_config(p, c);
		});
	};
	EXPECT_EQ(coll("mtu = 128\n"), "F:2:7: key 'job.mtu': expected an integer from 256 to 4096, got 128");
	EXPECT_EQ(coll("mtu = 1500\n"), "F:2:7: key 'job.mtu': expected one of 256, 512, 1024, 2048, 4096, got 1500");
	EXPECT_EQ(coll("mtu = 1024\n"), "");
	auto ah = [](const std::string &body) {
		return error_of("[ah]\n" + body, [](const std::string &p) {
			ahtool::ah_app_config c;
			ahtool::load_ah_config(p, c);
		});
	};
	EXPECT_EQ(ah("max_ah = 0\n"), "F:2:10: key 'ah.max_ah': expected an integer from 1 to 16777216, got 0");
	EXPECT_EQ(ah("neigh_ttl_ms = 0\n"),
		  "F:2:16: key 'ah.neigh_ttl_ms': expected an integer from 1 to 86400000, got 0");
	EXPECT_EQ(ah("max_ah = 1024\nneigh_ttl_ms = 10\n"), "");
	/* 802.1Q and ECN: the soft port's keys under those tables too. */
	EXPECT_EQ(coll("vlan = 4095\n"), "F:2:8: key 'job.vlan': expected an integer from 1 to 4094, got 4095");
	EXPECT_EQ(ah("vlan = 0\n"), "F:2:8: key 'ah.vlan': expected an integer from 1 to 4094, got 0");
	EXPECT_EQ(ah("ecn = 2\n"), "F:2:7: key 'ah.ecn': expected true or false, got 2");
	coll::coll_config cc;
	EXPECT_EQ(error_of("[job]\nvlan = 78\necn = true\n", [&](const std::string &p) { coll::load_coll_config(p, cc); }),
		  "");
	EXPECT_EQ(cc.vlan, 78);
	EXPECT_TRUE(cc.ecn);
}

} // namespace
