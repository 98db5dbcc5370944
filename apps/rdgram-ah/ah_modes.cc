/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-ah's modes (beside the running poll threads): what inspect, bench
 * and storm create and measure; ah_report.cc prints it.
 */
#include <algorithm>
#include <cstdio>
#include <cstring>

#include <rte_cycles.h>
#include <rte_lcore.h>

#include "ah_engine.h"
#include "ah_report.h"
#include "rdgram/config.h"

namespace rdgram::ahtool {

namespace {

double tsc_us(uint64_t d)
{
	return double(d) * 1e6 / double(rte_get_tsc_hz());
}

reg_summary summary(host &h)
{
	reg_summary s{};
	h.rt.ctl().call([&] {
		ah_registry &r = h.svc.registry();
		s.live = r.size();
		s.capacity = r.capacity();
		s.unref = r.unreferenced();
		s.memory = r.memory_bytes();
		s.created = r.stats().created;
		s.reused = r.stats().reused;
		s.evicted = r.stats().evicted;
		s.failed = r.stats().failed;
		s.device_live = h.local->live_ahs();
	});
	return s;
}

} // namespace

/* ---- inspect ------------------------------------------------------------ */

namespace {

/* inspect on a DPDK port: worker 0 sends one datagram per AH created (to
 * the peer's QP c.ping_qpn) and counts what comes back to the local QP,
 * until every one was answered or 2 s (at most --timeout) passed. */
void ping_peer(host &h, const std::vector<ibv_ah_attr> &attrs, const std::vector<int> &errs, inspect_result *res)
{
	const ah_app_config &c = *h.c;
	std::vector<ah_key> keys;
	for (size_t i = 0; i < attrs.size(); i++)
		if (errs[i] == 0)
			keys.push_back(ah_key::of(attrs[i]));
	ah_worker &w = *h.workers[0];
	h.ping_keys = keys.data();
	h.ping_n = uint32_t(keys.size());
	const uint64_t r0 = w.replies.load(std::memory_order_acquire);
	const double hz = double(rte_get_tsc_hz());
	const uint64_t end = rte_get_tsc_cycles() + uint64_t(std::min(c.timeout_s, 2.0) * hz);
	h.ping_go.store(true, std::memory_order_release);
	while (rte_get_tsc_cycles() < end &&
	       (!w.ping_done.load(std::memory_order_acquire) ||
		w.replies.load(std::memory_order_acquire) - r0 < keys.size()))
		rte_delay_us_sleep(200);
	h.ping_go.store(false, std::memory_order_release);
	/* The keys stay valid until worker 0 has begun an iteration after
	 * the store above (two increments: the current one may predate it). */
	const uint64_t l0 = w.loops.load(std::memory_order_seq_cst);
	while (w.loops.load(std::memory_order_seq_cst) < l0 + 2)
		rte_delay_us_sleep(50);
	res->pinged = h.ping_n;
	res->ping_given = w.ping_given;
	res->replies = w.replies.load(std::memory_order_acquire) - r0;
	h.ping_keys = nullptr;
}

} // namespace

int run_inspect(host &h, const std::vector<wire::gid> &dests, inspect_result *res)
{
	const ah_app_config &c = *h.c;
	std::vector<ibv_ah_attr> attrs;
	for (uint32_t f = 0; f < c.flows; f++)
		for (const auto &d : dests)
			attrs.push_back(attr_to(h, d, f));
	const unsigned n = unsigned(attrs.size());
	std::vector<ah_handle> hs(n);
	std::vector<int> errs(n);
	const unsigned ok = h.svc.create_ah_batch(attrs.data(), n, hs.data(), errs.data());
	int status = 0;
	for (unsigned i = 0; i < n; i++)
		if (errs[i] != 0) {
			wire::gid g;
			memcpy(g.raw, attrs[i].grh.dgid.raw, 16);
			fprintf(stderr, "rdgram-ah: creating the AH to %s failed: %s\n", format_gid(g).c_str(),
				strerror(errs[i]));
			status = 1;
		}
	if (h.on_port)
		ping_peer(h, attrs, errs, res);
	/* The last `release` AHs are destroyed again: the registry keeps them
	 * cached (refcount 0, evictable in LRU order). */
	uint32_t released = 0;
	for (unsigned i = n; i-- > 0 && released < c.release;)
		if (errs[i] == 0 && h.svc.destroy_ah(hs[i]) == 0)
			released++;

	std::vector<inspect_row> &rows = res->rows;
	h.rt.ctl().call([&] {
		h.svc.registry().for_each([&](const ah_key &k, ah_handle ah, uint32_t refs) {
			inspect_row r{k, ah, refs, false, {}, {}};
			wire::gid g;
			memcpy(g.raw, k.dgid, 16);
			r.have_neigh = h.local->neighbour_info(g, &r.n);
			const soft::soft_av &av = h.local->ahs().av_at(ah.slot);
			const size_t len = av.l3 == 4 ? wire::addr_len_v4 : sizeof(av.hdr);
			r.av.assign(av.hdr, av.hdr + len);
			rows.push_back(std::move(r));
		});
	});
	std::sort(rows.begin(), rows.end(),
		  [](const inspect_row &a, const inspect_row &b) { return a.h.slot < b.h.slot; });
	res->reg = summary(h);
	res->requested = n;
	res->created = ok;
	res->released = released;
	/* Release what inspect still holds (the registry keeps them cached). */
	for (unsigned i = 0; i < n; i++)
		if (errs[i] == 0)
			h.svc.destroy_ah(hs[i]);
	return status;
}

/* ---- bench -------------------------------------------------------------- */

int run_bench(host &h, bench_result *res)
{
	const ah_app_config &c = *h.c;
	const uint32_t n = c.count;
	const uint32_t ndest = std::max<uint32_t>(1, std::min(c.storm_dests, n));
	if (uint64_t(3) * n > c.capacity) {
		fprintf(stderr, "rdgram-ah: bench creates 3 x --count AHs: raise --capacity to %lu\n",
			(unsigned long)(uint64_t(3) * n));
		return 2;
	}
	/* Three disjoint key sets: flow labels 0.., n/ndest.., 2n/ndest.. */
	auto make = [&](uint32_t set) {
		std::vector<ibv_ah_attr> a(n);
		const uint32_t per = (n + ndest - 1) / ndest;
		for (uint32_t i = 0; i < n; i++)
			a[i] = attr_to(h, addr_of(c.ipv6, 2, i % ndest + 1), set * per + i / ndest);
		return a;
	};
	std::vector<ah_handle> hs(n);
	std::vector<int> errs(n);
	const double hz = double(rte_get_tsc_hz());
	std::vector<bench_figure> &out = res->figures;

	/* 1. One by one: one control-thread round trip per AH. */
	std::vector<ibv_ah_attr> a1 = make(0);
	uint64_t t0 = rte_get_tsc_cycles();
	unsigned ok = 0;
	for (uint32_t i = 0; i < n; i++) {
		hs[i] = h.svc.create_ah(a1[i], &errs[i]);
		ok += errs[i] == 0;
	}
	uint64_t t1 = rte_get_tsc_cycles();
	out.push_back({"create one-by-one", double(ok) / (double(t1 - t0) / hz), ok});
	release_all(h, hs, errs);

	/* 2. Batched: create_ah_batch in --batch chunks. */
	std::vector<ibv_ah_attr> a2 = make(1);
	auto batched = [&](const std::vector<ibv_ah_attr> &a) {
		unsigned k = 0;
		for (uint32_t off = 0; off < n; off += c.batch) {
			const uint32_t m = std::min(c.batch, n - off);
			k += h.svc.create_ah_batch(a.data() + off, m, hs.data() + off, errs.data() + off);
		}
		return k;
	};
	t0 = rte_get_tsc_cycles();
	ok = batched(a2);
	t1 = rte_get_tsc_cycles();
	out.push_back({"create batched", double(ok) / (double(t1 - t0) / hz), ok});
	release_all(h, hs, errs);

	/* 3. Batched again on the same keys: registry hits (reuse). */
	t0 = rte_get_tsc_cycles();
	ok = batched(a2);
	t1 = rte_get_tsc_cycles();
	out.push_back({"reacquire batched (hits)", double(ok) / (double(t1 - t0) / hz), ok});

	/* 4. dest_cache bulk lookups of set 2, as poll threads do them:
	 * every worker at once, each online on the QSBR variable (the
	 * rate is their sum; each one's is in the report). */
	std::vector<ah_key> keys(n);
	for (uint32_t i = 0; i < n; i++)
		keys[i] = ah_key::of(a2[i]);
	h.bench_keys = keys.data();
	h.bench_n = n;
	h.bench_end = rte_get_tsc_cycles() + uint64_t(c.lookup_s * hz);
	h.bench_go.store(true, std::memory_order_release);
	for (auto &w : h.workers)
		while (!w->bench_done.load(std::memory_order_acquire))
			rte_delay_us_sleep(1000);
	h.bench_go.store(false, std::memory_order_release);
	uint64_t lookups = 0, hits = 0, longest = 1;
	for (auto &w : h.workers) {
		lookups += w->lookups;
		hits += w->hits;
		longest = std::max(longest, w->lookup_tsc);
		res->per_worker.push_back({w->index, w->where.lcore, w->lookups, w->hits,
					   double(w->lookups) / (double(std::max<uint64_t>(1, w->lookup_tsc)) / hz)});
	}
	t0 = 0;
	t1 = longest;
	out.push_back({"dest_cache lookup_bulk", double(lookups) / (double(t1 - t0) / hz), unsigned(lookups)});
	release_all(h, hs, errs, 1);
	res->reg = summary(h);
	res->count = n;
	res->dests = ndest;
	res->lookups = lookups;
	res->hits = hits;
	return hits == lookups ? 0 : 1;
}

/* ---- storm -------------------------------------------------------------- */

int run_storm(host &h, uint32_t n, const std::vector<wire::gid> &dests, storm_result *res)
{
	const ah_app_config &c = *h.c;
	const uint32_t nd = uint32_t(dests.size());
	std::vector<ibv_ah_attr> attrs(n);
	std::vector<ah_key> keys(n);
	for (uint32_t i = 0; i < n; i++) {
		attrs[i] = attr_to(h, dests[i % nd], i / nd);
		keys[i] = ah_key::of(attrs[i]);
	}
	std::vector<uint64_t> ready(n, 0);
	/* Each worker watches its share: keys k with k % workers == its index. */
	const unsigned nw = unsigned(h.workers.size());
	for (auto &w : h.workers) {
		w->watch_idx.clear();
		for (uint32_t k = w->index; k < n; k += nw)
			w->watch_idx.push_back(k);
		w->watch_n = w->watched = uint32_t(w->watch_idx.size());
		w->seen = 0;
		w->scans = 0;
		w->watch_done.store(w->watch_n == 0, std::memory_order_relaxed);
	}
	std::vector<ah_handle> hs(n);
	std::vector<int> errs(n, 0);
	h.watch_keys = keys.data();
	h.ready_tsc = ready.data();

	const uint64_t t0 = rte_get_tsc_cycles();
	h.watching.store(true, std::memory_order_release);
	unsigned ok = 0;
	for (uint32_t off = 0; off < n; off += c.batch) {
		const uint32_t m = std::min(c.batch, n - off);
		ok += h.svc.create_ah_batch(attrs.data() + off, m, hs.data() + off, errs.data() + off);
	}
	const uint64_t t_created = rte_get_tsc_cycles();
	/* Failed ones never become ready: wait for the others. */
	const uint64_t give_up = t_created + uint64_t(c.timeout_s * double(rte_get_tsc_hz()));
	bool all = ok == n;
	if (all) {
		while (!h.watch_done() && rte_get_tsc_cycles() < give_up)
			rte_delay_us_sleep(200);
		all = h.watch_done();
	} else {
		rte_delay_us_sleep(10000);
	}
	h.watching.store(false, std::memory_order_seq_cst);
	/* The arrays stay valid until every worker has begun an iteration
	 * after the store above (two increments: the current one may
	 * predate it). */
	for (auto &w : h.workers) {
		const uint64_t l0 = w->loops.load(std::memory_order_seq_cst);
		while (w->loops.load(std::memory_order_seq_cst) < l0 + 2)
			rte_delay_us_sleep(50);
	}
	uint64_t scans = 0;
	for (auto &w : h.workers) {
		scans += w->scans;
		res->per_worker.push_back({w->index, w->where.lcore, w->watched, w->seen, w->watch_n, w->scans});
	}
	res->reg = summary(h);

	std::vector<double> &lat = res->ready_us;
	lat.reserve(n);
	uint64_t last = 0;
	for (uint32_t i = 0; i < n; i++)
		if (errs[i] == 0 && ready[i] != 0) {
			lat.push_back(tsc_us(ready[i] - t0));
			last = std::max(last, ready[i]);
		}
	std::sort(lat.begin(), lat.end());
	res->by_errno.assign(256, 0);
	for (uint32_t i = 0; i < n; i++)
		if (errs[i] != 0)
			res->by_errno[std::min(errs[i], 255)]++;
	res->requested = n;
	res->created = ok;
	res->dests = nd;
	res->all_ready = all;
	res->created_s = tsc_us(t_created - t0) / 1e6;
	res->all_ready_ms = last ? tsc_us(last - t0) / 1e3 : 0;
	res->scans = scans;
	release_all(h, hs, errs);
	return all ? 0 : 1;
}

} // namespace rdgram::ahtool
