/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Buffers that fit every port (issue 26, item 3): at every path MTU the
 * soft driver takes (256, 1024, 2048, 4096), two soft devices joined by
 * net_ring, by net_memif (server and client in this process) and by
 * net_af_packet (a veth pair in a network namespace this process makes for
 * itself: needs root, skips otherwise) exchange datagrams of the largest
 * size, payload = MTU, over IPv4 and IPv6, with and without immediate
 * data, both ways; each must arrive whole. The device sizes its own pool:
 * nothing here tells it what the PMD needs.
 *
 * And what cannot work says so: a caller's pool short of what the PMD
 * copies, or of the MTU, fails open() with one line naming the need; a
 * port that cuts frames below the MTU's largest (af_packet's framesz, the
 * interface MTU) opens with one warning naming the limit.
 */
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rte_alarm.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_log.h>
#include <rte_mbuf.h>

#include "eal_env.h"

using namespace rdgram;
using namespace rdgram::test;
using clk = std::chrono::steady_clock;

namespace {

constexpr uint32_t mtus[] = {256, 1024, 2048, 4096};
constexpr uint32_t qkey = 0x11111111;
constexpr uint32_t qpn[2] = {0x300, 0x301};

std::string memif_sock(uint32_t mtu)
{
	return "/tmp/rdgram-mtu-" + std::to_string(getpid()) + "-" + std::to_string(mtu) + ".sock";
}

int vdev_port(const std::string &name, const std::string &args)
{
	uint16_t p;
	if (rte_eth_dev_get_port_by_name(name.c_str(), &p) == 0)
		return p;
	if (rte_eal_hotplug_add("vdev", name.c_str(), args.c_str()) != 0)
		return -1;
	return rte_eth_dev_get_port_by_name(name.c_str(), &p) == 0 ? p : -1;
}

bool wait_link(uint16_t port, bool up, double seconds)
{
	const auto end = clk::now() + std::chrono::duration<double>(seconds);
	while (clk::now() < end) {
		rte_eth_link l{};
		if (rte_eth_link_get_nowait(port, &l) == 0 && (l.link_status == RTE_ETH_LINK_UP) == up)
			return true;
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
	return false;
}

/* Runs f(port) on the EAL interrupt thread and waits: DPDK 22.11's memif
 * handles its control channel there and is not safe against a stop from
 * another thread (tests/unit/test_burst_guard.cc). */
int on_intr_thread(int (*f)(uint16_t), uint16_t port)
{
	struct call {
		int (*f)(uint16_t);
		uint16_t port;
		int rc;
		std::atomic<bool> done{false};
	} c{f, port, -1};
	if (rte_eal_alarm_set(1, [](void *a) {
		    auto *k = static_cast<call *>(a);
		    k->rc = k->f(k->port);
		    k->done.store(true, std::memory_order_release);
	    }, &c) != 0)
		return -1;
	while (!c.done.load(std::memory_order_acquire))
		std::this_thread::sleep_for(std::chrono::microseconds(200));
	return c.rc;
}

/* The process's own network namespace with veth pairs in it, made once:
 * it goes when the process does. The main thread moves into it (the af_packet
 * sockets are made there); the EAL's other threads stay where they were. */
const char *netns_reason()
{
	static std::string reason = [] {
		if (geteuid() != 0)
			return std::string("needs root (a network namespace and veth pairs)");
		if (unshare(CLONE_NEWNET) != 0)
			return std::string("unshare(CLONE_NEWNET): ") + strerror(errno);
		/* rdmtu0-1: jumbo; rdmtu2-3: the interface MTU left at 1500.
		 * One pair per test: net_af_packet's sockets on one interface
		 * in one process join one PACKET_FANOUT group, which splits
		 * the frames among them. */
		/* No IPv6 of the kernel's own on the veths (router
		 * solicitations, MLD reports): only rdgram's frames. /proc/sys/net
		 * is the opening thread's namespace's; best effort (a kernel
		 * without IPv6 has nothing to turn off). */
		for (const char *f : {"/proc/sys/net/ipv6/conf/all/disable_ipv6",
				       "/proc/sys/net/ipv6/conf/default/disable_ipv6"})
			if (FILE *fp = fopen(f, "w"); fp != nullptr) {
				fputs("1", fp);
				fclose(fp);
			}
		const char *cmds[] = {
			"ip link add rdmtu0 type veth peer name rdmtu1",
			"ip link set rdmtu0 mtu 9000 up",
			"ip link set rdmtu1 mtu 9000 up",
			"ip link add rdmtu2 type veth peer name rdmtu3",
			"ip link set rdmtu2 up",
			"ip link set rdmtu3 up",
			"ip link add rdmtu4 type veth peer name rdmtu5",
			"ip link set rdmtu4 mtu 9000 up",
			"ip link set rdmtu5 mtu 9000 up",
		};
		for (const char *c : cmds)
			if (system((std::string(c) + " 2>&1").c_str()) != 0)
				return std::string("'") + c + "' failed";
		return std::string();
	}();
	return reason.empty() ? nullptr : reason.c_str();
}

/* Two soft devices, one on each of two ports that reach each other, each
 * with an IPv4 and an IPv6 address and the other as a static neighbour. */
struct link_pair {
	uint16_t port[2]{};
	soft::soft_device dev[2];
	soft::soft_queue q[2];
	wire::gid v4[2] = {ip_of("10.7.0.1"), ip_of("10.7.0.2")};
	wire::gid v6[2] = {ip_of("fd00:7::1"), ip_of("fd00:7::2")};
	uint16_t vlan = 0; /* soft_config::vlan of both sides */
	std::string err;

	int open(uint16_t p0, uint16_t p1, uint32_t mtu, rte_mempool *pool0 = nullptr)
	{
		port[0] = p0;
		port[1] = p1;
		rte_ether_addr hw[2];
		for (int i = 0; i < 2; i++)
			rte_eth_macaddr_get(port[i], &hw[i]);
		for (int i = 0; i < 2; i++) {
			soft::soft_config c;
			c.port_id = port[i];
			c.addresses = {v4[i], v6[i]};
			c.neighbours = {{v4[1 - i], hw[1 - i]}, {v6[1 - i], hw[1 - i]}};
			c.resolve = false;
			c.mtu = mtu;
			c.max_ah = 64;
			c.nb_mbufs = 1023;
			c.rx_desc = c.tx_desc = 256;
			c.qsbr = g_rt->qsbr();
			c.pool = i == 0 ? pool0 : nullptr;
			c.vlan = vlan;
			if (int e = dev[i].open(c); e != 0) {
				err = dev[i].error();
				return e;
			}
			if (int e = dev[i].create_queue({.index = 0}, q[i]); e != 0) {
				err = dev[i].error();
				return e;
			}
			q[i].add_qp(qpn[i], qkey);
		}
		return 0;
	}
};

/* Fills a payload that tells datagram k of a run from any other. */
void fill(uint8_t *d, uint32_t len, uint32_t k)
{
	for (uint32_t i = 0; i < len; i++)
		d[i] = uint8_t(k * 131 + i * 7 + (i >> 8));
}

/* From side `from` to the other, over IPv4 (sgid 0) or IPv6 (sgid 1): n
 * datagrams of payload mtu (every other one with immediate data), sent in
 * bursts of 8 and each burst received before the next. Returns how many
 * arrived whole. */
uint32_t exchange(link_pair &l, int from, bool v6, uint32_t mtu, uint32_t n)
{
	const int to = 1 - from;
	ibv_ah_attr a{};
	a.is_global = 1;
	a.port_num = 1;
	a.grh.hop_limit = 64;
	a.grh.sgid_index = v6 ? 1 : 0;
	memcpy(a.grh.dgid.raw, (v6 ? l.v6 : l.v4)[to].raw, 16);
	ah_handle h = ah_null;
	int e = 0;
	g_rt->ctl().call([&] { h = l.dev[from].create_ah(a, &e); });
	EXPECT_NE(h, ah_null) << "create_ah: " << e;
	if (h == ah_null)
		return 0;

	std::vector<uint8_t> want(mtu);
	uint32_t whole = 0, got = 0;
	for (uint32_t k = 0; k < n;) {
		send_wr w[8];
		unsigned b = 0;
		for (; b < 8 && k + b < n; b++) {
			rte_mbuf *m = rte_pktmbuf_alloc(l.dev[from].mempool());
			EXPECT_NE(m, nullptr);
			if (m == nullptr)
				break;
			auto *d = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, uint16_t(mtu)));
			EXPECT_NE(d, nullptr) << "the device's mbuf cannot hold an MTU of payload";
			if (d == nullptr) {
				rte_pktmbuf_free(m);
				break;
			}
			fill(d, mtu, k + b);
			w[b] = send_wr{h, qpn[to], qkey, m, nullptr, 0, 0, 0};
			if ((k + b) % 2 != 0) {
				w[b].flags |= send_imm;
				w[b].imm_data = rte_cpu_to_be_32(k + b);
			}
		}
		if (b == 0)
			break;
		const uint16_t took = l.q[from].tx_burst(w, uint16_t(b));
		for (unsigned j = took; j < b; j++)
			rte_pktmbuf_free(w[j].mbuf);
		/* Flush and receive in one loop, as a poll loop does: a memif
		 * client's RX refills the ring its server sends into. */
		const uint64_t deadline = rte_get_tsc_cycles() + rte_get_tsc_hz();
		const uint32_t end = k + took;
		while (got < end && rte_get_tsc_cycles() < deadline) {
			if (l.q[from].tx_pending() != 0)
				l.q[from].tx_flush();
			recv_wc wc[8];
			const uint16_t r = l.q[to].rx_burst(wc, 8);
			for (uint16_t i = 0; i < r; i++) {
				fill(want.data(), mtu, got);
				const bool imm = got % 2 != 0;
				const bool ok = wc[i].byte_len == 40 + mtu && wc[i].src_qp == qpn[from] &&
						wc[i].qp_num == qpn[to] &&
						rte_pktmbuf_data_len(wc[i].mbuf) >= 40 + mtu &&
						memcmp(rte_pktmbuf_mtod_offset(wc[i].mbuf, uint8_t *, 40), want.data(), mtu) == 0 &&
						bool(wc[i].wc_flags & wc_with_imm) == imm &&
						(!imm || wc[i].imm_data == rte_cpu_to_be_32(got)) &&
						wc[i].l3 == (v6 ? l3_type::ipv6 : l3_type::ipv4);
				whole += ok;
				got++;
				rte_pktmbuf_free(wc[i].mbuf);
			}
		}
		if (took == 0 || got < end)
			break;
		k = end;
	}
	g_rt->ctl().call([&] { EXPECT_EQ(l.dev[from].destroy_ah(h), 0); });
	EXPECT_EQ(l.q[from].counters().tx_drops(), 0u);
	return whole;
}

