/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The soft driver's receive cost per datagram when part of the traffic
 * lands on the wrong queue and is handed to its QP's queue
 * (drivers/soft/soft_steer.h), side by side in one run:
 *
 *   rx/handed_pct:0     every datagram is for a QP of the queue it
 *                       landed on (what rte_flow steering, or a port whose
 *                       spread matches the QPs, gives)
 *   rx/handed_pct:50    every other one is for a QP of queue 1
 *   rx/handed_pct:100   all of them are
 *
 * A port (net_ring, two queues) gets every frame on queue 0. Each
 * iteration puts 1024 64-byte RoCEv2 datagrams, built by a sending soft
 * port, on that ring (untimed), then times, on one thread, queue 0's
 * rx_burst until its ring is empty and queue 1's until it took every
 * frame handed to it: the whole receive work of both poll threads, mbuf
 * frees included. ns/datagram = the manual time / 1024; the difference
 * between the cases is the hand-off's cost (the staging, one ring
 * enqueue and dequeue per burst, the owner's second parse of the
 * headers; the ICRC is checked once, by the owner). On one core this is
 * CPU cost, not the cross-core cache traffic two poll threads on two
 * cores add (the mbuf header and the frame's first line move once more).
 *
 * Run e.g.:
 *   build/benchmarks/bench_steer --benchmark_repetitions=5 \
 *       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
 */
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>

#include "soft_datapath.h"
#include "soft_device.h"

using namespace rdgram;

namespace {

constexpr unsigned batch = 1024;
constexpr uint32_t qkey = 0x1234567;

struct rig {
	rte_ring *to_b = nullptr, *empty = nullptr, *sink = nullptr, *a_rx = nullptr;
	soft::soft_device a, b;
	soft::soft_queue qa, qb[2];
	ah_handle h = ah_null;
};
rig *g;

wire::gid v4(uint8_t d)
{
	wire::gid x{};
	x.raw[10] = x.raw[11] = 0xff;
	x.raw[12] = 10;
	x.raw[13] = 6;
	x.raw[15] = d;
	return x;
}

bool set_up()
{
	g = new rig;
	g->to_b = rte_ring_create("bs_to_b", 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	g->empty = rte_ring_create("bs_empty", 64, SOCKET_ID_ANY, 0);
	g->sink = rte_ring_create("bs_sink", 64, SOCKET_ID_ANY, 0);
	g->a_rx = rte_ring_create("bs_a_rx", 64, SOCKET_ID_ANY, 0);
	int pa = rte_eth_from_rings("net_bs_a", &g->a_rx, 1, &g->to_b, 1, 0);
	rte_ring *brx[2] = {g->to_b, g->empty}, *btx[2] = {g->sink, g->sink};
	int pb = rte_eth_from_rings("net_bs_b", brx, 2, btx, 2, 0);
	if (pa < 0 || pb < 0)
		return false;
	const rte_ether_addr ma{{2, 0, 0, 0, 6, 1}}, mb{{2, 0, 0, 0, 6, 2}};
	soft::soft_config c;
	c.port_id = uint16_t(pa);
	c.set_mac = true;
	c.mac = ma;
	c.addresses = {v4(1)};
	c.neighbours = {{v4(2), mb}};
	c.nb_mbufs = 8191;
	c.max_ah = 64;
	c.resolve = false;
	if (g->a.open(c) != 0 || g->a.create_queue({.index = 0}, g->qa) != 0 || g->qa.add_qp(0x100, qkey) != 0) {
		fprintf(stderr, "sender: %s\n", g->a.error().c_str());
		return false;
	}
	c.port_id = uint16_t(pb);
	c.mac = mb;
	c.addresses = {v4(2)};
	c.neighbours = {{v4(1), ma}};
	c.nb_queues = 2;
	c.steer = soft::steer_mode::software;
	if (g->b.open(c) != 0 || g->b.create_queue({.index = 0}, g->qb[0]) != 0 ||
	    g->b.create_queue({.index = 1}, g->qb[1]) != 0 || g->qb[0].add_qp(0x300, qkey) != 0 ||
	    g->qb[1].add_qp(0x301, qkey) != 0) {
		fprintf(stderr, "receiver: %s\n", g->b.error().c_str());
		return false;
	}
	ibv_ah_attr at{};
	at.is_global = 1;
	at.port_num = 1;
	at.grh.hop_limit = 64;
	memcpy(at.grh.dgid.raw, v4(2).raw, 16);
	int e = 0;
	g->h = g->a.create_ah(at, &e);
	return e == 0;
}

/* batch datagrams on queue 0's ring, every (100 / pct)-th to queue 1's QP. */
void fill(unsigned pct)
{
	static const uint8_t pay[64] = {1};
	for (unsigned done = 0; done < batch;) {
		send_wr w[32]{};
		for (unsigned i = 0; i < 32; i++) {
			const unsigned k = done + i;
			const bool handed = pct == 100 || (pct == 50 && (k & 1));
			w[i].ah = g->h;
			w[i].remote_qpn = handed ? 0x301 : 0x300;
			w[i].remote_qkey = qkey;
			w[i].inline_data = pay;
			w[i].inline_len = sizeof(pay);
			w[i].flags = send_inline;
		}
		done += g->qa.tx_burst(w, 32);
		g->qa.tx_flush();
	}
}

void bm_rx(benchmark::State &st)
{
	const unsigned pct = unsigned(st.range(0));
	uint64_t got = 0, handed0 = g->qb[0].counters().rx_handoff_out;
	for (auto _ : st) {
		fill(pct);
		const uint64_t t0 = rte_rdtsc_precise();
		unsigned n = 0;
		recv_wc wc[32];
		while (n < batch) {
			for (int q = 0; q < 2; q++) {
				const uint16_t k = g->qb[q].rx_burst(wc, 32);
				for (uint16_t i = 0; i < k; i++)
					rte_pktmbuf_free(wc[i].mbuf);
				n += k;
			}
		}
		const uint64_t t1 = rte_rdtsc_precise();
		st.SetIterationTime(double(t1 - t0) / double(rte_get_tsc_hz()));
		got += n;
	}
	st.SetItemsProcessed(int64_t(got));
	st.counters["handed"] = double(g->qb[0].counters().rx_handoff_out - handed0) / double(got);
	st.counters["ns/datagram"] =
		benchmark::Counter(double(got), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(bm_rx)->Name("rx/handed_pct")->Arg(0)->Arg(50)->Arg(100)->UseManualTime();

} // namespace

int main(int argc, char **argv)
{
	const char *eal_args[] = {"bench_steer", "--no-huge", "--no-shconf", "--no-pci", "-m", "512", "-l", "0",
				  "--file-prefix=bench_steer", "--log-level=lib.eal:error"};
	if (rte_eal_init(int(sizeof(eal_args) / sizeof(eal_args[0])), const_cast<char **>(eal_args)) < 0) {
		fprintf(stderr, "rte_eal_init failed\n");
		return 1;
	}
	if (!set_up())
		return 1;
	benchmark::Initialize(&argc, argv);
	benchmark::RunSpecifiedBenchmarks();
	return 0;
}
