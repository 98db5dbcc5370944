/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * verbs_peer: the lab guest's end of the wire tests (tests/lab/soft_rxe.sh):
 * one UD queue of rdgram's verbs driver on rxe0, receiving what the host's
 * soft driver sends and, with --echo, answering each datagram on an AH
 * derived from its completion (rdgram/ah_from_wc.h), created on rxe.
 *
 *   verbs_peer --dir DIR --expect N [--qkey Q] [--echo] [--timeout S]
 *              [--join GROUP --local ADDR | --attach GROUP]
 *
 * It writes DIR/verbs_peer.ready ("qpn 0x... qkey 0x...") once the queue
 * exists (and the group is joined), then receives until N datagrams have
 * arrived or the timeout. Each one is printed as a line
 *   rx src_qp=0x.. sgid=.. dgid=.. len=.. tag=.. imm=..
 * For the first datagram from each source GID it also prints the reply AH
 * of rdgram and of rdma-core's ibv_init_ah_from_wc side by side. At the end:
 * the queue's counters and the port's P_Key and Q_Key violation counters
 * (ibv_query_port: bad_pkey_cntr, qkey_viol_cntr) as "port" deltas.
 * Exit 0 when N arrived and every echo went out, 1 otherwise, 2 for a usage
 * or set-up error.
 */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_lcore.h>

#include "rdgram/ah_from_wc.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "tool_cpu.h"
#include "verbs_device.h"
#ifdef RDGRAM_VERBS_MCAST
#include "verbs_mcast.h"
#endif

using namespace rdgram;
using namespace rdgram::verbs;

