/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Every receive drop reason, each triggered by one malformed frame fed
 * through the real port (net_ring) and rx_burst: exactly that counter moves,
 * nothing is delivered, and every mbuf is back in its pool.
 */
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "eal_env.h"

using namespace rdgram;
using namespace rdgram::test;

namespace {

using mutator = std::function<void(rte_mbuf *)>;

uint8_t *frame(rte_mbuf *m) { return rte_pktmbuf_mtod(m, uint8_t *); }
rte_ipv4_hdr *ip4(rte_mbuf *m) { return reinterpret_cast<rte_ipv4_hdr *>(frame(m) + 14); }
void fix_ip4_csum(rte_mbuf *m)
{
	ip4(m)->hdr_checksum = 0;
	ip4(m)->hdr_checksum = rte_ipv4_cksum(ip4(m));
}
size_t l4(rte_mbuf *m) { return frame(m)[12] == 0x08 ? 34 : 54; }
wire::bth *bth(rte_mbuf *m) { return reinterpret_cast<wire::bth *>(frame(m) + l4(m) + 8); }
wire::deth *deth(rte_mbuf *m) { return reinterpret_cast<wire::deth *>(frame(m) + l4(m) + 20); }

struct DropCase {
	const char *name;
	bool v6;
	uint32_t paylen;
	mutator mut;
	uint64_t soft::soft_counters::*counter;
};

class SoftDrops : public ::testing::TestWithParam<DropCase> {};

TEST_P(SoftDrops, CountedAndFreed)
{
	const DropCase &c = GetParam();
	soft_pair p(c.v6, 1024);
	ASSERT_TRUE(p.ok);
	const unsigned base0 = p.in_use(0), base1 = p.in_use(1);
	ah_handle h = p.ah_from(0);
	ASSERT_NE(h, ah_null);

	/* A valid frame from side 0, taken off the wire before side 1 sees it. */
	std::vector<uint8_t> pay(c.paylen, 0x42);
	send_wr wr{};
	wr.ah = h;
	wr.remote_qpn = p.qpn[1];
	wr.remote_qkey = p.qkey;
	wr.inline_data = pay.data();
	wr.inline_len = c.paylen;
	wr.flags = send_inline;
	ASSERT_EQ(p.q[0].tx_burst(&wr, 1), 1);
	p.q[0].tx_flush();
	void *obj = nullptr;
	ASSERT_EQ(rte_ring_dequeue(p.ring[1], &obj), 0);
	ASSERT_NE(obj, nullptr);
	rte_mbuf *m = static_cast<rte_mbuf *>(obj);
	c.mut(m);
	ASSERT_EQ(rte_ring_enqueue(p.ring[1], m), 0);

	recv_wc wc[4];
	EXPECT_EQ(p.q[1].rx_burst(wc, 4), 0);
	const soft::soft_counters &k = p.q[1].counters();
	EXPECT_EQ(k.*(c.counter), 1u) << c.name;
	EXPECT_EQ(k.rx_drops(), 1u) << "exactly one drop, under its own reason";
	EXPECT_EQ(k.rx_pkts, 0u);
	g_rt->ctl().call([&] { p.dev[0].destroy_ah(h); });
	EXPECT_EQ(p.in_use(0), base0);
	EXPECT_EQ(p.in_use(1), base1);
}

/* The unmodified frame is delivered (the control case for all the others). */
TEST(SoftDropsControl, ValidFrameDelivered)
{
	for (bool v6 : {false, true}) {
		soft_pair p(v6);
		ASSERT_TRUE(p.ok);
		ah_handle h = p.ah_from(0);
		uint8_t b[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
		send_wr wr{h, p.qpn[1], p.qkey, nullptr, b, sizeof(b), 0, send_inline};
		ASSERT_EQ(p.q[0].tx_burst(&wr, 1), 1);
		recv_wc wc[4];
		ASSERT_EQ(p.q[1].rx_burst(wc, 4), 1);
		EXPECT_EQ(wc[0].src_qp, p.qpn[0]);
		EXPECT_EQ(wc[0].sgid, p.addr[0]);
		EXPECT_EQ(0, memcmp(rte_pktmbuf_mtod_offset(wc[0].mbuf, uint8_t *, 40), b, sizeof(b)));
		rte_pktmbuf_free(wc[0].mbuf);
		g_rt->ctl().call([&] { p.dev[0].destroy_ah(h); });
		EXPECT_EQ(p.in_use(1), 0u);
	}
}

const DropCase cases[] = {
	/* LLDP: not IP, and not ARP either (ARP goes to the control thread). */
	{"not_ip", false, 8, [](rte_mbuf *m) { frame(m)[12] = 0x88, frame(m)[13] = 0xcc; }, &soft::soft_counters::rx_not_ip},
	{"truncated_eth", false, 8, [](rte_mbuf *m) { rte_pktmbuf_trim(m, uint16_t(rte_pktmbuf_pkt_len(m) - 10)); },
	 &soft::soft_counters::rx_truncated},
	{"truncated_ip_len", false, 8,
	 [](rte_mbuf *m) {
		 ip4(m)->total_length = rte_cpu_to_be_16(1400);
		 fix_ip4_csum(m);
	 },
	 &soft::soft_counters::rx_truncated},
	{"ip_options", false, 8, [](rte_mbuf *m) { ip4(m)->version_ihl = 0x46; }, &soft::soft_counters::rx_bad_ip_header},
	{"ip_checksum", false, 8, [](rte_mbuf *m) { ip4(m)->hdr_checksum ^= 0x0101; }, &soft::soft_counters::rx_bad_ip_checksum},
	{"ip_fragment", false, 8,
	 [](rte_mbuf *m) {
		 ip4(m)->fragment_offset = RTE_BE16(RTE_IPV4_HDR_MF_FLAG);
		 fix_ip4_csum(m);
	 },
	 &soft::soft_counters::rx_ip_fragment},
	{"not_udp", false, 8,
	 [](rte_mbuf *m) {
		 ip4(m)->next_proto_id = 6;
		 fix_ip4_csum(m);
	 },
	 &soft::soft_counters::rx_not_udp},
	{"not_udp_v6", true, 8, [](rte_mbuf *m) { frame(m)[14 + 6] = 6; }, &soft::soft_counters::rx_not_udp},
	/* Shorter than any RoCEv2 packet but whole: a TCP ACK, an ICMPv6
	 * router solicitation (seen on the lab's tap). Not "truncated". */
	{"short_tcp_ack", false, 8,
	 [](rte_mbuf *m) {
		 ip4(m)->next_proto_id = 6;
		 ip4(m)->total_length = rte_cpu_to_be_16(40);
		 fix_ip4_csum(m);
		 rte_pktmbuf_trim(m, uint16_t(rte_pktmbuf_pkt_len(m) - 54));
	 },
	 &soft::soft_counters::rx_not_udp},
	{"short_icmpv6", true, 8,
	 [](rte_mbuf *m) {
		 frame(m)[14 + 6] = 58;
		 frame(m)[14 + 4] = 0, frame(m)[14 + 5] = 16;
		 rte_pktmbuf_trim(m, uint16_t(rte_pktmbuf_pkt_len(m) - 70));
	 },
	 &soft::soft_counters::rx_not_udp},
	{"short_lying_length", true, 8,
	 [](rte_mbuf *m) {
		 frame(m)[14 + 6] = 58;
		 frame(m)[14 + 4] = 0, frame(m)[14 + 5] = 200;
		 rte_pktmbuf_trim(m, uint16_t(rte_pktmbuf_pkt_len(m) - 70));
	 },
	 &soft::soft_counters::rx_truncated},
	{"ipv6_version", true, 8, [](rte_mbuf *m) { frame(m)[14] = 0x40; }, &soft::soft_counters::rx_bad_ip_header},
	{"not_roce", false, 8, [](rte_mbuf *m) { frame(m)[34 + 3] = 0xb8; }, &soft::soft_counters::rx_not_roce},
	{"udp_length", false, 8, [](rte_mbuf *m) { frame(m)[34 + 5] += 1; }, &soft::soft_counters::rx_bad_udp_length},
	{"dgid", false, 8,
	 [](rte_mbuf *m) {
		 ip4(m)->dst_addr ^= RTE_BE32(0xff);
		 fix_ip4_csum(m);
	 },
	 &soft::soft_counters::rx_dgid_mismatch},
	{"dgid_v6", true, 8, [](rte_mbuf *m) { frame(m)[14 + 39] ^= 1; }, &soft::soft_counters::rx_dgid_mismatch},
	{"bth_version", false, 8, [](rte_mbuf *m) { bth(m)->flags |= 1; }, &soft::soft_counters::rx_bad_bth_version},
	{"opcode_rc", false, 8, [](rte_mbuf *m) { bth(m)->opcode = 0x04; }, &soft::soft_counters::rx_bad_opcode},
	{"pkey", false, 8, [](rte_mbuf *m) { bth(m)->pkey = RTE_BE16(0x8001); }, &soft::soft_counters::rx_bad_pkey},
	{"pkey_limited", false, 8, [](rte_mbuf *m) { bth(m)->pkey = RTE_BE16(0x0001); }, &soft::soft_counters::rx_bad_pkey},
	{"unknown_qpn", false, 8, [](rte_mbuf *m) { wire::put24(bth(m)->dqpn, 0x999); }, &soft::soft_counters::rx_unknown_qpn},
	{"qkey", false, 8, [](rte_mbuf *m) { deth(m)->qkey ^= RTE_BE32(1); }, &soft::soft_counters::rx_bad_qkey},
	{"privileged_qkey", false, 8, [](rte_mbuf *m) { deth(m)->qkey |= RTE_BE32(0x80000000); },
	 &soft::soft_counters::rx_bad_qkey},
	{"pad_exceeds", false, 0, [](rte_mbuf *m) { bth(m)->flags |= 3 << 4; }, &soft::soft_counters::rx_bad_length},
	{"icrc", false, 8, [](rte_mbuf *m) { frame(m)[62 + 3] ^= 0x80; }, &soft::soft_counters::rx_bad_icrc},
	{"icrc_v6", true, 8, [](rte_mbuf *m) { frame(m)[82] ^= 1; }, &soft::soft_counters::rx_bad_icrc},
	{"icrc_header", false, 8, [](rte_mbuf *m) { wire::put24(bth(m)->psn, 77); }, &soft::soft_counters::rx_bad_icrc},
};

INSTANTIATE_TEST_SUITE_P(AllReasons, SoftDrops, ::testing::ValuesIn(cases),
			 [](const ::testing::TestParamInfo<DropCase> &i) { return std::string(i.param.name); });

/* Payload over the receiver's path MTU: the sender's MTU is larger. */
TEST(SoftDropsMtu, OverMtuDropped)
{
	soft_pair big(false, 4096), small(false, 256);
	ASSERT_TRUE(big.ok && small.ok);
	ah_handle h = big.ah_from(0);
	std::vector<uint8_t> pay(300, 1);
	send_wr wr{h, small.qpn[1], big.qkey, nullptr, pay.data(), 300, 0, send_inline};
	ASSERT_EQ(big.q[0].tx_burst(&wr, 1), 1);
	void *obj = nullptr;
	ASSERT_EQ(rte_ring_dequeue(big.ring[1], &obj), 0);
	/* Hand it to the small-MTU side (same addresses, same QPN). */
	ASSERT_EQ(rte_ring_enqueue(small.ring[1], obj), 0);
	recv_wc wc[2];
	EXPECT_EQ(small.q[1].rx_burst(wc, 2), 0);
	EXPECT_EQ(small.q[1].counters().rx_bad_length, 1u);
	g_rt->ctl().call([&] { big.dev[0].destroy_ah(h); });
	EXPECT_EQ(small.in_use(1), 0u);
	EXPECT_EQ(big.in_use(0), 0u);
}

/* Send side: stale handle, payload over MTU, unusable mbuf. */
TEST(SoftTxDrops, CountedAndFreed)
{
	soft_pair p(false, 256);
	ASSERT_TRUE(p.ok);
	ah_handle h = p.ah_from(0);
	g_rt->ctl().call([&] { EXPECT_EQ(p.dev[0].destroy_ah(h), 0); });
	uint8_t b[8]{};
	send_wr wr{h, p.qpn[1], p.qkey, nullptr, b, sizeof(b), 0, send_inline};
	EXPECT_EQ(p.q[0].tx_burst(&wr, 1), 1); /* taken, then dropped */
	EXPECT_EQ(p.q[0].counters().tx_stale_ah, 1u);

	ah_handle h2 = p.ah_from(0);
	std::vector<uint8_t> big(300);
	send_wr w2{h2, p.qpn[1], p.qkey, nullptr, big.data(), 300, 0, send_inline};
	EXPECT_EQ(p.q[0].tx_burst(&w2, 1), 1);
	EXPECT_EQ(p.q[0].counters().tx_too_long, 1u);

	/* mbuf with no headroom for the headers. */
	rte_mbuf *m = rte_pktmbuf_alloc(p.dev[0].mempool());
	rte_pktmbuf_prepend(m, rte_pktmbuf_headroom(m));
	send_wr w3{h2, p.qpn[1], p.qkey, m, nullptr, 0, 0, 0};
	EXPECT_EQ(p.q[0].tx_burst(&w3, 1), 1);
	EXPECT_EQ(p.q[0].counters().tx_bad_mbuf, 1u);
	EXPECT_EQ(p.q[0].counters().tx_pkts, 0u);
	EXPECT_EQ(p.q[0].counters().tx_drops(), 3u);
	recv_wc wc[2];
	EXPECT_EQ(p.q[1].rx_burst(wc, 2), 0);
	g_rt->ctl().call([&] { p.dev[0].destroy_ah(h2); });
	EXPECT_EQ(p.in_use(0), 0u);
	EXPECT_EQ(p.in_use(1), 0u);
}

} // namespace
