/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The soft driver's packets against an independent implementation: frames
 * built by scapy (tests/data/icrc_vectors.txt, see its header) must be
 * accepted by our receive path with the right fields, and our transmit path
 * must produce the same bytes from the same parameters: with every ICRC
 * kernel this CPU runs (crc32.h; a queue's is chosen at attach, here forced
 * with set_crc_kernel), so all of them write and accept the same bytes.
 */
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include "eal_env.h"
#include "soft_datapath.h"

using namespace rdgram;
using namespace rdgram::soft;

namespace {

struct vec {
	std::string name;
	int l3;
	bool imm;
	uint32_t qpn, sqpn, qkey, psn, paylen;
	std::string source;
	std::vector<uint8_t> frame;
};

std::vector<uint8_t> unhex(const std::string &h)
{
	std::vector<uint8_t> out;
	for (size_t i = 0; i + 1 < h.size(); i += 2)
		out.push_back(uint8_t(std::stoul(h.substr(i, 2), nullptr, 16)));
	return out;
}

std::vector<vec> load_vectors()
{
	std::vector<vec> out;
	std::ifstream f(RDGRAM_TEST_DATA "/icrc_vectors.txt");
	EXPECT_TRUE(f.good()) << "cannot open " RDGRAM_TEST_DATA "/icrc_vectors.txt";
	std::string line;
	while (std::getline(f, line)) {
		if (line.empty() || line[0] == '#')
			continue;
		std::istringstream ls(line);
		vec v;
		ls >> v.name;
		std::map<std::string, std::string> kv;
		std::string tok;
		while (ls >> tok) {
			auto eq = tok.find('=');
			kv[tok.substr(0, eq)] = tok.substr(eq + 1);
		}
		v.l3 = std::stoi(kv["l3"]);
		v.imm = kv["imm"] == "1";
		v.qpn = uint32_t(std::stoul(kv["qpn"], nullptr, 16));
		v.sqpn = uint32_t(std::stoul(kv["sqpn"], nullptr, 16));
		v.qkey = uint32_t(std::stoul(kv["qkey"], nullptr, 16));
		v.psn = uint32_t(std::stoul(kv["psn"], nullptr, 16));
		v.paylen = uint32_t(std::stoul(kv["paylen"]));
		v.source = kv["source"];
		v.frame = unhex(kv["frame"]);
		out.push_back(v);
	}
	return out;
}

/* The ICRC kernels crc32_select hands out on this CPU, one per level
 * (avx512, avx2, pclmul, table on an AVX-512 + VPCLMULQDQ host). */
std::vector<crc32_kernel> crc_kernels()
{
	std::vector<crc32_kernel> v;
	for (cpu_isa cap : {cpu_isa::avx512, cpu_isa::avx2, cpu_isa::sse, cpu_isa::portable}) {
		const crc32_kernel k = crc32_select(cap);
		if (v.empty() || v.back() != k)
			v.push_back(k);
	}
	return v;
}

class SoftWire : public ::testing::Test {
protected:
	void SetUp() override
	{
		static std::atomic<unsigned> seq{0};
		char name[32];
		snprintf(name, sizeof(name), "tw_pool%u", seq.fetch_add(1));
		mp = rte_pktmbuf_pool_create(name, 511, 0, 0, 8192 + RTE_PKTMBUF_HEADROOM, SOCKET_ID_ANY);
		ASSERT_NE(mp, nullptr);
		ASSERT_EQ(ahs.init(16, SOCKET_ID_ANY, nullptr), 0);
	}
	void TearDown() override
	{
		EXPECT_EQ(rte_mempool_in_use_count(mp), 0u) << "mbuf leak";
		rte_mempool_free(mp);
	}

	/* A queue that accepts v's destination. */
	void attach_for(soft_queue &q, const vec &v)
	{
		soft_port_view view;
		const uint8_t *ipb = v.frame.data() + 14;
		if (v.l3 == 4) {
			memcpy(&view.v4[0], ipb + 16, 4);
			view.n_v4 = 1;
		} else {
			memcpy(view.v6[0], ipb + 24, 16);
			view.n_v6 = 1;
		}
		q.attach(0, 0, mp, &ahs, view);
	}