namespace {

struct options {
	std::string dir, group, local, attach;
	unsigned expect = 0;
	uint32_t qkey = 0x11111111;
	bool echo = false;
	double timeout_s = 30;
};

double now_s() { return double(rte_get_timer_cycles()) / double(rte_get_timer_hz()); }

bool parse(int argc, char **argv, options &o)
{
	for (int i = 1; i < argc; i++) {
		const std::string k = argv[i];
		if (k == "--echo") {
			o.echo = true;
			continue;
		}
		if (i + 1 >= argc)
			return false;
		const std::string v = argv[++i];
		if (k == "--dir")
			o.dir = v;
		else if (k == "--expect")
			o.expect = unsigned(strtoul(v.c_str(), nullptr, 0));
		else if (k == "--qkey")
			o.qkey = uint32_t(strtoul(v.c_str(), nullptr, 0));
		else if (k == "--timeout")
			o.timeout_s = atof(v.c_str());
		else if (k == "--join")
			o.group = v;
		else if (k == "--local")
			o.local = v;
		else if (k == "--attach")
			o.attach = v;
		else
			return false;
	}
	return !o.dir.empty() && o.expect > 0 && o.group.empty() == o.local.empty();
}

struct port_viol {
	uint32_t bad_pkey = 0, qkey_viol = 0;
};
port_viol query_viol(ibv_context *ctx, uint8_t port)
{
	ibv_port_attr pa{};
	port_viol v;
	if (ibv_query_port(ctx, port, &pa) == 0) {
		v.bad_pkey = pa.bad_pkey_cntr;
		v.qkey_viol = pa.qkey_viol_cntr;
	}
	return v;
}

/* Both reply AHs for one completion, side by side. */
void print_reply_ahs(const verbs_device &dev, const gid_index &gix, const recv_wc &wc, const uint8_t *area)
{
	ibv_ah_attr mine{}, theirs{};
	const int mrc = init_ah_from_wc(dev.port(), gix, 1, wc, area, &mine);
	const int merr = errno;
	ibv_wc raw = ibv_wc_of(wc);
	const int rrc = ibv_init_ah_from_wc(dev.context(), dev.port_num(), &raw,
					    reinterpret_cast<ibv_grh *>(const_cast<uint8_t *>(area)), &theirs);
	const int rerr = errno;
	printf("reply-ah from %s: rdgram rc %d%s%s, rdma-core rc %d%s%s\n", format_gid(wc.sgid).c_str(), mrc,
	       mrc ? " " : "", mrc ? strerror(merr) : "", rrc, rrc ? " " : "", rrc ? strerror(rerr) : "");
	const auto row = [](const char *n, unsigned a, unsigned b) {
		printf("reply-ah   %-14s rdgram 0x%-8x rdma-core 0x%-8x%s\n", n, a, b, a == b ? "" : " differs");
	};
	row("is_global", mine.is_global, theirs.is_global);
	row("dlid", mine.dlid, theirs.dlid);
	row("sl", mine.sl, theirs.sl);
	row("sgid_index", mine.grh.sgid_index, theirs.grh.sgid_index);
	row("hop_limit", mine.grh.hop_limit, theirs.grh.hop_limit);
	row("traffic_class", mine.grh.traffic_class, theirs.grh.traffic_class);
	row("flow_label", mine.grh.flow_label, theirs.grh.flow_label);
	wire::gid a, b;
	memcpy(a.raw, mine.grh.dgid.raw, 16);
	memcpy(b.raw, theirs.grh.dgid.raw, 16);
	printf("reply-ah   %-14s rdgram %s rdma-core %s%s\n", "dgid", format_gid(a).c_str(), format_gid(b).c_str(),
	       a == b ? "" : " differs");
}

int run(const options &o, runtime &rt)
{
	verbs_device dev;
	verbs_config vc;
	vc.device = "rxe0";
	vc.max_ah = 256;
	vc.qsbr = rt.qsbr();
	vc.topology = rt.topology();
	/* The caller's pool (the device takes it and leaves it to us): room
	 * for the GRH area and the largest IB MTU, whatever rxe0's is. */
	rte_mempool *mp = rte_pktmbuf_pool_create("vpeer", 4095, 256, 0,
						  uint16_t(RTE_PKTMBUF_HEADROOM + wire::grh_len + 4096), SOCKET_ID_ANY);
	if (mp == nullptr) {
		fprintf(stderr, "verbs_peer: mempool\n");
		return 2;
	}
	vc.pool = mp;
	int rc = -1;
	rt.ctl().call([&] { rc = dev.open(vc); });
	if (rc != 0) {
		fprintf(stderr, "verbs_peer: open: %s\n", dev.error().c_str());
		return 2;
	}
	verbs_queue q;
	queue_params qp;
	qp.qkey = o.qkey;
	qp.sq_depth = 256;
	qp.rq_depth = 512;
	/* The queue contract on a real provider: a field verbs cannot honour
	 * is refused with a message, and a queue destroyed gives every
	 * buffer back and can be created again. */
	{
		queue_params bad = qp;
		bad.recv_batch = qp.rq_depth + 1;
		std::string why;
		rt.ctl().call([&] {
			rc = dev.create_queue(bad, q);
			why = dev.error();
		});
		if (rc != EINVAL || why.find("recv_batch") == std::string::npos) {
			fprintf(stderr, "verbs_peer: create_queue(recv_batch %u) gave %d (%s), not EINVAL naming it\n",
				bad.recv_batch, rc, why.c_str());
			return 2;
		}
		rt.ctl().call([&] {
			rc = dev.create_queue(qp, q);
			if (rc == 0)
				dev.destroy_queue(q);
		});
		if (rc != 0 || rte_mempool_in_use_count(mp) != 0) {
			fprintf(stderr, "verbs_peer: create/destroy_queue: %s, %u mbufs out\n",
				rc != 0 ? dev.error().c_str() : "ok", rte_mempool_in_use_count(mp));
			return 2;
		}
		printf("queue contract: EINVAL for recv_batch (%s); create, destroy, all mbufs back\n", why.c_str());
	}
	rt.ctl().call([&] { rc = dev.create_queue(qp, q); });
	if (rc != 0) {
		fprintf(stderr, "verbs_peer: create_queue: %s\n", dev.error().c_str());
		return 2;
	}
#ifdef RDGRAM_VERBS_MCAST
	rdmacm_group grp;
	if (!o.group.empty()) {
		sockaddr_storage local{}, group{};
		if (parse_sockaddr(o.local, &local) != 0 || parse_sockaddr(o.group, &group) != 0) {
			fprintf(stderr, "verbs_peer: bad --local or --join address\n");
			return 2;
		}
		rt.ctl().call([&] {
			rc = grp.join(dev.context(), dev.port_num(), false, reinterpret_cast<sockaddr *>(&local),
				      reinterpret_cast<sockaddr *>(&group), rdmacm_group::role::subscriber, q.qp(), 5000);
		});
		if (rc != 0) {
			fprintf(stderr, "verbs_peer: join %s: %s\n", o.group.c_str(), grp.error().c_str());
			return 2;
		}
		wire::gid mg;
		memcpy(mg.raw, grp.membership().mgid.raw, 16);
		printf("joined %s: MGID %s Q_Key 0x%x\n", o.group.c_str(), format_gid(mg).c_str(), grp.membership().qkey);
	}
#else
	if (!o.group.empty()) {
		fprintf(stderr, "verbs_peer: built without librdmacm: no --join\n");
		return 2;
	}
#endif
	/* --attach: ibv_attach_mcast(3) alone, no rdma_cm join (MLID 0, as
	 * RoCE has no LIDs). */
	ibv_gid attached{};
	if (!o.attach.empty()) {
		wire::gid g;
		if (!parse_ip(o.attach, &g) || !g.is_multicast()) {
			fprintf(stderr, "verbs_peer: --attach wants a multicast address\n");
			return 2;
		}
		memcpy(attached.raw, g.raw, 16);
		if (int e = ibv_attach_mcast(q.qp(), &attached, 0); e != 0) {
			fprintf(stderr, "verbs_peer: ibv_attach_mcast %s: %s\n", o.attach.c_str(), strerror(e));
			return 2;
		}
		printf("attached %s (no rdma_cm join)\n", o.attach.c_str());
	}
	const port_viol v0 = query_viol(dev.context(), dev.port_num());
	gid_index gix;
	gix.build(dev.port().gids);
	{
		const std::string tmp = o.dir + "/verbs_peer.ready.tmp";
		FILE *f = fopen(tmp.c_str(), "w");
		if (f == nullptr || fprintf(f, "qpn 0x%x qkey 0x%x\n", q.qpn(), q.qkey()) < 0 || fclose(f) != 0 ||
		    rename(tmp.c_str(), (o.dir + "/verbs_peer.ready").c_str()) != 0) {
			fprintf(stderr, "verbs_peer: cannot write %s\n", tmp.c_str());
			return 2;
		}
	}
	printf("verbs_peer: QPN 0x%x Q_Key 0x%x on %s, MTU %u\n", q.qpn(), q.qkey(), dev.name().c_str(),
	       dev.port().active_mtu);
	fflush(stdout);

	/* Reply AH per source GID (a reflector makes one, not one per packet). */
	const auto gid_less = [](const wire::gid &a, const wire::gid &b) { return memcmp(a.raw, b.raw, 16) < 0; };
	std::map<wire::gid, ah_handle, decltype(gid_less)> back(gid_less);
	unsigned got = 0, echoed = 0, echo_fail = 0;
	const double t0 = now_s();
	recv_wc wc[32];
	while (got < o.expect && now_s() - t0 < o.timeout_s) {
		q.tx_flush();
		const uint16_t n = q.rx_burst(wc, 32);
		for (uint16_t i = 0; i < n; i++) {
			const recv_wc &r = wc[i];
			const uint8_t *area = rte_pktmbuf_mtod(r.mbuf, const uint8_t *);
			const uint32_t len = r.byte_len - wire::grh_len;
			printf("rx src_qp=0x%x sgid=%s dgid=%s len=%u tag=%02x imm=%s\n", r.src_qp,
			       format_gid(r.sgid).c_str(), format_gid(r.dgid).c_str(), len,
			       len ? area[wire::grh_len] : 0,
			       (r.wc_flags & wc_with_imm) ? std::to_string(rte_be_to_cpu_32(r.imm_data)).c_str() : "-");
			got++;
			if (o.echo) {
				auto it = back.find(r.sgid);
				if (it == back.end()) {
					print_reply_ahs(dev, gix, r, area);
					int err = 0;
					ah_handle h = ah_null;
					rt.ctl().call([&] { h = create_ah_from_wc(dev, gix, 1, r, area, &err); });
					if (err != 0) {
						printf("echo: create_ah_from_wc for %s: %s\n", format_gid(r.sgid).c_str(),
						       strerror(err));
						echo_fail++;
						rte_pktmbuf_free(r.mbuf);
						continue;
					}
					it = back.emplace(r.sgid, h).first;
				}
				/* The same bytes back, from the receive buffer itself. */
				rte_pktmbuf_adj(r.mbuf, uint16_t(wire::grh_len));
				send_wr w{it->second, r.src_qp, 0x80000000u, r.mbuf, nullptr, 0, 0, 0};
				if (r.wc_flags & wc_with_imm) {
					w.flags |= send_imm;
					w.imm_data = r.imm_data;
				}
				const double ts = now_s();
				uint16_t k = 0;
				while ((k = q.tx_burst(&w, 1)) == 0 && now_s() - ts < 1)
					q.tx_flush();
				if (k == 1) {
					echoed++;
				} else {
					echo_fail++;
					rte_pktmbuf_free(r.mbuf);
				}
			} else {
				rte_pktmbuf_free(r.mbuf);
			}
		}
	}
	for (int spin = 0; spin < 100000 && q.tx_outstanding() != 0; spin++)
		q.tx_flush();
	const port_viol v1 = query_viol(dev.context(), dev.port_num());
	printf("received %u of %u in %.1f s, echoed %u\n", got, o.expect, now_s() - t0, echoed);
	printf("counters:");
	q.counters().for_each([](const xstat_name &n, uint64_t v) {
		if (v != 0 && n.kind != counter_kind::drop)
			printf(" %s=%lu", n.name, (unsigned long)v);
	});
	const verbs_counters &vs = q.counters();
	/* The drops every time, zero or not (the lab's scripts read them). */
	vs.for_each([](const xstat_name &n, uint64_t v) {
		if (n.kind == counter_kind::drop)
			printf(" %s=%lu", n.name, (unsigned long)v);
	});
	printf("\n");
	printf("port bad_pkey_cntr+%u qkey_viol_cntr+%u\n", v1.bad_pkey - v0.bad_pkey, v1.qkey_viol - v0.qkey_viol);
	fflush(stdout);
	bool ok = got == o.expect && echo_fail == 0 && vs.tx_wc_errors == 0 && q.counters().tx_drops() == 0;
	rt.ctl().call([&] {
		for (auto &kv : back)
			dev.destroy_ah(kv.second);
#ifdef RDGRAM_VERBS_MCAST
		grp.leave();
#endif
		if (!o.attach.empty())
			ibv_detach_mcast(q.qp(), &attached, 0);
		dev.destroy_queue(q);
		dev.close();
	});
	if (rte_mempool_in_use_count(mp) != 0) {
		printf("FAIL: %u mbufs not back in the pool\n", rte_mempool_in_use_count(mp));
		ok = false;
	}
	rte_mempool_free(mp);
	return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
	options o;
	if (!parse(argc, argv, o)) {
		fprintf(stderr, "usage: verbs_peer --dir DIR --expect N [--qkey Q] [--echo] [--timeout S] "
				"[--join GROUP --local ADDR | --attach GROUP]\n");
		return 2;
	}
	const std::string lcore = test::allowed_cpu();
	runtime rt;
	if (rt.init(default_eal_args(256, lcore), argv[0]) != 0) {
		fprintf(stderr, "verbs_peer: %s\n", rt.error().c_str());
		return 2;
	}
	const int rc = run(o, rt);
	rt.fini();
	return rc;
}
