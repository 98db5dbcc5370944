/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The verbs driver's logic without an RDMA device (none exists here):
 * port-facts translation, lkey lookup, the send ring, the chained send and
 * receive WRs, ibv_wc -> recv_wc. Then the verbs_queue data path end to end
 * against an in-memory MODEL of a UD QP (model_post_send / model_post_recv /
 * model_poll_cq below: it loops each send into the target QP's next posted
 * receive buffer and writes a RoCEv2 IPv4 GRH area). The model follows the
 * ibv_post_send(3) / ibv_poll_cq(3) contracts as this file reads them; it
 * is not a provider and says nothing about how real hardware behaves.
 */
#include <cstring>
#include <deque>
#include <map>
#include <vector>

#include <gtest/gtest.h>
#include <rte_mempool.h>

#include "eal_env.h"
#include "verbs_datapath.h"
#include "verbs_logic.h"

using namespace rdgram;
using namespace rdgram::verbs;
using namespace rdgram::ibv;

namespace {

wire::gid v4gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	return wire::gid::from_v4(rte_cpu_to_be_32(uint32_t(a) << 24 | uint32_t(b) << 16 | uint32_t(c) << 8 | d));
}

ibv_gid_entry gent(uint32_t idx, uint32_t port, uint32_t type, const wire::gid &g)
{
	ibv_gid_entry e{};
	memcpy(e.gid.raw, g.raw, 16);
	e.gid_index = idx;
	e.port_num = port;
	e.gid_type = type;
	return e;
}

/* A 20-byte IPv4 header (RoCEv2) with a valid checksum. */
void put_ipv4(uint8_t *h, const wire::gid &src, const wire::gid &dst, uint16_t total, uint8_t tos)
{
	memset(h, 0, 20);
	h[0] = 0x45;
	h[1] = tos;
	h[2] = uint8_t(total >> 8);
	h[3] = uint8_t(total);
	h[6] = 0x40; /* DF */
	h[8] = 64;
	h[9] = 17;
	memcpy(h + 12, src.raw + 12, 4);
	memcpy(h + 16, dst.raw + 12, 4);
	uint32_t s = 0;
	for (int i = 0; i < 20; i += 2)
		s += uint32_t(h[i]) << 8 | h[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	const uint16_t c = uint16_t(~s);
	h[10] = uint8_t(c >> 8);
	h[11] = uint8_t(c);
}

struct pool_guard {
	rte_mempool *mp = nullptr;
	explicit pool_guard(const char *name, unsigned n = 2047)
	{
		mp = rte_pktmbuf_pool_create(name, n, 0, 0, 2048 + RTE_PKTMBUF_HEADROOM, SOCKET_ID_ANY);
	}
	~pool_guard() { rte_mempool_free(mp); }
	unsigned in_use() const { return rte_mempool_in_use_count(mp); }
};

/* Registers a pool's chunks in map with made-up lkeys 0x1000 + i. */
void add_pool(lkey_map &map, rte_mempool *mp)
{
	struct arg {
		lkey_map *m;
		unsigned i;
	} a{&map, 0};
	rte_mempool_mem_iter(
		mp,
		[](rte_mempool *, void *o, rte_mempool_memhdr *h, unsigned) {
			auto *x = static_cast<arg *>(o);
			EXPECT_EQ(x->m->add(reinterpret_cast<uintptr_t>(h->addr), h->len, 0x1000 + x->i++), 0);
		},
		&a);
}

} // namespace

/* ------------------------------------------------------------ port facts */

TEST(VerbsPort, MtuEnumToBytes)
{
	EXPECT_EQ(mtu_bytes(IBV_MTU_256), 256u);
	EXPECT_EQ(mtu_bytes(IBV_MTU_512), 512u);
	EXPECT_EQ(mtu_bytes(IBV_MTU_1024), 1024u);
	EXPECT_EQ(mtu_bytes(IBV_MTU_2048), 2048u);
	EXPECT_EQ(mtu_bytes(IBV_MTU_4096), 4096u);
	EXPECT_EQ(mtu_bytes(0), 0u);
	EXPECT_EQ(mtu_bytes(6), 0u);
}

TEST(VerbsPort, RoceTableKeepsOnlyRoceV2AndEveryType)
{
	/* mlx5 on RoCE: each address twice (v1 at even, v2 at odd index),
	 * a hole at 4, and an entry of port 2 that must be ignored. */
	const wire::gid a = v4gid(10, 0, 0, 1), b = v4gid(10, 0, 0, 2), o = v4gid(9, 9, 9, 9);
	std::vector<ibv_gid_entry> e = {gent(0, 1, IBV_GID_TYPE_ROCE_V1, a), gent(1, 1, IBV_GID_TYPE_ROCE_V2, a),
					gent(2, 1, IBV_GID_TYPE_ROCE_V1, b), gent(3, 1, IBV_GID_TYPE_ROCE_V2, b),
					gent(0, 2, IBV_GID_TYPE_ROCE_V2, o)};
	port_query q;
	q.pa.link_layer = IBV_LINK_LAYER_ETHERNET;
	q.pa.active_mtu = IBV_MTU_1024;
	q.pa.gid_tbl_len = 6;
	q.pa.lid = 7; /* meaningless on RoCE */
	q.pa.flags = 0; /* RoCE needs the GRH even without the flag */
	q.port_num = 1;
	q.dev_max_ah = 1000;
	q.table_cap = 65536;
	q.pkey0 = 0xffff;
	q.numa_node = 1;
	q.gids = e.data();
	q.ngids = e.size();
	port_attr pa;
	std::vector<gid_kind> kinds;
	ASSERT_EQ(translate_port(q, &pa, &kinds), 0);
	EXPECT_EQ(pa.link, link_layer::ethernet);
	EXPECT_TRUE(pa.grh_required);
	EXPECT_EQ(pa.active_mtu, 1024u);
	EXPECT_EQ(pa.max_ah, 1000u);
	EXPECT_EQ(pa.pkey, 0xffff);
	EXPECT_EQ(pa.lid, 0);
	EXPECT_EQ(pa.numa_node, 1);
	ASSERT_EQ(pa.gids.size(), 6u);
	ASSERT_EQ(kinds.size(), 6u);
	EXPECT_TRUE(pa.gids[0].is_zero());
	EXPECT_EQ(pa.gids[1], a);
	EXPECT_TRUE(pa.gids[2].is_zero());
	EXPECT_EQ(pa.gids[3], b);
	EXPECT_TRUE(pa.gids[4].is_zero() && pa.gids[5].is_zero());
	EXPECT_EQ(kinds[0], gid_kind::roce_v1);
	EXPECT_EQ(kinds[1], gid_kind::roce_v2);
	EXPECT_EQ(kinds[2], gid_kind::roce_v1);
	EXPECT_EQ(kinds[3], gid_kind::roce_v2);
	EXPECT_EQ(kinds[4], gid_kind::none);

	/* The reply path's GID index then finds the RoCEv2 entry. */
	gid_index gi;
	gi.build(pa.gids);
	EXPECT_EQ(gi.find(a), 1);
	EXPECT_EQ(gi.find(b), 3);
}

