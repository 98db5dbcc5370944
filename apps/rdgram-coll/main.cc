/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll: the HPC collectives test over UD on the soft RoCEv2 driver.
 *
 *   rdgram-coll [EAL args --] [--mode threads|procs] [options]
 *
 * Every rank is one soft RoCEv2 device (its own port, GID, MAC, UD QP, AH
 * service). The fabric is an Ethernet switch in software that forwards real
 * RoCEv2 frames by destination MAC:
 *
 *   threads  all ranks in one process; rank i's port is a net_ring whose TX
 *            ring the switch drains into the RX ring of the rank owning
 *            the destination MAC.
 *   procs    one rank per process, in a star over net_memif: rank 0 is the
 *            memif server of one link per peer (and holds the switch, its
 *            own device on a net_ring), every other rank a memif client.
 *            Rank, size and every rank's endpoint record come from the
 *            launcher's PMIx server (mpirun, srun --mpi=pmix) or a TCP
 *            rendezvous at rank 0 (--bootstrap, job_bootstrap.h).
 *
 * One poll lcore drives the switch and every local rank's queue round
 * robin (each rank a state machine, coll_engine.h), so 8 ranks need no 8
 * cores. Phases: address exchange; the AH storm (each rank creates AHs to
 * all N - 1 peers in one create_ah_batch, timed per rank); then --iters
 * barriers, allgathers and alltoalls, verified, with per-op latency.
 */
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include "cli.h"
#include "coll_config.h"
#include "coll_engine.h"
#include "job_bootstrap.h"
#include "rdgram/ah_service.h"
#include "rdgram/burst_guard.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "soft_device.h"

using namespace rdgram;
using namespace rdgram::coll;

namespace {

constexpr uint32_t qpn_base = 0x1000;

/* Rank r's fabric identity: MAC 02:00:00:c0:HH:LL, IPv4 10.200.x.y (r + 1). */
rte_ether_addr mac_of(uint32_t r)
{
	return rte_ether_addr{{0x02, 0x00, 0x00, 0xc0, uint8_t(r >> 8), uint8_t(r)}};
}
wire::gid gid_of(uint32_t r)
{
	wire::gid g{};
	g.raw[10] = g.raw[11] = 0xff;
	g.raw[12] = 10;
	g.raw[13] = 200;
	g.raw[14] = uint8_t((r + 1) >> 8);
	g.raw[15] = uint8_t(r + 1);
	return g;
}

/* One switch port: a net_ring's ring pair (the rank's port is the other
 * end) or an ethdev port (a memif link to another process). */
struct sw_port {
	rte_ring *from = nullptr; /* frames the rank's port sent */
	rte_ring *to = nullptr;   /* frames for the rank's port */
	int eth = -1;
	int guard = -1; /* burst_guard slot of eth */
	rte_mbuf *out[32]; /* frames for this port from the current input burst */
	unsigned nout = 0;
};

struct sw_stats {
	uint64_t forwarded, unknown_dst, full;
};

/* The software Ethernet switch (poll thread: no syscall, lock or
 * allocation). Destination MAC 02:00:00:c0:HH:LL is rank HH:LL; anything
 * else (broadcast: there is no ARP on this fabric) is dropped, counted. */
struct eth_switch {
	std::vector<sw_port> ports; /* index = rank */
	sw_stats st{};

	void poll()
	{
		for (sw_port &in : ports) {
			rte_mbuf *m[32];
			unsigned n;
			if (in.eth >= 0) {
				burst_guard::enter(in.guard);
				n = rte_eth_rx_burst(uint16_t(in.eth), 0, m, 32);
				burst_guard::leave(in.guard);
			} else {
				n = rte_ring_dequeue_burst(in.from, (void **)m, 32, nullptr);
			}
			for (unsigned i = 0; i < n; i++) {
				const auto *e = rte_pktmbuf_mtod(m[i], const rte_ether_hdr *);
				const uint8_t *d = e->dst_addr.addr_bytes;
				const uint32_t r = uint32_t(d[4]) << 8 | d[5];
				if (m[i]->data_len < sizeof(*e) || d[0] != 0x02 || d[1] || d[2] || d[3] != 0xc0 ||
				    r >= ports.size()) {
					st.unknown_dst++;
					rte_pktmbuf_free(m[i]);
					continue;
				}
				sw_port &out = ports[r];
				out.out[out.nout++] = m[i];
			}
			/* One burst per output port per input burst. */
			for (sw_port &out : ports)
				if (out.nout != 0)
					send(out);
		}
	}

