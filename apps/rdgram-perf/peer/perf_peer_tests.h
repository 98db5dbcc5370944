/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The data phase against a standard tool (--oob-proto perftest or
 * ud_pingpong): plain UD SENDs of exactly size bytes, no rdgram header,
 * no control message, as the peer's own loop expects. Templates over the
 * driver (ud_driver), like perf_tests.h; every loop ends by itself at the
 * deadline.
 *
 *   ping-pong   perftest run_iter_lat_send and ud_pingpong's main loop:
 *               the client sends first; each side then sends its next
 *               message when the previous one's answer arrived; iters
 *               each way. perftest's latency is half the time between
 *               two consecutive sends of one side (print_report_lat:
 *               tposted[i+1] - tposted[i], the largest two dropped).
 *   bw send     perftest run_iter_bw: the client streams iters messages.
 *   bw receive  perftest run_iter_bw_server: the server counts them; it
 *               never answers. A lost datagram would leave it waiting:
 *               rdgram-perf stops once the sender has moved on to its
 *               closing hand-shake (the probe sees the TCP bytes) or at
 *               the deadline, and reports what arrived.
 *
 * Every received message is checked against what the exchange promised:
 * source QPN, source GID (from the GRH), payload size, and for
 * ibv_ud_pingpong its payload bytes.
 */
#ifndef RDGRAM_PERF_PEER_TESTS_H
#define RDGRAM_PERF_PEER_TESTS_H

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_rcu_qsbr.h>

#include "perf_report.h"
#include "perf_tests.h"
#include "rdgram/ud.h"
#include "rdgram/wire.h"

