/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Hardware suite for drivers/verbs: needs an RDMA device with an active
 * port (any provider: mlx5, efa, rxe, ...). Without one it exits 77, which
 * meson reports as SKIP. RDGRAM_VERBS_DEVICE=<name> picks the device.
 *
 * Where it ran: on rxe0 (Linux 6.1's rdma_rxe, a software provider behind
 * real uverbs) in the lab guest, tests/lab/verbs_hw.sh, as part of the
 * README's test command. Not yet on an RDMA NIC (mlx5, EFA, ...).
 *
 * With a device: open it, check the port facts, create two UD QPs (two
 * verbs_queues), create an AH to the port's own GID, send a burst from one
 * QP to the other (inline and mbuf payloads, with and without immediate
 * data), check every payload, src_qp, the GRH flag and the GIDs parsed from
 * the GRH area; check the AH errno semantics; destroy everything and check
 * every mbuf came back. With librdmacm: join a multicast group through
 * rdma_cm (publisher send-only, subscriber full member + ibv_attach_mcast),
 * send to the group, check what the subscriber's QP receives, leave.
 * RDGRAM_MCAST_LOCAL=<address of the port> (needed on InfiniBand: the IPoIB
 * address; on RoCE the port's first RoCEv2 GID gives it) and
 * RDGRAM_MCAST_GROUP=<group> (default 239.255.77.1 or ff15::7701).
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_mempool.h>

#include "eal_env.h"
#include "rdgram/ah_from_wc.h"
#include "verbs_device.h"
#ifdef RDGRAM_VERBS_MCAST
#include "verbs_mcast.h"
#endif

using namespace rdgram;
using namespace rdgram::verbs;
using rdgram::test::g_rt;

namespace {

std::string wanted_device()
{
	const char *e = getenv("RDGRAM_VERBS_DEVICE");
	return e != nullptr ? e : "";
}

/* The lowest index of a usable GID (port().gids keeps only RoCEv2 GIDs on
 * Ethernet, IB GIDs on InfiniBand), or -1. */
int first_gid(const port_attr &pa)
{
	for (size_t i = 0; i < pa.gids.size(); i++)
		if (!pa.gids[i].is_zero())
			return int(i);
	return -1;
}

struct hw_fixture {
	verbs_device dev;
	rte_mempool *mp = nullptr;
	verbs_queue q[2];
	bool made[2] = {false, false};
	bool ok = false;

	/* sub_qkey: queue 1's Q_Key (the multicast test's subscriber needs
	 * the group's). */
	explicit hw_fixture(uint32_t sub_qkey = 0x11111111)
	{
		/* The fixture's pool, given to the device (which leaves it to
		 * us): room for the GRH area and the largest IB MTU. */
		mp = rte_pktmbuf_pool_create("vhw", 4095, 256, 0, uint16_t(RTE_PKTMBUF_HEADROOM + wire::grh_len + 4096),
					     SOCKET_ID_ANY);
		if (mp == nullptr) {
			ADD_FAILURE() << "mempool";
			return;
		}
		verbs_config c;
		c.device = wanted_device();
		c.qsbr = g_rt->qsbr();
		c.topology = g_rt->topology();
		c.max_ah = 1024;
		c.pool = mp;
		int rc = -1;
		g_rt->ctl().call([&] { rc = dev.open(c); });
		if (rc != 0) {
			ADD_FAILURE() << "open: " << dev.error();
			return;
		}
		for (int i = 0; i < 2; i++) {
			queue_params qp;
			qp.qkey = i == 1 ? sub_qkey : 0x11111111;
			qp.sq_depth = 256;
			qp.rq_depth = 512;
			g_rt->ctl().call([&] { rc = dev.create_queue(qp, q[i]); });
			if (rc != 0) {
				ADD_FAILURE() << "create_queue: " << dev.error();
				return;
			}
			made[i] = true;
		}
		ok = true;
	}
	~hw_fixture()
	{
		g_rt->ctl().call([&] {
			for (int i = 0; i < 2; i++)
				if (made[i])
					dev.destroy_queue(q[i]);
			dev.close();
		});
		if (mp != nullptr) {
			EXPECT_EQ(rte_mempool_in_use_count(mp), 0u) << "mbufs not returned";
			rte_mempool_free(mp);
		}
	}
	ibv_ah_attr self_attr() const
	{
		const port_attr &pa = dev.port();
		ibv_ah_attr a{};
		a.port_num = 1;
		a.dlid = pa.lid;
		int gi = first_gid(pa);
		if (gi >= 0) {
			a.is_global = 1;
			a.grh.sgid_index = uint8_t(gi);
			a.grh.hop_limit = 64;
			memcpy(a.grh.dgid.raw, pa.gids[size_t(gi)].raw, 16);
		}
		return a;
	}
	ah_handle create(const ibv_ah_attr &a, int *err)
	{
		ah_handle h = ah_null;
		g_rt->ctl().call([&] { h = dev.create_ah(a, err); });
		return h;
	}
	int destroy(ah_handle h)
	{
		int rc = -1;
		g_rt->ctl().call([&] { rc = dev.destroy_ah(h); });
		return rc;
	}
};

} // namespace

TEST(VerbsHw, PortFacts)
{
	hw_fixture f;
	ASSERT_TRUE(f.ok);
	const port_attr &pa = f.dev.port();
	printf("device %s port %u: %s, MTU %u, max_ah %u, P_Key 0x%04x, LID %u, NUMA %d, %zu GID slots, %zu local CPUs\n",
	       f.dev.name().c_str(), f.dev.port_num(), pa.link == link_layer::ethernet ? "Ethernet" : "InfiniBand",
	       pa.active_mtu, pa.max_ah, pa.pkey, pa.lid, pa.numa_node, pa.gids.size(), f.dev.local_cpus().size());
	EXPECT_GE(pa.active_mtu, 256u);
	EXPECT_LE(pa.active_mtu, 4096u);
	EXPECT_GT(pa.max_ah, 0u);
	EXPECT_EQ(pa.gids.size(), f.dev.gid_kinds().size());
	if (pa.link == link_layer::ethernet) {
		EXPECT_TRUE(pa.grh_required);
		EXPECT_GE(first_gid(pa), 0) << "no RoCEv2 GID on this port (an IP address on its netdev?)";
	}
	EXPECT_NE(f.q[0].qpn(), f.q[1].qpn());
	EXPECT_GT(f.q[0].rx_posted(), 0u);
}

TEST(VerbsHw, AhErrnoSemantics)
{
	hw_fixture f;
	ASSERT_TRUE(f.ok);
	int err = -1;
	ibv_ah_attr a = f.self_attr();
	a.port_num = 2;
	EXPECT_EQ(f.create(a, &err), ah_null);
	EXPECT_EQ(err, EINVAL);
	a = f.self_attr();
	a.grh.sgid_index = uint8_t(f.dev.port().gids.size() < 256 ? f.dev.port().gids.size() : 255);
	if (a.is_global && f.dev.port().gids.size() < 256) {
		EXPECT_EQ(f.create(a, &err), ah_null);
		EXPECT_EQ(err, EINVAL);
	}
	if (f.dev.port().grh_required) {
		a = f.self_attr();
		a.is_global = 0;
		EXPECT_EQ(f.create(a, &err), ah_null);
		EXPECT_EQ(err, EINVAL);
	}
	ah_handle h = f.create(f.self_attr(), &err);
	ASSERT_EQ(err, 0);
	EXPECT_EQ(f.dev.live_ahs(), 1u);
	EXPECT_EQ(f.destroy(h), 0);
	EXPECT_EQ(f.destroy(h), EINVAL);
	EXPECT_EQ(f.dev.live_ahs(), 0u);
}

TEST(VerbsHw, BurstBetweenTwoQpsThroughOwnGid)
{
	hw_fixture f;
	ASSERT_TRUE(f.ok);
	int err = -1;
	ah_handle h = f.create(f.self_attr(), &err);
	ASSERT_EQ(err, 0) << strerror(err);

	/* This thread acts as the poll thread of both queues. */
	const unsigned n = 64;
	std::vector<std::vector<uint8_t>> pay(n);
	std::vector<send_wr> w(n);
	for (unsigned i = 0; i < n; i++) {
		pay[i].assign(i % 3 == 0 ? 16 + i : 512 + i, uint8_t(0x40 + i));
		w[i] = send_wr{h, f.q[1].qpn(), 0x80000000u, nullptr, nullptr, 0, 0, 0};
		if (i % 2 == 0) {
			w[i].inline_data = pay[i].data();
			w[i].inline_len = uint32_t(pay[i].size());
			w[i].flags = send_inline;
		} else {
			rte_mbuf *m = rte_pktmbuf_alloc(f.mp);
			ASSERT_NE(m, nullptr);
			memcpy(rte_pktmbuf_append(m, uint16_t(pay[i].size())), pay[i].data(), pay[i].size());
			w[i].mbuf = m;
		}
		if (i % 7 == 0) {
			w[i].flags |= send_imm;
			w[i].imm_data = rte_cpu_to_be_32(0x1000 + i);
		}
	}
	unsigned sent = 0;
	const uint64_t deadline = rte_get_tsc_cycles() + 2 * rte_get_tsc_hz();
	while (sent < n && rte_get_tsc_cycles() < deadline) {
		sent += f.q[0].tx_burst(w.data() + sent, uint16_t(n - sent));
		f.q[0].tx_flush();
	}
	ASSERT_EQ(sent, n);
	EXPECT_EQ(f.q[0].counters().tx_drops(), 0u);

	std::vector<recv_wc> got;
	recv_wc wc[32];
	while (got.size() < n && rte_get_tsc_cycles() < deadline) {
		uint16_t k = f.q[1].rx_burst(wc, 32);
		got.insert(got.end(), wc, wc + k);
		f.q[0].tx_flush();
	}
	ASSERT_EQ(got.size(), n) << "lost datagrams; rx_wc_errors " << f.q[1].counters().rx_wc_errors
				 << ", tx_wc_errors " << f.q[0].counters().tx_wc_errors;
	const port_attr &pa = f.dev.port();
	for (unsigned i = 0; i < n; i++) {
		/* UD over one port between two QPs: delivered in order. */
		const recv_wc &r = got[i];
		EXPECT_EQ(r.byte_len, wire::grh_len + pay[i].size()) << i;
		EXPECT_EQ(memcmp(rte_pktmbuf_mtod_offset(r.mbuf, void *, wire::grh_len), pay[i].data(), pay[i].size()), 0)
			<< i;
		EXPECT_EQ(r.src_qp, f.q[0].qpn());
		EXPECT_EQ(r.qp_num, f.q[1].qpn());
		EXPECT_EQ((r.wc_flags & wc_with_imm) != 0, i % 7 == 0) << i;
		if (i % 7 == 0) {
			EXPECT_EQ(r.imm_data, rte_cpu_to_be_32(0x1000 + i));
		}
		if (const int gi = first_gid(pa); gi >= 0) {
			/* The AH carried a GRH (is_global): the receive has one. */
			EXPECT_TRUE(r.wc_flags & wc_grh) << i;
			EXPECT_EQ(r.sgid, pa.gids[size_t(gi)]) << i;
			EXPECT_EQ(r.dgid, pa.gids[size_t(gi)]) << i;
		}
		rte_pktmbuf_free(r.mbuf);
	}
	for (int spin = 0; spin < 100000 && f.q[0].tx_outstanding() >= f.q[0].parts().tx.signal_every; spin++)
		f.q[0].tx_flush();
	EXPECT_EQ(f.destroy(h), 0);
}

/* The reply path on real completions: for each RoCEv2 (or IB) GID of the
 * port, queue 0 sends to queue 1 from that GID;
 * from queue 1's completion and its GRH area rdgram derives the AH back
 * (rdgram/ah_from_wc.h) and so does rdma-core (ibv_init_ah_from_wc, on the
 * same completion: the ibv_wc fields verbs_queue copied, and the area as
 * delivered). Every field is printed side by side; the ones rdgram takes
 * on purpose from elsewhere (ah_from_wc.h's file comment) are checked to
 * be what it says, the rest to be equal. Then the reply goes out on an AH
 * created from rdgram's attributes and must reach queue 0. */
TEST(VerbsHw, ReplyPathFromRealCompletion)
{
	hw_fixture f;
	ASSERT_TRUE(f.ok);
	const port_attr &pa = f.dev.port();
	gid_index gix;
	gix.build(pa.gids);
	/* Every usable GID, up to 8 (rxe in the lab: IPv6 link-local, IPv4,
	 * IPv6 global). */
	std::vector<int> picks;
	for (size_t i = 0; i < pa.gids.size() && picks.size() < 8; i++)
		if (!pa.gids[i].is_zero())
			picks.push_back(int(i));
	ASSERT_FALSE(picks.empty());
	for (const int gi : picks) {
		SCOPED_TRACE("sgid_index " + std::to_string(gi));
		const wire::gid &g = pa.gids[size_t(gi)];
		ibv_ah_attr a = f.self_attr();
		a.grh.sgid_index = uint8_t(gi);
		memcpy(a.grh.dgid.raw, g.raw, 16);
		/* The sender asks for hop limit 17, but what arrives is up to
		 * the stack: on RoCE the kernel takes the route's (64 on rxe:
		 * ib_resolve_eth_dmac). Either way it is a forward path's
		 * remainder, which rdma-core echoes and rdgram does not. */
		a.grh.hop_limit = 17;
		a.grh.traffic_class = 0x2b; /* DSCP 10, ECN CE */
		int err = -1;
		const ah_handle h = f.create(a, &err);
		ASSERT_EQ(err, 0) << strerror(err);
		uint8_t ping[24];
		memset(ping, 0x5a, sizeof(ping));
		send_wr w{h, f.q[1].qpn(), 0x80000000u, nullptr, ping, sizeof(ping), 0, send_inline};
		ASSERT_EQ(f.q[0].tx_burst(&w, 1), 1);
		recv_wc wc{};
		const uint64_t until = rte_get_timer_cycles() + 2 * rte_get_timer_hz();
		uint16_t k = 0;
		while (k == 0 && rte_get_timer_cycles() < until) {
			f.q[0].tx_flush();
			k = f.q[1].rx_burst(&wc, 1);
		}
		ASSERT_EQ(k, 1) << "the ping did not arrive";
		const uint8_t *area = rte_pktmbuf_mtod(wc.mbuf, const uint8_t *);

		ibv_ah_attr mine{}, theirs{};
		ASSERT_EQ(init_ah_from_wc(pa, gix, 1, wc, area, &mine), 0) << strerror(errno);
		ibv_wc raw = ibv_wc_of(wc);
		const int rrc = ibv_init_ah_from_wc(f.dev.context(), f.dev.port_num(), &raw,
						    reinterpret_cast<ibv_grh *>(const_cast<uint8_t *>(area)), &theirs);
		const int rerr = errno;
		printf("  from %s (sgid_index %d):  field            rdgram      rdma-core (rc %d%s%s)\n",
		       g.is_v4_mapped() ? "IPv4" : "IPv6", gi, rrc, rrc != 0 ? ", " : "", rrc != 0 ? strerror(rerr) : "");
		const auto row = [](const char *name, unsigned x, unsigned y) {
			printf("    %-16s 0x%-8x 0x%-8x%s\n", name, x, y, x == y ? "" : "  differs");
		};
		row("is_global", mine.is_global, theirs.is_global);
		row("dlid", mine.dlid, theirs.dlid);
		row("sl", mine.sl, theirs.sl);
		row("src_path_bits", mine.src_path_bits, theirs.src_path_bits);
		row("port_num", mine.port_num, theirs.port_num);
		row("sgid_index", mine.grh.sgid_index, theirs.grh.sgid_index);
		row("hop_limit", mine.grh.hop_limit, theirs.grh.hop_limit);
		row("traffic_class", mine.grh.traffic_class, theirs.grh.traffic_class);
		row("flow_label", mine.grh.flow_label, theirs.grh.flow_label);
		row("dgid equal", 1, memcmp(mine.grh.dgid.raw, theirs.grh.dgid.raw, 16) == 0);

		/* The reply goes back to the sender's GID from the GID it was
		 * sent to. */
		EXPECT_EQ(memcmp(mine.grh.dgid.raw, g.raw, 16), 0);
		EXPECT_EQ(mine.grh.sgid_index, uint8_t(gi));
		EXPECT_EQ(mine.grh.hop_limit, 0xffu); /* not the 17 that was left */
		if (pa.link == link_layer::ethernet) {
			EXPECT_EQ(mine.grh.traffic_class, 0x2au); /* CE echoed as ECT(0) */
		}
		if (g.is_v4_mapped()) {
			EXPECT_EQ(mine.grh.flow_label, 0u); /* IPv4 has none */
		}
		/* What arrived: the IPv4 TTL, or the IPv6 / IB GRH hop limit. */
		const unsigned arrived_hops = g.is_v4_mapped() && pa.link == link_layer::ethernet ? area[20 + 8] : area[7];
		if (rrc == 0) {
			EXPECT_EQ(theirs.is_global, 1u);
			EXPECT_EQ(memcmp(theirs.grh.dgid.raw, g.raw, 16), 0);
			EXPECT_EQ(theirs.grh.sgid_index, mine.grh.sgid_index);
			EXPECT_EQ(theirs.dlid, mine.dlid);
			EXPECT_EQ(theirs.port_num, f.dev.port_num());
			EXPECT_EQ(theirs.grh.hop_limit, arrived_hops); /* rdma-core echoes what was left */
			EXPECT_EQ(theirs.grh.traffic_class, 0x2bu);
		} else {
			ADD_FAILURE() << "ibv_init_ah_from_wc failed on a real completion: " << strerror(rerr);
		}

		/* The reply, on rdgram's AH. */
		rte_pktmbuf_free(wc.mbuf);
		const ah_handle back = f.create(mine, &err);
		ASSERT_EQ(err, 0) << "creating the reply AH: " << strerror(err);
		uint8_t pong[40];
		memset(pong, 0xa5, sizeof(pong));
		send_wr rw{back, wc.src_qp, 0x80000000u, nullptr, pong, sizeof(pong), 0, send_inline};
		ASSERT_EQ(f.q[1].tx_burst(&rw, 1), 1);
		recv_wc rr{};
		k = 0;
		while (k == 0 && rte_get_timer_cycles() < until) {
			f.q[1].tx_flush();
			k = f.q[0].rx_burst(&rr, 1);
		}
		ASSERT_EQ(k, 1) << "the reply on rdgram's AH did not reach the sender";
		EXPECT_EQ(rr.src_qp, f.q[1].qpn());
		EXPECT_EQ(rr.byte_len, wire::grh_len + sizeof(pong));
		EXPECT_EQ(memcmp(rte_pktmbuf_mtod_offset(rr.mbuf, void *, wire::grh_len), pong, sizeof(pong)), 0);
		EXPECT_EQ(rr.sgid, g);
		rte_pktmbuf_free(rr.mbuf);
		for (int spin = 0; spin < 100000 && (f.q[0].tx_outstanding() != 0 || f.q[1].tx_outstanding() != 0);
		     spin++) {
			f.q[0].tx_flush();
			f.q[1].tx_flush();
		}
		EXPECT_EQ(f.destroy(back), 0);
		EXPECT_EQ(f.destroy(h), 0);
	}
}

#ifdef RDGRAM_VERBS_MCAST
TEST(VerbsHw, MulticastJoinSendReceiveLeave)
{
	hw_fixture f(RDMA_UDP_QKEY); /* rdma_cm's RDMA_PS_UDP groups use it */
	ASSERT_TRUE(f.ok);
	const port_attr &pa = f.dev.port();
	const bool ib = pa.link != link_layer::ethernet;
	/* The local address: given, or the port's RoCEv2 GID as an IP address. */
	sockaddr_storage local{}, group{};
	if (const char *e = getenv("RDGRAM_MCAST_LOCAL"); e != nullptr) {
		ASSERT_EQ(parse_sockaddr(e, &local), 0) << "RDGRAM_MCAST_LOCAL=" << e;
	} else if (const int gi = first_gid(pa); !ib && gi >= 0 && pa.gids[size_t(gi)].is_v4_mapped()) {
		auto *s4 = reinterpret_cast<sockaddr_in *>(&local);
		s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = pa.gids[size_t(gi)].v4();
	} else {
		GTEST_SKIP() << "set RDGRAM_MCAST_LOCAL to an IP address of " << f.dev.name()
			     << "'s port (InfiniBand: its IPoIB address)";
	}
	const char *ge = getenv("RDGRAM_MCAST_GROUP");
	ASSERT_EQ(parse_sockaddr(ge != nullptr ? ge : local.ss_family == AF_INET ? "239.255.77.1" : "ff15::7701", &group),
		  0);
	rdmacm_group sub, pub;
	int rc = -1;
	g_rt->ctl().call([&] {
		rc = sub.join(f.dev.context(), f.dev.port_num(), ib, reinterpret_cast<sockaddr *>(&local),
			      reinterpret_cast<sockaddr *>(&group), rdmacm_group::role::subscriber, f.q[1].qp(), 5000);
	});
	ASSERT_EQ(rc, 0) << "subscriber join: " << sub.error();
	g_rt->ctl().call([&] {
		rc = pub.join(f.dev.context(), f.dev.port_num(), ib, reinterpret_cast<sockaddr *>(&local),
			      reinterpret_cast<sockaddr *>(&group), rdmacm_group::role::publisher, nullptr, 5000);
	});
	ASSERT_EQ(rc, 0) << "publisher join: " << pub.error();
	const mcast_membership &m = pub.membership();
	EXPECT_EQ(m.qpn, mcast_qpn);
	EXPECT_EQ(m.qkey, sub.membership().qkey);
	EXPECT_EQ(memcmp(m.mgid.raw, sub.membership().mgid.raw, 16), 0);
	printf("group MGID %02x%02x:...:%02x%02x MLID 0x%x Q_Key 0x%x\n", m.mgid.raw[0], m.mgid.raw[1],
	       m.mgid.raw[14], m.mgid.raw[15], m.mlid, m.qkey);

	ibv_ah_attr a = m.ah_attr;
	a.port_num = 1; /* rdgram's port numbering */
	int err = -1;
	const ah_handle h = f.create(a, &err);
	ASSERT_EQ(err, 0) << strerror(err);
	const unsigned n = 32;
	std::vector<std::vector<uint8_t>> pay(n);
	std::vector<send_wr> w(n);
	for (unsigned i = 0; i < n; i++) {
		pay[i].assign(16 + i, uint8_t(0xA0 + i));
		/* The caller's bytes: send_inline (without it the WR has no
		 * payload at all, a null mbuf, and is dropped as bad_mbuf). */
		w[i] = send_wr{h, m.qpn, m.qkey, nullptr, pay[i].data(), uint32_t(pay[i].size()), 0, send_inline};
	}
	ASSERT_EQ(f.q[0].tx_burst(w.data(), uint16_t(n)), n);
	EXPECT_EQ(f.q[0].counters().tx_drops(), 0u);
	EXPECT_EQ(f.q[0].counters().tx_pkts, n);
	std::vector<recv_wc> got;
	recv_wc wc[32];
	const uint64_t until = rte_get_timer_cycles() + 2 * rte_get_timer_hz();
	while (got.size() < n && rte_get_timer_cycles() < until) {
		f.q[0].tx_flush();
		const uint16_t k = f.q[1].rx_burst(wc, 32);
		got.insert(got.end(), wc, wc + k);
	}
	const verbs_counters &vs = f.q[0].counters();
	ASSERT_EQ(got.size(), size_t(n)) << "datagrams sent to the group did not all reach the attached QP; sender: "
					  << f.q[0].counters().tx_pkts << " posted, " << vs.tx_completions
					  << " send completions, " << vs.tx_wc_errors << " in error; AH sgid_index "
					  << unsigned(a.grh.sgid_index) << " hop_limit " << unsigned(a.grh.hop_limit)
					  << " is_global " << unsigned(a.is_global);
	for (unsigned i = 0; i < n; i++) {
		const recv_wc &r = got[i];
		EXPECT_EQ(r.byte_len, wire::grh_len + pay[i].size()) << i;
		EXPECT_EQ(memcmp(rte_pktmbuf_mtod_offset(r.mbuf, void *, wire::grh_len), pay[i].data(), pay[i].size()), 0)
			<< i;
		EXPECT_EQ(r.src_qp, f.q[0].qpn());
		EXPECT_TRUE(r.wc_flags & wc_grh) << i; /* multicast always carries a GRH */
		EXPECT_EQ(memcmp(r.dgid.raw, m.mgid.raw, 16), 0) << i;
		rte_pktmbuf_free(r.mbuf);
	}
	for (int spin = 0; spin < 100000 && f.q[0].tx_outstanding() >= f.q[0].parts().tx.signal_every; spin++)
		f.q[0].tx_flush();
	EXPECT_EQ(f.destroy(h), 0);
	g_rt->ctl().call([&] {
		EXPECT_EQ(sub.leave(), 0) << sub.error();
		EXPECT_EQ(pub.leave(), 0) << pub.error();
	});
}
#endif

int main(int argc, char **argv)
{
	/* Skip before starting the EAL: nothing to test without a device. */
	std::string name, why;
	uint8_t port = 0;
	if (!find_active_port(wanted_device(), &name, &port, &why)) {
		printf("SKIP: %s\n", why.c_str());
		return 77;
	}
	printf("verbs hardware suite on %s port %u\n", name.c_str(), port);
	::testing::InitGoogleTest(&argc, argv);
	::testing::AddGlobalTestEnvironment(new rdgram::test::eal_environment);
	return RUN_ALL_TESTS();
}
