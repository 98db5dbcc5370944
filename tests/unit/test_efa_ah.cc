/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/efa's AH path against a device model. No EFA device exists here:
 * the model stands behind efa_ah_ops where libibverbs/libefa would be, and
 * behaves as ibv_create_ah(3), efadv_query_ah(3) and ibv_destroy_ah(3) say
 * (and as rdma-core 44's EFA provider does where the pages are silent):
 *
 *  - ibv_create_ah: NULL + errno. EINVAL for a PD that is not the device's,
 *    port_num != 1, no GRH, sgid_index past its one-entry GID table, or a
 *    destination GID outside its subnet (the 8-byte prefix, standing in
 *    for "another subnet or availability zone"); ENOMEM when its AH table
 *    (max_ah entries) is full. One device AH per destination GID, shared
 *    by every ibv_ah to it (reference counted), so an ahn names one
 *    address, as receive attribution by wc.slid needs.
 *  - efadv_query_ah: EINVAL when inlen does not reach past ahn; otherwise
 *    the first inlen bytes are zeroed, ahn and comp_mask (an out field)
 *    written, and nothing past inlen touched.
 *  - ibv_destroy_ah: 0, or EINVAL for an AH it does not hold (the real
 *    library would read freed memory: the model counts it as misuse, and
 *    every test checks there was none).
 *
 * What this proves: the driver's AH logic (ahn per AH, the inlen contract,
 * ENOMEM unchanged and answered by the registry, EINVAL explanations,
 * stale handles refused before the library, deferred destruction, no
 * leak). What it cannot: that a real EFA device behaves like the model;
 * that is tests/hw/test_efa_hw.cc's job on a machine with one.
 */
#include <gtest/gtest.h>

#include <cstring>
#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>

#include "eal_env.h"
#include "efa_device.h"
#include "rdgram/ah_registry.h"

using namespace rdgram;
using namespace rdgram::efa;

namespace {

struct efa_model {
	struct model_ah {
		ibv_ah ah;  /* first: the ibv_ah * handed out */
		uint16_t ahn;
		wire::gid dgid;
	};
	struct entry {
		uint16_t ahn;
		uint32_t refs;
	};

	ibv_pd pd{};                 /* the device's PD (its address is the identity) */
	uint8_t subnet[8] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0};
	uint32_t max_ah = 8;         /* device AH table entries */
	uint64_t comp_mask_out = 0;  /* what query writes back (newer library: bits) */
	int query_error = 0;         /* efadv_query_ah fails with this */
	int force_ahn = -1;          /* >= 0: next device AH gets this number */

	/* Keyed by the GID bytes (std::array: a vector key trips GCC 12's false
	 * -Wstringop-overread in its three-way compare). */
	std::map<std::array<uint8_t, 16>, entry> by_gid;
	std::set<model_ah *> live;
	std::set<uint16_t> used_ahn;
	uint64_t created = 0, destroyed = 0, misuse = 0;
	uint64_t create_calls = 0, query_calls = 0;

	static inline efa_model *cur = nullptr;

	efa_model() { cur = this; }
	~efa_model()
	{
		for (model_ah *m : live)
			delete m;
		cur = nullptr;
	}

	wire::gid gid(uint8_t host) const
	{
		wire::gid g{};
		memcpy(g.raw, subnet, 8);
		g.raw[15] = host;
		g.raw[14] = 0x01;
		return g;
	}
	port_attr port() const
	{
		port_attr p;
		p.link = link_layer::ethernet;
		p.grh_required = true;
		p.max_ah = 0; /* as if ibv_query_device did not say: the model's table limits */
		p.active_mtu = 8928;
		p.gids = {gid(1)};
		return p;
	}