TEST(VerbsPort, InfinibandFlagsLidMaxAhAndBadMtu)
{
	wire::gid g{};
	g.raw[0] = 0xfe;
	g.raw[1] = 0x80;
	g.raw[15] = 0x42;
	ibv_gid_entry e = gent(0, 1, IBV_GID_TYPE_IB, g);
	port_query q;
	q.pa.link_layer = IBV_LINK_LAYER_INFINIBAND;
	q.pa.active_mtu = IBV_MTU_4096;
	q.pa.gid_tbl_len = 2;
	q.pa.lid = 0x1234;
	q.dev_max_ah = 0; /* not reported: the table size rules */
	q.table_cap = 4096;
	q.pkey0 = 0x8001;
	q.gids = &e;
	q.ngids = 1;
	port_attr pa;
	std::vector<gid_kind> kinds;
	ASSERT_EQ(translate_port(q, &pa, &kinds), 0);
	EXPECT_EQ(pa.link, link_layer::infiniband);
	EXPECT_FALSE(pa.grh_required);
	EXPECT_EQ(pa.lid, 0x1234);
	EXPECT_EQ(pa.max_ah, 4096u);
	EXPECT_EQ(pa.pkey, 0x8001);
	EXPECT_EQ(pa.active_mtu, 4096u);
	EXPECT_EQ(pa.gids[0], g);
	EXPECT_EQ(kinds[0], gid_kind::ib);
	EXPECT_EQ(kinds[1], gid_kind::none);

	q.pa.flags = IBV_QPF_GRH_REQUIRED;
	ASSERT_EQ(translate_port(q, &pa, &kinds), 0);
	EXPECT_TRUE(pa.grh_required);

	q.dev_max_ah = 100000; /* above the table: the table caps it */
	ASSERT_EQ(translate_port(q, &pa, &kinds), 0);
	EXPECT_EQ(pa.max_ah, 4096u);

	q.pa.active_mtu = ibv_mtu(0);
	EXPECT_EQ(translate_port(q, &pa, &kinds), EINVAL);
}

/* ------------------------------------------------------------------ lkeys */

TEST(VerbsMr, LookupByRange)
{
	lkey_map m;
	EXPECT_EQ(m.add(0x30000, 0x1000, 3), 0);
	EXPECT_EQ(m.add(0x10000, 0x1000, 1), 0);
	EXPECT_EQ(m.add(0x20000, 0x1000, 2), 0);
	EXPECT_EQ(m.add(0x20800, 0x1000, 9), EEXIST);
	EXPECT_EQ(m.add(0x1f800, 0x1000, 9), EEXIST);
	EXPECT_EQ(m.add(0x40000, 0, 9), EINVAL);
	uint32_t k = 0;
	EXPECT_TRUE(m.lookup(reinterpret_cast<void *>(0x10000), 64, &k));
	EXPECT_EQ(k, 1u);
	EXPECT_TRUE(m.lookup(reinterpret_cast<void *>(0x30fc0), 64, &k)); /* ends exactly at the end */
	EXPECT_EQ(k, 3u);
	EXPECT_TRUE(m.lookup(reinterpret_cast<void *>(0x20010), 16, &k));
	EXPECT_EQ(k, 2u);
	EXPECT_FALSE(m.lookup(reinterpret_cast<void *>(0x30fc1), 64, &k)); /* crosses the end */
	EXPECT_FALSE(m.lookup(reinterpret_cast<void *>(0x11000), 1, &k));  /* between ranges */
	EXPECT_FALSE(m.lookup(reinterpret_cast<void *>(0x0fff0), 8, &k));  /* below all */
	EXPECT_FALSE(m.lookup(reinterpret_cast<void *>(0x50000), 8, &k));  /* above all */
	/* The last hit is tried first but never answers for another range. */
	EXPECT_TRUE(m.lookup(reinterpret_cast<void *>(0x10010), 8, &k));
	EXPECT_EQ(k, 1u);
}

TEST(VerbsMr, ManyChunksAndFull)
{
	lkey_map m;
	/* Inserted in a scrambled order. */
	for (unsigned i = 0; i < lkey_map::max_chunks; i++) {
		unsigned j = (i * 37) % lkey_map::max_chunks;
		ASSERT_EQ(m.add(0x100000 + uintptr_t(j) * 0x2000, 0x1000, 100 + j), 0);
	}
	EXPECT_EQ(m.add(0x900000, 0x1000, 1), ENOSPC);
	for (unsigned j = 0; j < lkey_map::max_chunks; j++) {
		uint32_t k = 0;
		ASSERT_TRUE(m.lookup(reinterpret_cast<void *>(0x100000 + uintptr_t(j) * 0x2000 + 0x800), 0x800, &k));
		EXPECT_EQ(k, 100 + j);
		EXPECT_FALSE(m.lookup(reinterpret_cast<void *>(0x100000 + uintptr_t(j) * 0x2000 + 0x1000), 1, &k));
	}
}

/* -------------------------------------------------------------- send ring */

TEST(VerbsTxRing, SignalledCompletionFreesEverythingBefore)
{
	tx_ring r;
	ASSERT_EQ(r.init(6), 0); /* 8 slots, depth 6 */
	EXPECT_EQ(r.room(), 6u);
	rte_mbuf fake[6];
	uint64_t seq[6];
	for (int i = 0; i < 6; i++)
		seq[i] = r.push(i == 2 ? nullptr : &fake[i]); /* 2: inline from the caller */
	EXPECT_EQ(r.room(), 0u);
	std::vector<rte_mbuf *> freed;
	auto rec = [&](rte_mbuf *m) { freed.push_back(m); };
	EXPECT_EQ(r.complete(seq[3], rec), 4u);
	ASSERT_EQ(freed.size(), 3u);
	EXPECT_EQ(freed[0], &fake[0]);
	EXPECT_EQ(freed[1], &fake[1]);
	EXPECT_EQ(freed[2], &fake[3]);
	EXPECT_EQ(r.outstanding(), 2u);
	/* A repeated or older completion frees nothing. */
	EXPECT_EQ(r.complete(seq[3], rec), 0u);
	EXPECT_EQ(r.complete(seq[0], rec), 0u);
	/* One never posted neither. */
	EXPECT_EQ(r.complete(seq[5] + 1, rec), 0u);
	EXPECT_EQ(freed.size(), 3u);
	EXPECT_EQ(r.complete(seq[5], rec), 2u);
	EXPECT_EQ(freed.size(), 5u);
	EXPECT_EQ(r.outstanding(), 0u);
}