/* Every family, both ways, at the largest payload; then every mbuf is home. */
void exchange_all(link_pair &l, uint32_t mtu)
{
	constexpr uint32_t n = 32;
	for (int from = 0; from < 2; from++)
		for (bool v6 : {false, true})
			EXPECT_EQ(exchange(l, from, v6, mtu, n), n)
				<< "mtu " << mtu << (v6 ? " IPv6 " : " IPv4 ") << "side " << from << " -> " << 1 - from
				<< ": sent so far " << l.q[from].counters().tx_pkts << ", received so far "
				<< l.q[1 - from].counters().rx_pkts << ", rx drops " << l.q[1 - from].counters().rx_drops();
}

void close_pair(link_pair &l)
{
	for (int i = 0; i < 2; i++) {
		l.dev[i].destroy_queue(l.q[i]);
		/* Frames a kernel sent (IPv6 ND, MLD) wait in the control
		 * thread's ring: back to the pool before counting. */
		l.dev[i].drain_control_frames();
		if (l.dev[i].mempool() != nullptr) {
			EXPECT_EQ(rte_mempool_in_use_count(l.dev[i].mempool()), 0u) << "side " << i << " leaked mbufs";
		}
		l.dev[i].close();
	}
}

/* Two net_af_packet ports, one on each end of veth pair ifa-ifb, made for
 * one open: DPDK 22.11's af_packet closes its sockets at stop and never
 * reopens them, so a stopped port is of no further use. Removed (rings
 * unmapped) when this goes. */