	static ibv_ah *create(ibv_pd *pd, ibv_ah_attr *a)
	{
		efa_model &m = *cur;
		m.create_calls++;
		if (pd != &m.pd || a->port_num != 1 || !a->is_global || a->grh.sgid_index != 0 ||
		    memcmp(a->grh.dgid.raw, m.subnet, 8) != 0) {
			errno = EINVAL;
			return nullptr;
		}
		std::array<uint8_t, 16> key;
		memcpy(key.data(), a->grh.dgid.raw, 16);
		auto it = m.by_gid.find(key);
		if (it == m.by_gid.end()) {
			if (m.by_gid.size() >= m.max_ah) {
				errno = ENOMEM;
				return nullptr;
			}
			uint16_t n = 0;
			if (m.force_ahn >= 0) {
				n = uint16_t(m.force_ahn);
				m.force_ahn = -1;
			} else {
				while (m.used_ahn.count(n))
					n++;
			}
			m.used_ahn.insert(n);
			it = m.by_gid.emplace(key, entry{n, 0}).first;
		}
		it->second.refs++;
		auto *o = new model_ah{};
		o->ah.pd = pd;
		o->ahn = it->second.ahn;
		memcpy(o->dgid.raw, a->grh.dgid.raw, 16);
		m.live.insert(o);
		m.created++;
		return &o->ah;
	}
	static int query(ibv_ah *ah, efadv_ah_attr *attr, uint32_t inlen)
	{
		efa_model &m = *cur;
		m.query_calls++;
		auto *o = reinterpret_cast<model_ah *>(ah);
		if (!m.live.count(o)) {
			m.misuse++;
			return EINVAL;
		}
		if (m.query_error != 0)
			return m.query_error;
		if (inlen < offsetof(efadv_ah_attr, ahn) + sizeof(attr->ahn))
			return EINVAL;
		memset(attr, 0, inlen);
		attr->ahn = o->ahn;
		attr->comp_mask = m.comp_mask_out;
		return 0;
	}
	static int destroy(ibv_ah *ah)
	{
		efa_model &m = *cur;
		auto *o = reinterpret_cast<model_ah *>(ah);
		if (!m.live.count(o)) {
			m.misuse++;
			return EINVAL;
		}
		std::array<uint8_t, 16> key;
		memcpy(key.data(), o->dgid.raw, 16);
		auto it = m.by_gid.find(key);
		if (--it->second.refs == 0) {
			m.used_ahn.erase(it->second.ahn);
			m.by_gid.erase(it);
		}
		m.live.erase(o);
		delete o;
		m.destroyed++;
		return 0;
	}
	static constexpr efa_ah_ops ops{&create, &query, &destroy};
	uint16_t ahn_of_gid(const wire::gid &g) const
	{
		std::array<uint8_t, 16> gk;
		memcpy(gk.data(), g.raw, 16);
		auto it = by_gid.find(gk);
		return it == by_gid.end() ? ahn_unknown : it->second.ahn;
	}
};

ibv_ah_attr attr_to(const wire::gid &g, uint8_t hop = 0)
{
	ibv_ah_attr a{};
	a.is_global = 1;
	a.port_num = 1;
	memcpy(a.grh.dgid.raw, g.raw, 16);
	a.grh.sgid_index = 0;
	a.grh.hop_limit = hop;
	return a;
}

struct efa_fixture : ::testing::Test {
	efa_model model;
	efa_device dev;
	void SetUp() override { open(efa_config{}); }
	void open(const efa_config &cfg, ibv_pd *pd = nullptr)
	{
		ASSERT_EQ(dev.open_with(efa_model::ops, pd ? pd : &model.pd, model.port(), cfg), 0) << dev.error();
	}
	void TearDown() override
	{
		dev.close();
		EXPECT_EQ(model.live.size(), 0u) << "close left AHs in the device";
		EXPECT_EQ(model.created, model.destroyed) << "every ibv_ah created must be destroyed";
		EXPECT_EQ(model.misuse, 0u) << "the driver passed the library an AH it no longer held";
	}
	ah_handle create(const ibv_ah_attr &a, int *err)
	{
		return dev.create_ah(a, err);
	}
};