TEST(VerbsTxRing, WrapsAroundAndRollsBack)
{
	tx_ring r;
	ASSERT_EQ(r.init(8), 0);
	rte_mbuf fake[8];
	std::vector<rte_mbuf *> freed;
	auto rec = [&](rte_mbuf *m) { freed.push_back(m); };
	/* 5 rounds of 5 through 8 slots: indices wrap, sequences do not. */
	for (int round = 0; round < 5; round++) {
		uint64_t last = 0;
		for (int i = 0; i < 5; i++)
			last = r.push(&fake[(round * 5 + i) % 8]);
		EXPECT_EQ(last, uint64_t(round * 5 + 4));
		freed.clear();
		EXPECT_EQ(r.complete(last, rec), 5u);
		ASSERT_EQ(freed.size(), 5u);
		for (int i = 0; i < 5; i++)
			EXPECT_EQ(freed[i], &fake[(round * 5 + i) % 8]) << round << " " << i;
	}
	/* Rollback of a refused tail: those entries come back in order. */
	const uint64_t first = r.push(&fake[0]);
	r.push(&fake[1]);
	r.push(&fake[2]);
	std::vector<uint64_t> back;
	r.rollback(first + 1, [&](uint64_t s, rte_mbuf *m) {
		back.push_back(s);
		EXPECT_EQ(m, &fake[s - first]);
	});
	EXPECT_EQ(back, (std::vector<uint64_t>{first + 1, first + 2}));
	EXPECT_EQ(r.outstanding(), 1u);
	EXPECT_EQ(r.next_seq(), first + 1);
	freed.clear();
	EXPECT_EQ(r.drain(rec), 1u);
	EXPECT_EQ(freed, std::vector<rte_mbuf *>{&fake[0]});
	EXPECT_EQ(r.init(0), EINVAL);
}

/* ------------------------------------------------------------ send chain */

namespace {
struct chain_fixture {
	pool_guard pool{"vchain"};
	lkey_map mrs;
	tx_ring ring;
	tx_params p;
	ibv_ah ahs[2]{};
	chain_fixture()
	{
		add_pool(mrs, pool.mp);
		ring.init(64);
		p.max_inline = 64;
		p.mtu = 1024;
		p.signal_every = 4;
		p.own_qkey = 0x11111111;
	}
	rte_mbuf *mbuf_of(uint16_t len, uint8_t fill)
	{
		rte_mbuf *m = rte_pktmbuf_alloc(pool.mp);
		char *d = rte_pktmbuf_append(m, len);
		memset(d, fill, len);
		return m;
	}
	/* ah slot 0 and 1 are live, anything else stale. */
	ibv_ah *ah_of(ah_handle h) { return h.slot < 2 ? &ahs[h.slot] : nullptr; }
};
} // namespace

TEST(VerbsChain, PostlistSignallingInlineImm)
{
	chain_fixture f;
	uint8_t small[16], big[200];
	memset(small, 0xab, sizeof(small));
	memset(big, 0xcd, sizeof(big));
	std::vector<send_wr> w(10);
	for (unsigned i = 0; i < w.size(); i++)
		w[i] = send_wr{ah_handle{i & 1, 1}, 0x100 + i, 0x80000000u, nullptr, small, sizeof(small), 0, send_inline};
	w[1].flags |= send_imm;
	w[1].imm_data = rte_cpu_to_be_32(0xdeadbeef);
	w[2].flags |= send_solicited;
	w[3] = send_wr{ah_handle{1, 1}, 0x103, 0x1234, nullptr, big, sizeof(big), 0, send_inline}; /* copy */
	w[4] = send_wr{ah_handle{0, 1}, 0x104, 0x1234, f.mbuf_of(32, 1), nullptr, 0, 0, 0};          /* inline from mbuf */
	w[5] = send_wr{ah_handle{1, 1}, 0x105, 0x1234, f.mbuf_of(500, 2), nullptr, 0, 0, 0};         /* SGE */
	const unsigned before = f.pool.in_use();

	uint32_t since = 0;
	tx_chain c;
	unsigned allocs = 0;
	build_send_chain(w.data(), unsigned(w.size()), f.p, since, f.ring, f.mrs,
			 [&](ah_handle h) { return f.ah_of(h); },
			 [&]() {
				 allocs++;
				 return rte_pktmbuf_alloc(f.pool.mp);
			 },
			 c);
	EXPECT_EQ(c.taken, 10u);
	ASSERT_EQ(c.n, 10u);
	EXPECT_EQ(c.ndrops, 0u);
	EXPECT_EQ(allocs, 1u);
	EXPECT_FALSE(c.no_mbuf);
	for (unsigned k = 0; k < c.n; k++) {
		const ibv_send_wr &r = c.wr[k];
		EXPECT_EQ(r.next, k + 1 < c.n ? &c.wr[k + 1] : nullptr) << k;
		EXPECT_EQ(r.wr_id, uint64_t(k));
		EXPECT_EQ(r.wr.ud.ah, &f.ahs[k & 1]);
		EXPECT_EQ(r.wr.ud.remote_qpn, 0x100 + k);
		/* One in four signalled: the 4th and the 8th. */
		EXPECT_EQ((r.send_flags & IBV_SEND_SIGNALED) != 0, k == 3 || k == 7) << k;
		EXPECT_EQ(r.num_sge, 1);
	}
	EXPECT_EQ(since, 2u); /* 9th and 10th unsignalled so far */
	/* A controlled Q_Key (high bit) is the QP's own, resolved here: rxe
	 * sends the WR's value as it is. A plain one goes unchanged. */
	EXPECT_EQ(c.wr[0].wr.ud.remote_qkey, 0x11111111u);
	EXPECT_EQ(c.wr[3].wr.ud.remote_qkey, 0x1234u);
	EXPECT_EQ(c.wr[0].opcode, IBV_WR_SEND);
	EXPECT_EQ(c.wr[1].opcode, IBV_WR_SEND_WITH_IMM);
	EXPECT_EQ(c.wr[1].imm_data, rte_cpu_to_be_32(0xdeadbeef));
	EXPECT_TRUE(c.wr[2].send_flags & IBV_SEND_SOLICITED);
	EXPECT_FALSE(c.wr[0].send_flags & IBV_SEND_SOLICITED);
	/* Inline: the caller's 16 bytes, straight from their buffer. */
	EXPECT_TRUE(c.wr[0].send_flags & IBV_SEND_INLINE);
	EXPECT_EQ(c.sge[0].addr, uintptr_t(small));
	EXPECT_EQ(c.sge[0].length, 16u);
	/* 200 bytes do not fit: copied into a registered mbuf, with its lkey. */
	EXPECT_FALSE(c.wr[3].send_flags & IBV_SEND_INLINE);
	EXPECT_TRUE(c.fresh[3]);
	EXPECT_NE(c.sge[3].addr, uintptr_t(big));
	EXPECT_EQ(memcmp(reinterpret_cast<void *>(c.sge[3].addr), big, 200), 0);
	EXPECT_GE(c.sge[3].lkey, 0x1000u);
	/* 32 bytes in an mbuf go inline; 500 by SGE with the chunk's lkey. */
	EXPECT_TRUE(c.wr[4].send_flags & IBV_SEND_INLINE);
	EXPECT_FALSE(c.wr[5].send_flags & IBV_SEND_INLINE);
	EXPECT_EQ(c.sge[5].addr, rte_pktmbuf_mtod(w[5].mbuf, uintptr_t));
	EXPECT_EQ(c.sge[5].length, 500u);
	EXPECT_GE(c.sge[5].lkey, 0x1000u);
	EXPECT_EQ(f.pool.in_use(), before + 1); /* the copy */

	qp_counters ctr{};
	unsigned n = settle_send_chain(c, c.n, since, f.ring, ctr, [](rte_mbuf *m) { rte_pktmbuf_free(m); });
	EXPECT_EQ(n, 10u);
	EXPECT_EQ(ctr.tx_pkts, 10u);
	EXPECT_EQ(ctr.tx_bytes, 16u * 7 + 200 + 32 + 500);
	EXPECT_EQ(f.ring.outstanding(), 10u);
	/* The two signalled completions then free the three mbufs. */
	f.ring.complete(3, [](rte_mbuf *m) { rte_pktmbuf_free(m); });
	EXPECT_EQ(f.pool.in_use(), before - 0u);
	f.ring.complete(7, [](rte_mbuf *m) { rte_pktmbuf_free(m); });
	EXPECT_EQ(f.pool.in_use(), before - 2u);
	EXPECT_EQ(f.ring.outstanding(), 2u);

	/* Across bursts: the count goes on (the 12th WR is the next signal). */
	build_send_chain(w.data(), 2, f.p, since, f.ring, f.mrs, [&](ah_handle h) { return f.ah_of(h); },
			 []() -> rte_mbuf * { return nullptr; }, c);
	EXPECT_FALSE(c.wr[0].send_flags & IBV_SEND_SIGNALED);
	EXPECT_TRUE(c.wr[1].send_flags & IBV_SEND_SIGNALED);
	EXPECT_EQ(c.wr[1].wr_id, 11u);
}