struct afp_ports {
	std::string name[2];
	int port[2] = {-1, -1};
	afp_ports(const std::string &tag, const char *ifa, const char *ifb, const std::string &pmd)
	{
		const char *ifs[2] = {ifa, ifb};
		for (int i = 0; i < 2; i++) {
			name[i] = "net_af_packet_" + tag + "_" + std::to_string(i);
			port[i] = vdev_port(name[i], std::string("iface=") + ifs[i] + pmd);
		}
	}
	~afp_ports()
	{
		for (int i = 0; i < 2; i++)
			if (port[i] >= 0)
				rte_eal_hotplug_remove("vdev", name[i].c_str());
	}
	bool ok() const { return port[0] >= 0 && port[1] >= 0; }
};

/* Captures what the EAL logs while it lives. */
struct log_capture {
	FILE *f = tmpfile();
	log_capture() { rte_openlog_stream(f); }
	~log_capture()
	{
		rte_openlog_stream(nullptr);
		if (f != nullptr)
			fclose(f);
	}
	std::string text()
	{
		std::string s;
		if (f == nullptr)
			return s;
		fflush(f);
		rewind(f);
		char buf[512];
		while (fgets(buf, sizeof(buf), f) != nullptr)
			s += buf;
		return s;
	}
};

class SoftMtu : public ::testing::TestWithParam<uint32_t> {};