using EfaAh = efa_fixture;

/* Each AH gets the device's number for its destination; AHs to one GID
 * share it (one device AH per address); the AV holds the verbs AH and the
 * ahn a poll thread needs. */
TEST_F(EfaAh, AhnPerAh)
{
	int err;
	ah_handle h[3];
	for (int i = 0; i < 3; i++) {
		h[i] = create(attr_to(model.gid(uint8_t(10 + i))), &err);
		ASSERT_EQ(err, 0) << dev.error();
	}
	std::set<uint16_t> seen;
	for (int i = 0; i < 3; i++) {
		const uint16_t ahn = dev.ahn_of(h[i]);
		EXPECT_EQ(ahn, model.ahn_of_gid(model.gid(uint8_t(10 + i))));
		EXPECT_NE(ahn, ahn_unknown);
		seen.insert(ahn);
		const efa_av *av = dev.ahs().lookup(h[i]);
		ASSERT_NE(av, nullptr);
		EXPECT_EQ(av->ahn, ahn);
		ASSERT_NE(av->ah, nullptr);
		EXPECT_EQ(reinterpret_cast<efa_model::model_ah *>(av->ah)->ahn, ahn);
	}
	EXPECT_EQ(seen.size(), 3u) << "distinct destinations, distinct ahns";
	EXPECT_EQ(model.query_calls, 3u) << "one efadv_query_ah per AH";

	/* A second AH to the first GID (another hop limit: another rdgram AH)
	 * reports the same ahn: the device keeps one AH per address. */
	ah_handle h2 = create(attr_to(model.gid(10), 7), &err);
	ASSERT_EQ(err, 0);
	EXPECT_NE(h2, h[0]);
	EXPECT_EQ(dev.ahn_of(h2), dev.ahn_of(h[0]));
	EXPECT_EQ(dev.live_ahs(), 4u);
	EXPECT_EQ(model.live.size(), 4u);

	EXPECT_EQ(dev.destroy_ah(h[0]), 0);
	EXPECT_EQ(dev.ahn_of(h[0]), ahn_unknown) << "a destroyed handle has no ahn";
	EXPECT_EQ(dev.ahn_of(h2), model.ahn_of_gid(model.gid(10))) << "the other AH keeps it";
	for (ah_handle x : {h[1], h[2], h2})
		EXPECT_EQ(dev.destroy_ah(x), 0);
	EXPECT_EQ(dev.live_ahs(), 0u);
	EXPECT_EQ(model.live.size(), 0u);
}

/* The inlen contract of efadv_query_ah(3): bytes past inlen untouched, a
 * length that does not reach ahn refused, comp_mask an out field whose
 * unknown bits do not invalidate ahn. */