TEST(VerbsChain, DropsAndRefusedPostGoBackToTheCaller)
{
	chain_fixture f;
	uint8_t big[200] = {};
	rte_mbuf *seg2 = f.mbuf_of(10, 3);
	seg2->nb_segs = 2; /* chained: bad_mbuf */
	rte_mbuf *foreign = f.mbuf_of(500, 4);
	lkey_map empty; /* second pass: nothing registered */
	std::vector<send_wr> w = {
		{ah_handle{5, 1}, 1, 1, f.mbuf_of(8, 0), nullptr, 0, 0, 0},      /* 0 stale */
		{ah_handle{0, 1}, 1, 1, f.mbuf_of(1100, 0), nullptr, 0, 0, 0},   /* 1 > MTU */
		{ah_handle{0, 1}, 1, 1, seg2, nullptr, 0, 0, 0},                  /* 2 chained */
		{ah_handle{0, 1}, 1, 1, nullptr, nullptr, 0, 0, 0},               /* 3 no mbuf */
		{ah_handle{0, 1}, 1, 1, nullptr, big, 200, 0, send_inline},        /* 4 copy */
		{ah_handle{0, 1}, 1, 1, foreign, nullptr, 0, 0, 0},               /* 5 ok */
		{ah_handle{5, 1}, 1, 1, f.mbuf_of(8, 0), nullptr, 0, 0, 0},      /* 6 stale */
	};
	const unsigned before = f.pool.in_use();
	uint32_t since = 1;
	tx_chain c;
	build_send_chain(w.data(), unsigned(w.size()), f.p, since, f.ring, f.mrs,
			 [&](ah_handle h) { return f.ah_of(h); }, [&]() { return rte_pktmbuf_alloc(f.pool.mp); }, c);
	ASSERT_EQ(c.n, 2u);
	EXPECT_EQ(c.src[0], 4);
	EXPECT_EQ(c.src[1], 5);
	ASSERT_EQ(c.ndrops, 5u);
	EXPECT_EQ(c.drops[0].why, tx_drop_reason::stale_ah);
	EXPECT_EQ(c.drops[1].why, tx_drop_reason::too_long);
	EXPECT_EQ(c.drops[2].why, tx_drop_reason::bad_mbuf);
	EXPECT_EQ(c.drops[3].why, tx_drop_reason::bad_mbuf);
	EXPECT_EQ(c.drops[4].idx, 6);
	EXPECT_EQ(f.pool.in_use(), before + 1);

	/* The device refuses the second entry (burst index 5): the caller
	 * keeps WRs 5 and 6 (their mbufs untouched); 0..3 are dropped and
	 * counted, 4 was sent; the ring and signal count roll back. */
	qp_counters ctr{};
	std::vector<rte_mbuf *> freed;
	unsigned taken = settle_send_chain(c, 1, since, f.ring, ctr, [&](rte_mbuf *m) {
		freed.push_back(m);
		rte_pktmbuf_free(m);
	});
	EXPECT_EQ(taken, 5u);
	EXPECT_EQ(ctr.tx_stale_ah, 1u);
	EXPECT_EQ(ctr.tx_too_long, 1u);
	EXPECT_EQ(ctr.tx_bad_mbuf, 2u);
	EXPECT_EQ(ctr.tx_pkts, 1u);
	EXPECT_EQ(ctr.tx_bytes, 200u);
	EXPECT_EQ(freed.size(), 3u); /* 0, 1, 2 (3 had none) */
	EXPECT_EQ(f.ring.outstanding(), 1u);
	EXPECT_EQ(since, 2u); /* before entry 1 */
	EXPECT_EQ(f.pool.in_use(), before + 1 - 3);
	EXPECT_EQ(foreign->refcnt, 1); /* still the caller's */

	/* An mbuf outside registered memory is bad_mbuf. */
	build_send_chain(&w[5], 1, f.p, since, f.ring, empty, [&](ah_handle h) { return f.ah_of(h); },
			 []() -> rte_mbuf * { return nullptr; }, c);
	EXPECT_EQ(c.n, 0u);
	ASSERT_EQ(c.ndrops, 1u);
	EXPECT_EQ(c.drops[0].why, tx_drop_reason::bad_mbuf);
	settle_send_chain(c, 0, since, f.ring, ctr, [](rte_mbuf *m) { rte_pktmbuf_free(m); });
	EXPECT_EQ(ctr.tx_bad_mbuf, 3u);

	/* No mbuf for a copy: stop there, the rest stays with the caller. */
	build_send_chain(&w[4], 1, f.p, since, f.ring, f.mrs, [&](ah_handle h) { return f.ah_of(h); },
			 []() -> rte_mbuf * { return nullptr; }, c);
	EXPECT_TRUE(c.no_mbuf);
	EXPECT_EQ(c.taken, 0u);
	f.ring.drain([](rte_mbuf *m) { rte_pktmbuf_free(m); });
	rte_pktmbuf_free(w[6].mbuf);
	EXPECT_EQ(f.pool.in_use(), 0u);
}

