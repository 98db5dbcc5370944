/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf --oob (apps/rdgram-perf/perf_oob.h) over loopback TCP: the
 * server and the client get each other's QPN, GID, LID and Q_Key; a client
 * that comes first waits for the server; a peer speaking rdgram-coll's
 * rendezvous is refused; nobody listening ends in ETIMEDOUT within the
 * timeout. (The RDMA side needs a device: tests/hw.)
 *
 * --oob-proto perftest|ud_pingpong (perf_peer_wire.h, perf_peer_oob.h):
 * every message's bytes against what the real tools wrote, both roles of
 * both exchanges (ours against ours, and ours against the tools' recorded
 * transcripts), and each mismatch's one error: version, MTU, another
 * exchange, more than one QP, no GID, a peer that stops or closes.
 */
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

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

/* A perftest client (16-byte version, then it waits) on an rdgram-perf
 * server: refused at once with what it sent, not at the timeout. */
TEST(PerfOob, PerftestClientRefusedAtOnce)
{
	const std::string hp = hostport(4);
	oob_addr got{};
	std::string es;
	int rs = -1;
	const auto t0 = std::chrono::steady_clock::now();
	std::thread srv([&] { rs = oob_exchange(hp, true, addr(1, 2, 3, 4), 20, &got, &es); });
	std::this_thread::sleep_for(std::chrono::milliseconds(200));
	std::string host;
	uint16_t port = 0;
	ASSERT_TRUE(coll::split_hostport(hp, &host, &port));
	const int fd = socket(AF_INET, SOCK_STREAM, 0);
	sockaddr_in sa{};
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	inet_pton(AF_INET, host.c_str(), &sa.sin_addr);
	ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)), 0);
	char v[16] = "6.06";
	ASSERT_EQ(write(fd, v, sizeof(v)), ssize_t(sizeof(v)));
	srv.join();
	close(fd);
	const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	EXPECT_EQ(rs, EPROTO) << es;
	EXPECT_NE(es.find("\"6.06\""), std::string::npos) << es;
	EXPECT_NE(es.find("--oob-proto"), std::string::npos) << es;
	EXPECT_LT(s, 5.0) << "it waited for the rest of a hello that never comes";
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

/* ---- --oob-proto perftest | ud_pingpong (perf_peer_wire.h, perf_peer_oob.h) ----
 *
 * The literal messages below are what the real tools wrote, captured
 * between ib_send_lat / ib_send_bw -c UD / ibv_ud_pingpong (Debian
 * perftest 4.5+0.17, rdma-core 44) on rxe in the lab guest through a TCP
 * proxy: a server with QPN 0x11 and a client with QPN 0x12, both GID
 * ::ffff:10.77.0.2. */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>

#include "perf_peer_oob.h"

using namespace rdgram::perf::peer_wire;