	/* *h: an AH whose AV is v's own Eth/IP/UDP (lengths, checksums zero). */
	void av_of(const vec &v, ah_handle *h)
	{
		const bool v4 = v.l3 == 4;
		const size_t addr = v4 ? 42 : 62;
		uint32_t slot;
		ASSERT_TRUE(ahs.reserve(&slot));
		soft_av &av = ahs.av_at(slot);
		memset(&av, 0, sizeof(av));
		/* IPv6: the AV stops after the UDP destination port (58 of
		 * the 62 address bytes); TX writes length and checksum. */
		memcpy(av.hdr, v.frame.data(), std::min(addr, av_hdr_len));
		if (v4) {
			auto *ip4 = reinterpret_cast<rte_ipv4_hdr *>(av.hdr + 14);
			ip4->total_length = 0;
			ip4->hdr_checksum = 0;
			uint32_t s = rte_raw_cksum(ip4, 20);
			memcpy(av.hdr + av_v4_csum_off, &s, 4);
		} else {
			reinterpret_cast<rte_ipv6_hdr *>(av.hdr + 14)->payload_len = 0;
		}
		if (v4) {
			auto *udp = reinterpret_cast<rte_udp_hdr *>(av.hdr + addr - 8);
			udp->dgram_len = 0;
			udp->dgram_cksum = 0;
		}
		av.l3 = v4 ? 4 : 6;
		*h = ahs.publish(slot);
	}

	rte_mbuf *mbuf_of(const std::vector<uint8_t> &bytes)
	{
		rte_mbuf *m = rte_pktmbuf_alloc(mp);
		EXPECT_NE(m, nullptr);
		memcpy(rte_pktmbuf_append(m, uint16_t(bytes.size())), bytes.data(), bytes.size());
		return m;
	}