/* ---------------------------------------------------------- receive side */

TEST(VerbsRecv, ChainCoversTheWholeDataRoom)
{
	pool_guard pool("vrecv");
	lkey_map mrs;
	add_pool(mrs, pool.mp);
	rte_mbuf *ms[8];
	ASSERT_EQ(rte_pktmbuf_alloc_bulk(pool.mp, ms, 8), 0);
	ibv_recv_wr wr[8];
	ibv_sge sge[8];
	ASSERT_EQ(build_recv_chain(ms, 8, mrs, wr, sge), 8u);
	for (unsigned k = 0; k < 8; k++) {
		EXPECT_EQ(wr[k].wr_id, uintptr_t(ms[k]));
		EXPECT_EQ(wr[k].next, k < 7 ? &wr[k + 1] : nullptr);
		EXPECT_EQ(wr[k].num_sge, 1);
		EXPECT_EQ(sge[k].addr, rte_pktmbuf_mtod(ms[k], uintptr_t));
		EXPECT_EQ(sge[k].length, 2048u); /* GRH area + up to 2008 bytes */
		EXPECT_GE(sge[k].lkey, 0x1000u);
	}
	lkey_map none;
	EXPECT_EQ(build_recv_chain(ms, 8, none, wr, sge), 0u);
	rte_pktmbuf_free_bulk(ms, 8);
}

TEST(VerbsRecv, WcToRecvRoceV4V6IbAndNoGrh)
{
	pool_guard pool("vwc");
	rte_mbuf *m = rte_pktmbuf_alloc(pool.mp);
	auto *area = rte_pktmbuf_mtod(m, uint8_t *);
	const wire::gid s4 = v4gid(10, 0, 0, 2), d4 = v4gid(10, 0, 0, 1);

	/* RoCEv2 over IPv4: the first 20 bytes hold junk that starts with a 6
	 * (verbs leaves them undefined); the header is in the last 20. */
	memset(area, 0x66, 20);
	put_ipv4(area + 20, s4, d4, 20 + 8 + 12 + 8 + 4 + 100, 0x02);
	memset(area + 40, 0x5a, 100);
	ibv_wc w{};
	w.status = IBV_WC_SUCCESS;
	w.opcode = IBV_WC_RECV;
	w.byte_len = 140;
	w.qp_num = 0x11;
	w.src_qp = 0x22;
	w.wc_flags = IBV_WC_GRH | IBV_WC_WITH_IMM;
	w.imm_data = rte_cpu_to_be_32(7);
	w.sl = 3; /* what mlx5 reports as the L3 type: not a priority */
	recv_wc r{};
	ASSERT_TRUE(wc_to_recv(w, m, true, r));
	EXPECT_EQ(r.mbuf, m);
	EXPECT_EQ(r.byte_len, 140u);
	EXPECT_EQ(m->data_len, 140);
	EXPECT_EQ(m->pkt_len, 140u);
	EXPECT_EQ(r.qp_num, 0x11u);
	EXPECT_EQ(r.src_qp, 0x22u);
	EXPECT_EQ(r.wc_flags, wc_grh | wc_with_imm);
	EXPECT_EQ(r.imm_data, rte_cpu_to_be_32(7));
	EXPECT_EQ(r.l3, l3_type::ipv4);
	EXPECT_EQ(r.sgid, s4);
	EXPECT_EQ(r.dgid, d4);
	EXPECT_EQ(r.sl, 0) << "RoCE: no priority from the provider's L3-type bits";
	for (int i = 0; i < 20; i++)
		ASSERT_EQ(area[i], 0) << i;

	/* And the reply path agrees. */
	port_attr pa;
	pa.link = link_layer::ethernet;
	pa.gids = {wire::gid{}, d4};
	gid_index gi;
	gi.build(pa.gids);
	ibv_ah_attr aa;
	ASSERT_EQ(init_ah_from_wc(pa, gi, 1, r, area, &aa), 0);
	EXPECT_EQ(aa.grh.sgid_index, 1);
	EXPECT_EQ(memcmp(aa.grh.dgid.raw, s4.raw, 16), 0);

	/* RoCEv2 over IPv6. */
	wire::gid s6{}, d6{};
	s6.raw[0] = 0xfd;
	s6.raw[15] = 2;
	d6.raw[0] = 0xfd;
	d6.raw[15] = 1;
	memset(area, 0, 40);
	area[0] = 0x60;
	area[6] = 17;
	area[7] = 64;
	memcpy(area + 8, s6.raw, 16);
	memcpy(area + 24, d6.raw, 16);
	w.wc_flags = IBV_WC_GRH;
	ASSERT_TRUE(wc_to_recv(w, m, true, r));
	EXPECT_EQ(r.l3, l3_type::ipv6);
	EXPECT_EQ(r.sgid, s6);
	EXPECT_EQ(r.dgid, d6);
	EXPECT_EQ(r.imm_data, 0u);
	EXPECT_EQ(r.wc_flags, wc_grh);

	/* RoCEv1 (next header 0x1B) on Ethernet: not parsed. */
	area[6] = 0x1b;
	ASSERT_TRUE(wc_to_recv(w, m, true, r));
	EXPECT_EQ(r.l3, l3_type::ib_grh);
	EXPECT_TRUE(r.sgid.is_zero());

	/* InfiniBand: the GRH's GIDs as they are. */
	ASSERT_TRUE(wc_to_recv(w, m, false, r));
	EXPECT_EQ(r.l3, l3_type::ib_grh);
	EXPECT_EQ(r.sgid, s6);
	EXPECT_EQ(r.dgid, d6);

	/* No GRH (IB without one): no GIDs, byte_len still counts the area. */
	w.wc_flags = 0;
	w.slid = 0x44;
	ASSERT_TRUE(wc_to_recv(w, m, false, r));
	EXPECT_EQ(r.wc_flags, 0);
	EXPECT_EQ(r.slid, 0x44);
	EXPECT_TRUE(r.sgid.is_zero());

	/* Lengths verbs cannot produce. */
	w.byte_len = 39;
	EXPECT_FALSE(wc_to_recv(w, m, true, r));
	w.byte_len = 4000;
	EXPECT_FALSE(wc_to_recv(w, m, true, r));
	rte_pktmbuf_free(m);
}

/* ------------------------------------------- the queue against a MODEL */