	void send(sw_port &out)
	{
		unsigned k;
		if (out.eth >= 0) {
			burst_guard::enter(out.guard);
			k = rte_eth_tx_burst(uint16_t(out.eth), 0, out.out, uint16_t(out.nout));
			burst_guard::leave(out.guard);
		} else {
			k = rte_ring_enqueue_burst(out.to, (void **)out.out, out.nout, nullptr);
		}
		st.forwarded += k;
		st.full += out.nout - k;
		for (unsigned i = k; i < out.nout; i++)
			rte_pktmbuf_free(out.out[i]);
		out.nout = 0;
	}
};

using rank_t = coll_rank<soft::soft_queue>;

struct local_rank {
	uint32_t rank = 0;
	soft::soft_device dev;
	soft::soft_queue q;
	ah_service svc;
	bool svc_up = false;
	std::vector<ah_handle> ahs;
	double storm_ms = 0;
	uint64_t storm_end = 0; /* TSC when this rank held AHs to all peers */
	unsigned storm_ok = 0;
	int storm_err = 0;
	rank_t eng;
};

struct job {
	const coll_config *c = nullptr;
	runtime *rt = nullptr;
	uint32_t nranks = 0;
	std::vector<std::unique_ptr<local_rank>> ranks; /* local ranks */
	eth_switch sw;
	bool has_switch = false;
	lcore_cpu worker{};
	std::atomic<bool> stop{false};
	std::atomic<bool> local_done{false}; /* every local rank finished and quiet */
	std::atomic<bool> timed_out{false};
	uint64_t deadline = 0;
};

/* The poll lcore: the switch and every local rank, round robin. */
int worker_main(void *arg)
{
	auto *j = static_cast<job *>(arg);
	j->rt->bind_this_thread(j->worker.cpu);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(j->rt->qsbr(), tid);
	const uint64_t linger = rte_get_tsc_hz() / 2;
	uint64_t all_finished_at = 0;
	while (!j->stop.load(std::memory_order_acquire)) {
		const uint64_t now = rte_get_tsc_cycles();
		if (j->has_switch)
			j->sw.poll();
		bool fin = true, quiet = true;
		for (auto &r : j->ranks) {
			r->eng.poll(now);
			fin &= r->eng.finished();
			quiet &= r->eng.quiet();
		}
		if (fin && all_finished_at == 0)
			all_finished_at = now;
		/* Finished ranks keep answering retransmissions; quiet (all
		 * of their own DATA acknowledged) or a short linger ends it. */
		if (fin && (quiet || now - all_finished_at > linger))
			j->local_done.store(true, std::memory_order_release);
		if (now > j->deadline) {
			j->timed_out.store(true, std::memory_order_release);
			break;
		}
		rte_rcu_qsbr_quiescent(j->rt->qsbr(), tid);
	}
	poll_thread_offline(j->rt->qsbr(), tid);
	return 0;
}

/* Frames to or from memif rings: a switch pool (procs mode, rank 0). */
int setup_eth_port(uint16_t port, rte_mempool *mp)
{
	rte_eth_conf conf{};
	int rc = rte_eth_dev_configure(port, 1, 1, &conf);
	if (rc == 0)
		rc = rte_eth_rx_queue_setup(port, 0, 1024, unsigned(rte_eth_dev_socket_id(port)), nullptr, mp);
	if (rc == 0)
		rc = rte_eth_tx_queue_setup(port, 0, 1024, unsigned(rte_eth_dev_socket_id(port)), nullptr);
	if (rc == 0)
		rc = rte_eth_dev_start(port);
	return rc < 0 ? -rc : rc;
}

int probe_memif(uint32_t id, bool server, const std::string &sock, uint16_t *port)
{
	const std::string name = "net_memif_coll" + std::to_string(id);
	const std::string args = name + ",role=" + (server ? "server" : "client") + ",id=" + std::to_string(id) +
				 ",socket=" + sock + ",socket-abstract=no";
	if (int rc = rte_dev_probe(args.c_str()); rc < 0) {
		fprintf(stderr, "rdgram-coll: cannot probe '%s': %s\n", args.c_str(), strerror(-rc));
		return -rc;
	}
	if (rte_eth_dev_get_port_by_name(name.c_str(), port) != 0) {
		fprintf(stderr, "rdgram-coll: '%s' created no ethdev port\n", args.c_str());
		return ENODEV;
	}
	return 0;
}

bool wait_links(const std::vector<uint16_t> &ports, double timeout_s, bool want_up = true)
{
	const uint64_t end = rte_get_tsc_cycles() + uint64_t(timeout_s * double(rte_get_tsc_hz()));
	for (;;) {
		bool up = true;
		for (uint16_t p : ports) {
			rte_eth_link l{};
			rte_eth_link_get_nowait(p, &l);
			up &= (l.link_status == RTE_ETH_LINK_UP) == want_up;
		}
		if (up)
			return true;
		if (rte_get_tsc_cycles() > end)
			return false;
		rte_delay_us_sleep(10000);
	}
}

/* Opens rank r's device on port with static neighbours for every peer. */
int open_rank(job &j, local_rank &lr, uint16_t port, const std::vector<rank_addr> &table, int node)
{
	const coll_config &c = *j.c;
	soft::soft_config sc;
	sc.port_id = port;
	sc.set_mac = true;
	sc.mac = mac_of(lr.rank);
	sc.addresses = {gid_of(lr.rank)};
	sc.max_ah = std::max<uint32_t>(64, 2 * j.nranks);
	sc.resolve = false;
	sc.qsbr = j.rt->qsbr();
	sc.av_nodes = {node};
	sc.nb_mbufs = 2047;
	sc.rx_desc = sc.tx_desc = 512;
	sc.mtu = c.mtu;
	for (const rank_addr &a : table)
		if (a.rank != lr.rank) {
			soft::neighbour nb{};
			memcpy(nb.ip.raw, a.gid, 16);
			memcpy(nb.mac.addr_bytes, a.mac, 6);
			sc.neighbours.push_back(nb);
		}
	if (lr.dev.open(sc) != 0) {
		fprintf(stderr, "rdgram-coll: rank %u: %s\n", lr.rank, lr.dev.error().c_str());
		return 1;
	}
	lr.dev.init_queue(0, lr.q, node);
	lr.q.add_qp(qpn_base + lr.rank, c.qkey);
	ah_service_config svc;
	svc.capacity = std::max<uint32_t>(64, 2 * j.nranks);
	svc.qsbr = j.rt->qsbr();
	svc.socket = node;
	svc.app_timeout_us = uint64_t(c.timeout_s * 1e6);
	if (int rc = lr.svc.start(lr.dev, j.rt->ctl(), svc); rc != 0) {
		fprintf(stderr, "rdgram-coll: rank %u: AH service: %s\n", lr.rank, strerror(rc));
		return 1;
	}
	lr.svc_up = true;
	return 0;
}

/* The AH storm of one rank: AHs to every peer in one create_ah_batch. */
void storm(local_rank &lr, const std::vector<rank_addr> &table)
{
	std::vector<ibv_ah_attr> attrs;
	std::vector<uint32_t> who;
	for (const rank_addr &a : table)
		if (a.rank != lr.rank) {
			ibv_ah_attr at{};
			at.is_global = 1;
			at.port_num = 1;
			at.grh.sgid_index = 0;
			at.grh.hop_limit = 64;
			memcpy(at.grh.dgid.raw, a.gid, 16);
			attrs.push_back(at);
			who.push_back(a.rank);
		}
	std::vector<ah_handle> hs(attrs.size(), ah_null);
	std::vector<int> errs(attrs.size(), 0);
	const uint64_t t0 = rte_get_tsc_cycles();
	lr.storm_ok = attrs.empty() ? 0
				    : lr.svc.create_ah_batch(attrs.data(), unsigned(attrs.size()), hs.data(),
							     errs.data());
	lr.storm_end = rte_get_tsc_cycles();
	lr.storm_ms = double(lr.storm_end - t0) * 1e3 / double(rte_get_tsc_hz());
	lr.ahs.assign(table.size(), ah_null);
	for (size_t i = 0; i < who.size(); i++) {
		lr.ahs[who[i]] = hs[i];
		if (errs[i] != 0)
			lr.storm_err = errs[i];
	}
}

/* Procs mode: the job's bootstrap (--bootstrap), decided once, before the
 * EAL starts. nullptr with *err (one line) on a refusal. */
std::unique_ptr<job_bootstrap> open_bootstrap(const coll_config &c, const cli::parser &app, std::string *err)
{
	const std::string how = c.bootstrap == "auto" ? auto_bootstrap() : c.bootstrap;
	if (how == "pmix") {
		auto b = pmix_bootstrap(err);
		if (!b)
			return nullptr;
		if ((app.count("--ranks") != 0 && int(c.ranks) != b->size()) ||
		    (app.count("--rank") != 0 && c.rank >= 0 && c.rank != b->rank())) {
			*err = "--rank/--ranks disagree with PMIx (rank " + std::to_string(b->rank()) + " of " +
			       std::to_string(b->size()) + "): leave them out under a PMIx launcher";
			return nullptr;
		}
		return b;
	}
	launch_env le;
	if (!detect_launcher(&le, err))
		return nullptr;
	const int size = le.size > 0 ? le.size : int(c.ranks);
	const int rank = c.rank >= 0 ? c.rank : le.rank;
	if (rank < 0) {
		*err = "procs mode needs --rank (no mpirun or PMIx rank in the environment)";
		return nullptr;
	}
	std::string h;
	uint16_t p;
	if (!split_hostport(c.rendezvous, &h, &p)) {
		*err = "--rendezvous: expected host:port, got '" + c.rendezvous + "'";
		return nullptr;
	}
	return tcp_bootstrap(c.rendezvous, unsigned(rank), unsigned(size),
			     le.launcher.empty() ? "command line" : le.launcher);
}

/* From t_start (TSC) to the end of lr's AH storm, ms. */
double ahs_ms(const local_rank &lr, uint64_t t_start)
{
	return lr.storm_end > t_start ? double(lr.storm_end - t_start) * 1e3 / double(rte_get_tsc_hz()) : 0;
}

double pct(std::vector<double> &v, double p)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

} // namespace