namespace {

const std::string cap_version("6.06\0\0\0\0\0\0\0\0\0\0\0\0", 16);
const std::string cap_page("\x00\x00\x10\x00", 4); /* 4096 */
const std::string cap_line("\x00\x00\x00@", 4);    /* 64 */
const std::string cap_mtu("3\0", 2);               /* IBV_MTU_1024 */
const std::string cap_key_client(
	"0000:0001:000012:f64ef2:00000000:00005607a71e8000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:02:00000000:\0",
	108);
const std::string cap_key_server(
	"0000:0001:000011:f529da:00000000:000055d254557000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:02:00000000:\0",
	108);
const std::string cap_done("done\0", 5);
const std::string cap_pp_client("0000:000016:a8b06a:00000000000000000000ffff0a4d0002\0", 52);
const std::string cap_pp_server("0000:000015:9eec34:00000000000000000000ffff0a4d0002\0", 52);
const uint8_t gid_v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 2};
const uint8_t gid_v6[16] = {0xfd, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

std::string peer_port(int k) { return "127.0.0.1:" + std::to_string(30000 + (getpid() % 2000) * 16 + k); }

peer_link::clock::time_point in_s(double s)
{
	return peer_link::clock::now() + std::chrono::milliseconds(int64_t(s * 1000));
}

/* A scripted peer on raw sockets: listens (server) or connects (client)
 * and runs script on the connection in a thread of its own. */
struct scripted {
	std::thread t;
	int lfd = -1;
	scripted(const std::string &hp, bool server, std::function<void(int)> script)
	{
		const int port = std::stoi(hp.substr(hp.rfind(':') + 1));
		sockaddr_in a{};
		a.sin_family = AF_INET;
		a.sin_port = htons(uint16_t(port));
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (server) {
			lfd = socket(AF_INET, SOCK_STREAM, 0);
			const int one = 1;
			setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			EXPECT_EQ(bind(lfd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
			listen(lfd, 1);
		}
		t = std::thread([this, a, server, script] {
			int fd;
			if (server) {
				fd = accept(lfd, nullptr, nullptr);
			} else {
				for (int i = 0;; i++) {
					fd = socket(AF_INET, SOCK_STREAM, 0);
					if (connect(fd, reinterpret_cast<const sockaddr *>(&a), sizeof(a)) == 0 || i > 200)
						break;
					close(fd);
					usleep(10000);
				}
			}
			const int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			script(fd);
			close(fd);
		});
	}
	~scripted()
	{
		t.join();
		if (lfd >= 0)
			close(lfd);
	}
};

/* The peer's side of one message: read exactly n bytes / write them. */
std::string rd(int fd, size_t n)
{
	std::string s(n, '\0');
	size_t got = 0;
	while (got < n) {
		const ssize_t k = recv(fd, s.data() + got, n - got, 0);
		if (k <= 0)
			break;
		got += size_t(k);
	}
	s.resize(got);
	return s;
}
void wr(int fd, const std::string &s) { ASSERT_EQ(send(fd, s.data(), s.size(), MSG_NOSIGNAL), ssize_t(s.size())); }

perftest_dest dest(uint32_t qpn, uint32_t psn, uint64_t vaddr, const uint8_t *gid)
{
	perftest_dest d;
	d.qpn = qpn;
	d.psn = psn;
	d.vaddr = vaddr;
	memcpy(d.gid, gid, 16);
	return d;
}

} // namespace

TEST(PeerWire, PerftestMessagesAreTheToolsBytes)
{
	EXPECT_EQ(perftest_version_msg(), cap_version);
	EXPECT_EQ(be32_msg(sys_cycle_buffer), cap_page);
	EXPECT_EQ(be32_msg(sys_cache_line), cap_line);
	EXPECT_EQ(perftest_mtu_msg(mtu_enum(1024)), cap_mtu);
	EXPECT_EQ(perftest_mtu_msg(5), std::string("5\0", 2));
	EXPECT_EQ(perftest_key_msg(dest(0x12, 0xf64ef2, 0x5607a71e8000, gid_v4), true), cap_key_client);
	/* Without a GID: KEY_PRINT_FMT, 59 bytes with the NUL. */
	const std::string no_gid("0000:0001:000012:f64ef2:00000000:00005607a71e8000:00000000\0", 59);
	EXPECT_EQ(perftest_key_msg(dest(0x12, 0xf64ef2, 0x5607a71e8000, gid_v4), false), no_gid);
	EXPECT_EQ(key_len_gid, 108u);
	EXPECT_EQ(key_len, 59u);
	EXPECT_EQ(qkey, 0x11111111u);
	EXPECT_EQ(grh_room, 40u);
	for (int e = 1; e <= 5; e++)
		EXPECT_EQ(mtu_enum(mtu_bytes(e)), e);
	EXPECT_EQ(mtu_enum(1500), 0);
}

TEST(PeerWire, PerftestParsesTheToolsMessages)
{
	perftest_dest d;
	std::string e;
	ASSERT_TRUE(parse_perftest_key(cap_key_server.data(), cap_key_server.size(), true, &d, &e)) << e;
	EXPECT_EQ(d.lid, 0u);
	EXPECT_EQ(d.out_reads, 1u);
	EXPECT_EQ(d.qpn, 0x11u);
	EXPECT_EQ(d.psn, 0xf529dau);
	EXPECT_EQ(d.rkey, 0u);
	EXPECT_EQ(d.vaddr, 0x55d254557000ull);
	EXPECT_EQ(memcmp(d.gid, gid_v4, 16), 0);
	EXPECT_EQ(d.srqn, 0u);
	double v = 0;
	ASSERT_TRUE(parse_perftest_version(cap_version.data(), &v, &e)) << e;
	EXPECT_DOUBLE_EQ(v, 6.06);
	ASSERT_TRUE(parse_perftest_version(perftest_version_msg("6.29").data(), &v, &e));
	EXPECT_DOUBLE_EQ(v, 6.29);
	EXPECT_EQ(parse_perftest_mtu(cap_mtu.data()), 3);
	EXPECT_EQ(parse_perftest_mtu("9"), 0);
	EXPECT_EQ(parse_perftest_mtu("3x"), 0);
	EXPECT_EQ(be32_of(cap_page.data()), 4096u);
}

TEST(PeerWire, PerftestRefusesMalformedMessages)
{
	perftest_dest d;
	std::string e;
	/* Each damaged once: length, a separator, a digit, the final NUL. */
	EXPECT_FALSE(parse_perftest_key(cap_key_server.data(), 59, true, &d, &e));
	std::string k = cap_key_server;
	k[4] = '-';
	EXPECT_FALSE(parse_perftest_key(k.data(), k.size(), true, &d, &e));
	k = cap_key_server;
	k[60] = 'g';
	EXPECT_FALSE(parse_perftest_key(k.data(), k.size(), true, &d, &e));
	k = cap_key_server;
	k[107] = 'x';
	EXPECT_FALSE(parse_perftest_key(k.data(), k.size(), true, &d, &e));
	EXPECT_NE(e.find("malformed perftest key message"), std::string::npos) << e;
	/* A 59-byte message read as the 108-byte kind and the reverse. */
	const std::string no_gid = perftest_key_msg(dest(0x12, 1, 2, gid_v4), false);
	EXPECT_FALSE(parse_perftest_key(no_gid.data(), no_gid.size(), true, &d, &e));
	EXPECT_FALSE(parse_perftest_key(cap_key_server.data(), 59, false, &d, &e));
	double v;
	EXPECT_FALSE(parse_perftest_version(cap_pp_client.data(), &v, &e));
	EXPECT_NE(e.find("not a perftest version"), std::string::npos) << e;
	EXPECT_FALSE(parse_perftest_version(std::string("6.06x\0\0\0\0\0\0\0\0\0\0\0", 16).data(), &v, &e));
	EXPECT_FALSE(parse_perftest_version(std::string(16, '\0').data(), &v, &e));
}

TEST(PeerWire, UdPingpongMessagesAreTheToolsBytes)
{
	pp_dest d;
	d.qpn = 0x16;
	d.psn = 0xa8b06a;
	memcpy(d.gid, gid_v4, 16);
	EXPECT_EQ(pp_msg(d), cap_pp_client);
	pp_dest p;
	std::string e;
	ASSERT_TRUE(parse_pp_msg(cap_pp_server.data(), cap_pp_server.size(), &p, &e)) << e;
	EXPECT_EQ(p.lid, 0u);
	EXPECT_EQ(p.qpn, 0x15u);
	EXPECT_EQ(p.psn, 0x9eec34u);
	EXPECT_EQ(memcmp(p.gid, gid_v4, 16), 0);
	/* gid_to_wire_gid: the 16 bytes in order (htobe32 of each word
	 * loaded from memory prints its bytes as they lie). */
	const uint8_t ll[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x77, 0x00, 0x02};
	memcpy(d.gid, ll, 16);
	EXPECT_EQ(pp_msg(d).substr(19, 32), "fe80000000000000505400fffe770002");
	EXPECT_FALSE(parse_pp_msg(cap_pp_server.data(), 51, &p, &e));
	std::string bad = cap_pp_server;
	bad[11] = '.';
	EXPECT_FALSE(parse_pp_msg(bad.data(), bad.size(), &p, &e));
	EXPECT_NE(e.find("malformed ibv_ud_pingpong"), std::string::npos) << e;
}

TEST(PeerWire, GuessesWhatAPeerSpeaks)
{
	EXPECT_EQ(guess_protocol(cap_version.data(), 16), proto_guess::perftest);
	EXPECT_EQ(guess_protocol(cap_version.data(), 2), proto_guess::incomplete);
	EXPECT_EQ(guess_protocol(cap_pp_client.data(), 16), proto_guess::ud_pingpong);
	EXPECT_EQ(guess_protocol(cap_pp_client.data(), 5), proto_guess::incomplete);
	EXPECT_EQ(guess_protocol("FRPR\0\0\0\0", 8), proto_guess::rdgram_perf);
	EXPECT_EQ(guess_protocol("LOCR\0\0\0\0", 8), proto_guess::rdgram_coll);
	EXPECT_EQ(guess_protocol("GET / HTTP/1.1\r\n", 16), proto_guess::unknown);
	EXPECT_EQ(guess_protocol(cap_key_client.data(), 16), proto_guess::unknown);
}

TEST(PeerWire, ChecksBothSidesMake)
{
	const uint8_t zero[16] = {};
	const uint8_t ours4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 1};
	EXPECT_EQ(check_peer_gid(ours4, gid_v4, true, "perftest", "a", "b"), "");
	EXPECT_EQ(check_peer_gid(ours4, zero, false, "perftest", "a", "b"), ""); /* InfiniBand, by LID */
	const std::string fam = check_peer_gid(ours4, gid_v6, true, "perftest", "10.77.0.1", "fd77::2");
	EXPECT_NE(fam.find("GID types differ: ours 10.77.0.1 is IPv4, the peer's fd77::2 IPv6"), std::string::npos) << fam;
	EXPECT_NE(check_peer_gid(ours4, zero, true, "ibv_ud_pingpong", "a", "b").find("with -g"), std::string::npos);
	EXPECT_NE(check_peer_gid(ours4, zero, true, "perftest", "a", "b").find("with -x"), std::string::npos);
	EXPECT_EQ(check_size_mtu(1024, 2048, 1024), "");
	const std::string m = check_size_mtu(2048, 4096, 1024);
	EXPECT_NE(m.find("size 2048 is above the MTU both sides support, 1024 (ours 4096, the peer's 1024"),
		  std::string::npos)
		<< m;
}

TEST(PeerOob, PerftestSessionBetweenBothRoles)
{
	const std::string hp = peer_port(0);
	const perftest_dest s_me = dest(0x11, 0xabc, 0x1000, gid_v4), c_me = dest(0x12, 0xdef, 0x2000, gid_v4);
	perftest_dest s_got, c_got;
	perftest_hello sh, ch;
	int rs = -1, rc = -1;
	bool s_done = false, c_done = false;
	std::string es, ec;
	std::thread srv([&] {
		peer_link l;
		if ((rs = l.open(hp, true, in_s(10), &es)) != 0)
			return;
		perftest_session s(l, false);
		if ((rs = s.hello(5, &sh, &es)) != 0)
			return;
		for (int i = 0; i < 4 && rs == 0; i++)
			rs = s.hand_shake(s_me, true, &s_got, "a hand-shake", &es);
		if (rs == 0)
			rs = s.close(s_me, true, &s_done, &es);
	});
	peer_link l;
	rc = l.open(hp, false, in_s(10), &ec);
	if (rc == 0) {
		perftest_session s(l, true);
		rc = s.hello(3, &ch, &ec);
		for (int i = 0; i < 4 && rc == 0; i++)
			rc = s.hand_shake(c_me, true, &c_got, "a hand-shake", &ec);
		if (rc == 0)
			rc = s.close(c_me, true, &c_done, &ec);
	}
	srv.join();
	ASSERT_EQ(rs, 0) << es;
	ASSERT_EQ(rc, 0) << ec;
	EXPECT_EQ(sh.peer_version, "6.06");
	EXPECT_EQ(sh.mtu, 3); /* the smaller */
	EXPECT_EQ(ch.mtu, 3);
	EXPECT_EQ(ch.peer_mtu, 5);
	EXPECT_EQ(sh.peer_cycle_buffer, 4096u);
	EXPECT_EQ(sh.peer_cache_line, 64u);
	EXPECT_TRUE(s_got == c_me);
	EXPECT_TRUE(c_got == s_me);
	EXPECT_TRUE(s_done);
	EXPECT_TRUE(c_done);
}

/* ib_send_lat's server, replayed from the capture: rdgram-perf's client
 * must write exactly what the real client wrote (all but the random PSN
 * and buffer address of its key message) and parse what came back. */
TEST(PeerOob, PerftestClientAgainstTheToolsServerTranscript)
{
	const std::string hp = peer_port(1);
	std::vector<std::string> got;
	scripted peer(hp, true, [&](int fd) {
		for (const std::string &m : {cap_version, cap_page, cap_line, cap_mtu}) {
			got.push_back(rd(fd, m.size()));
			wr(fd, m);
		}
		for (int i = 0; i < 5; i++) { /* key, connect, print, receives, close */
			got.push_back(rd(fd, 108));
			wr(fd, cap_key_server);
		}
		wr(fd, cap_done);
		got.push_back(rd(fd, 5));
	});
	peer_link l;
	std::string e;
	ASSERT_EQ(l.open(hp, false, in_s(10), &e), 0) << e;
	perftest_session s(l, true);
	perftest_hello h;
	ASSERT_EQ(s.hello(3, &h, &e), 0) << e;
	const perftest_dest me = dest(0x12, 0xf64ef2, 0x5607a71e8000, gid_v4);
	perftest_dest them;
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(s.hand_shake(me, true, &them, "a hand-shake", &e), 0) << e;
	bool done = false;
	ASSERT_EQ(s.close(me, true, &done, &e), 0) << e;
	EXPECT_TRUE(done);
	EXPECT_EQ(them.qpn, 0x11u);
	ASSERT_EQ(got.size(), 10u);
	EXPECT_EQ(got[0], cap_version);
	EXPECT_EQ(got[1], cap_page);
	EXPECT_EQ(got[2], cap_line);
	EXPECT_EQ(got[3], cap_mtu);
	for (int i = 4; i < 9; i++)
		EXPECT_EQ(got[size_t(i)], cap_key_client);
	EXPECT_EQ(got[9], cap_done);
}

TEST(PeerOob, PerftestServerAgainstTheToolsClientTranscript)
{
	const std::string hp = peer_port(2);
	std::vector<std::string> got;
	peer_link l;
	std::string e;
	std::thread srv([&] {
		ASSERT_EQ(l.open(hp, true, in_s(10), &e), 0) << e;
		perftest_session s(l, false);
		perftest_hello h;
		ASSERT_EQ(s.hello(3, &h, &e), 0) << e;
		const perftest_dest me = dest(0x11, 0xf529da, 0x55d254557000, gid_v4);
		perftest_dest them;
		for (int i = 0; i < 4; i++)
			ASSERT_EQ(s.hand_shake(me, true, &them, "a hand-shake", &e), 0) << e;
		EXPECT_EQ(them.qpn, 0x12u);
		bool done = false;
		ASSERT_EQ(s.close(me, true, &done, &e), 0) << e;
		EXPECT_TRUE(done);
	});
	{
		scripted peer(hp, false, [&](int fd) {
			for (const std::string &m : {cap_version, cap_page, cap_line, cap_mtu}) {
				wr(fd, m);
				got.push_back(rd(fd, m.size()));
			}
			for (int i = 0; i < 5; i++) {
				wr(fd, cap_key_client);
				got.push_back(rd(fd, 108));
			}
			wr(fd, cap_done);
			got.push_back(rd(fd, 5));
		});
	}
	srv.join();
	ASSERT_EQ(got.size(), 10u);
	EXPECT_EQ(got[0], cap_version);
	EXPECT_EQ(got[3], cap_mtu);
	for (int i = 4; i < 9; i++)
		EXPECT_EQ(got[size_t(i)], cap_key_server);
	EXPECT_EQ(got[9], cap_done);
}

namespace {

/* Runs our perftest client's hello and first hand-shake against a
 * scripted server; returns the errno value, *e the line. */
int client_vs(int k, std::function<void(int)> script, std::string *e, double timeout_s = 5)
{
	const std::string hp = peer_port(k);
	scripted peer(hp, true, std::move(script));
	peer_link l;
	int rc = l.open(hp, false, in_s(timeout_s), e);
	if (rc != 0)
		return rc;
	perftest_session s(l, true);
	perftest_hello h;
	if ((rc = s.hello(3, &h, e)) != 0)
		return rc;
	perftest_dest them;
	for (int i = 0; i < 2 && rc == 0; i++)
		rc = s.hand_shake(dest(0x12, 1, 2, gid_v4), true, &them, "the key exchange", e);
	return rc;
}

} // namespace

TEST(PeerOob, PerftestMismatchesGiveOneClearError)
{
	std::string e;
	/* A version perftest itself refuses. */
	EXPECT_EQ(client_vs(3, [](int fd) { rd(fd, 16); wr(fd, perftest_version_msg("5.60")); }, &e), EPROTO);
	EXPECT_NE(e.find("the peer is perftest 5.60, older than 5.70"), std::string::npos) << e;
	/* An ibv_ud_pingpong server: reads its 52 bytes, gets 16, gives up. */
	EXPECT_EQ(client_vs(4, [](int fd) { rd(fd, 16); }, &e), ECONNRESET);
	EXPECT_NE(e.find("may not be perftest"), std::string::npos) << e;
	/* An rdgram-perf rendezvous server would answer its own magic. */
	EXPECT_EQ(client_vs(5, [](int fd) { rd(fd, 16); wr(fd, std::string("FRPR\2\0\0\0", 8)); usleep(300000); }, &e),
		  EPROTO);
	EXPECT_NE(e.find("rdgram-perf's own rendezvous"), std::string::npos) << e;
	/* An MTU that is no ibv_mtu. */
	EXPECT_EQ(client_vs(6, [](int fd) {
			  for (const std::string &m : {cap_version, cap_page, cap_line}) {
				  rd(fd, m.size());
				  wr(fd, m);
			  }
			  rd(fd, 2);
			  wr(fd, std::string("9\0", 2));
		  }, &e),
		  EPROTO);
	EXPECT_NE(e.find("not an ibv_mtu value"), std::string::npos) << e;
	/* A second QP's key message where the hand-shake repeats the first. */
	EXPECT_EQ(client_vs(7, [](int fd) {
			  for (const std::string &m : {cap_version, cap_page, cap_line, cap_mtu}) {
				  rd(fd, m.size());
				  wr(fd, m);
			  }
			  rd(fd, 108);
			  wr(fd, cap_key_server);
			  rd(fd, 108);
			  wr(fd, perftest_key_msg(dest(0x13, 1, 2, gid_v4), true));
		  }, &e),
		  EPROTO);
	EXPECT_NE(e.find("more than one QP"), std::string::npos) << e;
	/* A peer without a GID index: 59-byte keys. */
	EXPECT_EQ(client_vs(8, [](int fd) {
			  for (const std::string &m : {cap_version, cap_page, cap_line, cap_mtu}) {
				  rd(fd, m.size());
				  wr(fd, m);
			  }
			  rd(fd, 108);
			  wr(fd, perftest_key_msg(dest(0x11, 1, 2, gid_v4), false));
			  usleep(500000);
		  }, &e),
		  EPROTO);
	EXPECT_NE(e.find("has no GID (59 bytes)"), std::string::npos) << e;
}

TEST(PeerOob, PerftestPeerThatStopsIsNoHang)
{
	std::string e;
	/* Half a version, then silence: the timeout ends it. */
	auto t0 = std::chrono::steady_clock::now();
	EXPECT_EQ(client_vs(9, [](int fd) { rd(fd, 16); wr(fd, cap_version.substr(0, 8)); usleep(1500000); }, &e, 1.0),
		  ETIMEDOUT);
	EXPECT_NE(e.find("stopped in the middle of the version exchange (8 of 16 bytes)"), std::string::npos) << e;
	EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
	/* It closes in the middle of the system data. */
	EXPECT_EQ(client_vs(10, [](int fd) { rd(fd, 16); wr(fd, cap_version); rd(fd, 4); wr(fd, std::string("\0\0", 2)); }, &e),
		  ECONNRESET);
	EXPECT_NE(e.find("closed the connection during the system data exchange (page size) (2 of 4 bytes)"),
		  std::string::npos)
		<< e;
	/* Nobody listening: the connect attempts end at the timeout. */
	peer_link l;
	t0 = std::chrono::steady_clock::now();
	EXPECT_EQ(l.open(peer_port(11), false, in_s(0.5), &e), ETIMEDOUT);
	EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
	EXPECT_NE(e.find("cannot connect to"), std::string::npos) << e;
}

TEST(PeerOob, PerftestServerRefusesAnUdPingpongClient)
{
	const std::string hp = peer_port(12);
	std::string e;
	int rc = -1;
	std::thread srv([&] {
		peer_link l;
		if ((rc = l.open(hp, true, in_s(5), &e)) != 0)
			return;
		perftest_session s(l, false);
		perftest_hello h;
		rc = s.hello(3, &h, &e);
	});
	{
		scripted peer(hp, false, [](int fd) {
			wr(fd, cap_pp_client);
			rd(fd, 52);
		});
		srv.join();
	}
	EXPECT_EQ(rc, EPROTO);
	EXPECT_NE(e.find("it speaks ibv_ud_pingpong's exchange (--oob-proto ud_pingpong)"), std::string::npos) << e;
}

TEST(PeerOob, UdPingpongBothRolesAndTheToolsTranscript)
{
	/* Ours against ours. */
	{
		const std::string hp = peer_port(13);
		pp_dest s_me, c_me, s_got, c_got;
		s_me.qpn = 0x15;
		memcpy(s_me.gid, gid_v4, 16);
		c_me.qpn = 0x16;
		memcpy(c_me.gid, gid_v6, 16);
		std::string es, ec;
		int rs = -1, connected = 0;
		std::thread srv([&] {
			peer_link l;
			if ((rs = l.open(hp, true, in_s(5), &es)) == 0)
				rs = ud_pingpong_server(
					l, s_me, [&](const pp_dest &, std::string *) { return connected++, 0; }, &s_got, &es);
		});
		peer_link l;
		int rc = l.open(hp, false, in_s(5), &ec);
		if (rc == 0)
			rc = ud_pingpong_client(l, c_me, &c_got, &ec);
		srv.join();
		ASSERT_EQ(rs, 0) << es;
		ASSERT_EQ(rc, 0) << ec;
		EXPECT_EQ(connected, 1);
		EXPECT_EQ(s_got.qpn, 0x16u);
		EXPECT_EQ(memcmp(s_got.gid, gid_v6, 16), 0);
		EXPECT_EQ(c_got.qpn, 0x15u);
	}
	/* Our client against ud_pingpong's server, replayed. */
	{
		const std::string hp = peer_port(14);
		std::string got, done, e;
		pp_dest me, them;
		me.qpn = 0x16;
		me.psn = 0xa8b06a;
		memcpy(me.gid, gid_v4, 16);
		int rc = -1;
		{
			scripted peer(hp, true, [&](int fd) {
				got = rd(fd, 52);
				wr(fd, cap_pp_server);
				done = rd(fd, 52); /* it reads sizeof msg, expects 5 */
			});
			peer_link l;
			rc = l.open(hp, false, in_s(5), &e);
			if (rc == 0)
				rc = ud_pingpong_client(l, me, &them, &e);
		}
		ASSERT_EQ(rc, 0) << e;
		EXPECT_EQ(them.qpn, 0x15u);
		EXPECT_EQ(got, cap_pp_client);
		EXPECT_EQ(done, cap_done);
	}
	/* A perftest client at our ud_pingpong server. */
	{
		const std::string hp = peer_port(15);
		std::string e;
		int rc = -1;
		std::thread srv([&] {
			peer_link l;
			pp_dest me, them;
			if ((rc = l.open(hp, true, in_s(5), &e)) == 0)
				rc = ud_pingpong_server(
					l, me, [](const pp_dest &, std::string *) { return 0; }, &them, &e);
		});
		{
			scripted peer(hp, false, [](int fd) {
				wr(fd, cap_version);
				rd(fd, 16);
			});
			srv.join();
		}
		EXPECT_EQ(rc, EPROTO);
		EXPECT_NE(e.find("it speaks perftest's exchange (--oob-proto perftest)"), std::string::npos) << e;
	}
}

/* A HEAD perftest (6.29) skips its parameter negotiation for our "6.06"
 * and ends without "done": the close still succeeds. (Checked against a
 * 6.29 built from source on rxe in the lab, by hand.) */
TEST(PeerOob, PerftestHeadPeerEndsWithoutDone)
{
	const std::string hp = peer_port(16);
	std::string e, last;
	bool done = true;
	int rc = -1;
	{
		scripted peer(hp, true, [&](int fd) {
			rd(fd, 16);
			wr(fd, perftest_version_msg("6.29"));
			for (const std::string &m : {cap_page, cap_line, cap_mtu}) {
				rd(fd, m.size());
				wr(fd, m);
			}
			for (int i = 0; i < 5; i++) {
				rd(fd, 108);
				wr(fd, cap_key_server);
			}
			last = rd(fd, 5); /* our "done", then it closes */
		});
		peer_link l;
		rc = l.open(hp, false, in_s(5), &e);
		perftest_session s(l, true);
		perftest_hello h;
		perftest_dest them;
		const perftest_dest me = dest(0x12, 1, 2, gid_v4);
		if (rc == 0)
			rc = s.hello(3, &h, &e);
		EXPECT_EQ(h.peer_version, "6.29");
		for (int i = 0; i < 4 && rc == 0; i++)
			rc = s.hand_shake(me, true, &them, "a hand-shake", &e);
		if (rc == 0)
			rc = s.close(me, true, &done, &e);
	}
	EXPECT_EQ(rc, 0) << e;
	EXPECT_FALSE(done);
	EXPECT_EQ(last, cap_done);
}