namespace {

/* An in-memory MODEL of UD QPs and CQs (not a provider, not hardware). */
struct model_cq {
	ibv_cq cq{}; /* first member: the queue hands this pointer back */
	std::deque<ibv_wc> q;
};
struct model_ah {
	ibv_ah ah{};
	wire::gid sgid, dgid;
};
struct model_qp {
	ibv_qp qp{};
	uint32_t qpn = 0, qkey = 0;
	model_cq *scq = nullptr, *rcq = nullptr;
	struct rbuf {
		uint64_t wr_id;
		uint64_t addr;
		uint32_t len;
		uint32_t lkey;
	};
	std::deque<rbuf> rq;
	uint32_t sq_depth = 0;
};
struct model {
	std::map<uint32_t, model_qp *> qps;
	int refuse_at = -1;      /* post_send: refuse the chain's entry k (ENOMEM) */
	bool hold_send_completions = false;
	std::deque<std::pair<model_cq *, ibv_wc>> held;
	unsigned posted_inline = 0, posted_sge = 0, rnr_drops = 0, bad_lkey = 0, qkey_drops = 0;
	uint32_t max_inline = 64;
};
model *g_model = nullptr;

model_qp *qp_of(ibv_qp *q) { return reinterpret_cast<model_qp *>(q); }
model_cq *cq_of(ibv_cq *c) { return reinterpret_cast<model_cq *>(c); }

int model_post_send(ibv_qp *q, ibv_send_wr *wr, ibv_send_wr **bad)
{
	model &md = *g_model;
	model_qp *src = qp_of(q);
	int k = 0;
	for (; wr != nullptr; wr = wr->next, k++) {
		if (k == md.refuse_at || (wr->send_flags & IBV_SEND_INLINE && wr->sg_list[0].length > md.max_inline)) {
			*bad = wr;
			return ENOMEM;
		}
		uint32_t len = wr->num_sge ? wr->sg_list[0].length : 0;
		if (wr->send_flags & IBV_SEND_INLINE) {
			md.posted_inline++;
		} else {
			md.posted_sge++;
			if (wr->num_sge && wr->sg_list[0].lkey < 0x1000)
				md.bad_lkey++;
		}
		auto *ah = reinterpret_cast<model_ah *>(wr->wr.ud.ah);
		auto it = md.qps.find(wr->wr.ud.remote_qpn);
		/* The Q_Key goes on the wire as the WR gives it, as rxe's
		 * requester does (it does not apply IBA 10.2.5's high-bit rule:
		 * the driver must). */
		const uint32_t qkey = wr->wr.ud.remote_qkey;
		if (it != md.qps.end() && it->second->qkey != qkey) {
			md.qkey_drops++;
		} else if (it != md.qps.end()) {
			model_qp *dst = it->second;
			if (dst->rq.empty()) {
				md.rnr_drops++; /* UD: no buffer, the datagram is lost */
			} else {
				model_qp::rbuf b = dst->rq.front();
				dst->rq.pop_front();
				auto *p = reinterpret_cast<uint8_t *>(b.addr);
				memset(p, 0x66, 20); /* undefined part of the area */
				put_ipv4(p + 20, ah->sgid, ah->dgid, uint16_t(20 + 8 + 12 + 8 + len + 4), 0);
				if (len)
					memcpy(p + 40, reinterpret_cast<void *>(wr->sg_list[0].addr), len);
				ibv_wc w{};
				w.wr_id = b.wr_id;
				w.status = 40 + len <= b.len ? IBV_WC_SUCCESS : IBV_WC_LOC_LEN_ERR;
				w.opcode = IBV_WC_RECV;
				w.byte_len = 40 + len;
				w.qp_num = dst->qpn;
				w.src_qp = src->qpn;
				w.wc_flags = IBV_WC_GRH;
				if (wr->opcode == IBV_WR_SEND_WITH_IMM) {
					w.wc_flags |= IBV_WC_WITH_IMM;
					w.imm_data = wr->imm_data;
				}
				dst->rcq->q.push_back(w);
			}
		}
		if (wr->send_flags & IBV_SEND_SIGNALED) {
			ibv_wc w{};
			w.wr_id = wr->wr_id;
			w.status = IBV_WC_SUCCESS;
			w.opcode = IBV_WC_SEND;
			if (md.hold_send_completions)
				md.held.emplace_back(src->scq, w);
			else
				src->scq->q.push_back(w);
		}
	}
	return 0;
}

int model_post_recv(ibv_qp *q, ibv_recv_wr *wr, ibv_recv_wr **)
{
	for (; wr != nullptr; wr = wr->next)
		qp_of(q)->rq.push_back({wr->wr_id, wr->sg_list[0].addr, wr->sg_list[0].length, wr->sg_list[0].lkey});
	return 0;
}

int model_poll_cq(ibv_cq *c, int n, ibv_wc *wc)
{
	model_cq *m = cq_of(c);
	int k = 0;
	while (k < n && !m->q.empty()) {
		wc[k++] = m->q.front();
		m->q.pop_front();
	}
	return k;
}

const verbs_ops model_ops = {model_post_send, model_post_recv, model_poll_cq};

struct model_pair {
	model md;
	pool_guard pool{"vmodel", 1023};
	model_cq cq[4];
	model_qp mq[2];
	model_ah ah_to1;
	ah_table<verbs_av> ahs;
	ah_handle h1{};
	verbs_queue q[2];

	model_pair()
	{
		g_model = &md;
		ahs.init(8, SOCKET_ID_ANY, nullptr);
		ah_to1.sgid = v4gid(10, 0, 0, 1);
		ah_to1.dgid = v4gid(10, 0, 0, 2);
		uint32_t slot = 0;
		EXPECT_TRUE(ahs.reserve(&slot));
		ahs.av_at(slot).ah = &ah_to1.ah;
		h1 = ahs.publish(slot);
		for (int i = 0; i < 2; i++) {
			mq[i].qpn = 0x100 * uint32_t(i + 1);
			mq[i].qkey = 0x11111111;
			mq[i].scq = &cq[2 * i];
			mq[i].rcq = &cq[2 * i + 1];
			md.qps[mq[i].qpn] = &mq[i];
			verbs_queue_parts p;
			p.qp = &mq[i].qp;
			p.send_cq = &cq[2 * i].cq;
			p.recv_cq = &cq[2 * i + 1].cq;
			p.qpn = mq[i].qpn;
			p.qkey = mq[i].qkey;
			p.ops = &model_ops;
			p.ahs = ahs.replica(0);
			add_pool(p.mrs, pool.mp);
			p.rx_pool = pool.mp;
			p.ethernet = true;
			p.sq_depth = 64;
			p.rq_depth = 128;
			p.recv_batch = 16;
			p.tx.max_inline = 64;
			p.tx.mtu = 1024;
			p.tx.signal_every = 8;
			EXPECT_EQ(q[i].attach(p), 0);
			q[i].post_recvs();
		}
	}
	~model_pair()
	{
		for (int i = 0; i < 2; i++) {
			q[i].release_tx();
			for (auto &b : mq[i].rq)
				rte_pktmbuf_free(reinterpret_cast<rte_mbuf *>(b.wr_id));
			for (auto *c : {&cq[2 * i + 1]})
				for (auto &w : c->q)
					rte_pktmbuf_free(reinterpret_cast<rte_mbuf *>(w.wr_id));
		}
		g_model = nullptr;
	}
	/* Receives everything queue 1 has, checks and frees it. */
	unsigned receive_all(std::vector<recv_wc> &out)
	{
		recv_wc wc[32];
		uint16_t n;
		unsigned total = 0;
		while ((n = q[1].rx_burst(wc, 32)) != 0) {
			for (uint16_t i = 0; i < n; i++)
				out.push_back(wc[i]);
			total += n;
		}
		return total;
	}
};

} // namespace

