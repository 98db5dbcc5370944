/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast: market-data style UD multicast over the soft RoCEv2 driver.
 * A publisher sends sequence-numbered, TSC-stamped messages to multicast
 * groups at a paced rate; subscribers join the groups (IGMPv2/MLDv2 report
 * from the driver, QP attached to the group), check sequence numbers for
 * gaps, duplicates and reordering, and keep a one-way latency histogram.
 *
 * --mode both runs one publisher and N subscribers in one process, each on
 * its own soft device and net_ring port; the process plays the L2 switch
 * between them: every frame the publisher's port sends is copied to every
 * subscriber port (flooding, as a switch without IGMP snooping does), and
 * the frames subscribers send (their IGMP/MLD reports) are decoded and
 * counted. One poll thread runs all of it (publisher, switch, subscribers,
 * in turn), so the run is deterministic on a shared 2-core machine.
 * --mode pub / sub run one role on an ethdev given with --port (e.g.
 * net_af_packet on a veth), one process each.
 */
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include "cli.h"
#include "mcast.h"
#include "perf_status.h"
#include "port.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "rdgram/telemetry.h"
#include "soft_device.h"
#ifdef RDGRAM_MCAST_VERBS
#include "verbs_device.h"
#include "verbs_mcast.h"
#endif

using namespace rdgram;
using namespace rdgram::mcast;
using perf::latency_hist;

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

/* Messages per burst: both drivers take 32. */
constexpr unsigned burst = soft::soft_queue::max_burst;

/* One publisher or subscriber: a soft device on one port with one queue
 * and one QP, or (driver "verbs") an RDMA device with one UD queue and the
 * rdma_cm memberships of its groups. */
struct node {
	std::string name;
	soft::soft_device dev;
	soft::soft_queue q;
	runtime *polled_by = nullptr;
	bool verbs = false;
#ifdef RDGRAM_MCAST_VERBS
	static_assert(verbs::verbs_queue::max_burst >= burst);
	verbs::verbs_device vdev;
	verbs::verbs_queue vq;
	bool vqueue = false;
	std::vector<std::unique_ptr<verbs::rdmacm_group>> joins; /* one per group */
#endif
	~node()
	{
		if (polled_by != nullptr)
			polled_by->ctl().remove_poller(&soft::soft_device::control_poller, &dev);
	}
};

/* The data path's calls, one branch per burst on the node's driver (no
 * virtual call; the soft path is the one the compiler sees inline). */
inline uint16_t node_tx(node &n, send_wr *w, uint16_t k)
{
#ifdef RDGRAM_MCAST_VERBS
	if (unlikely(n.verbs))
		return n.vq.tx_burst(w, k);
#endif
	return n.q.tx_burst(w, k);
}
inline void node_flush(node &n)
{
#ifdef RDGRAM_MCAST_VERBS
	if (unlikely(n.verbs))
		return n.vq.tx_flush();
#endif
	n.q.tx_flush();
}
inline uint16_t node_rx(node &n, recv_wc *w, uint16_t k)
{
#ifdef RDGRAM_MCAST_VERBS
	if (unlikely(n.verbs))
		return n.vq.rx_burst(w, k);
#endif
	return n.q.rx_burst(w, k);
}
/* Calls f with the node's counter set (its driver's, stats.h). */
template <class F> void with_counters(const node &n, F &&f)
{
#ifdef RDGRAM_MCAST_VERBS
	if (n.verbs) {
		f(n.vq.counters());
		return;
	}
#endif
	f(n.q.counters());
}

struct publisher {
	node *n = nullptr;
	std::vector<ah_handle> ahs; /* one per group */
	std::vector<uint32_t> qkeys; /* per group: the Q_Key to send with */
	pacer pace;
	uint64_t next_seq = 1;      /* sequence numbers start at 1 */
	uint64_t last_seq = 0;      /* the highest number handed to the driver */
	std::atomic<uint64_t> sent{0}; /* messages (per group) handed over */
	std::unique_ptr<uint8_t[]> bufs; /* max_burst payloads */
	bool done = false;
	uint64_t refused = 0; /* WRs the port queue never took */
};

struct subscriber {
	node *n = nullptr;
	std::unique_ptr<seq_tracker[]> trk; /* per group index */
	latency_hist hist;
	std::atomic<uint64_t> received{0}, malformed{0}, foreign{0}, max_ns{0};
	uint64_t last_rx = 0; /* TSC of the last message */
};

/* IGMP/MLD frames a subscriber port sent, as the switch saw them. */
struct membership_seen {
	uint64_t igmp_report = 0, igmp_leave = 0, mld_join = 0, mld_leave = 0, other = 0;
};

/* Decodes one frame a subscriber sent (the switch's view, control of the
 * driver's reports against RFC 2236 / RFC 3810 numbers). */
void classify(const rte_mbuf *m, membership_seen &s)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	const uint32_t len = rte_pktmbuf_data_len(m);
	if (len >= 14 + 24 + 8 && f[12] == 0x08 && f[13] == 0x00 && f[14 + 9] == IPPROTO_IGMP) {
		const uint32_t ihl = (f[14] & 0xf) * 4u;
		const uint8_t t = f[14 + ihl];
		if (t == 0x16)
			s.igmp_report++;
		else if (t == 0x17)
			s.igmp_leave++;
		else
			s.other++;
		return;
	}
	if (len >= 14 + 40 + 8 + 28 && f[12] == 0x86 && f[13] == 0xdd && f[14 + 6] == 0 &&
	    f[14 + 40] == IPPROTO_ICMPV6 && f[14 + 48] == 143) {
		const uint8_t rec = f[14 + 48 + 8];
		if (rec == 4)
			s.mld_join++;
		else if (rec == 3)
			s.mld_leave++;
		else
			s.other++;
		return;
	}
	s.other++;
}