TEST_P(SoftMtu, NetRing)
{
	const uint32_t mtu = GetParam();
	rte_ring *r[2];
	int p[2];
	for (int i = 0; i < 2; i++) {
		const std::string n = "mtur" + std::to_string(mtu) + "_" + std::to_string(i);
		r[i] = rte_ring_create(n.c_str(), 1024, SOCKET_ID_ANY, 0);
		ASSERT_NE(r[i], nullptr);
	}
	for (int i = 0; i < 2; i++) {
		const std::string n = "net_mtur" + std::to_string(mtu) + "_" + std::to_string(i);
		p[i] = rte_eth_from_rings(n.c_str(), &r[i], 1, &r[1 - i], 1, 0);
		ASSERT_GE(p[i], 0);
	}
	{
		link_pair l;
		ASSERT_EQ(l.open(uint16_t(p[0]), uint16_t(p[1]), mtu), 0) << l.err;
		exchange_all(l, mtu);
		close_pair(l);
	}
	for (int i = 0; i < 2; i++)
		rte_eth_dev_close(uint16_t(p[i]));
	for (int i = 0; i < 2; i++)
		rte_ring_free(r[i]);
}

TEST_P(SoftMtu, NetMemif)
{
	const uint32_t mtu = GetParam();
	const std::string sock = memif_sock(mtu);
	unlink(sock.c_str());
	const std::string base = "id=" + std::to_string(mtu) + ",socket-abstract=no,socket=" + sock;
	const int srv = vdev_port("net_memif_mtu" + std::to_string(mtu) + "s", "role=server," + base);
	const int cli = vdev_port("net_memif_mtu" + std::to_string(mtu) + "c", "role=client," + base);
	ASSERT_GE(srv, 0);
	ASSERT_GE(cli, 0);
	link_pair l;
	ASSERT_EQ(l.open(uint16_t(srv), uint16_t(cli), mtu), 0) << l.err;
	ASSERT_TRUE(wait_link(uint16_t(srv), true, 10.0));
	ASSERT_TRUE(wait_link(uint16_t(cli), true, 10.0));
	exchange_all(l, mtu);
	/* Stopped on the interrupt thread (see on_intr_thread); close() then
	 * finds them stopped. The ports stay: see exit_before_eal_cleanup. */
	EXPECT_EQ(on_intr_thread(rte_eth_dev_stop, uint16_t(cli)), 0);
	EXPECT_EQ(on_intr_thread(rte_eth_dev_stop, uint16_t(srv)), 0);
	close_pair(l);
	unlink(sock.c_str());
}