TEST(VerbsQueueModel, BurstsLoopBackWithPayloadsGrhAndImm)
{
	model_pair mp;
	EXPECT_EQ(mp.q[0].rx_posted(), 128u);
	EXPECT_EQ(mp.mq[0].rq.size(), 128u);
	const unsigned base = mp.pool.in_use(); /* the posted receive buffers */
	EXPECT_EQ(base, 256u);

	/* 40 sends in bursts of 32 and 8: inline from the caller (small and
	 * large), from mbufs (small: inline; large: SGE), some with imm. */
	std::vector<std::vector<uint8_t>> pay(40);
	std::vector<send_wr> w(40);
	for (unsigned i = 0; i < 40; i++) {
		pay[i].assign(i % 4 == 1 ? 300 : 10 + i, uint8_t(i));
		const bool caller = i % 2 == 0;
		w[i] = send_wr{mp.h1, 0x200, 0x80000000u, nullptr, nullptr, 0, 0, 0};
		if (caller) {
			w[i].inline_data = pay[i].data();
			w[i].inline_len = uint32_t(pay[i].size());
			w[i].flags = send_inline;
		} else {
			rte_mbuf *m = rte_pktmbuf_alloc(mp.pool.mp);
			memcpy(rte_pktmbuf_append(m, uint16_t(pay[i].size())), pay[i].data(), pay[i].size());
			w[i].mbuf = m;
		}
		if (i % 5 == 0) {
			w[i].flags |= send_imm;
			w[i].imm_data = rte_cpu_to_be_32(i);
		}
	}
	ASSERT_EQ(mp.q[0].tx_burst(w.data(), 40), 32);
	ASSERT_EQ(mp.q[0].tx_burst(w.data() + 32, 8), 8);
	EXPECT_EQ(mp.q[0].counters().tx_pkts, 40u);
	EXPECT_EQ(mp.md.bad_lkey, 0u);
	EXPECT_GT(mp.md.posted_inline, 0u);
	EXPECT_GT(mp.md.posted_sge, 0u);
	/* The second burst reaped the first one's 4 completions first. */
	EXPECT_EQ(mp.q[0].tx_outstanding(), 8u);
	mp.q[0].tx_flush();
	EXPECT_EQ(mp.q[0].tx_outstanding(), 0u); /* 5 signalled completions cover all 40 */
	EXPECT_EQ(mp.q[0].counters().tx_completions, 5u);

	std::vector<recv_wc> got;
	ASSERT_EQ(mp.receive_all(got), 40u);
	for (unsigned i = 0; i < 40; i++) {
		const recv_wc &r = got[i];
		ASSERT_EQ(r.byte_len, 40 + pay[i].size()) << i;
		EXPECT_EQ(memcmp(rte_pktmbuf_mtod_offset(r.mbuf, void *, 40), pay[i].data(), pay[i].size()), 0) << i;
		EXPECT_EQ(r.src_qp, 0x100u);
		EXPECT_EQ(r.qp_num, 0x200u);
		EXPECT_EQ(r.l3, l3_type::ipv4);
		EXPECT_EQ(r.sgid, mp.ah_to1.sgid);
		EXPECT_EQ(r.dgid, mp.ah_to1.dgid);
		EXPECT_EQ((r.wc_flags & wc_with_imm) != 0, i % 5 == 0) << i;
		if (i % 5 == 0) {
			EXPECT_EQ(r.imm_data, rte_cpu_to_be_32(i));
		}
		rte_pktmbuf_free(r.mbuf);
	}
	EXPECT_EQ(mp.q[1].counters().rx_pkts, 40u);
	/* The receive queue was topped up in batches: never below depth - batch. */
	EXPECT_GT(mp.q[1].rx_posted(), 128u - 16u);
	/* Every send mbuf and copy went back: only posted receives remain. */
	EXPECT_EQ(mp.pool.in_use(), mp.q[0].rx_posted() + mp.q[1].rx_posted());
}

