/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The endpoint record's checks (job_bootstrap.h), the choice of bootstrap,
 * and the TCP bootstrap between threads: the multi-rank figures of the end
 * barrier and a Q_Key that disagrees.
 */
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "job_bootstrap.h"

using namespace rdgram::coll;

namespace {

endpoint_record rec(uint32_t rank, const std::string &job = "j1")
{
	endpoint_record r{endpoint_magic, endpoint_format, 2048, job_key(job), {}};
	r.addr.rank = rank;
	r.addr.qpn = 0x1000 + rank;
	r.addr.qkey = 0x11110000;
	return r;
}

} // namespace

TEST(EndpointRecord, SameJobAccepted)
{
	std::string why;
	EXPECT_TRUE(check_record(rec(0), rec(3), 3, &why)) << why;
	auto tcp = rec(3);
	tcp.mtu = 0; /* not carried: not checked */
	EXPECT_TRUE(check_record(rec(0), tcp, 3, &why)) << why;
}

TEST(EndpointRecord, EachMismatchRefusedWithItsReason)
{
	std::string why;
	auto r = rec(2);
	r.magic = 0x12345678;
	EXPECT_FALSE(check_record(rec(0), r, 2, &why));
	EXPECT_NE(why.find("rank 2's endpoint record is not one"), std::string::npos) << why;
	r = rec(2);
	r.format = endpoint_format + 1;
	EXPECT_FALSE(check_record(rec(0), r, 2, &why));
	EXPECT_NE(why.find("has format 2, this rank reads format 1"), std::string::npos) << why;
	EXPECT_FALSE(check_record(rec(0), rec(2, "other"), 2, &why));
	EXPECT_NE(why.find("belongs to another job"), std::string::npos) << why;
	EXPECT_FALSE(check_record(rec(0), rec(2), 1, &why));
	EXPECT_NE(why.find("rank 1's endpoint record claims rank 2"), std::string::npos) << why;
	r = rec(2);
	r.addr.qkey = 0x22220000;
	EXPECT_FALSE(check_record(rec(0), r, 2, &why));
	EXPECT_NE(why.find("has Q_Key 0x22220000, this rank's is 0x11110000"), std::string::npos) << why;
	r = rec(2);
	r.mtu = 1024;
	EXPECT_FALSE(check_record(rec(0), r, 2, &why));
	EXPECT_NE(why.find("has MTU 1024, this rank's is 2048"), std::string::npos) << why;
}

TEST(EndpointRecord, JobKeyIsFnv1a)
{
	EXPECT_EQ(job_key(""), 0xcbf29ce484222325ull);
	EXPECT_EQ(job_key("a"), 0xaf63dc4c8601ec8cull);
	EXPECT_NE(job_key("285147137"), job_key("285147138"));
}

TEST(JobBootstrap, AutoNeedsAServerAddress)
{
	unsetenv("PMIX_SERVER_URI41");
	setenv("PMIX_RANK", "0", 1);
	setenv("PMIX_NAMESPACE", "x", 1);
	EXPECT_EQ(auto_bootstrap(), "tcp");
	setenv("PMIX_SERVER_URI41", "0.0;tcp4://127.0.0.1:1", 1);
	EXPECT_EQ(auto_bootstrap(), have_pmix() ? "pmix" : "tcp");
	unsetenv("PMIX_SERVER_URI41");
	unsetenv("PMIX_RANK");
	unsetenv("PMIX_NAMESPACE");
}

/* Three ranks over the TCP bootstrap in threads: the table, then two
 * figures per rank gathered at rank 0, at_all run once there. */
TEST(JobBootstrap, TcpExchangeAndFinish)
{
	const std::string hp = "127.0.0.1:" + std::to_string(21000 + getpid() % 20000);
	std::vector<int> rc(3, -1), frc(3, -1);
	std::vector<std::vector<endpoint_record>> tables(3);
	std::vector<double> all;
	int at_all = 0;
	std::vector<std::thread> th;
	for (unsigned r = 0; r < 3; r++)
		th.emplace_back([&, r] {
			auto b = tcp_bootstrap(hp, r, 3, "command line");
			rc[r] = b->exchange(rec(r), 10, &tables[r]);
			if (rc[r] != 0)
				return;
			std::vector<double> mine = {double(r), 10.0 + r}, got;
			frc[r] = b->finish(10, mine, &got, [&] { at_all++; });
			if (r == 0)
				all = got;
		});
	for (auto &t : th)
		t.join();
	for (unsigned r = 0; r < 3; r++) {
		ASSERT_EQ(rc[r], 0);
		ASSERT_EQ(frc[r], 0);
		ASSERT_EQ(tables[r].size(), 3u);
		for (unsigned p = 0; p < 3; p++)
			EXPECT_EQ(tables[r][p].addr.qpn, 0x1000 + p);
	}
	EXPECT_EQ(at_all, 1);
	EXPECT_EQ(all, (std::vector<double>{0, 10, 1, 11, 2, 12}));
}

TEST(JobBootstrap, TcpRefusesAnotherQkey)
{
	const std::string hp = "127.0.0.1:" + std::to_string(41000 + getpid() % 20000);
	int rc0 = -1, rc1 = -1;
	std::string e0;
	std::thread t0([&] {
		auto b = tcp_bootstrap(hp, 0, 2, "command line");
		std::vector<endpoint_record> t;
		rc0 = b->exchange(rec(0), 10, &t);
		e0 = b->error();
	});
	std::thread t1([&] {
		auto b = tcp_bootstrap(hp, 1, 2, "command line");
		auto me = rec(1);
		me.addr.qkey = 0x22220000;
		std::vector<endpoint_record> t;
		rc1 = b->exchange(me, 10, &t);
	});
	t0.join();
	t1.join();
	EXPECT_EQ(rc0, EPROTO);
	EXPECT_EQ(rc1, EPROTO);
	EXPECT_NE(e0.find("rank 1's endpoint record has Q_Key 0x22220000"), std::string::npos) << e0;
}
