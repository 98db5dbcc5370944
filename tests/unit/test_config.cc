/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Config errors name file:line:column, the key, and what was expected.
 */
#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "perf_config.h"
#include "rdgram/config.h"

using namespace rdgram;
using namespace rdgram::perf;

namespace {

std::string write_tmp(const std::string &text)
{
	char path[] = "/tmp/rdgram_cfg_XXXXXX";
	int fd = mkstemp(path);
	EXPECT_GE(fd, 0);
	FILE *f = fdopen(fd, "w");
	fputs(text.c_str(), f);
	fclose(f);
	return path;
}

std::string error_of(const std::string &text, std::string *path_out = nullptr)
{
	std::string p = write_tmp(text);
	if (path_out)
		*path_out = p;
	perf_config c;
	try {
		load_perf_config(p, c);
	} catch (const config_error &e) {
		remove(p.c_str());
		return e.what();
	}
	remove(p.c_str());
	return "";
}

TEST(Config, ShippedExamplesLoad)
{
	for (const char *f : {"loopback.toml", "loopback-ipv6.toml", "memif-pair.toml", "perftest-peer.toml"}) {
		perf_config c;
		EXPECT_NO_THROW(load_perf_config(std::string(RDGRAM_CONFIG_DIR "/") + f, c)) << f;
	}
}

/* [rdma] oob_proto: one of the three exchanges, anything else refused. */
TEST(Config, OobProto)
{
	perf_config c;
	load_perf_config(std::string(RDGRAM_CONFIG_DIR "/") + "perftest-peer.toml", c);
	EXPECT_EQ(c.rdma.oob_proto, "perftest");
	EXPECT_EQ(c.mtu, 2048u);
	std::string p;
	EXPECT_NE(error_of("[rdma]\noob_proto = \"ib_send_lat\"\n", &p).find("oob_proto"), std::string::npos);
	EXPECT_EQ(error_of("[rdma]\noob_proto = \"ud_pingpong\"\n", &p), "");
}

/* [rdma] oob: HOST:PORT as the exchange splits it (bootstrap.h's
 * split_hostport); anything else refused at its line and column, by key. */
TEST(Config, OobHostPort)
{
	std::string p;
	for (const char *ok : {"192.0.2.1:18515", "host.example:1", "[fd00::1]:65535", "fd00::1:18515"})
		EXPECT_EQ(error_of(std::string("[rdma]\noob = \"") + ok + "\"\n", &p), "") << ok;
	for (const char *bad : {"192.0.2.1", ":18515", "host:", "host:0", "host:65536", "host:18x", "host:-1"}) {
		const std::string e = error_of(std::string("[rdma]\noob = \"") + bad + "\"\n", &p);
		EXPECT_EQ(e, p + ":2:7: key 'rdma.oob': expected \"host:port\" of the TCP exchange (e.g. "
			      "\"192.0.2.1:18515\"), got \"" + bad + "\"")
			<< bad;
	}
}

TEST(Config, ValuesApplied)
{
	std::string p = write_tmp("[perf]\nsize = 256\ntest = \"lat\"\n[server]\naddress = \"fd00::5\"\n"
				  "qpn = 0x345\n[client]\naddress = \"fd00::6\"\nmac = \"02:aa:bb:cc:dd:ee\"\n");
	perf_config c;
	load_perf_config(p, c);
	remove(p.c_str());
	EXPECT_EQ(c.size, 256u);
	EXPECT_EQ(c.test, "lat");
	EXPECT_EQ(c.server.qpn, 0x345u);
	EXPECT_FALSE(c.server.address.is_v4_mapped());
	EXPECT_EQ(c.client.mac.addr_bytes[1], 0xaa);
}

TEST(Config, UnknownKeyHasPosition)
{
	std::string p;
	std::string e = error_of("[perf]\nsize = 64\n  sise = 65\n", &p);
	EXPECT_EQ(e, p + ":3:3: unknown key 'perf.sise'");
}

TEST(Config, UnknownTable)
{
	std::string p;
	std::string e = error_of("[perf]\n[porg]\nmtu = 1\n", &p);
	EXPECT_EQ(e.rfind(p + ":2:", 0), 0u) << e;
	EXPECT_NE(e.find("unknown key 'porg'"), std::string::npos) << e;
}

TEST(Config, WrongTypeSaysExpected)
{
	std::string p;
	std::string e = error_of("[perf]\nsize = \"big\"\n", &p);
	EXPECT_EQ(e, p + ":2:8: key 'perf.size': expected an integer from 0 to 4096, got \"big\"");
}

TEST(Config, OutOfRange)
{
	std::string e = error_of("[server]\nqpn = 0x1000000\n");
	EXPECT_NE(e.find(":2:7: key 'server.qpn': expected an integer from 2 to 16777215, got 16777216"),
		  std::string::npos)
		<< e;
}

TEST(Config, BadEnum)
{
	std::string e = error_of("[perf]\nmode = \"sideways\"\n");
	EXPECT_NE(e.find("key 'perf.mode': expected one of \"loopback\", \"server\", \"client\", got \"sideways\""),
		  std::string::npos)
		<< e;
}

/* [perf] workers: poll threads a side (--workers); driver: every driver
 * apps/common/driver.h names, whether built or not (the run says). */
TEST(Config, WorkersAndDriver)
{
	std::string p = write_tmp("[perf]\nworkers = 2\ndriver = \"efa\"\n");
	perf_config c;
	EXPECT_EQ(c.workers, 1u);
	load_perf_config(p, c);
	remove(p.c_str());
	EXPECT_EQ(c.workers, 2u);
	EXPECT_EQ(c.driver, "efa");
	std::string path;
	std::string e = error_of("[perf]\nworkers = 0\n", &path);
	EXPECT_EQ(e.rfind(path + ":2:11: key 'perf.workers': expected an integer from 1 to ", 0), 0u) << e;
	e = error_of("[perf]\ndriver = \"rxe\"\n");
	EXPECT_NE(e.find("key 'perf.driver': expected one of \"soft\", \"verbs\", \"mlx5\", \"efa\", got \"rxe\""),
		  std::string::npos)
		<< e;
}

TEST(Config, BadAddressAndMac)
{
	EXPECT_NE(error_of("[server]\naddress = \"10.0.0.300\"\n").find("key 'server.address': expected an IPv4 or IPv6"),
		  std::string::npos);
	EXPECT_NE(error_of("[client]\nmac = \"02:00:00:00:00\"\n").find("key 'client.mac': expected a MAC address"),
		  std::string::npos);
	EXPECT_NE(error_of("[server]\naddress = \"239.0.0.1\"\n").find("expected a unicast"), std::string::npos);
}

TEST(Config, MixedFamiliesRefused)
{
	EXPECT_NE(error_of("[server]\naddress = \"fd00::1\"\n").find("both be IPv4 or both IPv6"), std::string::npos);
}

TEST(Config, SyntaxErrorHasPosition)
{
	std::string p;
	std::string e = error_of("[perf]\nsize = = 3\n", &p);
	EXPECT_EQ(e.rfind(p + ":2:", 0), 0u) << e;
}

TEST(Config, MissingFile)
{
	perf_config c;
	try {
		load_perf_config("/nonexistent/x.toml", c);
		FAIL();
	} catch (const config_error &e) {
		EXPECT_NE(std::string(e.what()).find("/nonexistent/x.toml: cannot open"), std::string::npos);
	}
}

TEST(Config, MtuMustBeIbSize)
{
	EXPECT_NE(error_of("[port]\nmtu = 1500\n").find("key 'port.mtu': expected one of 256"), std::string::npos);
}

/* fuzz/fuzz_config: a float where an integer belongs went through toml++'s
 * unchecked float-to-int64 cast (undefined beyond int64's range). */
TEST(Config, HugeFloatForIntegerRefused)
{
	std::string p;
	std::string e = error_of("[perf]\nsize = 1e19\n", &p);
	EXPECT_EQ(e, p + ":2:8: key 'perf.size': expected an integer from 0 to 4096, got 1e+19");
	e = error_of("[server]\nqpn = -9.3e19\n", &p);
	EXPECT_EQ(e.rfind(p + ":2:7: key 'server.qpn': expected an integer from 2 to 16777215", 0), 0u) << e;
}

} // namespace