TEST(VerbsQueueModel, StaleAhRefusedPostFullQueueAndErrors)
{
	model_pair mp;
	auto one = [&](uint32_t qkey = 0x80000000u) {
		rte_mbuf *m = rte_pktmbuf_alloc(mp.pool.mp);
		memset(rte_pktmbuf_append(m, 100), 1, 100);
		return send_wr{mp.h1, 0x200, qkey, m, nullptr, 0, 0, 0};
	};
	const auto posted_rx = [&] { return mp.q[0].rx_posted() + mp.q[1].rx_posted(); };

	/* A stale handle: taken, dropped, counted, mbuf freed. */
	send_wr st = one();
	st.ah.gen += 2;
	EXPECT_EQ(mp.q[0].tx_burst(&st, 1), 1);
	EXPECT_EQ(mp.q[0].counters().tx_stale_ah, 1u);
	EXPECT_EQ(mp.pool.in_use(), posted_rx());

	/* The device refuses the 3rd of 6: 2 sent, the caller keeps 4. */
	std::vector<send_wr> w;
	for (int i = 0; i < 6; i++)
		w.push_back(one());
	mp.md.refuse_at = 2;
	EXPECT_EQ(mp.q[0].tx_burst(w.data(), 6), 2);
	EXPECT_EQ(mp.q[0].counters().tx_post_refused, 1u);
	EXPECT_EQ(mp.q[0].tx_outstanding(), 2u);
	mp.md.refuse_at = -1;
	EXPECT_EQ(mp.q[0].tx_burst(w.data() + 2, 4), 4);
	EXPECT_EQ(mp.q[0].tx_outstanding(), 6u);

	/* Completions held back: the send queue (64) fills, then refuses. */
	mp.md.hold_send_completions = true;
	unsigned sent = 6;
	for (int round = 0; round < 10; round++) {
		std::vector<send_wr> b;
		for (int i = 0; i < 16; i++)
			b.push_back(one());
		uint16_t k = mp.q[0].tx_burst(b.data(), 16);
		sent += k;
		for (unsigned i = k; i < 16; i++)
			rte_pktmbuf_free(b[i].mbuf);
	}
	EXPECT_EQ(sent, 64u);
	EXPECT_EQ(mp.q[0].tx_outstanding(), 64u);
	EXPECT_GT(mp.q[0].counters().tx_port_full, 0u);
	/* Completions arrive: room again, and every mbuf comes back. */
	mp.md.hold_send_completions = false;
	for (auto &h : mp.md.held)
		h.first->q.push_back(h.second);
	mp.md.held.clear();
	for (int i = 0; i < 4; i++)
		mp.q[0].tx_flush();
	EXPECT_EQ(mp.q[0].tx_outstanding(), 0u);
	std::vector<recv_wc> got;
	mp.receive_all(got);
	EXPECT_EQ(mp.md.rnr_drops, 0u); /* 64 sends, 128 receives posted */
	for (auto &r : got)
		rte_pktmbuf_free(r.mbuf);
	EXPECT_EQ(got.size(), sent);
	EXPECT_EQ(mp.pool.in_use(), posted_rx());

	/* A wrong Q_Key never arrives (the model drops it as a UD QP would). */
	send_wr bq = one(0x1234);
	EXPECT_EQ(mp.q[0].tx_burst(&bq, 1), 1);
	EXPECT_EQ(mp.md.qkey_drops, 1u);

	/* A receive completion in error: mbuf freed, counted, not delivered. */
	ASSERT_FALSE(mp.mq[1].rq.empty());
	ibv_wc e{};
	e.wr_id = mp.mq[1].rq.front().wr_id;
	mp.mq[1].rq.pop_front();
	e.status = IBV_WC_LOC_PROT_ERR;
	mp.cq[3].q.push_back(e);
	recv_wc r[4];
	EXPECT_EQ(mp.q[1].rx_burst(r, 4), 0);
	EXPECT_EQ(mp.q[1].counters().rx_wc_errors, 1u);
	mp.q[0].tx_flush();
	/* The unsignalled send above is still outstanding (its mbuf with it). */
	EXPECT_EQ(mp.pool.in_use(), posted_rx() + mp.q[0].tx_outstanding());
	/* The same figures through the queue's iteration (xstats, stats.h):
	 * the stale AH is the sender's one drop and the error completion the
	 * receiver's; the refused post and the full queue are events, outside
	 * the drop sums. */
	std::map<std::string, std::pair<counter_kind, uint64_t>> x0, x1;
	mp.q[0].counters().for_each([&](const xstat_name &n, uint64_t v) { x0[n.name] = {n.kind, v}; });
	mp.q[1].counters().for_each([&](const xstat_name &n, uint64_t v) { x1[n.name] = {n.kind, v}; });
	EXPECT_EQ(x0["tx_stale_ah"], std::make_pair(counter_kind::drop, uint64_t(1)));
	EXPECT_EQ(x0["tx_post_refused"], std::make_pair(counter_kind::event, uint64_t(1)));
	EXPECT_EQ(x0["tx_port_full"].first, counter_kind::event);
	EXPECT_EQ(x1["rx_wc_errors"], std::make_pair(counter_kind::drop, uint64_t(1)));
	EXPECT_EQ(mp.q[0].counters().tx_drops(), 1u);
	EXPECT_EQ(mp.q[1].counters().rx_drops(), 1u);
	EXPECT_EQ(mp.q[0].counters().drops() + mp.q[1].counters().drops(), 2u);
}

/* rxe (Linux 6.1) flushes no posted receive WR of a UD QP when it moves to
 * the error state: the queue itself must give those buffers back once the
 * QP is destroyed. Also: a reordered completion leaves a hole the ring
 * skips, and a completion for a buffer the queue never posted is counted
 * and not freed. */
TEST(VerbsQueueModel, ReceiveBuffersBackWithoutFlush)
{
	model_pair mp;
	EXPECT_EQ(mp.pool.in_use(), 256u);

	/* Three datagrams; the model's receive queue completes in order. */
	std::vector<send_wr> w;
	uint8_t pay[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	for (int i = 0; i < 3; i++)
		w.push_back(send_wr{mp.h1, 0x200, 0x11111111, nullptr, pay, sizeof(pay), 0, send_inline});
	ASSERT_EQ(mp.q[0].tx_burst(w.data(), 3), 3);
	std::vector<recv_wc> got;
	ASSERT_EQ(mp.receive_all(got), 3u);
	for (auto &r : got)
		rte_pktmbuf_free(r.mbuf);

	/* Out of order: the 3rd posted buffer of queue 1 completes first
	 * (in error, so it is simply freed), then the 1st, then the 2nd. */
	ASSERT_GE(mp.mq[1].rq.size(), 3u);
	const uint64_t ids[3] = {mp.mq[1].rq[2].wr_id, mp.mq[1].rq[0].wr_id, mp.mq[1].rq[1].wr_id};
	mp.mq[1].rq.erase(mp.mq[1].rq.begin(), mp.mq[1].rq.begin() + 3);
	const uint32_t before = mp.q[1].rx_posted();
	for (uint64_t id : ids) {
		ibv_wc e{};
		e.wr_id = id;
		e.status = IBV_WC_WR_FLUSH_ERR;
		mp.cq[3].q.push_back(e);
	}
	/* And one the queue never posted. */
	rte_mbuf *foreign = rte_pktmbuf_alloc(mp.pool.mp);
	ibv_wc e{};
	e.wr_id = reinterpret_cast<uintptr_t>(foreign);
	e.status = IBV_WC_SUCCESS;
	e.byte_len = 48;
	mp.cq[3].q.push_back(e);
	recv_wc r[8];
	EXPECT_EQ(mp.q[1].rx_burst(r, 8), 0);
	EXPECT_EQ(mp.q[1].counters().rx_wc_errors, 3u);
	EXPECT_EQ(mp.q[1].counters().rx_unknown_wr, 1u);
	EXPECT_EQ(rte_mbuf_refcnt_read(foreign), 1u); /* not freed by the queue */
	rte_pktmbuf_free(foreign);
	EXPECT_EQ(mp.q[1].rx_posted(), before - 3);

	/* Teardown as on rxe: the QP is destroyed, no flush completion
	 * comes. The device forgets its receive queue; the queue frees
	 * every buffer itself. */
	mp.q[0].tx_flush();
	for (int i = 0; i < 2; i++) {
		mp.q[i].release_tx();
		const uint32_t posted = mp.q[i].rx_posted();
		EXPECT_EQ(mp.q[i].release_rx(), posted);
		EXPECT_EQ(mp.q[i].counters().rx_reclaimed, posted);
		EXPECT_EQ(mp.q[i].rx_posted(), 0u);
		mp.mq[i].rq.clear();
	}
	EXPECT_EQ(mp.pool.in_use(), 0u);
}