struct run {
	const mcast_config *c;
	runtime *rt;
	std::vector<std::unique_ptr<node>> nodes;
	publisher *pub = nullptr;
	std::vector<std::unique_ptr<subscriber>> subs;
	/* both: the switch's rings (net_ring: what each port sends / gets). */
	rte_ring *pub_tx = nullptr;
	std::vector<rte_ring *> sub_rx, sub_tx;
	std::vector<membership_seen> seen;
	uint64_t sw_copy_fail = 0;
	uint64_t hz = 0, start = 0, end_tsc = 0;
	uint64_t idle_ticks = 0;  /* sub: stop after this long without data */
	uint64_t drain_until = 0; /* both: publisher done, wires draining */
	std::atomic<bool> running{false}, finished{false};
	std::atomic<bool> stop{false};
};

bool is_listed(const std::vector<uint64_t> &v, uint64_t s)
{
	for (uint64_t x : v)
		if (x == s)
			return true;
	return false;
}

/* The publisher's share of one loop turn: as many messages as the pacer
 * allows, each to every group. */
void publish_some(run &r, publisher &p, uint64_t now)
{
	const mcast_config &c = *r.c;
	const uint32_t ng = uint32_t(p.ahs.size());
	if (p.done)
		return;
	if ((c.count != 0 && p.next_seq > c.count) || (r.end_tsc != 0 && now >= r.end_tsc) || g_stop) {
		p.done = true;
		return;
	}
	const uint32_t max_msgs = burst / ng;
	uint32_t want = max_msgs;
	if (c.count != 0 && c.count - p.next_seq + 1 < want)
		want = uint32_t(c.count - p.next_seq + 1);
	uint32_t n = p.pace.take(now, want);
	if (n == 0)
		return;
	send_wr wrs[burst];
	uint32_t nw = 0;
	const uint64_t tsc = rte_rdtsc();
	for (uint32_t i = 0; i < n; i++) {
		const uint64_t s = p.next_seq++;
		/* Fault injection: a skipped number is never sent (a gap), a
		 * duplicated one goes twice. Lists are a few entries long. */
		if (!c.skip_seq.empty() && is_listed(c.skip_seq, s))
			continue;
		const unsigned copies = (!c.dup_seq.empty() && is_listed(c.dup_seq, s)) ? 2 : 1;
		for (unsigned k = 0; k < copies && nw + ng <= burst; k++)
			for (uint32_t g = 0; g < ng; g++) {
				uint8_t *b = p.bufs.get() + size_t(nw) * c.size;
				msg_hdr h{msg_magic, c.publisher_id, s, tsc, g, c.size};
				memcpy(b, &h, sizeof(h));
				wrs[nw++] = send_wr{p.ahs[g], soft::soft_queue::mcast_qpn, p.qkeys[g], nullptr, b, c.size,
						    0, send_inline};
			}
		p.last_seq = s;
	}
	uint32_t off = 0;
	/* The port queue takes everything unless it is full: retry on this
	 * turn, the switch drains the ring on the next one. */
	for (unsigned tries = 0; off < nw && tries < 64; tries++)
		off += node_tx(*p.n, wrs + off, uint16_t(nw - off));
	p.refused += nw - off; /* inline payloads: nothing to free */
	node_flush(*p.n);
	p.sent.store(p.last_seq, std::memory_order_relaxed);
}