TEST_F(EfaAh, QueryInlen)
{
	int err;
	ah_handle h = create(attr_to(model.gid(20)), &err);
	ASSERT_EQ(err, 0);
	ibv_ah *ah = dev.ahs().lookup(h)->ah;
	const uint16_t want = model.ahn_of_gid(model.gid(20));

	/* Full size, as the driver passes it. */
	uint16_t ahn = 0;
	EXPECT_EQ(query_ahn(efa_model::ops, ah, sizeof(efadv_ah_attr), &ahn), 0);
	EXPECT_EQ(ahn, want);

	/* Exactly up to ahn: accepted, and the reserved bytes after it (past
	 * inlen) keep what the caller had there. */
	alignas(8) uint8_t buf[sizeof(efadv_ah_attr)];
	memset(buf, 0xab, sizeof(buf));
	ASSERT_LT(ah_attr_min_inlen, sizeof(efadv_ah_attr)) << "the test needs a struct longer than ahn";
	EXPECT_EQ(efa_model::query(ah, reinterpret_cast<efadv_ah_attr *>(buf), ah_attr_min_inlen), 0);
	efadv_ah_attr got;
	memcpy(&got, buf, sizeof(got));
	EXPECT_EQ(got.comp_mask, 0u);
	EXPECT_EQ(got.ahn, want);
	for (size_t i = ah_attr_min_inlen; i < sizeof(buf); i++)
		EXPECT_EQ(buf[i], 0xab) << "byte " << i << " is past inlen";
	EXPECT_EQ(query_ahn(efa_model::ops, ah, ah_attr_min_inlen, &ahn), 0);
	EXPECT_EQ(ahn, want);

	/* Short of ahn: EINVAL, and not one byte written. */
	memset(buf, 0xab, sizeof(buf));
	EXPECT_EQ(efa_model::query(ah, reinterpret_cast<efadv_ah_attr *>(buf), sizeof(uint64_t)), EINVAL);
	for (size_t i = 0; i < sizeof(buf); i++)
		EXPECT_EQ(buf[i], 0xab);
	ahn = 0x1234;
	EXPECT_EQ(query_ahn(efa_model::ops, ah, sizeof(uint64_t), &ahn), EINVAL);
	EXPECT_EQ(ahn, 0x1234) << "no ahn on failure";
	EXPECT_EQ(query_ahn(efa_model::ops, ah, ah_attr_min_inlen - 1, &ahn), EINVAL);

	/* A newer library announcing out-fields: ahn is still valid. */
	model.comp_mask_out = 1ull << 5;
	EXPECT_EQ(query_ahn(efa_model::ops, ah, sizeof(efadv_ah_attr), &ahn), 0);
	EXPECT_EQ(ahn, want);
	ah_handle h2 = create(attr_to(model.gid(21)), &err);
	EXPECT_EQ(err, 0) << "create_ah must not refuse out-field bits it does not know";
	EXPECT_EQ(dev.destroy_ah(h2), 0);
	model.comp_mask_out = 0;
	EXPECT_EQ(dev.destroy_ah(h), 0);
}

/* A failing efadv_query_ah fails the creation with its errno, and the AH
 * it could not number is destroyed, not leaked. An ahn of 0xFFFF (the "no
 * AH" mark of receives) from the device is refused as EPROTO. */
TEST_F(EfaAh, QueryFailureDestroysTheAh)
{
	int err;
	model.query_error = EOPNOTSUPP; /* what libefa says for a non-EFA AH */
	ah_handle h = create(attr_to(model.gid(30)), &err);
	EXPECT_EQ(h, ah_null);
	EXPECT_EQ(err, EOPNOTSUPP);
	EXPECT_NE(dev.error().find("efadv_query_ah"), std::string::npos) << dev.error();
	EXPECT_EQ(model.live.size(), 0u);
	EXPECT_EQ(dev.live_ahs(), 0u);
	model.query_error = 0;

	model.force_ahn = 0xffff;
	h = create(attr_to(model.gid(31)), &err);
	EXPECT_EQ(h, ah_null);
	EXPECT_EQ(err, EPROTO);
	EXPECT_EQ(model.live.size(), 0u);

	/* The slots went back: the table is usable to its full size. */
	h = create(attr_to(model.gid(32)), &err);
	EXPECT_EQ(err, 0);
	EXPECT_EQ(dev.destroy_ah(h), 0);
}

/* ENOMEM from the device comes back unchanged (the registry's cue). */
TEST_F(EfaAh, EnomemSurfaced)
{
	model.max_ah = 2;
	int err;
	ah_handle a = create(attr_to(model.gid(40)), &err);
	ASSERT_EQ(err, 0);
	ah_handle b = create(attr_to(model.gid(41)), &err);
	ASSERT_EQ(err, 0);
	ah_handle c = create(attr_to(model.gid(42)), &err);
	EXPECT_EQ(c, ah_null);
	EXPECT_EQ(err, ENOMEM);
	EXPECT_NE(dev.error().find("ENOMEM"), std::string::npos) << dev.error();
	EXPECT_EQ(dev.live_ahs(), 2u);
	/* Another AH to a GID the device already holds needs no new entry. */
	ah_handle a2 = create(attr_to(model.gid(40), 3), &err);
	EXPECT_EQ(err, 0);
	for (ah_handle x : {a, b, a2})
		EXPECT_EQ(dev.destroy_ah(x), 0);
	c = create(attr_to(model.gid(42)), &err);
	EXPECT_EQ(err, 0) << "room again once destroyed";
	EXPECT_EQ(dev.destroy_ah(c), 0);
}