TEST_P(SoftMtu, NetAfPacket)
{
	const uint32_t mtu = GetParam();
	if (const char *why = netns_reason())
		GTEST_SKIP() << why;
	/* framesz 8192 (blocksz must hold a frame): a 4096-byte MTU's frames,
	 * 4186 bytes, need more than 4096 - 66. */
	afp_ports ap("m" + std::to_string(mtu), "rdmtu0", "rdmtu1", ",qpairs=1,blocksz=8192,framesz=8192,framecnt=64");
	ASSERT_TRUE(ap.ok());
	log_capture log;
	link_pair l;
	ASSERT_EQ(l.open(uint16_t(ap.port[0]), uint16_t(ap.port[1]), mtu), 0) << l.err;
	EXPECT_EQ(log.text().find("are lost"), std::string::npos) << log.text();
	exchange_all(l, mtu);
	close_pair(l);
}

/* 802.1Q over a kernel link, both ports on VLAN 78: net_af_packet inserts
 * the tag on TX (the offload the device enabled) and the kernel hands it
 * to the receiving socket out of band (TP_STATUS_VLAN_VALID; the PMD puts
 * it back in the frame or reports it stripped); the largest datagram of a
 * 4096-byte MTU, 4 bytes longer tagged, arrives both ways, IPv4 and
 * IPv6. */
TEST(SoftMtuVlan, NetAfPacketTagged)
{
	if (const char *why = netns_reason())
		GTEST_SKIP() << why;
	afp_ports ap("vlan", "rdmtu4", "rdmtu5", ",qpairs=1,blocksz=8192,framesz=8192,framecnt=64");
	ASSERT_TRUE(ap.ok());
	link_pair l;
	l.vlan = 78;
	ASSERT_EQ(l.open(uint16_t(ap.port[0]), uint16_t(ap.port[1]), 4096), 0) << l.err;
	EXPECT_TRUE(l.dev[0].vlan_tx_offload()) << "net_af_packet offers RTE_ETH_TX_OFFLOAD_VLAN_INSERT";
	exchange_all(l, 4096);
	for (int i = 0; i < 2; i++)
		EXPECT_EQ(l.q[i].counters().rx_vlan_untagged + l.q[i].counters().rx_vlan_other, 0u) << i;
	close_pair(l);
}

INSTANTIATE_TEST_SUITE_P(Mtu, SoftMtu, ::testing::ValuesIn(mtus),
			 [](const ::testing::TestParamInfo<uint32_t> &i) { return std::to_string(i.param); });

/* The case: mtu 1024 on a net_af_packet left at its defaults
 * (framesz 2048: the PMD copies 2016 bytes into each mbuf). It used to fail
 * queue set-up with ENOMEM; now it just works. The same port at mtu 4096
 * opens with a warning naming framesz, and still carries what fits. */
TEST(SoftMtuLimits, AfPacketDefaultFrames)
{
	if (const char *why = netns_reason())
		GTEST_SKIP() << why;
	{
		afp_ports ap("d1024", "rdmtu0", "rdmtu1", "");
		ASSERT_TRUE(ap.ok());
		link_pair l;
		ASSERT_EQ(l.open(uint16_t(ap.port[0]), uint16_t(ap.port[1]), 1024), 0) << l.err;
		EXPECT_GE(rte_pktmbuf_data_room_size(l.dev[0].mempool()), RTE_PKTMBUF_HEADROOM + 2016u);
		exchange_all(l, 1024);
		close_pair(l);
	}
	afp_ports ap("d4096", "rdmtu0", "rdmtu1", "");
	ASSERT_TRUE(ap.ok());
	log_capture log;
	link_pair l;
	ASSERT_EQ(l.open(uint16_t(ap.port[0]), uint16_t(ap.port[1]), 4096), 0) << l.err;
	const std::string t = log.text();
	EXPECT_NE(t.find("mtu 4096 makes frames of up to 4186 bytes, but net_af_packet's framesz 2048 holds frames of "
			 "1982 bytes"),
		  std::string::npos)
		<< t;
	/* 1982 - 82 - 4: what the warning says passes, over IPv6. */
	EXPECT_NE(t.find("datagrams above 1896 bytes (1892 with immediate data) are lost"), std::string::npos) << t;
	EXPECT_EQ(exchange(l, 0, true, 1024, 8), 8u);
	close_pair(l);
}

/* A 1500-byte interface (the veth default) limits the frame before
 * framesz does: the warning names the interface. */
