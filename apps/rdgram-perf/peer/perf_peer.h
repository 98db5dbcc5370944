/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf as the peer of the standard tools: --oob HOST:PORT with
 * --oob-proto perftest (ib_send_lat / ib_send_bw -c UD) or ud_pingpong
 * (ibv_ud_pingpong), in either role, on any driver. run_peer() drives one
 * session on a queue its caller opened: the TCP exchange
 * (perf_peer_oob.h), the AH to the peer, the data phase
 * (perf_peer_tests.h), the closing exchange, the report. Its caller, on
 * every driver, is run_peer_side() (perf_peer_side.h), from rdgram-perf's
 * one run path (perf_main.cc).
 */
#ifndef RDGRAM_PERF_PEER_H
#define RDGRAM_PERF_PEER_H

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_mempool.h>

#include "perf_config.h"
#include "perf_peer_oob.h"
#include "perf_peer_tests.h"
#include "perf_report.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "rdgram/wire.h"

namespace rdgram::perf {

/* true when the config asks for a standard tool's exchange. */
inline bool peer_proto(const perf_config &c) { return c.rdma.oob_proto == "perftest" || c.rdma.oob_proto == "ud_pingpong"; }

/* Settings the peer tools cannot run with: one line on stderr, exit 2. */
inline bool peer_config_ok(const perf_config &c)
{
	const char *why = nullptr;
	std::string msg;
	if (c.rdma.oob.empty())
		why = "--oob-proto perftest|ud_pingpong needs --oob HOST:PORT (the TCP exchange)";
	else if (c.mode != "server" && c.mode != "client")
		why = "--oob-proto perftest|ud_pingpong runs as --mode server or --mode client";
	else if (c.rdma.oob_proto == "perftest" && c.test != "lat" && c.test != "bw")
		why = "--oob-proto perftest runs one test per connection, as ib_send_lat or ib_send_bw do: "
		      "--test lat or --test bw";
	else if (c.rdma.oob_proto == "ud_pingpong" && c.test != "lat" && c.test != "both")
		why = "--oob-proto ud_pingpong is a ping-pong: --test lat (or no --test)";
	else if ((c.mode == "server" ? c.server.qkey : c.client.qkey) != peer_wire::qkey)
		why = "perftest and ibv_ud_pingpong use Q_Key 0x11111111: leave [server|client] qkey at its default";
	else if (c.use_imm)
		why = "--oob-proto perftest|ud_pingpong sends plain SENDs (the tools post no immediate data): no --imm";
	if (why == nullptr)
		return true;
	fprintf(stderr, "rdgram-perf: %s\n", why);
	return false;
}

/* Who we are, for the exchange. */
struct peer_self {
	uint32_t qpn = 0;
	uint16_t lid = 0;
	wire::gid gid{};
	bool with_gid = true; /* RoCE: address by GID (perftest's 108-byte keys) */
	uint32_t mtu = 0;     /* bytes: the port's largest UD payload */
	std::string device;   /* for the report: "soft, net_af_packet0,..." */
};

/* The queue and how to reach the peer, from the driver's caller. */
template <ud_driver Q> struct peer_port {
	Q *q = nullptr;
	rte_mempool *mp = nullptr;
	uint32_t inline_max = 0;
	rte_rcu_qsbr *qs = nullptr;
	unsigned tid = 0;
	/* Creates the AH to the peer (this thread; it may poll the queue
	 * through pump while a neighbour resolves). 0 or errno with *err. */
	std::function<int(const wire::gid &dgid, uint16_t dlid, const std::function<void()> &pump, ah_handle *ah,
			  std::string *err)>
		make_ah;
};

namespace peer_detail {

inline std::string gid_str(const uint8_t *g)
{
	wire::gid x;
	memcpy(x.raw, g, 16);
	return format_gid(x);
}

inline void print_rx_line(FILE *f, const peer_counts &k, uint64_t expected, const peer_expect &x, bool known)
{
	char head[256];
	if (known)
		snprintf(head, sizeof(head), " received: %lu of %lu messages, %lu payload bytes, from QPN 0x%06x GID %s",
			 (unsigned long)k.received, (unsigned long)expected, (unsigned long)k.received_bytes, x.src_qp,
			 format_gid(x.sgid).c_str());
	else
		snprintf(head, sizeof(head), " received: %lu messages, %lu payload bytes, from QPN 0x%06x GID %s",
			 (unsigned long)k.received, (unsigned long)k.received_bytes, x.src_qp, format_gid(x.sgid).c_str());
	std::string tail;
	char b[200];
	if (k.bad_src_qp) {
		snprintf(b, sizeof(b), ", %lu from another QPN (0x%06x)", (unsigned long)k.bad_src_qp, k.seen_src_qp);
		tail += b;
	}
	if (k.bad_sgid) {
		snprintf(b, sizeof(b), ", %lu from another GID (%s)", (unsigned long)k.bad_sgid,
			 format_gid(k.seen_sgid).c_str());
		tail += b;
	}
	if (k.bad_size) {
		snprintf(b, sizeof(b), ", %lu of another size (%u bytes, not %u: -s must be the same on both sides)",
			 (unsigned long)k.bad_size, k.seen_size, x.size);
		tail += b;
	}
	if (k.bad_payload) {
		snprintf(b, sizeof(b), ", %lu with other payload bytes than ibv_ud_pingpong's", (unsigned long)k.bad_payload);
		tail += b;
	}
	if (known && k.received < expected) {
		snprintf(b, sizeof(b), ", %lu lost", (unsigned long)(expected - k.received));
		tail += b;
	}
	fprintf(f, "%s%s\n", head, tail.empty() ? ": all as expected" : tail.c_str());
}

} // namespace peer_detail

/* One session against a perftest or ibv_ud_pingpong peer, on a queue
 * that is up and a thread that is online in the queue's QSBR. Returns
 * the exit status (0; 1: the exchange or the test failed; one line on
 * stderr says why). *ah: the AH it made (the caller destroys it). */
template <ud_driver Q>
int run_peer(const perf_config &c, peer_port<Q> &p, const peer_self &self, uint64_t deadline_tsc, ah_handle *ah)
{
	using namespace peer_wire;
	using clk = peer_link::clock;
	Q &q = *p.q;
	const bool server = c.mode == "server";
	const bool pp = c.rdma.oob_proto == "ud_pingpong";
	const bool bw = !pp && c.test == "bw";
	const uint64_t iters = bw ? c.bw_iters : c.lat_iters;
	const uint32_t size = c.size;
	const uint64_t hz = rte_get_tsc_hz(), now_tsc = rte_rdtsc();
	const auto deadline = clk::now() + std::chrono::microseconds(
						   deadline_tsc > now_tsc ? int64_t((deadline_tsc - now_tsc) * 1e6 / double(hz)) : 0);
	loop_env env{p.qs, p.tid, deadline_tsc, nullptr};
	peer_counts k;
	/* Between TCP waits: poll the queue (a soft port answers ARP/ND for
	 * the peer's ibv_create_ah through it). Datagrams that come before
	 * the data phase are held for it; after it, they are strays. */
	peer_backlog held;
	bool holding = true;
	auto pump = [&] { peer_drain(q, env, k, holding ? &held : nullptr); };
	auto fail = [&](const std::string &m) {
		fprintf(stderr, "rdgram-perf: --oob %s (%s): %s\n", c.rdma.oob.c_str(), c.rdma.oob_proto.c_str(), m.c_str());
		return 1;
	};

	peer_link link;
	link.set_idle(pump);
	if (!c.json) {
		printf(" rdgram-perf: %s, %s, QPN 0x%06x, GID %s: %s %s (%s)\n", c.mode.c_str(), self.device.c_str(),
		       self.qpn, format_gid(self.gid).c_str(), server ? "waiting for a client on" : "connecting to",
		       c.rdma.oob.c_str(), pp ? "ibv_ud_pingpong's exchange" : "perftest 6.06's exchange");
		fflush(stdout);
	}
	std::string err;
	if (int rc = link.open(c.rdma.oob, server, deadline, &err); rc != 0)
		return fail(err);

	std::mt19937 rng{std::random_device{}()};
	const uint32_t psn = rng() & 0xffffff;
	wire::gid peer_gid{};
	uint32_t peer_qpn = 0, peer_lid = 0, peer_psn = 0;
	peer to{ah_null, 0, qkey};
	/* The AH, after the checks perftest makes (ctx_check_gid_compatibility)
	 * and one more: no GID on RoCE cannot work. A bandwidth server never
	 * sends, and makes none (perftest's ctx_connect neither). */
	auto connect = [&](std::string *e) {
		*e = check_peer_gid(self.gid.raw, peer_gid.raw, self.with_gid, pp ? "ibv_ud_pingpong" : "perftest",
				    format_gid(self.gid), format_gid(peer_gid));
		if (!e->empty())
			return EPROTO;
		if (bw && server)
			return 0;
		const int rc = p.make_ah(peer_gid, uint16_t(peer_lid), pump, &to.ah, e);
		*ah = to.ah; /* the caller's to destroy, whatever follows */
		return rc;
	};

	std::vector<uint8_t> payload(std::max<uint32_t>(size, 1));
	if (pp)
		pp_payload(payload.data(), size);
	else
		for (uint32_t i = 0; i < size; i++)
			payload[i] = uint8_t(0xa5 ^ i);
	peer_expect x;
	x.size = size;
	x.check_sgid = self.with_gid;
	x.pp_content = pp;
	std::vector<uint64_t> tposted;
	bool data_ok = false;
	int agreed_mtu = mtu_enum(self.mtu);
	perftest_dest mine, theirs;
	perftest_session ses(link, !server);

	if (pp) {
		pp_dest me, them;
		me.lid = self.lid;
		me.qpn = self.qpn;
		me.psn = psn;
		if (self.with_gid)
			memcpy(me.gid, self.gid.raw, 16);
		auto take = [&](const pp_dest &d) {
			memcpy(peer_gid.raw, d.gid, 16);
			peer_qpn = d.qpn;
			peer_lid = d.lid;
			peer_psn = d.psn;
		};
		int rc;
		if (server) {
			rc = ud_pingpong_server(
				link, me,
				[&](const pp_dest &d, std::string *e) {
					take(d);
					return connect(e);
				},
				&them, &err);
		} else {
			rc = ud_pingpong_client(link, me, &them, &err);
			if (rc == 0) {
				take(them);
				rc = connect(&err);
			}
		}
		if (rc != 0)
			return fail(err);
		/* pp_init_ctx: "Requested size larger than port MTU". */
		if (size > self.mtu)
			return fail("size " + std::to_string(size) + " is above the port MTU " + std::to_string(self.mtu));
		if (!c.json) {
			printf("  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x: GID %s\n", self.lid, self.qpn, psn,
			       format_gid(self.gid).c_str());
			printf("  remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", peer_lid, peer_qpn, peer_psn,
			       format_gid(peer_gid).c_str());
			fflush(stdout);
		}
	} else {
		perftest_hello h;
		if (int rc = ses.hello(agreed_mtu, &h, &err); rc != 0)
			return fail(err);
		agreed_mtu = h.mtu;
		/* check_mtu, with -s given: "Max message size in UD cannot be
		 * greater than MTU". */
		if (std::string e = check_size_mtu(size, self.mtu, mtu_bytes(h.peer_mtu)); !e.empty())
			return fail(e);
		mine.lid = self.lid;
		mine.qpn = self.qpn;
		mine.psn = psn;
		memcpy(mine.gid, self.gid.raw, 16);
		if (int rc = ses.hand_shake(mine, self.with_gid, &theirs, "the key exchange", &err); rc != 0)
			return fail(err);
		memcpy(peer_gid.raw, theirs.gid, 16);
		peer_qpn = theirs.qpn;
		peer_lid = theirs.lid;
		peer_psn = theirs.psn;
		if (int rc = connect(&err); rc != 0)
			return fail(err);
		/* After ctx_connect; the remote address print; after the
		 * receives are posted (ours always are). */
		for (const char *what : {"the hand-shake after connecting", "the hand-shake of the address print",
					 "the hand-shake after posting receives"})
			if (int rc = ses.hand_shake(mine, self.with_gid, &theirs, what, &err); rc != 0)
				return fail(err);
		if (!c.json) {
			printf("---------------------------------------------------------------------------------------\n");
			printf("                    Send %s Test (rdgram-perf, the peer of perftest %s)\n",
			       bw ? "BW" : "Latency", h.peer_version.c_str());
			printf(" Connection type : UD\t\tDevice         : %s\n", self.device.c_str());
			printf(" Mtu             : %u[B] (ours %u, the peer's %u)\n", mtu_bytes(h.mtu), self.mtu,
			       mtu_bytes(h.peer_mtu));
			printf(" local address: LID %04x QPN 0x%04x PSN 0x%06x\n", self.lid, self.qpn, psn);
			printf(" GID: %s\n", format_gid(self.gid).c_str());
			printf(" remote address: LID %04x QPN 0x%04x PSN 0x%06x\n", peer_lid, peer_qpn, peer_psn);
			printf(" GID: %s\n", format_gid(peer_gid).c_str());
			fflush(stdout);
		}
	}
	to.qpn = peer_qpn;
	x.src_qp = peer_qpn;
	x.sgid = peer_gid;

	/* The data phase. The TCP link tells when a perftest peer moved on
	 * (its closing hand-shake); ud_pingpong's is closed by now. */
	peer_probe probe;
	if (link.is_open())
		probe = [&] { return link.peer_spoke(); };
	if (bw && !server)
		data_ok = peer_bw_send(q, p.mp, to, payload.data(), size, iters, p.inline_max, c.tx_depth, env, k);
	else if (bw)
		data_ok = peer_bw_recv(q, x, iters, env, probe, k, held);
	else
		data_ok = peer_pingpong(q, p.mp, to, {size, iters, !server, pp && server, p.inline_max, payload.data()}, x,
					env, probe, k, tposted, held);
	holding = false;
	k.strays += held.release(); /* what the data phase did not take */
	int status = 0;
	std::string end_err;
	if (!pp) {
		bool got_done = false;
		if (ses.close(mine, self.with_gid, &got_done, &end_err) != 0) {
			if (bw && !server)
				end_err += " (a perftest bw server waits for every message: when UD lost some it never "
					   "gets to this hand-shake, and gives up 60 to 120 s later)";
			status = 1;
		}
	}

	/* The report: perftest's table, then what went each way. */
	const bool rx_known = !(bw && !server);
	if (bw) {
		const uint64_t msgs = server ? k.received : k.sent;
		bw_result r = peer_bandwidth(msgs, size, iters, k.t_start, k.t_end);
		if (c.json)
			printf("%s\n", bw_json(r).c_str());
		else
			print_bw_table(stdout, {r});
	} else {
		const lat_result r = peer_latency(tposted, size);
		if (pp && !c.json) {
			const double usec = double(k.t_end - k.t_start) * 1e6 / double(hz);
			const long long bytes = (long long)size * (long long)iters * 2;
			printf("%lld bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec / 1e6,
			       usec > 0 ? double(bytes) * 8. / usec : 0.0);
			printf("%lu iters in %.2f seconds = %.2f usec/iter\n", (unsigned long)iters, usec / 1e6,
			       iters ? usec / double(iters) : 0.0);
		}
		if (c.json)
			printf("%s\n", lat_json(r).c_str());
		else
			print_lat_table(stdout, {r});
	}
	if (!c.json) {
		if (!(bw && server))
			printf(" sent: %lu messages, %lu payload bytes, to QPN 0x%06x\n", (unsigned long)k.sent,
			       (unsigned long)k.sent_bytes, peer_qpn);
		if (rx_known)
			peer_detail::print_rx_line(stdout, k, iters, x, true);
		if (k.strays != 0)
			printf(" outside the data phase: %lu datagrams arrived (freed, not counted)\n",
			       (unsigned long)k.strays);
	}
	fflush(stdout);
	if (!data_ok) {
		if (k.peer_left)
			fprintf(stderr,
				"rdgram-perf: the peer finished its data phase first: %lu of its %lu messages never "
				"arrived (UD lost them)\n",
				(unsigned long)(iters - std::min(iters, k.received)), (unsigned long)iters);
		else if (perf_stop.load())
			fprintf(stderr, "rdgram-perf: interrupted\n");
		else
			fprintf(stderr,
				"rdgram-perf: the data phase did not complete before the %.1f s timeout (%lu sent, %lu "
				"received of %lu)\n",
				c.timeout_s, (unsigned long)k.sent, (unsigned long)k.received, (unsigned long)iters);
		status = perf_stop.load() ? 130 : 1;
	} else if (k.mismatches() != 0) {
		fprintf(stderr, "rdgram-perf: %lu received messages were not what the exchange promised\n",
			(unsigned long)k.mismatches());
		status = 1;
	}
	/* The closing exchange's failure is the news only when the data
	 * phase went well (else the line above said what happened). */
	if (!end_err.empty() && data_ok) {
		fail(end_err);
		status = status ? status : 1;
	}
	return status;
}

} // namespace rdgram::perf

#endif