/* Our own table is the other limit: max_ah in the config. */
TEST_F(EfaAh, TableCapacity)
{
	dev.close();
	efa_config cfg;
	cfg.max_ah = 1;
	open(cfg);
	EXPECT_EQ(dev.port().max_ah, 1u);
	int err;
	ah_handle a = create(attr_to(model.gid(45)), &err);
	ASSERT_EQ(err, 0);
	EXPECT_EQ(create(attr_to(model.gid(46)), &err), ah_null);
	EXPECT_EQ(err, ENOMEM);
	EXPECT_EQ(model.create_calls, 1u) << "a full table does not reach the device";
	EXPECT_EQ(dev.destroy_ah(a), 0);
}

/* EINVAL stays EINVAL, with the likely cause named. */
TEST_F(EfaAh, EinvalExplained)
{
	int err;
	struct {
		ibv_ah_attr a;
		const char *says;
	} cases[] = {
		{attr_to(model.gid(50)), "one port"},
		{attr_to(model.gid(50)), "GRH"},
		{attr_to(model.gid(50)), "past the GID table"},
		{attr_to(wire::gid{}), "zero"},
		{attr_to(model.gid(50)), "availability zone"},
	};
	cases[0].a.port_num = 2;
	cases[1].a.is_global = 0;
	cases[2].a.grh.sgid_index = 3;
	/* Another subnet: the model's prefix differs. */
	cases[4].a.grh.dgid.raw[0] = 0x20;
	cases[4].a.grh.dgid.raw[1] = 0x01;
	for (size_t i = 0; i < std::size(cases); i++) {
		ah_handle h = create(cases[i].a, &err);
		EXPECT_EQ(h, ah_null) << i;
		EXPECT_EQ(err, EINVAL) << i;
		EXPECT_NE(dev.error().find(cases[i].says), std::string::npos) << i << ": " << dev.error();
	}
	/* The off-subnet case names the GIDs involved. */
	EXPECT_NE(dev.error().find("2001:"), std::string::npos) << dev.error();
	EXPECT_EQ(dev.live_ahs(), 0u);

	/* A PD that is not the device's: the device refuses the same way and
	 * the explanation mentions the PD. */
	dev.close();
	ibv_pd other{};
	open(efa_config{}, &other);
	ah_handle h = create(attr_to(model.gid(51)), &err);
	EXPECT_EQ(h, ah_null);
	EXPECT_EQ(err, EINVAL);
	EXPECT_NE(dev.error().find("PD"), std::string::npos) << dev.error();
}

/* Destroying what is not live: EINVAL from the driver, never a call into
 * the library with a freed AH. */
TEST_F(EfaAh, DestroyStaleHandle)
{
	int err;
	ah_handle h = create(attr_to(model.gid(60)), &err);
	ASSERT_EQ(err, 0);
	EXPECT_EQ(dev.destroy_ah(h), 0);
	EXPECT_EQ(dev.destroy_ah(h), EINVAL) << "destroyed twice";
	EXPECT_EQ(dev.destroy_ah(ah_null), EINVAL);
	EXPECT_EQ(dev.destroy_ah(ah_handle{3, 1}), EINVAL) << "never created";
	EXPECT_EQ(dev.destroy_ah(ah_handle{1u << 30, 1}), EINVAL) << "out of range";
	/* The slot reused: the old handle is stale, the new one live. */
	ah_handle h2 = create(attr_to(model.gid(61)), &err);
	ASSERT_EQ(err, 0);
	EXPECT_EQ(dev.destroy_ah(h), EINVAL);
	EXPECT_NE(dev.ahs().lookup(h2), nullptr);
	EXPECT_EQ(dev.destroy_ah(h2), 0);
	EXPECT_EQ(model.destroyed, 2u);
}