/* A subscriber's share: every completion checked and recorded. */
bool receive_some(run &r, subscriber &s, uint64_t now)
{
	recv_wc wcs[burst];
	const uint16_t n = node_rx(*s.n, wcs, burst);
	const uint32_t ng = uint32_t(r.c->groups.size());
	for (uint16_t i = 0; i < n; i++) {
		rte_mbuf *m = wcs[i].mbuf;
		const uint32_t plen = wcs[i].byte_len - wire::grh_len;
		msg_hdr h;
		if (plen < sizeof(h)) {
			s.malformed.store(s.malformed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
			rte_pktmbuf_free(m);
			continue;
		}
		memcpy(&h, rte_pktmbuf_mtod_offset(m, const uint8_t *, wire::grh_len), sizeof(h));
		rte_pktmbuf_free(m);
		if (h.magic != msg_magic || h.len != plen || h.group >= ng) {
			s.malformed.store(s.malformed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
			continue;
		}
		if (h.publisher != r.c->publisher_id) {
			s.foreign.store(s.foreign.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
			continue;
		}
		s.received.store(s.received.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
		if (s.trk[h.group].on_seq(h.seq) && now > h.tsc) {
			const uint64_t ns = (now - h.tsc) * 1000000000ull / r.hz;
			s.hist.record(ns);
			if (ns > s.max_ns.load(std::memory_order_relaxed))
				s.max_ns.store(ns, std::memory_order_relaxed);
		}
		s.last_rx = now;
	}
	return n != 0;
}

/* The in-process switch (--mode both). */
bool switch_some(run &r)
{
	bool work = false;
	void *objs[64];
	unsigned n = rte_ring_sc_dequeue_burst(r.pub_tx, objs, 64, nullptr);
	for (unsigned i = 0; i < n; i++) {
		auto *m = static_cast<rte_mbuf *>(objs[i]);
		for (size_t k = 0; k < r.subs.size(); k++) {
			rte_mbuf *cp = rte_pktmbuf_copy(m, r.subs[k]->n->dev.mempool(), 0, UINT32_MAX);
			if (cp == nullptr || rte_ring_sp_enqueue(r.sub_rx[k], cp) != 0) {
				rte_pktmbuf_free(cp);
				r.sw_copy_fail++;
			}
		}
		rte_pktmbuf_free(m);
	}
	work |= n != 0;
	for (size_t k = 0; k < r.sub_tx.size(); k++) {
		unsigned t = rte_ring_sc_dequeue_burst(r.sub_tx[k], objs, 64, nullptr);
		for (unsigned i = 0; i < t; i++) {
			classify(static_cast<rte_mbuf *>(objs[i]), r.seen[k]);
			rte_pktmbuf_free(static_cast<rte_mbuf *>(objs[i]));
		}
		work |= t != 0;
	}
	return work;
}

int poll_main(void *arg)
{
	auto &r = *static_cast<run *>(arg);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(r.rt->qsbr(), tid);
	r.running.store(true, std::memory_order_release);
	for (;;) {
		const uint64_t now = rte_rdtsc();
		if (r.pub != nullptr) {
			publish_some(r, *r.pub, now);
			/* --mode pub: the port's own receive side still hands
			 * ARP/ND to the control thread (and sends its answers);
			 * datagrams to the publisher are not expected. */
			if (r.pub_tx == nullptr) {
				recv_wc wcs[burst];
				const uint16_t n = node_rx(*r.pub->n, wcs, burst);
				for (uint16_t i = 0; i < n; i++)
					rte_pktmbuf_free(wcs[i].mbuf);
			}
		}
		if (r.pub_tx != nullptr)
			switch_some(r);
		for (auto &s : r.subs)
			while (receive_some(r, *s, rte_rdtsc()))
				;
		rte_rcu_qsbr_quiescent(r.rt->qsbr(), tid);
		if (r.stop.load(std::memory_order_relaxed))
			break;
		/* Done: publisher finished and (both) the wires drained, or a
		 * subscriber idle for idle_timeout after its last message. */
		if (r.pub != nullptr && r.pub->done && r.drain_until == 0)
			r.drain_until = now + r.hz / 5; /* 200 ms for the last frames */
		if (r.pub != nullptr && r.pub->done && (r.subs.empty() || now > r.drain_until))
			break;
		if (r.pub == nullptr) {
			/* A fresh clock: receive_some stamped last_rx after now
			 * was read, and now - last_rx would wrap around. */
			const uint64_t t = rte_rdtsc();
			bool idle = true;
			for (auto &s : r.subs)
				idle &= s->last_rx != 0 && t > s->last_rx && t - s->last_rx > r.idle_ticks;
			if (idle || (r.end_tsc != 0 && now >= r.end_tsc) || g_stop)
				break;
		}
	}
	poll_thread_offline(r.rt->qsbr(), tid);
	r.finished.store(true, std::memory_order_release);
	return 0;
}

/* The status line, from the main thread while the poll thread runs. */
void print_status(run &r, uint64_t now, std::vector<uint64_t> &last_rx, uint64_t &last_tsc)
{
	const double el = double(now - r.start) / double(r.hz);
	const double dt = last_tsc != 0 ? double(now - last_tsc) / double(r.hz) : 0;
	if (r.pub != nullptr)
		fprintf(stderr, " [%6.1f s] pub: seq %lu\n", el, (unsigned long)r.pub->sent.load(std::memory_order_relaxed));
	for (size_t k = 0; k < r.subs.size(); k++) {
		subscriber &s = *r.subs[k];
		const uint64_t rx = s.received.load(std::memory_order_relaxed);
		uint64_t miss = 0, dups = 0;
		for (size_t g = 0; g < r.c->groups.size(); g++) {
			miss += s.trk[g].missing();
			dups += s.trk[g].dups();
		}
		char lat[128] = "p50/p99/p99.9/max -";
		if (s.hist.count() != 0)
			snprintf(lat, sizeof(lat), "p50 %.2f p99 %.2f p99.9 %.2f max %.2f us",
				 double(s.hist.quantile_ns(0.5)) / 1e3, double(s.hist.quantile_ns(0.99)) / 1e3,
				 double(s.hist.quantile_ns(0.999)) / 1e3,
				 double(s.max_ns.load(std::memory_order_relaxed)) / 1e3);
		fprintf(stderr, " [%6.1f s] sub%zu: %lu msgs, %.0f msg/s, missing %lu, dup %lu, %s\n", el, k,
			(unsigned long)rx, dt > 0 ? double(rx - last_rx[k]) / dt : 0.0, (unsigned long)miss,
			(unsigned long)dups, lat);
		last_rx[k] = rx;
	}
	last_tsc = now;
}

int parse_seq_list(const std::vector<std::string> &in, std::vector<uint64_t> &out, const char *opt)
{
	for (const auto &s : in) {
		char *end = nullptr;
		errno = 0;
		const unsigned long long v = strtoull(s.c_str(), &end, 0);
		if (s.empty() || s[0] == '-' || *end != '\0' || errno != 0 || v == 0) {
			fprintf(stderr, "rdgram-mcast: %s wants sequence numbers >= 1, got '%s'\n", opt, s.c_str());
			return 2;
		}
		out.push_back(v);
	}
	return 0;
}

/* Opens a node's device on port, one queue, one QP. */
int open_node(run &r, node &n, uint16_t port, const rte_ether_addr &mac, const std::vector<wire::gid> &addrs,
	      int socket)
{
	soft::soft_config sc;
	sc.port_id = port;
	sc.set_mac = true;
	sc.mac = mac;
	sc.addresses = addrs;
	sc.qsbr = r.rt->qsbr();
	sc.av_nodes = {socket};
	sc.nb_mbufs = 8191;
	if (int rc = n.dev.open(sc); rc != 0) {
		fprintf(stderr, "rdgram-mcast: %s port: %s\n", n.name.c_str(), n.dev.error().c_str());
		return rc;
	}
	if (r.rt->ctl().add_poller(&soft::soft_device::control_poller, &n.dev) == 0)
		n.polled_by = r.rt;
	n.dev.create_queue({.index = 0, .socket = socket}, n.q);
	if (int rc = n.q.add_qp(r.c->qpn, r.c->qkey); rc != 0) {
		fprintf(stderr, "rdgram-mcast: %s: QP: %s\n", n.name.c_str(), strerror(rc));
		return rc;
	}
	return 0;
}

int sgid_index_for(const std::vector<wire::gid> &addrs, const wire::gid &g)
{
	for (size_t i = 0; i < addrs.size(); i++)
		if (addrs[i].is_v4_mapped() == g.is_v4_mapped())
			return int(i);
	return -1;
}


#ifdef RDGRAM_MCAST_VERBS
/* The sockaddr of an IP address held as a GID (IPv4-mapped or IPv6). */
sockaddr_storage sockaddr_of(const wire::gid &g)
{
	sockaddr_storage ss{};
	if (g.is_v4_mapped()) {
		auto *s4 = reinterpret_cast<sockaddr_in *>(&ss);
		s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = g.v4();
	} else {
		auto *s6 = reinterpret_cast<sockaddr_in6 *>(&ss);
		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, g.raw, 16);
	}
	return ss;
}

/* rdma_cm's local address for a group: --local, or the port's first
 * RoCEv2 GID of the group's family (not link-local). 0 or EINVAL. */
int local_for(const run &r, const node &n, const wire::gid &group, sockaddr_storage *out)
{
	const int fam = group.is_v4_mapped() ? AF_INET : AF_INET6;
	if (!r.c->local.empty()) {
		if (verbs::parse_sockaddr(r.c->local, out) != 0 || out->ss_family != fam) {
			fprintf(stderr, "rdgram-mcast: --local %s is not an %s address (group %s)\n", r.c->local.c_str(),
				fam == AF_INET ? "IPv4" : "IPv6", format_gid(group).c_str());
			return EINVAL;
		}
		return 0;
	}
	for (const wire::gid &g : n.vdev.port().gids) {
		if (g.is_zero() || g.is_v4_mapped() != (fam == AF_INET) || (g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80))
			continue;
		*out = sockaddr_of(g);
		return 0;
	}
	fprintf(stderr, "rdgram-mcast: %s port %u has no %s RoCEv2 GID for group %s: give --local (on InfiniBand: "
			"the port's IPoIB address)\n",
		n.vdev.name().c_str(), n.vdev.port_num(), fam == AF_INET ? "IPv4" : "IPv6", format_gid(group).c_str());
	return EINVAL;
}

/* Opens a verbs node: the device (with its own mempool) and one UD
 * queue with rdma_cm's UDP Q_Key (what its groups use). */
int open_verbs_node(run &r, node &n)
{
	n.verbs = true;
	verbs::verbs_config vc;
	vc.device = r.c->device;
	vc.qsbr = r.rt->qsbr();
	vc.topology = r.rt->topology();
	vc.max_ah = 64;
	int rc = 0;
	r.rt->ctl().call([&] { rc = n.vdev.open(vc); });
	if (rc != 0) {
		fprintf(stderr, "rdgram-mcast: %s: %s\n", n.name.c_str(), n.vdev.error().c_str());
		return rc;
	}
	const int numa = n.vdev.port().numa_node >= 0 ? n.vdev.port().numa_node : SOCKET_ID_ANY;
	queue_params qp;
	qp.socket = numa;
	qp.qkey = RDMA_UDP_QKEY;
	qp.max_inline = r.c->size;
	r.rt->ctl().call([&] { rc = n.vdev.create_queue(qp, n.vq); });
	if (rc != 0) {
		fprintf(stderr, "rdgram-mcast: %s: %s\n", n.name.c_str(), n.vdev.error().c_str());
		return rc;
	}
	n.vqueue = true;
	return 0;
}

/* Joins every group through rdma_cm on the control thread: as a send-only
 * member (publisher, qp null) or a full member attaching n's QP. */
int join_verbs(run &r, node &n, verbs::rdmacm_group::role role)
{
	const bool ib = n.vdev.port().link != link_layer::ethernet;
	for (const auto &g : r.c->groups) {
		sockaddr_storage local{}, group = sockaddr_of(g);
		if (int rc = local_for(r, n, g, &local); rc != 0)
			return rc;
		auto j = std::make_unique<verbs::rdmacm_group>();
		int rc = 0;
		r.rt->ctl().call([&] {
			rc = j->join(n.vdev.context(), n.vdev.port_num(), ib, reinterpret_cast<sockaddr *>(&local),
				     reinterpret_cast<sockaddr *>(&group), role,
				     role == verbs::rdmacm_group::role::subscriber ? n.vq.qp() : nullptr, 5000);
		});
		if (rc != 0) {
			fprintf(stderr, "rdgram-mcast: %s: joining %s: %s\n", n.name.c_str(), format_gid(g).c_str(),
				j->error().c_str());
			return rc;
		}
		n.joins.push_back(std::move(j));
	}
	return 0;
}

/* Leaves the groups, destroys the queue and closes the device (after the
 * poll thread stopped). */
void close_verbs_node(run &r, node &n)
{
	r.rt->ctl().call([&] {
		for (auto &j : n.joins)
			if (int rc = j->leave(); rc != 0)
				fprintf(stderr, "rdgram-mcast: %s: leaving: %s\n", n.name.c_str(), j->error().c_str());
		n.joins.clear();
		if (n.vqueue)
			n.vdev.destroy_queue(n.vq);
		n.vqueue = false;
		n.vdev.close();
	});
}
#endif

int setup_publisher(run &r, node &n, const std::vector<wire::gid> &addrs)
{
	auto p = std::make_unique<publisher>();
	p->n = &n;
	p->bufs = std::make_unique<uint8_t[]>(size_t(burst) * r.c->size);
	memset(p->bufs.get(), 0, size_t(burst) * r.c->size);
#ifdef RDGRAM_MCAST_VERBS
	if (n.verbs) {
		/* The AH to each group comes from its join event (MLID, MGID,
		 * SL, rate, the GRH rdma_cm filled). */
		if (int rc = join_verbs(r, n, verbs::rdmacm_group::role::publisher); rc != 0)
			return rc;
		for (size_t g = 0; g < r.c->groups.size(); g++) {
			const verbs::mcast_membership &m = n.joins[g]->membership();
			ibv_ah_attr a = m.ah_attr;
			a.port_num = 1; /* rdgram numbers the device's one port 1 */
			int err = 0;
			ah_handle h = ah_null;
			r.rt->ctl().call([&] { h = n.vdev.create_ah(a, &err); });
			if (err != 0) {
				fprintf(stderr, "rdgram-mcast: AH to group %s: %s\n", format_gid(r.c->groups[g]).c_str(),
					strerror(err));
				return err;
			}
			p->ahs.push_back(h);
			p->qkeys.push_back(m.qkey);
		}
		r.pub = p.release();
		return 0;
	}
#endif
	for (const auto &g : r.c->groups) {
		ibv_ah_attr a{};
		a.is_global = 1;
		a.port_num = 1;
		a.grh.sgid_index = uint8_t(sgid_index_for(addrs, g));
		a.grh.hop_limit = 8;
		memcpy(a.grh.dgid.raw, g.raw, 16);
		int err = 0;
		ah_handle h = ah_null;
		r.rt->ctl().call([&] { h = n.dev.create_ah(a, &err); });
		if (err != 0) {
			fprintf(stderr, "rdgram-mcast: AH to group %s: %s\n", format_gid(g).c_str(), strerror(err));
			return err;
		}
		p->ahs.push_back(h);
		p->qkeys.push_back(r.c->qkey);
	}
	r.pub = p.release();
	return 0;
}

int setup_subscriber(run &r, node &n)
{
	auto s = std::make_unique<subscriber>();
	s->n = &n;
	s->trk = std::make_unique<seq_tracker[]>(r.c->groups.size());
#ifdef RDGRAM_MCAST_VERBS
	if (n.verbs) {
		if (int rc = join_verbs(r, n, verbs::rdmacm_group::role::subscriber); rc != 0)
			return rc;
		r.subs.push_back(std::move(s));
		return 0;
	}
#endif
	for (const auto &g : r.c->groups) {
		int rc = 0;
		/* rdma_join_multicast's part (membership report), then
		 * ibv_attach_mcast's (the QP gets the group). */
		r.rt->ctl().call([&] { rc = n.dev.join_mcast(g); });
		if (rc == 0)
			rc = n.q.attach_mcast(r.c->qpn, g);
		if (rc != 0) {
			fprintf(stderr, "rdgram-mcast: %s: joining %s: %s\n", n.name.c_str(), format_gid(g).c_str(),
				strerror(rc));
			return rc;
		}
	}
	r.subs.push_back(std::move(s));
	return 0;
}

/* Leaves every group (IGMP Leave / MLD CHANGE_TO_INCLUDE) and lets queue 0
 * put the frames on the wire. (After the poll thread stopped.) */
void leave_all(run &r)
{
	for (auto &s : r.subs)
		for (const auto &g : r.c->groups) {
			if (s->n->verbs)
				break; /* close_verbs_node detaches and leaves */
			int rc = s->n->q.detach_mcast(r.c->qpn, g);
			if (rc == 0)
				r.rt->ctl().call([&] { rc = s->n->dev.leave_mcast(g); });
			if (rc != 0)
				fprintf(stderr, "rdgram-mcast: %s: leaving %s: %s\n", s->n->name.c_str(),
					format_gid(g).c_str(), strerror(rc));
		}
	const uint64_t until = rte_rdtsc() + r.hz / 20;
	recv_wc wcs[burst];
	while (rte_rdtsc() < until) {
		for (auto &s : r.subs) {
			const uint16_t n = node_rx(*s->n, wcs, burst);
			for (uint16_t i = 0; i < n; i++)
				rte_pktmbuf_free(wcs[i].mbuf);
		}
		if (r.pub_tx != nullptr)
			switch_some(r);
	}
}

std::string with_suffix(const std::string &path, size_t k, size_t n)
{
	if (n == 1)
		return path;
	const size_t dot = path.rfind('.');
	const std::string tag = "-sub" + std::to_string(k);
	return dot == std::string::npos || dot < path.rfind('/') + 1 ? path + tag : path.substr(0, dot) + tag + path.substr(dot);
}

/* Final report; returns the exit status contribution (3: plot failed). */
int report(run &r)
{
	const mcast_config &c = *r.c;
	int st = 0;
	const size_t ng = c.groups.size();
	if (r.pub != nullptr) {
		uint64_t tx_pkts = 0, tx_drops = 0;
		with_counters(*r.pub->n, [&](const auto &k) {
			tx_pkts = k.tx_pkts;
			tx_drops = k.tx_drops();
		});
		printf("pub: last_seq=%lu groups=%zu tx_pkts=%lu tx_drops=%lu refused=%lu skipped=%zu duplicated=%zu\n",
		       (unsigned long)r.pub->last_seq, ng, (unsigned long)tx_pkts, (unsigned long)tx_drops,
		       (unsigned long)r.pub->refused, c.skip_seq.size(), c.dup_seq.size());
	}
	for (size_t i = 0; i < r.subs.size(); i++) {
		subscriber &s = *r.subs[i];
		uint64_t miss = 0, dups = 0, reord = 0, old = 0;
		for (size_t g = 0; g < ng; g++) {
			if (r.pub != nullptr)
				s.trk[g].tail(r.pub->last_seq); /* losses at the very end */
			miss += s.trk[g].missing();
			dups += s.trk[g].dups();
			reord += s.trk[g].reordered();
			old += s.trk[g].too_old();
		}
		uint64_t rx_drops = 0;
		std::string reasons;
		with_counters(*s.n, [&](const auto &k) {
			rx_drops = k.rx_drops();
			k.for_each([&](const xstat_name &n, uint64_t v) {
				if (n.kind == counter_kind::drop && n.rx() && v != 0)
					reasons += std::string(" ") + n.name + "=" + std::to_string(v);
			});
		});
		printf("sub%zu: received=%lu missing=%lu dup=%lu reordered=%lu too_old=%lu malformed=%lu foreign=%lu "
		       "rx_drops=%lu\n",
		       i, (unsigned long)s.received.load(), (unsigned long)miss, (unsigned long)dups,
		       (unsigned long)reord, (unsigned long)old, (unsigned long)s.malformed.load(),
		       (unsigned long)s.foreign.load(), (unsigned long)rx_drops);
		if (rx_drops != 0) /* each reason by name: on a real link most are frames
				    * that are not RoCE at all (the kernel's ICMPv6, ...) */
			printf("sub%zu: rx_drops by reason:%s\n", i, reasons.c_str());
		printf("sub%zu: latency_ns samples=%lu p50=%lu p99=%lu p99.9=%lu max=%lu (one-way, TSC)\n", i,
		       (unsigned long)s.hist.count(), (unsigned long)s.hist.quantile_ns(0.5),
		       (unsigned long)s.hist.quantile_ns(0.99), (unsigned long)s.hist.quantile_ns(0.999),
		       (unsigned long)s.max_ns.load());
		if (!s.n->verbs) { /* verbs: the kernel sends IGMP/MLD (rdma_cm on RoCE) */
			const auto &mc = s.n->dev.mcast_counters();
			printf("sub%zu: driver sent igmp_report=%lu igmp_leave=%lu mld_report=%lu mld_leave=%lu "
			       "tx_failed=%lu\n",
			       i, (unsigned long)mc.igmp_reports, (unsigned long)mc.igmp_leaves,
			       (unsigned long)mc.mld_reports, (unsigned long)mc.mld_leaves, (unsigned long)mc.tx_failed);
		}
		if (i < r.seen.size())
			printf("sub%zu: switch saw igmp_report=%lu igmp_leave=%lu mld_join=%lu mld_leave=%lu other=%lu\n", i,
			       (unsigned long)r.seen[i].igmp_report, (unsigned long)r.seen[i].igmp_leave,
			       (unsigned long)r.seen[i].mld_join, (unsigned long)r.seen[i].mld_leave,
			       (unsigned long)r.seen[i].other);
		if (!c.hist_csv.empty()) {
			const std::string csv = with_suffix(c.hist_csv, i, r.subs.size());
			if (int rc = perf::write_hist_csv(s.hist, csv); rc != 0) {
				fprintf(stderr, "rdgram-mcast: cannot write %s: %s\n", csv.c_str(), strerror(rc));
				st = 1;
				continue;
			}
			printf("sub%zu: latency histogram -> %s\n", i, csv.c_str());
			if (!c.hist_plot.empty()) {
				const std::string out = with_suffix(c.hist_plot, i, r.subs.size());
				std::string err;
				const std::string title = "rdgram-mcast sub" + std::to_string(i) + ": one-way latency, " +
							  std::to_string(s.hist.count()) + " messages";
				if (perf::plot_hist(csv, out, title, &err) != 0) {
					fprintf(stderr, "rdgram-mcast: --hist-plot: %s\n", err.c_str());
					st = 3;
				} else {
					printf("sub%zu: latency plot -> %s\n", i, out.c_str());
				}
			}
		}
	}
	if (r.pub_tx != nullptr && r.sw_copy_fail != 0)
		printf("switch: %lu copies failed (mbuf pool or ring full)\n", (unsigned long)r.sw_copy_fail);
	return st;
}

rte_ether_addr mac_n(uint8_t n)
{
	rte_ether_addr m{{0x02, 0x00, 0x00, 0x00, 0x0c, n}};
	return m;
}

} // namespace

int main(int argc, char **argv)
{
	split_args sa = split_command_line(argc, argv);
	mcast_config c;
	cli::parser app{"rdgram-mcast",
			"rdgram-mcast: UD multicast publisher/subscriber (market-data style) over the soft RoCEv2 "
			"driver, or an RDMA device with --driver verbs.\nUsage: rdgram-mcast [EAL args --] [options]. With no options: one publisher and two "
			"subscribers in one process (--mode both) over net_ring ports, groups 239.1.1.1 and ff15::1:1.",
			34};
	std::string cfg_path, mode;
	std::vector<std::string> groups, addrs, skip, dup;
	uint32_t subs = 0, size = 0, qpn = 0;
	int64_t pub_id = -1;
	int64_t qkey = -1;
	double rate = -1, duration = -1, status = -1, idle = -1;
	int64_t count = -1;
	std::string port, hist_csv, hist_plot, driver, device, local;
	app.add("-c,--config", cfg_path, "TOML config file ([mcast], [eal]); options below override it");
	app.add("--mode", mode, "pub, sub, or both (publisher + --subscribers in one process) [both]")
		.one_of({"pub", "sub", "both"});
	app.add("-g,--group", groups, "multicast group, IPv4 224/4 or IPv6 ff00::/8; repeat for several, "
				      "at most 8 [239.1.1.1 and ff15::1:1]");
	app.add("--subscribers", subs, "both: subscribers in the process [2]").range(1u, 8u);
	app.add("--rate", rate, "publisher: messages per second per group, token bucket on the TSC; 0: "
				"unpaced [100000]").range(0.0, 1e9);
	app.add("-n,--count", count, "publisher: messages per group; 0: until --duration [20000]")
		.range(int64_t(0), int64_t(1) << 48);
	app.add("--duration", duration, "seconds to run; 0: until --count (pub) or idle (sub) [0]")
		.range(0.0, 604800.0);
	app.add("-s,--size", size, "payload bytes per message, 32-byte header included [64]")
		.range(uint32_t(sizeof(msg_hdr)), 4096u);
	app.add("--status-interval", status, "seconds between status lines on stderr; 0: none [1]")
		.range(0.0, 3600.0);
	app.add("--skip-seq", skip, "fault: never send this sequence number (a gap); repeatable [none]");
	app.add("--dup-seq", dup, "fault: send this sequence number twice (a duplicate); repeatable [none]");
	app.add("--qkey", qkey, "Q_Key of the groups' QPs, below 0x80000000 [0x11111111]")
		.range(int64_t(0), int64_t(0x7fffffff));
	app.add("--qpn", qpn, "local QP number [0x100]").range(2u, 0xfffffeu);
	app.add("--publisher-id", pub_id, "publisher id carried in every message; subscribers count "
					  "others as foreign [1]").range(int64_t(0), int64_t(0xffffffff));
	app.add("--idle-timeout", idle, "sub: stop this many seconds after the last message (none yet: run until --duration or Ctrl-C) [2]")
		.range(0.01, 3600.0);
	app.add("--port", port, "pub/sub: ethdev devargs, e.g. net_af_packet0,iface=veth0 [none]");
	app.add("--address", addrs, "pub/sub: the port's IPv4/IPv6 address; repeat for both families [none]");
	app.add("--driver", driver, "soft (RoCEv2 over a DPDK port) or verbs (an RDMA device; groups joined "
				    "through rdma_cm, the subscriber's QP attached with ibv_attach_mcast) [soft]")
		.one_of({"soft", "verbs"});
	app.add("--device", device, "verbs: RDMA device name [the first with an active port]");
	app.add("--local", local, "verbs: the port's IP address rdma_cm joins from (InfiniBand: its IPoIB "
				  "address) [the port's RoCEv2 GID of the group's family]");
	app.add("--hist-csv", hist_csv, "write each subscriber's one-way latency histogram as CSV "
					"(lower_ns,count,cumulative_fraction); -subK before the suffix with "
					"several subscribers [none]");
	app.add("--hist-plot", hist_plot, "draw the histogram with gnuplot into FILE.svg or FILE.png "
					  "(CSV next to it unless --hist-csv) [none]");
	if (int rc = app.parse(sa.app); rc >= 0)
		return rc;
	try {
		if (!cfg_path.empty())
			load_mcast_config(cfg_path, c);
	} catch (const config_error &e) {
		fprintf(stderr, "rdgram-mcast: %s\n", e.what());
		return 2;
	}
	if (!mode.empty())
		c.mode = mode;
	if (!groups.empty()) {
		c.groups.clear();
		for (const auto &g : groups) {
			wire::gid x;
			if (!parse_ip(g, &x) || !x.is_multicast()) {
				fprintf(stderr, "rdgram-mcast: --group %s is not an IPv4 or IPv6 multicast address\n",
					g.c_str());
				return 2;
			}
			c.groups.push_back(x);
		}
	}
	if (!addrs.empty()) {
		c.addresses.clear();
		for (const auto &a : addrs) {
			wire::gid x;
			if (!parse_ip(a, &x) || x.is_multicast() || x.is_zero()) {
				fprintf(stderr, "rdgram-mcast: --address %s is not a unicast IP address\n", a.c_str());
				return 2;
			}
			c.addresses.push_back(x);
		}
	}
	if (subs != 0)
		c.subscribers = subs;
	if (size != 0)
		c.size = size;
	if (qpn != 0)
		c.qpn = qpn;
	if (pub_id >= 0)
		c.publisher_id = uint32_t(pub_id);
	if (qkey >= 0)
		c.qkey = uint32_t(qkey);
	if (rate >= 0)
		c.rate = rate;
	if (count >= 0)
		c.count = uint64_t(count);
	if (duration >= 0)
		c.duration = duration;
	if (status >= 0)
		c.status_interval = status;
	if (idle >= 0)
		c.idle_timeout = idle;
	if (!port.empty())
		c.port = port;
	if (!driver.empty())
		c.driver = driver;
	if (!device.empty())
		c.device = device;
	if (!local.empty())
		c.local = local;
	if (!hist_csv.empty())
		c.hist_csv = hist_csv;
	if (!hist_plot.empty())
		c.hist_plot = hist_plot;
	if (!skip.empty()) {
		c.skip_seq.clear();
		if (parse_seq_list(skip, c.skip_seq, "--skip-seq") != 0)
			return 2;
	}
	if (!dup.empty()) {
		c.dup_seq.clear();
		if (parse_seq_list(dup, c.dup_seq, "--dup-seq") != 0)
			return 2;
	}
	if (c.groups.empty()) {
		wire::gid a, b;
		parse_ip("239.1.1.1", &a);
		parse_ip("ff15::1:1", &b);
		c.groups = {a, b};
	}
	/* Refusals: one line, exit 2. */
	const bool has_pub = c.mode != "sub", has_sub = c.mode != "pub";
	const bool verbs = c.driver == "verbs";
	const char *bad = nullptr;
	if (c.groups.size() > 8)
		bad = "at most 8 groups";
	else if (has_pub && c.count == 0 && c.duration == 0)
		bad = "the publisher needs --count or --duration";
#ifndef RDGRAM_MCAST_VERBS
	else if (verbs)
		bad = "this rdgram-mcast was built without the verbs driver's multicast (libibverbs-dev, librdmacm-dev)";
#endif
	else if (verbs && (!c.port.empty() || !c.addresses.empty()))
		bad = "--port/--address are for the soft driver; verbs takes --device and --local";
	else if (verbs && qkey >= 0)
		bad = "with the verbs driver the Q_Key is the group's (rdma_cm gives it): --qkey does not apply";
	else if (!verbs && (!c.device.empty() || !c.local.empty()))
		bad = "--device/--local are for --driver verbs";
	else if (verbs)
		; /* the rest are the soft driver's rules */
	else if (c.mode != "both" && c.port.empty())
		bad = "--mode pub/sub need --port (an ethdev's devargs)";
	else if (c.mode != "both" && c.addresses.empty())
		bad = "--mode pub/sub need --address";
	else if (c.mode == "both" && (!c.port.empty() || !c.addresses.empty()))
		bad = "--port/--address are for --mode pub/sub; --mode both makes its own net_ring ports";
	else if (!has_pub && (!c.skip_seq.empty() || !c.dup_seq.empty()))
		bad = "--skip-seq/--dup-seq are publisher faults (--mode pub or both)";
	else if (!has_sub && (!c.hist_csv.empty() || !c.hist_plot.empty()))
		bad = "--hist-csv/--hist-plot need a subscriber (--mode sub or both)";
	else if (!c.hist_plot.empty() && !(c.hist_plot.ends_with(".svg") || c.hist_plot.ends_with(".png")))
		bad = "--hist-plot wants a file ending in .svg or .png";
	if (bad == nullptr && !verbs && c.mode != "both")
		for (const auto &g : c.groups)
			if (sgid_index_for(c.addresses, g) < 0)
				bad = "every group needs an --address of its family (IPv4 or IPv6)";
	if (bad != nullptr) {
		fprintf(stderr, "rdgram-mcast: %s (see --help)\n", bad);
		return 2;
	}
	if (!c.hist_plot.empty() && c.hist_csv.empty())
		c.hist_csv = c.hist_plot.substr(0, c.hist_plot.rfind('.')) + ".csv";

	runtime rt;
	int init_rc;
	{
		/* The runtime directory and telemetry socket owner-only, as in
		 * rdgram-perf. */
		telemetry::private_umask um;
		init_rc = rt.init(sa.eal_given ? sa.eal : c.eal_args, argv[0]);
	}
	if (init_rc != 0) {
		fprintf(stderr, "rdgram-mcast: %s\n", rt.error().c_str());
		return 1;
	}
	{
		std::string err;
		if (int rc = telemetry::secure_socket(&err); rc != 0 && rc != ENOENT) {
			fprintf(stderr, "rdgram-mcast: %s\n", err.c_str());
			rt.fini();
			return 1;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	int st = 0;
	{
		run r;
		r.c = &c;
		r.rt = &rt;
		r.hz = rte_get_tsc_hz();
		const unsigned worker = rte_get_next_lcore(-1, 1, 0);
		const int socket = worker < RTE_MAX_LCORE ? int(rte_lcore_to_socket_id(worker)) : SOCKET_ID_ANY;
		int rc = 0;
#ifdef RDGRAM_MCAST_VERBS
		if (verbs) {
			/* pub/sub: one node; both: a publisher QP and --subscribers
			 * QPs on the same device (the HCA delivers the group's
			 * datagrams to every attached QP). */
			const unsigned nsub = c.mode == "both" ? c.subscribers : c.mode == "sub" ? 1 : 0;
			if (has_pub) {
				auto n = std::make_unique<node>();
				n->name = "pub";
				rc = open_verbs_node(r, *n);
				if (rc == 0)
					rc = setup_publisher(r, *n, {});
				r.nodes.push_back(std::move(n));
			}
			for (unsigned k = 0; rc == 0 && k < nsub; k++) {
				auto n = std::make_unique<node>();
				n->name = "sub" + std::to_string(k);
				rc = open_verbs_node(r, *n);
				if (rc == 0)
					rc = setup_subscriber(r, *n);
				r.nodes.push_back(std::move(n));
			}
		} else
#endif
		if (c.mode == "both") {
			wire::gid v4, v6;
			/* Everyone on one subnet; the publisher is .1 / ::1. */
			auto addrs_of = [&](unsigned i) {
				parse_ip("10.12.0." + std::to_string(i + 1), &v4);
				parse_ip("fd00:12::" + std::to_string(i + 1), &v6);
				return std::vector<wire::gid>{v4, v6};
			};
			auto ring = [](const std::string &n) {
				return rte_ring_create(n.c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
			};
			rte_ring *prx = ring("mc_pub_rx");
			r.pub_tx = ring("mc_pub_tx");
			int pp = prx && r.pub_tx ? rte_eth_from_rings("mc_pub", &prx, 1, &r.pub_tx, 1, 0) : -1;
			if (pp < 0) {
				fprintf(stderr, "rdgram-mcast: cannot create the publisher's net_ring port\n");
				rc = ENOMEM;
			}
			if (rc == 0) {
				auto n = std::make_unique<node>();
				n->name = "pub";
				rc = open_node(r, *n, uint16_t(pp), mac_n(1), addrs_of(0), socket);
				if (rc == 0)
					rc = setup_publisher(r, *n, addrs_of(0));
				r.nodes.push_back(std::move(n));
			}
			for (unsigned k = 0; rc == 0 && k < c.subscribers; k++) {
				rte_ring *rx = ring("mc_sub_rx" + std::to_string(k));
				rte_ring *tx = ring("mc_sub_tx" + std::to_string(k));
				const std::string nm = "mc_sub" + std::to_string(k);
				int sp = rx && tx ? rte_eth_from_rings(nm.c_str(), &rx, 1, &tx, 1, 0) : -1;
				if (sp < 0) {
					fprintf(stderr, "rdgram-mcast: cannot create %s\n", nm.c_str());
					rc = ENOMEM;
					break;
				}
				r.sub_rx.push_back(rx);
				r.sub_tx.push_back(tx);
				auto n = std::make_unique<node>();
				n->name = "sub" + std::to_string(k);
				rc = open_node(r, *n, uint16_t(sp), mac_n(uint8_t(k + 2)), addrs_of(k + 1), socket);
				if (rc == 0)
					rc = setup_subscriber(r, *n);
				r.nodes.push_back(std::move(n));
			}
			r.seen.resize(c.subscribers);
		} else {
			uint16_t pid = 0;
			if (std::string err; (rc = apps::probe_port(c.port, &pid, &err)) != 0)
				fprintf(stderr, "rdgram-mcast: %s\n", err.c_str());
			if (rc == 0) {
				auto n = std::make_unique<node>();
				n->name = c.mode;
				rte_ether_addr mac;
				rte_eth_macaddr_get(pid, &mac);
				rc = open_node(r, *n, pid, mac, c.addresses, socket);
				if (rc == 0)
					rc = c.mode == "pub" ? setup_publisher(r, *n, c.addresses) : setup_subscriber(r, *n);
				r.nodes.push_back(std::move(n));
			}
		}
		if (rc == 0) {
			r.start = rte_rdtsc();
			r.end_tsc = c.duration > 0 ? r.start + uint64_t(c.duration * double(r.hz)) : 0;
			r.idle_ticks = uint64_t(c.idle_timeout * double(r.hz));
			if (r.pub != nullptr)
				r.pub->pace.init(c.rate, r.hz, r.start);
			printf("rdgram-mcast: mode %s, driver %s, %zu group(s):", c.mode.c_str(), c.driver.c_str(),
			       c.groups.size());
			for (const auto &g : c.groups)
				printf(" %s", format_gid(g).c_str());
			printf(", %zu subscriber(s), rate %.0f msg/s/group, size %u\n", r.subs.size(), c.rate, c.size);
			fflush(stdout);
			if (worker < RTE_MAX_LCORE) {
				launch_on_lcore(poll_main, &r, worker);
				std::vector<uint64_t> last(r.subs.size(), 0);
				uint64_t last_tsc = r.start;
				const uint64_t every = uint64_t(c.status_interval * double(r.hz));
				uint64_t next = r.start + every;
				while (!r.finished.load(std::memory_order_acquire)) {
					rte_delay_us_sleep(10000);
					const uint64_t now = rte_rdtsc();
					if (every != 0 && now >= next) {
						print_status(r, now, last, last_tsc);
						next += every;
					}
					if (g_stop)
						r.stop.store(true, std::memory_order_relaxed);
				}
				wait_on_lcore(worker);
			} else {
				poll_main(&r); /* one lcore: no live status line */
			}
			leave_all(r);
			st = report(r);
		} else {
			st = 1;
		}
#ifdef RDGRAM_MCAST_VERBS
		for (auto &n : r.nodes)
			if (n->verbs)
				close_verbs_node(r, *n);
#endif
		for (auto &n : r.nodes)
			if (n->polled_by != nullptr) {
				rt.ctl().remove_poller(&soft::soft_device::control_poller, &n->dev);
				n->polled_by = nullptr;
			}
		delete r.pub;
		r.subs.clear();
		r.nodes.clear();
	}
	rt.fini();
	return st;
}