int main(int argc, char **argv)
{
	split_args sa = split_command_line(argc, argv);
	coll_config c;

	cli::parser app{"rdgram-coll",
			"rdgram-coll: HPC collectives over UD on the soft RoCEv2 driver: address exchange, the AH "
			"storm (timed per rank), then barrier (dissemination), allgather (ring) and alltoall "
			"(pairwise) with the app's own loss recovery, verified results and per-op latency.\n"
			"Usage: rdgram-coll [EAL args --] [options]",
			34};
	std::string cfg_path;
	app.add("-c,--config", cfg_path, "TOML config file (see config/rdgram-coll.toml); options override it");
	app.add("--mode", c.mode,
		"threads: all ranks in this process over a net_ring switch; procs: this process is one "
		"rank, star over net_memif through rank 0 [threads]")
		.one_of({"threads", "procs"});
	app.add("--ranks", c.ranks,
		"number of ranks (threads: at most 32, DPDK's RTE_MAX_ETHPORTS; procs: at most 64, taken from mpirun's "
		"OMPI_COMM_WORLD_SIZE when set) [8]")
		.range(1u, max_procs_ranks);
	app.add("--rank", c.rank, "procs: this process's rank (-1: from OMPI_COMM_WORLD_RANK or PMIX_RANK) [-1]")
		.range(-1, int(max_procs_ranks) - 1);
	app.add("--bootstrap", c.bootstrap,
		"procs: how ranks find each other: pmix (the launcher's PMIx server: rank, size and endpoint "
		"records through PMIx), tcp (--rendezvous at rank 0), auto (pmix when a PMIx server is in the "
		"environment) [auto]")
		.one_of({"auto", "pmix", "tcp"});
	app.add("--job", c.job,
		"procs: the job's name in every endpoint record; a record of another name is refused "
		"[the PMIx namespace]");
	app.add("--rendezvous", c.rendezvous,
		"procs, tcp: host:port where rank 0 listens for the address exchange [127.0.0.1:18515]");
	app.add("--memif-socket", c.memif_socket,
		"procs: the memif control socket of the star (rank 0 is the server) [/tmp/rdgram-coll.sock]");
	app.add("--iters", c.iters, "iterations of each collective [100]").range(1u, 1000000u);
	app.add("--size", c.size, "bytes per rank block in allgather and alltoall (one datagram) [64]")
		.range(1u, max_size);
	app.add("--rto-us", c.rto_us, "retransmission timeout of an unacknowledged message, us [200]")
		.range(1u, 10000000u);
	app.add("--drop-rate", c.drop_rate,
		"fraction of received datagrams each rank throws away, to exercise loss recovery [0]")
		.range(0.0, 0.5);
	app.add("--seed", c.seed, "seed of the drop pattern (per rank: seed and rank) [1]");
	app.add("--json", c.json, "also write the results (storm per rank, each collective's p50/p99/max, "
				  "counters, PASS/FAIL; procs, rank 0: every rank's storm) as one JSON object to FILE ({rank}: "
				  "this process's rank); - for stdout [none]");
	app.add("--timeout", c.timeout_s, "deadline of each phase (exchange, storm, collectives), s [30]")
		.range(0.1, 3600.0);
	app.add("--qkey", c.qkey, "Q_Key of every rank's QP (below 0x80000000) [0x11110000]").range(0u, 0x7fffffffu);
	app.add("--mtu", c.mtu, "path MTU of every rank's device: 256, 512, 1024, 2048 or 4096 [2048]")
		.range(256u, 4096u);

	/* A config file is applied first, so options (which CLI11 writes into c
	 * while parsing) must win: parse twice, the second time over the
	 * file's values. */
	if (int rc = app.parse(sa.app); rc >= 0)
		return rc;
	if (!cfg_path.empty()) {
		try {
			load_coll_config(cfg_path, c);
		} catch (const config_error &e) {
			fprintf(stderr, "rdgram-coll: %s\n", e.what());
			return 2;
		}
		if (int rc = app.parse(sa.app); rc >= 0)
			return rc;
	}

	const bool procs = c.mode == "procs";
	uint32_t nranks = c.ranks, my_rank = 0;
	if ((c.mtu & (c.mtu - 1)) != 0) {
		fprintf(stderr, "rdgram-coll: --mtu %u: expected 256, 512, 1024, 2048 or 4096\n", c.mtu);
		return 2;
	}
	std::unique_ptr<job_bootstrap> boot;
	std::vector<std::string> eal = sa.eal_given ? sa.eal : c.eal_args;
	if (procs) {
		std::string err;
		if (!(boot = open_bootstrap(c, app, &err))) {
			fprintf(stderr, "rdgram-coll: %s\n", err.c_str());
			return 2;
		}
		nranks = uint32_t(boot->size());
		my_rank = uint32_t(boot->rank());
		if (nranks < 2 || nranks > max_procs_ranks || my_rank >= nranks) {
			fprintf(stderr, "rdgram-coll: rank %u of %u (%s): need 2..%u ranks and rank < ranks\n", my_rank,
				nranks, boot->name().c_str(), max_procs_ranks);
			return 2;
		}
		/* Every rank of a launcher gets the same EAL arguments:
		 * {rank} in them is this rank, and a private --file-prefix
		 * per rank is added unless one was given. */
		for (std::string &a : eal)
			for (size_t at; (at = a.find("{rank}")) != std::string::npos;)
				a.replace(at, 6, std::to_string(my_rank));
		const bool has_prefix = std::any_of(eal.begin(), eal.end(), [](const std::string &a) {
			return a.rfind("--file-prefix", 0) == 0;
		});
		if (!eal.empty() && !has_prefix && !boot->job_name().empty()) {
			std::string ns = boot->job_name();
			for (char &ch : ns)
				if (!isalnum((unsigned char)ch) && ch != '-' && ch != '_' && ch != '.')
					ch = '_';
			eal.push_back("--file-prefix=rdgram-coll-" + ns + "-" + std::to_string(my_rank));
		}
	} else if (nranks > max_threads_ranks) {
		fprintf(stderr, "rdgram-coll: threads mode takes at most %u ranks (one net_ring port each; DPDK was "
				"built with RTE_MAX_ETHPORTS %u)\n", max_threads_ranks, unsigned(RTE_MAX_ETHPORTS));
		return 2;
	}

	runtime rt;
	if (rt.init(eal, argv[0]) != 0) {
		fprintf(stderr, "rdgram-coll: %s\n", rt.error().c_str());
		return 1;
	}
	int status = 0;
	{
		job j;
		j.c = &c;
		j.rt = &rt;
		j.nranks = nranks;
		const double hz = double(rte_get_tsc_hz());
		auto lcores = rt.poll_lcores(SOCKET_ID_ANY);
		for (const auto &l : lcores)
			if (l.lcore != rte_get_main_lcore()) {
				j.worker = l;
				break;
			}
		if (lcores.size() < 2) {
			fprintf(stderr, "rdgram-coll: needs two lcores (EAL -l with two CPUs): one polls every rank\n");
			rt.fini();
			return 2;
		}
		const int node = replica_nodes(rt.topology(), {j.worker})[0];

		/* 1. The fabric (devices open after the exchange). */
		std::vector<uint16_t> memif_ports;
		rte_mempool *swpool = nullptr;
		auto ring_port = [&](uint32_t r, uint16_t *port) {
			const std::string n = "coll" + std::to_string(r);
			rte_ring *rx = rte_ring_create((n + "rx").c_str(), 1024, node, RING_F_SP_ENQ | RING_F_SC_DEQ);
			rte_ring *tx = rte_ring_create((n + "tx").c_str(), 1024, node, RING_F_SP_ENQ | RING_F_SC_DEQ);
			const int p = rx && tx ? rte_eth_from_rings(("net_ring_" + n).c_str(), &rx, 1, &tx, 1,
								     unsigned(std::max(node, 0)))
					       : -1;
			if (p < 0) {
				fprintf(stderr, "rdgram-coll: cannot create the net_ring port of rank %u\n", r);
				return 1;
			}
			*port = uint16_t(p);
			sw_port sp;
			sp.from = tx;
			sp.to = rx;
			j.sw.ports[r] = sp;
			return 0;
		};
		/* Rank 0 of procs mode sets up the star's memif servers first:
		 * a peer receives the table only once they listen. */
		uint16_t port = 0;
		if (procs && my_rank == 0) {
			j.has_switch = true;
			j.sw.ports.resize(nranks);
			swpool = rte_pktmbuf_pool_create("coll_sw", 4095, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, node);
			status = swpool ? ring_port(0, &port) : 1;
			for (uint32_t r = 1; r < nranks && status == 0; r++) {
				uint16_t mp;
				status = probe_memif(r, true, c.memif_socket, &mp);
				if (status == 0 && (status = setup_eth_port(mp, swpool)) != 0)
					fprintf(stderr, "rdgram-coll: memif link %u: %s\n", r, strerror(status));
				j.sw.ports[r].eth = mp;
				j.sw.ports[r].guard = burst_guard::slot_for(mp, 0);
				memif_ports.push_back(mp);
			}
		}

		/* 2. Address exchange. Each rank's address is fixed by its rank
		 * (GID, MAC, QPN), so it is known before its device opens and
		 * the peers' MACs go in as static neighbours. */
		std::vector<rank_addr> table(nranks);
		auto addr = [&](uint32_t r) {
			rank_addr a{};
			a.rank = r;
			memcpy(a.gid, gid_of(r).raw, 16);
			a.qpn = qpn_base + r;
			a.qkey = c.qkey;
			memcpy(a.mac, mac_of(r).addr_bytes, 6);
			return a;
		};
		std::vector<double> storm_all, ahs_all; /* procs, rank 0: every rank's figures */
		const uint64_t tx0 = rte_get_tsc_cycles();
		if (procs && status == 0) {
			endpoint_record self{endpoint_magic, endpoint_format, uint16_t(c.mtu),
					     job_key(c.job.empty() ? boot->job_name() : c.job), addr(my_rank)};
			std::vector<endpoint_record> recs;
			if (boot->exchange(self, c.timeout_s, &recs) != 0) {
				fprintf(stderr, "rdgram-coll: rank %u: %s\n", my_rank, boot->error().c_str());
				status = 1;
			}
			for (size_t r = 0; r < recs.size(); r++)
				table[r] = recs[r].addr;
		} else {
			for (uint32_t r = 0; r < nranks; r++)
				table[r] = addr(r);
		}
		/* The job's start: the start barrier's return (PMIx: the
		 * fence's, before the peers' records were read and checked). */
		uint64_t t_start = rte_get_tsc_cycles();
		if (procs && status == 0) {
			const std::chrono::duration<double> since = std::chrono::steady_clock::now() - boot->started();
			t_start -= std::min(t_start - tx0, uint64_t(since.count() * hz));
		}
		const double exchange_ms = double(t_start - tx0) * 1e3 / hz;

		if (status == 0) {
			if (!procs) {
				j.has_switch = true;
				j.sw.ports.resize(nranks);
				for (uint32_t r = 0; r < nranks && status == 0; r++) {
					auto lr = std::make_unique<local_rank>();
					lr->rank = r;
					uint16_t rp;
					status = ring_port(r, &rp);
					if (status == 0)
						status = open_rank(j, *lr, rp, table, node);
					j.ranks.push_back(std::move(lr));
				}
			} else {
				auto lr = std::make_unique<local_rank>();
				lr->rank = my_rank;
				if (my_rank != 0) {
					status = probe_memif(my_rank, false, c.memif_socket, &port);
					memif_ports.push_back(port);
				}
				if (status == 0)
					status = open_rank(j, *lr, port, table, node);
				j.ranks.push_back(std::move(lr));
				if (status == 0 && !wait_links(memif_ports, c.timeout_s)) {
					fprintf(stderr, "rdgram-coll: rank %u: memif link(s) not up within %.1f s\n", my_rank,
						c.timeout_s);
					status = 1;
				}
			}
		}

		/* 3. The AH storm: every local rank at once (one thread each,
		 * as N processes would at job start). */
		if (status == 0) {
			std::vector<std::thread> th;
			for (auto &lr : j.ranks)
				th.emplace_back([&, p = lr.get()] { storm(*p, table); });
			for (auto &t : th)
				t.join();
			std::vector<double> st;
			printf("rdgram-coll: %u ranks, mode %s (%s), exchange %.3f ms%s%s\n", nranks, c.mode.c_str(),
			       procs ? boot->launcher().c_str() : "in-memory", exchange_ms, procs ? ", bootstrap " : "",
			       procs ? boot->name().c_str() : "");
			printf("AH storm (create_ah_batch of %u AHs per rank):\n", nranks - 1);
			for (auto &lr : j.ranks) {
				printf("  rank %3u  %8.3f ms  %u/%u created%s%s\n", lr->rank, lr->storm_ms, lr->storm_ok,
				       nranks - 1, lr->storm_err ? ", error: " : "",
				       lr->storm_err ? strerror(lr->storm_err) : "");
				st.push_back(lr->storm_ms);
				if (lr->storm_ok != nranks - 1)
					status = 1;
			}
			const double mn = *std::min_element(st.begin(), st.end());
			const double mx = *std::max_element(st.begin(), st.end());
			printf("  storm ms: min %.3f  median %.3f  max %.3f\n", mn, pct(st, 0.5), mx);
			if (procs)
				printf("  start barrier (%s) to AHs to all peers: %.3f ms\n",
				       boot->name() == "PMIx" ? "PMIx fence" : "rendezvous", ahs_ms(*j.ranks[0], t_start));
			fflush(stdout);
		}

		/* 4. Collectives on the poll lcore. */
		if (status == 0) {
			for (auto &lr : j.ranks) {
				std::vector<peer_addr> peers(nranks);
				for (uint32_t r = 0; r < nranks; r++)
					peers[r] = peer_addr{lr->ahs[r], table[r].qpn, table[r].qkey};
				rank_params p{};
				p.rank = uint16_t(lr->rank);
				p.nranks = uint16_t(nranks);
				p.size = c.size;
				p.iters = c.iters;
				p.rto_cyc = uint64_t(double(c.rto_us) * hz / 1e6);
				p.drop_rate = c.drop_rate;
				p.seed = c.seed;
				lr->eng.init(p, &lr->q, peers);
			}
			j.deadline = rte_get_tsc_cycles() + uint64_t(c.timeout_s * hz);
			if (launch_on_lcore(worker_main, &j, j.worker.lcore) != 0) {
				fprintf(stderr, "rdgram-coll: cannot launch the poll lcore %u\n", j.worker.lcore);
				status = 1;
			} else {
				while (!j.local_done.load(std::memory_order_acquire) &&
				       !j.timed_out.load(std::memory_order_acquire))
					rte_delay_us_sleep(1000);
				/* procs: everyone keeps polling (answering
				 * retransmissions, rank 0 switching) until all are
				 * done. */
				/* Rank 0 stops its switch before it lets the
				 * others go: they then close their memif links
				 * while nothing polls them here. */
				auto stop_worker = [&] {
					j.stop.store(true, std::memory_order_release);
					wait_on_lcore(j.worker.lcore);
				};
				std::vector<double> figs;
				if (procs && !j.timed_out.load() &&
				    boot->finish(c.timeout_s, {j.ranks[0]->storm_ms, ahs_ms(*j.ranks[0], t_start)}, &figs,
						 stop_worker) != 0) {
					fprintf(stderr, "rdgram-coll: rank %u: %s\n", my_rank, boot->error().c_str());
					status = 1;
				}
				for (size_t i = 0; i + 1 < figs.size(); i += 2) {
					storm_all.push_back(figs[i]);
					ahs_all.push_back(figs[i + 1]);
				}
				/* A rank gave up: the bootstrap may tell who never
				 * got this far. Each rank's deadline counts from
				 * its own start of the collectives, so the others
				 * get as long again to say they gave up too. */
				if (procs && j.timed_out.load()) {
					const std::string gone = boot->absent_ranks(c.timeout_s);
					if (!gone.empty())
						fprintf(stderr, "rdgram-coll: rank %u: collectives timed out after %.1f s: %s\n",
							my_rank, c.timeout_s, gone.c_str());
				}
				if (!j.stop.load())
					stop_worker();
			}
		}

		/* 5. Report. */
		if (status == 0) {
			rank_stats tot{};
			bool all_fin = true;
			for (auto &lr : j.ranks) {
				const rank_stats &s = lr->eng.stats();
				tot.data_sent += s.data_sent;
				tot.acks_sent += s.acks_sent;
				tot.retransmits += s.retransmits;
				tot.tx_refused += s.tx_refused;
				tot.data_recv += s.data_recv;
				tot.acks_recv += s.acks_recv;
				tot.duplicates += s.duplicates;
				tot.stale_acks += s.stale_acks;
				tot.dropped += s.dropped;
				tot.bad_msgs += s.bad_msgs;
				tot.verified += s.verified;
				tot.verify_fail += s.verify_fail;
				if (!lr->eng.finished()) {
					all_fin = false;
					fprintf(stderr, "rdgram-coll: rank %u stopped at collective %u of %u (%s)\n", lr->rank,
						lr->eng.cseq(), c.iters * nb_ops,
						op_name(lr->eng.op_of(std::min(lr->eng.cseq(), c.iters * nb_ops - 1))));
				}
			}
			/* The same results as JSON (--json). */
			std::string js;
			char b[512];
			snprintf(b, sizeof(b),
				 "{\"ranks\":%u,\"local_ranks\":%zu,\"mode\":\"%s\",\"launcher\":\"%s\",\"bootstrap\":\"%s\","
				 "\"exchange_ms\":%.3f,"
				 "\"iters\":%u,\"size\":%u,\"rto_us\":%u,\"drop_rate\":%.4f,\"seed\":%lu,\"storm\":[",
				 nranks, j.ranks.size(), c.mode.c_str(), procs ? boot->launcher().c_str() : "in-memory",
				 procs ? boot->name().c_str() : "in-memory", exchange_ms,
				 c.iters, c.size, c.rto_us, c.drop_rate, (unsigned long)c.seed);
			js += b;
			for (size_t i = 0; i < j.ranks.size(); i++) {
				snprintf(b, sizeof(b), "%s{\"rank\":%u,\"ms\":%.3f,\"created\":%u,\"start_to_ahs_ms\":%.3f}",
					 i ? "," : "", j.ranks[i]->rank, j.ranks[i]->storm_ms, j.ranks[i]->storm_ok,
					 ahs_ms(*j.ranks[i], t_start));
				js += b;
			}
			/* Procs, rank 0: every rank's figures from the end barrier. */
			js += "],\"job_storm\":[";
			for (size_t r = 0; r < storm_all.size() && r < ahs_all.size(); r++) {
				snprintf(b, sizeof(b), "%s{\"rank\":%zu,\"ms\":%.3f,\"start_to_ahs_ms\":%.3f}", r ? "," : "", r,
					 storm_all[r], ahs_all[r]);
				js += b;
			}
			js += "],\"collectives\":{";
			printf("collectives: %u iterations each, %u-byte blocks, rto %u us, drop rate %.3f (seed %lu)\n",
			       c.iters, c.size, c.rto_us, c.drop_rate, (unsigned long)c.seed);
			printf("  %-10s %10s %10s %10s %10s   (us per op per rank, %zu rank(s) here)\n", "op", "p50", "p99",
			       "max", "verified", j.ranks.size());
			for (unsigned o = 0; o < nb_ops && all_fin; o++) {
				std::vector<double> v;
				for (auto &lr : j.ranks)
					for (uint32_t i = 0; i < c.iters; i++)
						v.push_back(double(lr->eng.latency(o * c.iters + i)) * 1e6 / hz);
				const double p50 = pct(v, 0.5), p99 = pct(v, 0.99), mx = v.back();
				printf("  %-10s %10.1f %10.1f %10.1f %10zu\n", op_name(op_kind(o)), p50, p99, mx, v.size());
				snprintf(b, sizeof(b), "%s\"%s\":{\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,\"samples\":%zu}",
					 o ? "," : "", op_name(op_kind(o)), p50, p99, mx, v.size());
				js += b;
			}
			snprintf(b, sizeof(b),
				 "},\"verified\":%lu,\"verify_failed\":%lu,\"data_sent\":%lu,\"retransmits\":%lu,"
				 "\"dropped\":%lu,\"duplicates\":%lu,\"acks_sent\":%lu,\"acks_received\":%lu,"
				 "\"stale_acks\":%lu,\"tx_refused\":%lu,\"bad_messages\":%lu",
				 (unsigned long)tot.verified, (unsigned long)tot.verify_fail, (unsigned long)tot.data_sent,
				 (unsigned long)tot.retransmits, (unsigned long)tot.dropped, (unsigned long)tot.duplicates,
				 (unsigned long)tot.acks_sent, (unsigned long)tot.acks_recv, (unsigned long)tot.stale_acks,
				 (unsigned long)tot.tx_refused, (unsigned long)tot.bad_msgs);
			js += b;
			if (j.has_switch) {
				snprintf(b, sizeof(b), ",\"switch\":{\"forwarded\":%lu,\"unknown_destination\":%lu,\"output_full\":%lu}",
					 (unsigned long)j.sw.st.forwarded, (unsigned long)j.sw.st.unknown_dst,
					 (unsigned long)j.sw.st.full);
				js += b;
			}
			printf("  verified: %lu  failed: %lu\n", (unsigned long)tot.verified, (unsigned long)tot.verify_fail);
			printf("  data sent: %lu  retransmits: %lu  dropped (--drop-rate): %lu  duplicates: %lu\n",
			       (unsigned long)tot.data_sent, (unsigned long)tot.retransmits, (unsigned long)tot.dropped,
			       (unsigned long)tot.duplicates);
			printf("  acks sent: %lu  acks received: %lu  stale acks: %lu  tx refused: %lu  bad messages: %lu\n",
			       (unsigned long)tot.acks_sent, (unsigned long)tot.acks_recv, (unsigned long)tot.stale_acks,
			       (unsigned long)tot.tx_refused, (unsigned long)tot.bad_msgs);
			if (procs && my_rank == 0 && storm_all.size() == nranks) {
				/* The storm times every rank brought to the final
				 * barrier. */
				printf("AH storm, all ranks (gathered at the end), ms:");
				for (uint32_t r = 0; r < nranks; r++)
					printf("%s %.3f", r % 8 ? "" : "\n ", storm_all[r]);
				const double mn = *std::min_element(storm_all.begin(), storm_all.end());
				const double mx = *std::max_element(storm_all.begin(), storm_all.end());
				printf("\n  storm ms: min %.3f  median %.3f  max %.3f\n", mn, pct(storm_all, 0.5), mx);
				/* The job's AH storm end to end: from the start
				 * barrier's return (PMIx: the fence) to this rank
				 * holding AHs to all peers; the job's figure is the
				 * last rank's. */
				printf("start barrier (%s) to AHs to all peers, all ranks, ms:",
				       boot->name() == "PMIx" ? "PMIx fence" : "rendezvous");
				for (uint32_t r = 0; r < nranks; r++)
					printf("%s %.3f", r % 8 ? "" : "\n ", ahs_all[r]);
				printf("\n  start to AHs ms: min %.3f  median %.3f  max %.3f\n",
				       *std::min_element(ahs_all.begin(), ahs_all.end()), pct(ahs_all, 0.5),
				       *std::max_element(ahs_all.begin(), ahs_all.end()));
			}
			if (j.has_switch)
				printf("  switch: forwarded %lu  unknown destination %lu  output full %lu\n",
				       (unsigned long)j.sw.st.forwarded, (unsigned long)j.sw.st.unknown_dst,
				       (unsigned long)j.sw.st.full);
			if (j.timed_out.load())
				fprintf(stderr, "rdgram-coll: timed out after %.1f s\n", c.timeout_s);
			if (!all_fin || tot.verify_fail != 0 || tot.verified != uint64_t(c.iters) * nb_ops * j.ranks.size())
				status = 1;
			else
				printf("result: PASS\n");
			js += status == 0 ? ",\"result\":\"PASS\"}\n" : ",\"result\":\"FAIL\"}\n";
			if (!c.json.empty()) {
				/* Ranks of one launcher share the command line:
				 * {rank} in the name is this process's rank. */
				std::string path = c.json;
				if (const size_t at = path.find("{rank}"); at != std::string::npos)
					path.replace(at, 6, std::to_string(my_rank));
				FILE *f = path == "-" ? stdout : fopen(path.c_str(), "w");
				if (f == nullptr || fputs(js.c_str(), f) < 0 || (f != stdout && fclose(f) != 0)) {
					fprintf(stderr, "rdgram-coll: cannot write --json %s: %s\n", path.c_str(), strerror(errno));
					status = 1;
				}
			}
		}
		fflush(stdout);

		for (auto &lr : j.ranks)
			if (lr->svc_up)
				lr->svc.stop();
		for (auto &lr : j.ranks)
			lr->dev.close();
		/* The switch's memif links (rank 0); a client's link is its
		 * device's port, closed with it. Rank 0 waits for the clients
		 * to disconnect first: DPDK 22.11's memif interrupt thread
		 * crashed here when a client's disconnect raced the close of
		 * the server ports that share its socket. */
		if (procs && my_rank == 0 && !memif_ports.empty()) {
			wait_links(memif_ports, 5, false);
			/* The link goes down at the start of the PMD's
			 * disconnect handling; let it finish freeing the
			 * regions before the close frees them too. */
			rte_delay_us_sleep(100000);
		}
		for (uint16_t p : memif_ports) {
			if (my_rank != 0)
				break;
			rte_eth_dev_stop(p);
			rte_eth_dev_close(p);
		}
		if (swpool)
			rte_mempool_free(swpool);
	}
	rt.fini();
	return status;
}
