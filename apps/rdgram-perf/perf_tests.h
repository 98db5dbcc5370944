/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The rdgram-perf poll loops, templates over the driver (ud_driver), so the
 * same code drives every driver with no virtual call per packet. Every loop
 * is bounded by a TSC deadline and stops by itself.
 *
 * Protocol (client leads, server follows):
 *   SYNC (imm 'SYNC', payload: test, size, iterations) -> echoed
 *   lat: data ping -> echoed pong; bw: data stream, counted
 *   FIN  (imm 'FIN!', payload: last flag) -> echoed with the count of data
 *        messages the server received since SYNC
 */
#ifndef RDGRAM_PERF_TESTS_H
#define RDGRAM_PERF_TESTS_H

#include <algorithm>
#include <atomic>
#include <cstring>
#include <ctime>
#include <vector>

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_rcu_qsbr.h>

#include "perf_report.h"
#include "perf_status.h"
#include "rdgram/ud.h"

namespace rdgram::perf {

inline constexpr uint32_t imm_sync = RTE_BE32(0x53594e43); /* "SYNC" */
inline constexpr uint32_t imm_fin = RTE_BE32(0x46494e21);  /* "FIN!" */

enum test_kind : uint32_t { kind_lat = 1, kind_bw = 2 };

struct ctl_msg {
	uint32_t kind;
	uint32_t size;
	uint64_t iterations;
	uint64_t count; /* FIN reply: data messages received */
	uint32_t last;  /* FIN: the server may exit after answering */
	uint32_t pad;
};

/* Where a poll thread sends: one peer. */
struct peer {
	ah_handle ah;
	uint32_t qpn;
	uint32_t qkey;
};

struct loop_env {
	rte_rcu_qsbr *qs;
	unsigned tid;
	uint64_t deadline; /* TSC */
	loop_hooks *hooks = nullptr; /* status line and telemetry (optional) */
};

/* Set by SIGINT or SIGTERM (main.cc): every loop then ends as it does at its
 * deadline. One relaxed load per check, no syscall. */
inline std::atomic<bool> perf_stop{false};
inline bool past(uint64_t deadline, uint64_t now)
{
	return now > deadline || perf_stop.load(std::memory_order_relaxed);
}

/* Publishes progress for the status line and telemetry: stores only, the
 * QP counters at most every qp_publisher::publish_interval_s. */
template <ud_driver Q> inline void loop_tick(Q &q, const loop_env &env, uint64_t now, uint64_t done)
{
	if (env.hooks == nullptr)
		return;
	if (env.hooks->prog != nullptr)
		env.hooks->prog->done.store(done, std::memory_order_relaxed);
	if constexpr (requires { q.counters(); })
		if (env.hooks->pub != nullptr)
			env.hooks->pub->maybe_publish(q.counters(), nullptr, now);
}
template <ud_driver Q> inline void loop_phase(Q &q, const loop_env &env, int phase)
{
	if (env.hooks != nullptr && env.hooks->prog != nullptr) {
		env.hooks->prog->done.store(0, std::memory_order_relaxed);
		env.hooks->prog->phase.store(phase, std::memory_order_relaxed);
	}
	(void)q;
}

template <ud_driver Q>
inline bool send_one_inline(Q &q, const peer &p, const void *data, uint32_t len, uint32_t imm,
			    bool with_imm, const loop_env &env)
{
	send_wr wr{};
	wr.ah = p.ah;
	wr.remote_qpn = p.qpn;
	wr.remote_qkey = p.qkey;
	wr.inline_data = data;
	wr.inline_len = len;
	wr.imm_data = imm;
	wr.flags = uint16_t(send_inline | (with_imm ? send_imm : 0));
	while (q.tx_burst(&wr, 1) == 0) {
		if (past(env.deadline, rte_rdtsc()))
			return false;
		rte_pause();
	}
	return true;
}

/* Sends a control message until its echo arrives (UD may lose either);
 * data completions seen meanwhile are freed. Returns false at the deadline. */
template <ud_driver Q>
inline bool control_exchange(Q &q, const peer &p, uint32_t imm, const ctl_msg &out, ctl_msg *reply,
			     const loop_env &env)
{
	const uint64_t retry = rte_get_tsc_hz() / 50; /* 20 ms */
	recv_wc wcs[Q::max_burst];
	for (;;) {
		if (!send_one_inline(q, p, &out, sizeof(out), imm, true, env))
			return false;
		const uint64_t t0 = rte_rdtsc();
		while (rte_rdtsc() - t0 < retry) {
			q.tx_flush();
			uint16_t n = q.rx_burst(wcs, Q::max_burst);
			bool got = false;
			for (uint16_t i = 0; i < n; i++) {
				const recv_wc &wc = wcs[i];
				if (!got && (wc.wc_flags & wc_with_imm) && wc.imm_data == imm &&
				    wc.byte_len >= wire::grh_len + sizeof(ctl_msg)) {
					memcpy(reply, rte_pktmbuf_mtod_offset(wc.mbuf, void *, wire::grh_len),
					       sizeof(*reply));
					got = true;
				}
				rte_pktmbuf_free(wc.mbuf);
			}
			rte_rcu_qsbr_quiescent(env.qs, env.tid);
			if (got)
				return true;
			if (past(env.deadline, rte_rdtsc()))
				return false;
		}
	}
}

/* The server: answers SYNC and FIN, echoes lat pings, counts bw data.
 * Returns when it has answered a FIN marked last, or at the deadline. */
template <ud_driver Q>
inline bool serve(Q &q, const peer &p, uint32_t inline_max, const loop_env &env, uint64_t *served)
{
	recv_wc wcs[Q::max_burst];
	send_wr out[Q::max_burst];
	uint32_t kind = 0;
	uint64_t count = 0;
	unsigned ticks = 0;
	for (;;) {
		uint16_t n = q.rx_burst(wcs, Q::max_burst);
		uint16_t no = 0;
		bool exit_after = false;
		for (uint16_t i = 0; i < n; i++) {
			recv_wc &wc = wcs[i];
			const bool ctl = (wc.wc_flags & wc_with_imm) &&
					 (wc.imm_data == imm_sync || wc.imm_data == imm_fin);
			if (ctl) {
				ctl_msg m{};
				if (wc.byte_len >= wire::grh_len + sizeof(m))
					memcpy(&m, rte_pktmbuf_mtod_offset(wc.mbuf, void *, wire::grh_len), sizeof(m));
				if (wc.imm_data == imm_sync) {
					kind = m.kind;
					count = 0;
				} else {
					m.count = count;
					exit_after |= m.last != 0;
				}
				rte_pktmbuf_free(wc.mbuf);
				wc.mbuf = nullptr;
				send_one_inline(q, p, &m, sizeof(m), wc.imm_data, true, env);
				continue;
			}
			count++;
			if (kind != kind_lat) {
				rte_pktmbuf_free(wc.mbuf);
				wc.mbuf = nullptr;
				continue;
			}
			/* Echo: reuse the received buffer as the reply's payload
			 * (zero copy), or send small payloads inline. */
			const uint32_t len = wc.byte_len - uint32_t(wire::grh_len);
			send_wr &w = out[no++];
			w = send_wr{};
			w.ah = p.ah;
			w.remote_qpn = p.qpn;
			w.remote_qkey = p.qkey;
			if (wc.wc_flags & wc_with_imm) {
				w.flags = send_imm;
				w.imm_data = wc.imm_data;
			}
			rte_pktmbuf_adj(wc.mbuf, uint16_t(wire::grh_len));
			if (len <= inline_max) {
				w.inline_data = rte_pktmbuf_mtod(wc.mbuf, void *);
				w.inline_len = len;
				w.flags = uint16_t(w.flags | send_inline);
			} else {
				w.mbuf = wc.mbuf;
				wc.mbuf = nullptr; /* now the reply's */
			}
		}
		uint16_t done = 0;
		while (done < no) {
			done += q.tx_burst(out + done, uint16_t(no - done));
			if (past(env.deadline, rte_rdtsc()))
				break;
		}
		/* Inline replies copied their bytes: free the received buffers. */
		for (uint16_t i = 0; i < n; i++)
			if (wcs[i].mbuf != nullptr)
				rte_pktmbuf_free(wcs[i].mbuf);
		for (uint16_t i = done; i < no; i++)
			if (!(out[i].flags & send_inline))
				rte_pktmbuf_free(out[i].mbuf);
		q.tx_flush();
		rte_rcu_qsbr_quiescent(env.qs, env.tid);
		if (unlikely(env.hooks != nullptr && (++ticks & 63) == 0))
			loop_tick(q, env, rte_rdtsc(), count);
		if (exit_after) {
			while (q.tx_pending() != 0 && !past(env.deadline, rte_rdtsc()))
				q.tx_flush();
			*served = count;
			return true;
		}
		if (past(env.deadline, rte_rdtsc())) {
			*served = count;
			return false;
		}
	}
}

struct client_params {
	uint32_t size;
	uint64_t iterations;
	uint64_t warmup;
	uint32_t inline_max;
	uint32_t tx_depth;
	bool use_imm;
	bool last;   /* tell the server to exit after this test */
	bool txonly; /* bw with no server: no SYNC/FIN exchange */
	/* bw: when set, message i goes to dests[i % n_dests] instead of the
	 * peer's AH (same QPN and Q_Key), the order made before the loop
	 * (round robin or a permutation): no RNG call per message. */
	const ah_handle *dests = nullptr;
	uint32_t n_dests = 0;
};

inline bool fill_payload(rte_mempool *mp, const client_params &cp, const uint8_t *buf, send_wr &w)
{
	if (cp.size <= cp.inline_max) {
		w.inline_data = buf;
		w.inline_len = cp.size;
		w.flags = uint16_t(w.flags | send_inline);
		return true;
	}
	rte_mbuf *m = rte_pktmbuf_alloc(mp);
	if (m == nullptr)
		return false;
	void *d = rte_pktmbuf_append(m, uint16_t(cp.size));
	memcpy(d, buf, std::min<uint32_t>(cp.size, 64));
	w.mbuf = m;
	return true;
}

/* Ping-pong latency: RTT/2 per iteration in microseconds. A ping without a
 * pong for 100 ms is counted lost and sent again. */
template <ud_driver Q>
inline bool client_lat(Q &q, rte_mempool *mp, const peer &p, const client_params &cp, const loop_env &env,
		       std::vector<double> &samples, lat_result *res)
{
	ctl_msg sync{kind_lat, cp.size, cp.iterations, 0, 0, 0}, reply{};
	if (!control_exchange(q, p, imm_sync, sync, &reply, env))
		return false;
	std::vector<uint8_t> buf(std::max<uint32_t>(cp.size, 8), 0xa5);
	const double us_per_tick = 1e6 / double(rte_get_tsc_hz());
	const uint64_t lost_after = rte_get_tsc_hz() / 10;
	recv_wc wcs[Q::max_burst];
	uint64_t lost = 0;
	samples.clear();
	samples.reserve(cp.iterations);
	const uint64_t total = cp.warmup + cp.iterations;
	const double ns_per_tick = 1e9 / double(rte_get_tsc_hz());
	latency_hist *hist = env.hooks != nullptr && env.hooks->prog != nullptr ? &env.hooks->prog->hist : nullptr;
	loop_phase(q, env, progress::lat);
	for (uint64_t i = 0; i < total; i++) {
		memcpy(buf.data(), &i, std::min<uint32_t>(cp.size, 8));
	again:
		send_wr w{};
		w.ah = p.ah;
		w.remote_qpn = p.qpn;
		w.remote_qkey = p.qkey;
		if (cp.use_imm) {
			w.flags = send_imm;
			w.imm_data = uint32_t(i);
		}
		if (!fill_payload(mp, cp, buf.data(), w))
			return false;
		const uint64_t t0 = rte_rdtsc();
		while (q.tx_burst(&w, 1) == 0)
			if (past(env.deadline, rte_rdtsc()))
				return false;
		q.tx_flush();
		bool got = false;
		uint64_t t1 = 0;
		while (!got) {
			uint16_t n = q.rx_burst(wcs, Q::max_burst);
			if (n != 0)
				t1 = rte_rdtsc();
			for (uint16_t k = 0; k < n; k++) {
				uint64_t seq = i;
				if (cp.size >= 8)
					memcpy(&seq, rte_pktmbuf_mtod_offset(wcs[k].mbuf, void *, wire::grh_len), 8);
				if (!(wcs[k].wc_flags & wc_with_imm) || cp.use_imm)
					got |= seq == i;
				rte_pktmbuf_free(wcs[k].mbuf);
			}
			if (!got) {
				q.tx_flush();
				uint64_t now = rte_rdtsc();
				if (now - t0 > lost_after) {
					lost++;
					rte_rcu_qsbr_quiescent(env.qs, env.tid);
					if (past(env.deadline, now))
						return false;
					goto again;
				}
			}
		}
		if (i >= cp.warmup) {
			samples.push_back(double(t1 - t0) * us_per_tick / 2);
			if (hist != nullptr)
				hist->record(uint64_t(double(t1 - t0) * ns_per_tick / 2 + 0.5));
		}
		rte_rcu_qsbr_quiescent(env.qs, env.tid);
		loop_tick(q, env, t1, i + 1);
	}
	*res = summarize_latency(samples, cp.size);
	res->lost = lost;
	ctl_msg fin{kind_lat, cp.size, cp.iterations, 0, cp.last ? 1u : 0u, 0};
	control_exchange(q, p, imm_fin, fin, &reply, env);
	return true;
}

/* This thread's CPU time, s (0 when the clock is unavailable): read twice
 * per test, never per message. */
inline double thread_cpu_s()
{
	timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

/* Streaming bandwidth: bursts of up to tx_depth (postlist) WRs as fast as
 * the driver takes them. Peak: the best rate over windows of 64 bursts. */
template <ud_driver Q>
inline bool client_bw(Q &q, rte_mempool *mp, const peer &p, const client_params &cp, const loop_env &env,
		      bw_result *res)
{
	ctl_msg sync{kind_bw, cp.size, cp.iterations, 0, 0, 0}, reply{};
	if (!cp.txonly && !control_exchange(q, p, imm_sync, sync, &reply, env))
		return false;
	std::vector<uint8_t> buf(std::max<uint32_t>(cp.size, 8), 0x5a);
	constexpr unsigned B = Q::max_burst;
	send_wr wrs[B];
	recv_wc wcs[B];
	const unsigned depth = std::min<unsigned>(cp.tx_depth, B);
	uint64_t sent = 0, win_start_sent = 0;
	const uint64_t t_start = rte_rdtsc();
	const double cpu_start = thread_cpu_s();
	uint64_t win_start = t_start, best_window = 0, best_window_msgs = 0;
	unsigned bursts = 0;
	unsigned have = 0; /* built WRs carried to the next try */
	/* Every WR starts from this one, built once (as perftest prepares its
	 * WRs before the loop). With inline payloads and no immediate all WRs
	 * are the same: the array is filled once, and what tx_burst leaves is
	 * already in place. (Was 5% of the txonly profile, per message.) */
	send_wr proto{};
	proto.ah = p.ah;
	proto.remote_qpn = p.qpn;
	proto.remote_qkey = p.qkey;
	proto.flags = cp.use_imm ? uint16_t(send_imm) : uint16_t(0);
	const bool inl = cp.size <= cp.inline_max;
	if (inl && !fill_payload(mp, cp, buf.data(), proto))
		return false;
	const bool same_wrs = inl && !cp.use_imm;
	if (same_wrs)
		std::fill(wrs, wrs + B, proto);
	const ah_handle *dests = cp.n_dests != 0 ? cp.dests : nullptr;
	uint32_t di = 0; /* next destination in dests */
	const unsigned pf_ahead = std::min(depth, cp.n_dests); /* next burst's AHs to prefetch */
	loop_phase(q, env, progress::bw);
	while (sent < cp.iterations) {
		if (same_wrs) {
			have = unsigned(std::min<uint64_t>(depth, cp.iterations - sent));
			if (dests != nullptr) /* only the AH differs between WRs */
				for (unsigned j = 0; j < have; j++) {
					wrs[j].ah = dests[di];
					if (++di == cp.n_dests)
						di = 0;
				}
		}
		while (have < depth && sent + have < cp.iterations) {
			send_wr &w = wrs[have];
			w = proto;
			if (cp.use_imm)
				w.imm_data = uint32_t(sent + have);
			if (dests != nullptr)
				w.ah = dests[di];
			if (!inl && !fill_payload(mp, cp, buf.data(), w))
				break;
			if (dests != nullptr && ++di == cp.n_dests)
				di = 0;
			have++;
		}
		/* The next burst's destinations are known: their AVs start loading
		 * now, so each miss overlaps this burst's build (a driver without
		 * the hint just sends). */
		if constexpr (requires { q.prefetch_ah(ah_handle{}); })
			if (dests != nullptr)
				for (uint32_t j = di, k = 0; k < pf_ahead; k++) {
					q.prefetch_ah(dests[j]);
					if (++j == cp.n_dests)
						j = 0;
				}
		uint16_t k = q.tx_burst(wrs, uint16_t(have));
		if (k < have && !same_wrs)
			memmove(wrs, wrs + k, (have - k) * sizeof(wrs[0]));
		if (k < have && same_wrs && dests != nullptr) {
			/* The refused WRs are rebuilt from wrs[0] next time: give
			 * their destinations back so none is skipped. */
			const uint32_t back = (have - k) % cp.n_dests;
			di = di >= back ? di - back : di + cp.n_dests - back;
		}
		have -= k;
		sent += k;
		if (!cp.txonly) {
			/* Nothing is expected back; keep the receive queue drained. */
			uint16_t n = q.rx_burst(wcs, B);
			for (uint16_t i = 0; i < n; i++)
				rte_pktmbuf_free(wcs[i].mbuf);
		}
		if (++bursts == 64) {
			uint64_t now = rte_rdtsc();
			uint64_t msgs = sent - win_start_sent;
			if (best_window == 0 || msgs * best_window > best_window_msgs * (now - win_start)) {
				best_window = now - win_start;
				best_window_msgs = msgs;
			}
			win_start = now;
			win_start_sent = sent;
			bursts = 0;
			rte_rcu_qsbr_quiescent(env.qs, env.tid);
			loop_tick(q, env, now, sent);
			if (past(env.deadline, now))
				break;
		}
	}
	for (unsigned i = 0; i < have; i++)
		if (!(wrs[i].flags & send_inline))
			rte_pktmbuf_free(wrs[i].mbuf);
	while (q.tx_pending() != 0 && !past(env.deadline, rte_rdtsc()))
		q.tx_flush();
	const uint64_t t_end = rte_rdtsc();
	const double cpu_secs = thread_cpu_s() - cpu_start;
	const double hz = double(rte_get_tsc_hz());
	const double secs = double(t_end - t_start) / hz;
	res->bytes = cp.size;
	res->iterations = sent;
	res->seconds = secs;
	res->msg_rate_mpps = secs > 0 ? double(sent) / secs / 1e6 : 0;
	res->cpu_msg_rate_mpps = cpu_secs > 0 ? double(sent) / cpu_secs / 1e6 : 0;
	res->bw_avg_mib = secs > 0 ? double(sent) * cp.size / secs / 1048576.0 : 0;
	res->bw_peak_mib = best_window ? double(best_window_msgs) * cp.size / (double(best_window) / hz) / 1048576.0
				       : res->bw_avg_mib;
	if (res->bw_peak_mib < res->bw_avg_mib)
		res->bw_peak_mib = res->bw_avg_mib;
	ctl_msg fin{kind_bw, cp.size, cp.iterations, 0, cp.last ? 1u : 0u, 0};
	if (!cp.txonly && control_exchange(q, p, imm_fin, fin, &reply, env)) {
		res->received = reply.count;
		res->received_known = true;
	}
	return sent == cp.iterations;
}

} // namespace rdgram::perf

#endif