namespace rdgram::perf {

/* ud_pingpong's payload: its buffer is memset to 0x7b, and with -c the
 * client writes 0 at each page's first byte (i / page_size % sizeof(char)
 * is always 0); the server sends back what it last received (one buffer
 * serves both). */
inline constexpr uint8_t pp_fill = 0x7b;
inline constexpr uint32_t pp_page = 4096;
inline void pp_payload(uint8_t *b, uint32_t size)
{
	memset(b, pp_fill, size);
	for (uint32_t i = 0; i < size; i += pp_page)
		b[i] = 0;
}
inline bool pp_payload_ok(const uint8_t *b, uint32_t size)
{
	for (uint32_t i = 0; i < size; i++)
		if (b[i] != pp_fill && !(i % pp_page == 0 && b[i] == 0))
			return false;
	return true;
}

/* What every received message must be. */
struct peer_expect {
	uint32_t src_qp = 0;
	wire::gid sgid{};
	bool check_sgid = false; /* on RoCE: the GRH's source is the peer's GID */
	uint32_t size = 0;
	bool pp_content = false; /* ibv_ud_pingpong's payload bytes */
};

/* What the data phase did, and what arrived that should not have. */
struct peer_counts {
	uint64_t sent = 0, sent_bytes = 0;
	uint64_t received = 0, received_bytes = 0;
	uint64_t bad_src_qp = 0, bad_sgid = 0, bad_size = 0, bad_payload = 0;
	uint64_t strays = 0; /* datagrams outside the data phase (freed) */
	uint32_t seen_src_qp = 0, seen_size = 0; /* the last wrong ones */
	wire::gid seen_sgid{};
	uint64_t t_start = 0, t_end = 0;          /* TSC: first send or receive, last one */
	bool peer_left = false;                   /* the probe said the peer moved on */
	uint64_t mismatches() const { return bad_src_qp + bad_sgid + bad_size + bad_payload; }
};

/* Tells, without blocking, whether the peer has left the data phase (its
 * next TCP message or its close arrived). Called only while the loop has
 * had nothing to do for a while. */
using peer_probe = std::function<bool()>;

inline void peer_check_rx(const recv_wc &wc, const peer_expect &x, peer_counts &c)
{
	const uint32_t len = wc.byte_len >= wire::grh_len ? wc.byte_len - uint32_t(wire::grh_len) : 0;
	c.received++;
	c.received_bytes += len;
	if (wc.src_qp != x.src_qp) {
		c.bad_src_qp++;
		c.seen_src_qp = wc.src_qp;
	}
	if (x.check_sgid && memcmp(wc.sgid.raw, x.sgid.raw, 16) != 0) {
		c.bad_sgid++;
		c.seen_sgid = wc.sgid;
	}
	if (len != x.size) {
		c.bad_size++;
		c.seen_size = len;
	} else if (x.pp_content && !pp_payload_ok(rte_pktmbuf_mtod_offset(wc.mbuf, const uint8_t *, wire::grh_len), len)) {
		c.bad_payload++;
	}
}

/* One SEND of len bytes of data: inline up to inline_max, else from an
 * mbuf of the queue's pool. false at the deadline or without an mbuf. */
template <ud_driver Q>
inline bool peer_send(Q &q, rte_mempool *mp, const peer &to, const uint8_t *data, uint32_t len, uint32_t inline_max,
		      const loop_env &env)
{
	send_wr w{};
	w.ah = to.ah;
	w.remote_qpn = to.qpn;
	w.remote_qkey = to.qkey;
	if (len <= inline_max) {
		w.inline_data = data;
		w.inline_len = len;
		w.flags = send_inline;
	} else {
		rte_mbuf *m = rte_pktmbuf_alloc(mp);
		if (m == nullptr)
			return false;
		memcpy(rte_pktmbuf_append(m, uint16_t(len)), data, len);
		w.mbuf = m;
	}
	while (q.tx_burst(&w, 1) == 0) {
		q.tx_flush();
		if (past(env.deadline, rte_rdtsc())) {
			if (w.mbuf != nullptr)
				rte_pktmbuf_free(w.mbuf);
			return false;
		}
	}
	q.tx_flush();
	return true;
}

/* Completions that came before the data phase, kept for it; what is
 * left is freed at the end, whatever path the session took. */
struct peer_backlog {
	std::vector<recv_wc> w;
	size_t taken = 0;
	peer_backlog() = default;
	peer_backlog(const peer_backlog &) = delete;
	peer_backlog &operator=(const peer_backlog &) = delete;
	~peer_backlog() { release(); }
	/* Frees what the data phase did not take; returns how many. */
	size_t release()
	{
		const size_t n = w.size() - taken;
		for (size_t i = taken; i < w.size(); i++)
			rte_pktmbuf_free(w[i].mbuf);
		w.clear();
		taken = 0;
		return n;
	}
};

/* Polls the queue outside the data phase. Before it (hold), what arrives
 * is kept for it, up to a limit: the peer may send its first message as
 * soon as its last TCP write is out, before we read that write (an
 * ibv_ud_pingpong client pings right after "done"). After it, anything is
 * a stray and freed. */
template <ud_driver Q> inline void peer_drain(Q &q, const loop_env &env, peer_counts &c, peer_backlog *hold)
{
	recv_wc wcs[Q::max_burst];
	const uint16_t n = q.rx_burst(wcs, Q::max_burst);
	for (uint16_t i = 0; i < n; i++) {
		if (hold != nullptr && hold->w.size() < 4096) {
			hold->w.push_back(wcs[i]);
			continue;
		}
		rte_pktmbuf_free(wcs[i].mbuf);
		c.strays++;
	}
	q.tx_flush();
	rte_rcu_qsbr_quiescent(env.qs, env.tid);
}

/* A burst: the held completions first, then the queue's. */
template <ud_driver Q> inline uint16_t peer_rx(Q &q, recv_wc *wcs, peer_backlog &b)
{
	if (b.taken < b.w.size()) {
		uint16_t n = 0;
		while (n < Q::max_burst && b.taken < b.w.size())
			wcs[n++] = b.w[b.taken++];
		return n;
	}
	return q.rx_burst(wcs, Q::max_burst);
}

/* What a receive loop does when a poll brought nothing: reports a
 * quiescent state, flushes the send side, stops at the deadline, and once
 * quiet for a while asks probe (every 10 ms) whether the peer moved on.
 * step() is false when the loop must stop (c.peer_left says which). */
struct peer_idle {
	const peer_probe &probe;
	uint64_t quiet;          /* TSC ticks without a receive before probing */
	uint64_t next_probe = 0;

