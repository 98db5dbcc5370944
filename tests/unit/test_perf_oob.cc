/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf --oob (apps/rdgram-perf/perf_oob.h) over loopback TCP: the
 * server and the client get each other's QPN, GID, LID and Q_Key; a client
 * that comes first waits for the server; a peer speaking rdgram-coll's
 * rendezvous is refused; nobody listening ends in ETIMEDOUT within the
 * timeout. (The RDMA side needs a device: tests/hw.)
 */
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "perf_oob.h"

using namespace rdgram;
using namespace rdgram::perf;

namespace {

/* A port per test, away from the well-known ones. */
std::string hostport(int k) { return "127.0.0.1:" + std::to_string(20000 + (getpid() % 5000) * 8 + k); }

oob_addr addr(uint8_t tag, uint32_t qpn, uint32_t qkey, uint16_t lid)
{
	oob_addr a{};
	memset(a.gid, tag, sizeof(a.gid));
	a.qpn = qpn;
	a.qkey = qkey;
	a.lid = lid;
	return a;
}

} // namespace

TEST(PerfOob, ServerAndClientSwapAddresses)
{
	for (const bool client_first : {false, true}) {
		SCOPED_TRACE(client_first ? "client first" : "server first");
		const std::string hp = hostport(client_first ? 1 : 0);
		const oob_addr srv = addr(0x5a, 0x000123, 0x11111111, 7), cli = addr(0xc1, 0xabcdef, 0x22222222, 9);
		oob_addr got_by_srv{}, got_by_cli{};
		std::string es, ec;
		int rs = -1, rcl = -1;
		std::thread first([&] {
			if (client_first)
				rcl = oob_exchange(hp, false, cli, 10, &got_by_cli, &ec);
			else
				rs = oob_exchange(hp, true, srv, 10, &got_by_srv, &es);
		});
		std::this_thread::sleep_for(std::chrono::milliseconds(200));
		if (client_first)
			rs = oob_exchange(hp, true, srv, 10, &got_by_srv, &es);
		else
			rcl = oob_exchange(hp, false, cli, 10, &got_by_cli, &ec);
		first.join();
		ASSERT_EQ(rs, 0) << es;
		ASSERT_EQ(rcl, 0) << ec;
		EXPECT_EQ(memcmp(got_by_cli.gid, srv.gid, 16), 0);
		EXPECT_EQ(got_by_cli.qpn, srv.qpn);
		EXPECT_EQ(got_by_cli.qkey, srv.qkey);
		EXPECT_EQ(got_by_cli.lid, srv.lid);
		EXPECT_EQ(memcmp(got_by_srv.gid, cli.gid, 16), 0);
		EXPECT_EQ(got_by_srv.qpn, cli.qpn);
		EXPECT_EQ(got_by_srv.qkey, cli.qkey);
		EXPECT_EQ(got_by_srv.lid, cli.lid);
	}
}

TEST(PerfOob, CollRendezvousPeerRefused)
{
	const std::string hp = hostport(2);
	oob_addr got{};
	std::string es;
	int rs = -1;
	std::thread srv([&] { rs = oob_exchange(hp, true, addr(1, 2, 3, 4), 3, &got, &es); });
	std::this_thread::sleep_for(std::chrono::milliseconds(200));
	/* An rdgram-coll rank 1 (its default magic) on the same port. */
	coll::rendezvous rv;
	coll::rank_addr me{};
	me.rank = 1;
	std::vector<coll::rank_addr> table;
	const int rc = rv.exchange(hp, 1, 2, me, 3, &table);
	srv.join();
	EXPECT_NE(rs, 0) << "the perf server paired with an rdgram-coll rank";
	EXPECT_EQ(rs, EPROTO) << es;
	EXPECT_NE(rc, 0);
}

TEST(PerfOob, NobodyListeningTimesOut)
{
	oob_addr got{};
	std::string e;
	const auto t0 = std::chrono::steady_clock::now();
	const int rc = oob_exchange(hostport(3), false, addr(1, 2, 3, 4), 1.0, &got, &e);
	const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	EXPECT_EQ(rc, ETIMEDOUT) << e;
	EXPECT_LT(s, 5.0);
}