TEST(SoftMtuLimits, AfPacketInterfaceMtu)
{
	if (const char *why = netns_reason())
		GTEST_SKIP() << why;
	afp_ports ap("if", "rdmtu2", "rdmtu3", ",qpairs=1,blocksz=8192,framesz=8192,framecnt=64");
	ASSERT_TRUE(ap.ok());
	log_capture log;
	link_pair l;
	ASSERT_EQ(l.open(uint16_t(ap.port[0]), uint16_t(ap.port[1]), 2048), 0) << l.err;
	const std::string t = log.text();
	/* 1514 - 82 - 4 over IPv6. */
	EXPECT_NE(t.find("mtu 2048 makes frames of up to 2138 bytes, but interface rdmtu2 has MTU 1500"),
		  std::string::npos)
		<< t;
	EXPECT_NE(t.find("datagrams above 1428 bytes (1424 with immediate data) are lost"), std::string::npos) << t;
	/* What passes, passes: the largest IB MTU below it. */
	for (bool v6 : {false, true}) {
		EXPECT_EQ(exchange(l, 0, v6, 1024, 8), 8u);
	}
	close_pair(l);
}

/* A caller's pool short of what af_packet copies into each buffer: one
 * line naming the PMD's need, EINVAL, not the PMD's ENOMEM. */
TEST(SoftMtuLimits, CallerPoolShortOfThePmd)
{
	if (const char *why = netns_reason())
		GTEST_SKIP() << why;
	afp_ports ap("pool", "rdmtu0", "rdmtu1", "");
	ASSERT_TRUE(ap.ok());
	rte_mempool *mp = rte_pktmbuf_pool_create("mtu_small", 511, 0, 0, RTE_PKTMBUF_HEADROOM + 1200, SOCKET_ID_ANY);
	ASSERT_NE(mp, nullptr);
	link_pair l;
	EXPECT_EQ(l.open(uint16_t(ap.port[0]), uint16_t(ap.port[1]), 1024, mp), EINVAL);
	EXPECT_EQ(l.err, "pool: data room 1328 is short of 2144, the headroom plus net_af_packet's frame (framesz "
			 "2048 less its 32-byte tpacket2 header)");
	l.dev[0].close();
	rte_mempool_free(mp);
}

/* And short of the MTU, on any port. */
TEST(SoftMtuLimits, CallerPoolShortOfTheMtu)
{
	rte_ring *r = rte_ring_create("mtu_short", 256, SOCKET_ID_ANY, 0);
	ASSERT_NE(r, nullptr);
	const int p = rte_eth_from_rings("net_mtu_short", &r, 1, &r, 1, 0);
	ASSERT_GE(p, 0);
	rte_mempool *mp = rte_pktmbuf_pool_create("mtu_short", 511, 0, 0, RTE_PKTMBUF_HEADROOM + 1200, SOCKET_ID_ANY);
	ASSERT_NE(mp, nullptr);
	link_pair l;
	EXPECT_EQ(l.open(uint16_t(p), uint16_t(p), 2048, mp), EINVAL);
	EXPECT_EQ(l.err, "pool: data room 1328 is short of 2270, the headroom plus the MTU's largest frame (headers + "
			 "MTU + ICRC + pad)");
	l.dev[0].close();
	rte_eth_dev_close(uint16_t(p));
	rte_mempool_free(mp);
	rte_ring_free(r);
}

/* DPDK 22.11's memif teardown is not safe with both ends of one control
 * socket in one process (tests/unit/test_burst_guard.cc): leave with the
 * verdict before the EAL cleanup closes the ports. */
class exit_before_eal_cleanup : public ::testing::EmptyTestEventListener {
	void OnEnvironmentsTearDownStart(const ::testing::UnitTest &u) override
	{
		printf("[  %s  ] %d tests (exiting before the EAL cleanup)\n", u.Passed() ? "PASSED" : "FAILED",
		       u.test_to_run_count());
		fflush(stdout);
		fflush(stderr);
		for (uint32_t m : mtus)
			unlink(memif_sock(m).c_str());
		std::_Exit(u.Passed() ? 0 : 1);
	}
};
const bool exit_listener_added = [] {
	::testing::UnitTest::GetInstance()->listeners().Append(new exit_before_eal_cleanup);
	return true;
}();

} // namespace