/* close() destroys whatever is still live (the fixture's TearDown checks
 * the model is empty, created == destroyed and no misuse). */
TEST_F(EfaAh, CloseDestroysLiveAhs)
{
	int err;
	for (uint8_t i = 0; i < 5; i++) {
		create(attr_to(model.gid(uint8_t(70 + i))), &err);
		ASSERT_EQ(err, 0);
	}
	EXPECT_EQ(model.live.size(), 5u);
}

/* The registry over the model: at the device's ENOMEM it evicts its least
 * recently released AH and retries once; ENOMEM reaches the caller only
 * when every entry is referenced. */
TEST_F(EfaAh, RegistryEvictsAndRetriesOnEnomem)
{
	model.max_ah = 2;
	ah_registry reg(dev, 64);
	int err;
	const ibv_ah_attr A = attr_to(model.gid(80)), B = attr_to(model.gid(81)), C = attr_to(model.gid(82)),
			  D = attr_to(model.gid(83));
	ah_handle a = reg.acquire(A, &err);
	ASSERT_EQ(err, 0);
	ah_handle b = reg.acquire(B, &err);
	ASSERT_EQ(err, 0);
	EXPECT_EQ(reg.release(a), 0); /* a: cached, unreferenced, the LRU victim */
	ah_handle c = reg.acquire(C, &err);
	EXPECT_EQ(err, 0) << dev.error();
	EXPECT_NE(c, ah_null);
	EXPECT_EQ(reg.stats().device_enomem_retries, 1u);
	EXPECT_EQ(reg.stats().evicted, 1u);
	EXPECT_EQ(model.ahn_of_gid(model.gid(80)), ahn_unknown) << "a's device AH went";
	EXPECT_EQ(dev.ahn_of(c), model.ahn_of_gid(model.gid(82)));
	/* Everything referenced: ENOMEM to the caller. */
	ah_handle d = reg.acquire(D, &err);
	EXPECT_EQ(d, ah_null);
	EXPECT_EQ(err, ENOMEM);
	EXPECT_EQ(reg.release(b), 0);
	EXPECT_EQ(reg.release(c), 0);
	reg.clear();
	EXPECT_EQ(model.live.size(), 0u);
}

/* With poll threads (QSBR), a destroyed AH leaves the device only after a
 * grace period: a poll thread may still hold the ibv_ah it looked up. The
 * registry sees reclaim_pending() and reports ENOMEM (transient) rather
 * than evicting more; after the quiescent state the retry succeeds. */