	template <ud_driver Q> bool step(Q &q, const loop_env &env, uint64_t now, uint64_t last, peer_counts &c)
	{
		rte_rcu_qsbr_quiescent(env.qs, env.tid);
		q.tx_flush();
		if (past(env.deadline, now))
			return false;
		if (probe && now - last > quiet && now > next_probe) {
			next_probe = now + rte_get_tsc_hz() / 100;
			if (probe()) {
				c.peer_left = true;
				return false;
			}
		}
		return true;
	}
};

struct peer_pingpong_params {
	uint32_t size;
	uint64_t iters;
	bool first;          /* the client: sends first */
	bool echo;           /* answer with the payload received (ud_pingpong's server) */
	uint32_t inline_max;
	const uint8_t *payload; /* size bytes, when not echoing */
};

/* The ping-pong; tposted gets the TSC of each send. true when iters went
 * each way. */
template <ud_driver Q>
inline bool peer_pingpong(Q &q, rte_mempool *mp, const peer &to, const peer_pingpong_params &pp, const peer_expect &x,
			  const loop_env &env, const peer_probe &probe, peer_counts &c, std::vector<uint64_t> &tposted,
			  peer_backlog &held)
{
	recv_wc wcs[Q::max_burst];
	std::vector<uint8_t> echo(std::max<uint32_t>(pp.size, 1));
	tposted.assign(pp.iters, 0);
	peer_idle idle{probe, rte_get_tsc_hz() / 20};
	uint64_t scnt = 0, rcnt = 0, last = rte_rdtsc();
	auto send = [&](const uint8_t *data) {
		tposted[scnt] = rte_rdtsc();
		if (!peer_send(q, mp, to, data, pp.size, pp.inline_max, env))
			return false;
		scnt++;
		c.sent++;
		c.sent_bytes += pp.size;
		return true;
	};
	c.t_start = last;
	if (pp.first && pp.iters != 0 && !send(pp.payload))
		return false;
	while (rcnt < pp.iters) {
		const uint16_t n = peer_rx(q, wcs, held);
		const uint64_t now = rte_rdtsc();
		for (uint16_t i = 0; i < n; i++) {
			peer_check_rx(wcs[i], x, c);
			rcnt++;
			const uint8_t *data = pp.payload;
			if (pp.echo) {
				const uint32_t len = wcs[i].byte_len - uint32_t(wire::grh_len);
				memcpy(echo.data(), rte_pktmbuf_mtod_offset(wcs[i].mbuf, const uint8_t *, wire::grh_len),
				       std::min(len, pp.size));
				data = echo.data();
			}
			rte_pktmbuf_free(wcs[i].mbuf);
			if (scnt < pp.iters && !send(data))
				return false;
		}
		if (n != 0) {
			last = now;
			continue;
		}
		if (!idle.step(q, env, now, last, c))
			return false;
	}
	c.t_end = rte_rdtsc();
	return scnt == pp.iters;
}

/* perftest's bandwidth client: iters SENDs in bursts of tx_depth. */
template <ud_driver Q>
inline bool peer_bw_send(Q &q, rte_mempool *mp, const peer &to, const uint8_t *payload, uint32_t size, uint64_t iters,
			 uint32_t inline_max, uint32_t tx_depth, const loop_env &env, peer_counts &c)
{
	constexpr unsigned B = Q::max_burst;
	send_wr wrs[B];
	recv_wc wcs[B];
	const unsigned depth = std::max(1u, std::min<unsigned>(tx_depth, B));
	const bool inl = size <= inline_max;
	unsigned have = 0, ticks = 0;
	c.t_start = rte_rdtsc();
	while (c.sent < iters) {
		while (have < depth && c.sent + have < iters) {
			send_wr &w = wrs[have];
			w = send_wr{};
			w.ah = to.ah;
			w.remote_qpn = to.qpn;
			w.remote_qkey = to.qkey;
			if (inl) {
				w.inline_data = payload;
				w.inline_len = size;
				w.flags = send_inline;
			} else {
				rte_mbuf *m = rte_pktmbuf_alloc(mp);
				if (m == nullptr)
					break;
				memcpy(rte_pktmbuf_append(m, uint16_t(size)), payload, size);
				w.mbuf = m;
			}
			have++;
		}
		const uint16_t k = q.tx_burst(wrs, uint16_t(have));
		if (k < have)
			memmove(wrs, wrs + k, (have - k) * sizeof(wrs[0]));
		have -= k;
		c.sent += k;
		c.sent_bytes += uint64_t(k) * size;
		/* Nothing is expected back: keep the receive queue drained. */
		const uint16_t n = q.rx_burst(wcs, B);
		for (uint16_t i = 0; i < n; i++)
			rte_pktmbuf_free(wcs[i].mbuf);
		c.strays += n;
		if ((++ticks & 63) == 0) {
			rte_rcu_qsbr_quiescent(env.qs, env.tid);
			if (past(env.deadline, rte_rdtsc()))
				break;
		}
	}
	for (unsigned i = 0; i < have; i++)
		if (wrs[i].mbuf != nullptr)
			rte_pktmbuf_free(wrs[i].mbuf);
	while (q.tx_pending() != 0 && !past(env.deadline, rte_rdtsc()))
		q.tx_flush();
	c.t_end = rte_rdtsc();
	return c.sent == iters;
}

/* perftest's bandwidth server: counts until iters arrived, the sender
 * moved on (probe) or the deadline. true when all iters arrived. */
template <ud_driver Q>
inline bool peer_bw_recv(Q &q, const peer_expect &x, uint64_t iters, const loop_env &env, const peer_probe &probe,
			 peer_counts &c, peer_backlog &held)
{
	recv_wc wcs[Q::max_burst];
	peer_idle idle{probe, rte_get_tsc_hz() / 10};
	uint64_t last = rte_rdtsc();
	while (c.received < iters) {
		const uint16_t n = peer_rx(q, wcs, held);
		const uint64_t now = rte_rdtsc();
		for (uint16_t i = 0; i < n; i++) {
			peer_check_rx(wcs[i], x, c);
			rte_pktmbuf_free(wcs[i].mbuf);
		}
		if (n != 0) {
			if (c.t_start == 0)
				c.t_start = now; /* perftest: the clock starts at the first receive */
			c.t_end = last = now;
			continue;
		}
		if (!idle.step(q, env, now, last, c))
			return false;
	}
	return true;
}

/* perftest's latency report from one side's send times: half of each gap
 * between consecutive sends, the two largest dropped (LAT_MEASURE_TAIL),
 * in microseconds. #iterations is iters, as perftest prints it. */
inline lat_result peer_latency(const std::vector<uint64_t> &tposted, uint32_t size)
{
	std::vector<double> us;
	const double per_tick = 1e6 / double(rte_get_tsc_hz()) / 2;
	for (size_t i = 0; i + 1 < tposted.size(); i++)
		us.push_back(double(tposted[i + 1] - tposted[i]) * per_tick);
	std::sort(us.begin(), us.end());
	if (us.size() > 2)
		us.resize(us.size() - 2);
	lat_result r = summarize_latency(us, size);
	r.iterations = tposted.size();
	return r;
}

/* perftest's bandwidth figures from a count over [t_start, t_end]. */
inline bw_result peer_bandwidth(uint64_t msgs, uint32_t size, uint64_t iters, uint64_t t_start, uint64_t t_end)
{
	bw_result r;
	r.bytes = size;
	r.iterations = iters;
	const double s = t_end > t_start ? double(t_end - t_start) / double(rte_get_tsc_hz()) : 0;
	r.msg_rate_mpps = s > 0 ? double(msgs) / s / 1e6 : 0;
	r.bw_avg_mib = s > 0 ? double(msgs) * size / s / 1048576.0 : 0;
	r.bw_peak_mib = r.bw_avg_mib;
	return r;
}

} // namespace rdgram::perf

#endif