	rte_mempool *mp = nullptr;
	ah_table<soft_av> ahs;
};

/* On an AVX-512 + VPCLMULQDQ CPU the tests below run all four kernels;
 * a queue's default is the process's plan (crc32_chosen: measured, or
 * the best crc32_select names when RDGRAM_CPU_MAX forces it), of
 * kernels this CPU runs. */
TEST_F(SoftWire, EveryIcrcKernelUnderTest)
{
	const auto ks = crc_kernels();
	std::string names;
	for (crc32_kernel k : ks)
		names += std::string(crc32_kernel_name(k)) + " ";
	std::printf("ICRC kernels under test: %s\n", names.c_str());
	if (std::getenv("RDGRAM_CPU_MAX") == nullptr && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("vpclmulqdq")) {
		EXPECT_EQ(ks.size(), 4u);
	}
	soft_queue q;
	const crc32_plan &p = crc32_chosen();
	std::printf("ICRC plan: %s\n", crc32_plan_describe(p).c_str());
	for (unsigned c = 0; c < crc32_plan::classes; c++) {
		EXPECT_EQ(q.crc_plan().kernel[c], p.kernel[c]);
		EXPECT_NE(std::find(ks.begin(), ks.end(), p.kernel[c]), ks.end()) << crc32_kernel_name(p.kernel[c]);
		EXPECT_EQ(q.crc_for(crc32_plan::class_len[c]), p.kernel[c]);
	}
	if (std::getenv("RDGRAM_CPU_MAX") != nullptr) {
		EXPECT_FALSE(p.measured);
		EXPECT_TRUE(p.uniform());
		EXPECT_EQ(p.kernel[0], ks.front());
	}
	q.set_crc_kernel(ks.back());
	EXPECT_EQ(q.crc_for(60), ks.back());
	EXPECT_EQ(q.crc_for(9000), ks.back());
}

TEST_F(SoftWire, VectorsLoaded)
{
	auto vs = load_vectors();
	EXPECT_GE(vs.size(), 40u);
	size_t v6 = 0, imm = 0;
	for (auto &v : vs) {
		v6 += v.l3 == 6;
		imm += v.imm;
	}
	EXPECT_GT(v6, 0u);
	EXPECT_GT(imm, 0u);
}

/* Receive: every independent frame is delivered, in verbs' layout. */
TEST_F(SoftWire, ParsesIndependentFrames)
{
	for (const crc32_kernel k : crc_kernels())
	for (const auto &v : load_vectors()) {
		SCOPED_TRACE(v.name + ", ICRC kernel " + crc32_kernel_name(k));
		soft_queue q;
		attach_for(q, v);
		q.set_crc_kernel(k);
		q.add_qp(v.qpn, v.qkey);
		rte_mbuf *m = mbuf_of(v.frame);
		recv_wc wc{};
		ASSERT_TRUE(q.parse(m, wc)) << "dropped; counters rx_drops=" << q.counters().rx_drops()
					    << " icrc=" << q.counters().rx_bad_icrc;
		EXPECT_EQ(wc.qp_num, v.qpn);
		EXPECT_EQ(wc.src_qp, v.sqpn);
		EXPECT_EQ(wc.byte_len, 40 + v.paylen);
		EXPECT_EQ(rte_pktmbuf_pkt_len(wc.mbuf), 40 + v.paylen);
		EXPECT_EQ(bool(wc.wc_flags & wc_with_imm), v.imm);
		EXPECT_TRUE(wc.wc_flags & wc_grh);
		const uint8_t *ipb = v.frame.data() + 14;
		const uint8_t *grh = rte_pktmbuf_mtod(wc.mbuf, const uint8_t *);
		const size_t hdr = (v.l3 == 4 ? 62 : 82) + (v.imm ? 4 : 0);
		if (v.l3 == 4) {
			EXPECT_EQ(wc.l3, l3_type::ipv4);
			EXPECT_EQ(0, memcmp(wc.sgid.raw + 12, ipb + 12, 4));
			EXPECT_TRUE(wc.sgid.is_v4_mapped());
			/* IPv4 header in the last 20 bytes of the GRH area. */
			EXPECT_EQ(0, memcmp(grh + 20, ipb, 20));
		} else {
			EXPECT_EQ(wc.l3, l3_type::ipv6);
			EXPECT_EQ(0, memcmp(wc.sgid.raw, ipb + 8, 16));
			EXPECT_EQ(0, memcmp(grh, ipb, 40));
		}
		if (v.imm) {
			EXPECT_EQ(0, memcmp(&wc.imm_data, v.frame.data() + hdr - 4, 4));
		}
		EXPECT_EQ(0, memcmp(grh + 40, v.frame.data() + hdr, v.paylen)) << "payload differs";
		rte_pktmbuf_free(wc.mbuf);
		EXPECT_EQ(q.counters().rx_pkts, 1u);
	}
}

/* Receive: one flipped bit anywhere ICRC covers is caught. */
TEST_F(SoftWire, IcrcCatchesCorruption)
{
	for (const crc32_kernel k : crc_kernels())
	for (const auto &v : load_vectors()) {
		if (v.paylen < 4)
			continue;
		SCOPED_TRACE(v.name + ", ICRC kernel " + crc32_kernel_name(k));
		soft_queue q;
		attach_for(q, v);
		q.set_crc_kernel(k);
		q.add_qp(v.qpn, v.qkey);
		auto bad = v.frame;
		bad[bad.size() - 6] ^= 0x10; /* last payload/pad byte region */
		rte_mbuf *m = mbuf_of(bad);
		recv_wc wc{};
		EXPECT_FALSE(q.parse(m, wc));
		rte_pktmbuf_free(m);
		EXPECT_EQ(q.counters().rx_bad_icrc, 1u);
	}
}

/* Transmit: same parameters, same bytes as scapy. */
TEST_F(SoftWire, BuildsIdenticalFrames)
{
	for (const crc32_kernel k : crc_kernels())
	for (int from_mbuf = 0; from_mbuf < 2; from_mbuf++) {
		for (const auto &v : load_vectors()) {
			SCOPED_TRACE(v.name + (from_mbuf ? " (mbuf payload)" : " (inline)") + ", ICRC kernel " +
				     crc32_kernel_name(k));
			const bool v4 = v.l3 == 4;
			const size_t addr = v4 ? 42 : 62;
			const size_t hdr = (v4 ? 62 : 82) + (v.imm ? 4 : 0);
			ah_handle h;
			ASSERT_NO_FATAL_FAILURE(av_of(v, &h));

			soft_queue q;
			attach_for(q, v);
			q.set_crc_kernel(k);
			q.add_qp(v.sqpn, v.qkey);
			q.qp(0)->psn = v.psn;
			send_wr wr{};
			wr.ah = h;
			wr.remote_qpn = v.qpn;
			wr.remote_qkey = v.qkey;
			const uint8_t *payload = v.frame.data() + hdr;
			rte_mbuf *m = rte_pktmbuf_alloc(mp);
			ASSERT_NE(m, nullptr);
			if (from_mbuf) {
				memcpy(rte_pktmbuf_append(m, uint16_t(v.paylen)), payload, v.paylen);
				wr.mbuf = m;
			} else {
				wr.inline_data = payload;
				wr.inline_len = v.paylen;
				wr.flags = send_inline;
			}
			if (v.frame[addr + 1] & wire::bth_se)
				wr.flags |= send_solicited;
			if (v.imm) {
				wr.flags |= send_imm;
				memcpy(&wr.imm_data, v.frame.data() + hdr - 4, 4);
			}
			ASSERT_TRUE(q.build(wr, *q.qp(0), m));
			std::vector<uint8_t> got(rte_pktmbuf_mtod(m, uint8_t *),
						 rte_pktmbuf_mtod(m, uint8_t *) + rte_pktmbuf_pkt_len(m));
			auto want = v.frame;
			if (!v4) /* we send UDP checksum 0 (Annex A17.4.5.1); ICRC masks it */
				want[14 + 40 + 6] = want[14 + 40 + 7] = 0;
			ASSERT_EQ(got.size(), want.size());
			size_t diff = 0;
			while (diff < got.size() && got[diff] == want[diff])
				diff++;
			EXPECT_EQ(diff, got.size()) << "first differing byte at offset " << diff << ": got "
						    << int(got[diff < got.size() ? diff : 0]) << " want "
						    << int(want[diff < got.size() ? diff : 0]);
			rte_pktmbuf_free(m);
			ASSERT_EQ(ahs.retire(h), 0);
		}
	}
}

/* A send to the port's own address (tx_loopback: rdgram's libibverbs,
 * for a QP sending to its own GID): built as for the wire and delivered
 * through the receive checks, inline or from an mbuf; what is not
 * delivered is counted, and every mbuf is back in the pool (TearDown). */
TEST_F(SoftWire, LoopbackDeliversThroughTheReceiveChecks)
{
	const std::vector<uint8_t> too_long(soft_port_view{}.mtu + 1, 0x5a);
	for (int from_mbuf = 0; from_mbuf < 2; from_mbuf++)
	for (const auto &v : load_vectors()) {
		if (v.sqpn == v.qpn)
			continue;
		SCOPED_TRACE(v.name + (from_mbuf ? " (mbuf payload)" : " (inline)"));
		const size_t hdr = (v.l3 == 4 ? 62 : 82) + (v.imm ? 4 : 0);
		const uint8_t *payload = v.frame.data() + hdr;
		ah_handle h;
		ASSERT_NO_FATAL_FAILURE(av_of(v, &h));
		soft_queue q;
		attach_for(q, v);
		ASSERT_EQ(q.add_qp(v.sqpn, v.qkey), 0);
		ASSERT_EQ(q.add_qp(v.qpn, v.qkey), 0);
		q.select_send_qp(0);
		send_wr wr{};
		wr.ah = h;
		wr.remote_qpn = v.qpn;
		wr.remote_qkey = v.qkey;
		if (v.imm) {
			wr.flags |= send_imm;
			memcpy(&wr.imm_data, v.frame.data() + hdr - 4, 4);
		}
		auto set_payload = [&](const uint8_t *p, uint32_t len) {
			if (from_mbuf) {
				wr.mbuf = rte_pktmbuf_alloc(mp);
				ASSERT_NE(wr.mbuf, nullptr);
				memcpy(rte_pktmbuf_append(wr.mbuf, uint16_t(len)), p, len);
			} else {
				wr.flags |= send_inline;
				wr.inline_data = p;
				wr.inline_len = len;
			}
		};
		ASSERT_NO_FATAL_FAILURE(set_payload(payload, v.paylen));
		recv_wc wc{};
		ASSERT_TRUE(q.tx_loopback(wr, wc)) << "not delivered; rx_drops=" << q.counters().rx_drops();
		EXPECT_EQ(wc.qp_num, v.qpn);
		EXPECT_EQ(wc.src_qp, v.sqpn);
		EXPECT_EQ(wc.byte_len, 40 + v.paylen);
		EXPECT_EQ(bool(wc.wc_flags & wc_with_imm), v.imm);
		if (v.imm) {
			EXPECT_EQ(wc.imm_data, wr.imm_data);
		}
		EXPECT_EQ(0, memcmp(rte_pktmbuf_mtod(wc.mbuf, const uint8_t *) + 40, payload, v.paylen));
		rte_pktmbuf_free(wc.mbuf);
		EXPECT_EQ(q.counters().tx_pkts, 1u);
		EXPECT_EQ(q.counters().rx_pkts, 1u);

		/* To a QPN of no QP: built, then dropped by the receive checks. */
		wr.remote_qpn = 0x123456;
		ASSERT_NE(wr.remote_qpn, v.qpn);
		ASSERT_NE(wr.remote_qpn, v.sqpn);
		ASSERT_NO_FATAL_FAILURE(set_payload(payload, v.paylen));
		EXPECT_FALSE(q.tx_loopback(wr, wc));
		EXPECT_EQ(q.counters().rx_unknown_qpn, 1u);
		EXPECT_EQ(q.counters().tx_pkts, 2u);
		EXPECT_EQ(q.counters().rx_pkts, 1u);

		/* Over the path MTU: refused by the build, never received. */
		wr.remote_qpn = v.qpn;
		ASSERT_NO_FATAL_FAILURE(set_payload(too_long.data(), uint32_t(too_long.size())));
		EXPECT_FALSE(q.tx_loopback(wr, wc));
		EXPECT_EQ(q.counters().tx_too_long, 1u);
		EXPECT_EQ(q.counters().tx_pkts, 2u);
		EXPECT_EQ(q.counters().rx_pkts, 1u);
		ASSERT_EQ(ahs.retire(h), 0);
	}
}

TEST(Wire, Helpers)
{
	uint8_t b[3];
	wire::put24(b, 0xabcdef);
	EXPECT_EQ(wire::get24(b), 0xabcdefu);
	EXPECT_EQ(wire::pad_for(0), 0u);
	EXPECT_EQ(wire::pad_for(1), 3u);
	EXPECT_EQ(wire::pad_for(6), 2u);
	/* rdma_flow_label_to_udp_sport (include/rdma/ib_verbs.h). */
	EXPECT_EQ(wire::udp_sport_from_flow_label(0), 0xC000);
	EXPECT_EQ(wire::udp_sport_from_flow_label(0x12345), uint16_t(((0x12345 & 0x3fff) ^ (0x12345 >> 14)) | 0xC000));
	EXPECT_TRUE(pkey_match(0xffff, 0xffff));
	EXPECT_TRUE(pkey_match(0x7fff, 0xffff));
	EXPECT_FALSE(pkey_match(0x7fff, 0x7fff)); /* two limited members */
	EXPECT_FALSE(pkey_match(0x8001, 0xffff));
}

} // namespace