TEST_F(EfaAh, DestroyWaitsForGracePeriod)
{
	const uint32_t nthreads = 4;
	auto *qs = static_cast<rte_rcu_qsbr *>(rte_zmalloc("efa_test_qs", rte_rcu_qsbr_get_memsize(nthreads), 64));
	ASSERT_NE(qs, nullptr);
	ASSERT_EQ(rte_rcu_qsbr_init(qs, nthreads), 0);
	const unsigned tid = 2;
	poll_thread_online(qs, tid);

	dev.close();
	efa_config cfg;
	cfg.qsbr = qs;
	open(cfg);
	model.max_ah = 1;
	int err;
	ah_handle a = create(attr_to(model.gid(90)), &err);
	ASSERT_EQ(err, 0);
	const efa_av *av = dev.ahs().lookup(a); /* what a poll thread would hold */
	ASSERT_NE(av, nullptr);
	ibv_ah *held = av->ah;
	EXPECT_EQ(dev.destroy_ah(a), 0);
	EXPECT_EQ(dev.ahs().lookup(a), nullptr) << "new lookups miss at once";
	EXPECT_EQ(dev.reclaim_pending(), 1u);
	dev.reclaim();
	EXPECT_EQ(model.live.count(reinterpret_cast<efa_model::model_ah *>(held)), 1u)
		<< "the device AH must outlive the grace period";
	EXPECT_EQ(av->ah, held) << "the AV a poll thread may still read is intact";

	/* The device is full (its only entry awaits the grace period). */
	{
		ah_registry reg(dev, 8);
		ah_handle b = reg.acquire(attr_to(model.gid(91)), &err);
		EXPECT_EQ(b, ah_null);
		EXPECT_EQ(err, ENOMEM);
		EXPECT_EQ(reg.stats().device_enomem_retries, 0u) << "nothing to evict while a grace period runs";

		rte_rcu_qsbr_quiescent(qs, tid);
		dev.reclaim();
		EXPECT_EQ(dev.reclaim_pending(), 0u);
		EXPECT_EQ(model.live.size(), 0u);
		b = reg.acquire(attr_to(model.gid(91)), &err);
		EXPECT_EQ(err, 0) << dev.error();
		EXPECT_EQ(reg.release(b), 0);
		reg.clear(); /* destroy: deferred again */
		EXPECT_EQ(dev.reclaim_pending(), 1u);
		rte_rcu_qsbr_quiescent(qs, tid);
		dev.poll(0); /* device::poll reclaims */
		EXPECT_EQ(dev.reclaim_pending(), 0u);
		EXPECT_EQ(model.live.size(), 0u);
	}
	/* close() also destroys AHs still waiting. */
	ah_handle c = create(attr_to(model.gid(92)), &err);
	ASSERT_EQ(err, 0);
	EXPECT_EQ(dev.destroy_ah(c), 0);
	EXPECT_EQ(model.live.size(), 1u);
	dev.close();
	EXPECT_EQ(model.live.size(), 0u);
	poll_thread_offline(qs, tid);
	rte_free(qs);
}

/* Churn against the model: random creates and destroys (some to full
 * tables, some invalid), the driver's view and the model's agree, nothing
 * leaks. */
TEST_F(EfaAh, ChurnAgreesWithModel)
{
	model.max_ah = 16;
	uint32_t seed = 12345;
	auto rnd = [&] {
		seed = seed * 1103515245u + 12345u;
		return seed >> 8;
	};
	std::vector<std::pair<ah_handle, uint8_t>> live;
	unsigned enomem = 0, einval = 0;
	for (int i = 0; i < 4000; i++) {
		if (live.empty() || rnd() % 3 != 0) {
			const uint8_t host = uint8_t(rnd() % 40);
			ibv_ah_attr a = attr_to(model.gid(host), uint8_t(rnd() % 2));
			const bool bad = rnd() % 10 == 0;
			if (bad)
				a.is_global = 0;
			int err;
			ah_handle h = create(a, &err);
			if (bad) {
				EXPECT_EQ(err, EINVAL);
				einval++;
			} else if (err == ENOMEM) {
				enomem++;
			} else {
				ASSERT_EQ(err, 0) << dev.error();
				EXPECT_EQ(dev.ahn_of(h), model.ahn_of_gid(model.gid(host)));
				live.emplace_back(h, host);
			}
		} else {
			const size_t k = rnd() % live.size();
			EXPECT_EQ(dev.destroy_ah(live[k].first), 0);
			live[k] = live.back();
			live.pop_back();
		}
		ASSERT_EQ(dev.live_ahs(), live.size());
		ASSERT_EQ(model.live.size(), live.size());
	}
	EXPECT_GT(enomem, 0u) << "the churn should reach the device's limit";
	EXPECT_GT(einval, 0u);
}

} // namespace
