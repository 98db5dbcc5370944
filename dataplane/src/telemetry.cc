/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * /rdgram/ telemetry commands and the rdgram log types (telemetry.h).
 */
#include "rdgram/telemetry.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_lcore.h>
#include <rte_telemetry.h>

#include "rdgram/ah_registry.h"
#include "rdgram/ah_service.h"
#include "rdgram/config.h"
#include "rdgram/control.h"
#include "rdgram/crc32_choose.h"
#include "rdgram/device.h"

namespace rdgram::telemetry {

/* ---- seqlock ------------------------------------------------------------ */

/* The seqlock in C++ atomics (Boehm, "Can seqlocks get along with
 * programming language memory models?", 2012): the writer makes the
 * sequence odd, then stores the words, then makes it even with a release
 * store; the data words are atomics, so a reader racing a writer reads
 * torn values without undefined behaviour and throws them away. Each data
 * word is stored with release and loaded with acquire (the paper's
 * variant without fences): a reader that sees a new word then sees an
 * odd or newer sequence. On x86 these are the plain moves the relaxed
 * ones were; and ThreadSanitizer, which does not model
 * atomic_thread_fence (GCC warns -Wtsan), sees the ordering. */
void seqlock_write(std::atomic<uint64_t> &seq, std::atomic<uint64_t> *w, const void *src, size_t nwords)
{
	const uint64_t s = seq.load(std::memory_order_relaxed);
	seq.store(s + 1, std::memory_order_relaxed);
	const auto *p = static_cast<const uint8_t *>(src);
	for (size_t i = 0; i < nwords; i++) {
		uint64_t v;
		memcpy(&v, p + 8 * i, 8);
		w[i].store(v, std::memory_order_release);
	}
	seq.store(s + 2, std::memory_order_release);
}

bool seqlock_read(const std::atomic<uint64_t> &seq, const std::atomic<uint64_t> *w, void *dst, size_t nwords)
{
	auto *p = static_cast<uint8_t *>(dst);
	for (unsigned tries = 0; tries < 1000000; tries++) {
		const uint64_t s0 = seq.load(std::memory_order_acquire);
		if (s0 & 1)
			continue;
		for (size_t i = 0; i < nwords; i++) {
			/* Acquire: the second sequence load below cannot see
			 * an older value than the writer's that stored v. */
			const uint64_t v = w[i].load(std::memory_order_acquire);
			memcpy(p + 8 * i, &v, 8);
		}
		if (seq.load(std::memory_order_relaxed) == s0)
			return s0 != 0;
	}
	return false; /* a writer that never finishes: report nothing */
}

static_assert(sizeof(ah_client_counters) == sizeof(qp_snapshot::client));

void qp_publisher::publish_snapshot(qp_snapshot &s, const ah_client *c, uint64_t now)
{
	if (c != nullptr) {
		memcpy(s.client, &c->counters(), sizeof(s.client));
		s.waiting_messages = c->waiting_messages();
		s.waiting_destinations = c->waiting_destinations();
		s.has_client = 1;
	}
	s.published_tsc = now;
	seqlock_write(seq_, w_, &s, nwords);
	next_ = now + interval_;
}

bool qp_publisher::read(qp_snapshot *out) const
{
	return seqlock_read(seq_, w_, out, nwords);
}

/* ---- the attachment ----------------------------------------------------- */

namespace {

/* The control thread's figures, published every 100 ms. */
struct ah_summary {
	uint64_t have_registry, capacity, live, unreferenced, memory_bytes, entry_bytes;
	uint64_t created, reused, evicted, device_enomem_retries, failed;
	uint64_t device_live, reclaim_pending;
	uint64_t have_service, svc_requests, svc_answered_cached, svc_created, svc_failed, svc_neigh_waits,
		svc_app_creates, svc_app_destroys;
	uint64_t published_tsc;
};
constexpr size_t summary_words = sizeof(ah_summary) / 8;
static_assert(sizeof(ah_summary) % 8 == 0);

struct published_summary {
	std::atomic<uint64_t> seq{0};
	std::atomic<uint64_t> w[summary_words]{};
};

struct port_copy {
	std::string name, driver, mac;
	int port_id;
	port_attr attr;
};

struct state {
	std::mutex mu; /* telemetry thread vs attach/detach; never a poll thread */
	bool attached = false;
	attachment a;
	std::vector<port_copy> ports;
	published_summary sum;
	uint64_t next_summary = 0;
};

state &g()
{
	static state s;
	return s;
}

bool summary_poller(void *arg, uint64_t now)
{
	auto *s = static_cast<state *>(arg);
	if (now < s->next_summary)
		return false;
	s->next_summary = now + rte_get_tsc_hz() / 10;
	/* s->a is not modified while the poller is installed (attach installs
	 * it last, detach removes it first). */
	const attachment &a = s->a;
	ah_summary m;
	memset(&m, 0, sizeof(m));
	ah_registry *reg = a.registry;
	if (a.service != nullptr) {
		reg = &a.service->registry();
		const ah_service_stats st = a.service->stats(); /* inline on this thread */
		m.have_service = 1;
		m.svc_requests = st.requests;
		m.svc_answered_cached = st.answered_cached;
		m.svc_created = st.created;
		m.svc_failed = st.failed;
		m.svc_neigh_waits = st.neigh_waits;
		m.svc_app_creates = st.app_creates;
		m.svc_app_destroys = st.app_destroys;
	}
	if (reg != nullptr) {
		m.have_registry = 1;
		m.capacity = reg->capacity();
		m.live = reg->size();
		m.unreferenced = reg->unreferenced();
		m.memory_bytes = reg->memory_bytes();
		m.entry_bytes = ah_registry::entry_bytes();
		const ah_registry_stats &rs = reg->stats();
		m.created = rs.created;
		m.reused = rs.reused;
		m.evicted = rs.evicted;
		m.device_enomem_retries = rs.device_enomem_retries;
		m.failed = rs.failed;
	}
	for (device *d : a.ah_devices) {
		m.device_live += d->live_ahs();
		m.reclaim_pending += d->reclaim_pending();
	}
	m.published_tsc = now;
	seqlock_write(s->sum.seq, s->sum.w, &m, summary_words);
	return false; /* cheap: never keeps the control thread from napping */
}

/* Telemetry strings are at most RTE_TEL_MAX_STRING_LEN. */
void add_str(rte_tel_data *d, const char *k, const std::string &v)
{
	rte_tel_data_add_dict_string(d, k, v.substr(0, RTE_TEL_MAX_STRING_LEN - 1).c_str());
}

double age_s(uint64_t tsc)
{
	const uint64_t now = rte_get_tsc_cycles();
	return now > tsc ? double(now - tsc) / double(rte_get_tsc_hz()) : 0.0;
}

int cmd_lcores(const char *, const char *, rte_tel_data *d)
{
	state &s = g();
	std::lock_guard<std::mutex> lk(s.mu);
	rte_tel_data_start_dict(d);
	if (!s.attached)
		return 0;
	for (const lcore_info &l : s.a.lcores) {
		rte_tel_data *c = rte_tel_data_alloc();
		if (c == nullptr)
			return -ENOMEM;
		rte_tel_data_start_dict(c);
		rte_tel_data_add_dict_u64(c, "lcore", l.lcore);
		rte_tel_data_add_dict_u64(c, "cpu", l.cpu);
		rte_tel_data_add_dict_int(c, "numa_node", l.numa);
		rte_tel_data_add_dict_int(c, "socket_id", int(rte_lcore_to_socket_id(l.lcore)));
		add_str(c, "role", l.role);
		const std::string key = "lcore" + std::to_string(l.lcore) + (l.role.empty() ? "" : "_" + l.role);
		rte_tel_data_add_dict_container(d, key.c_str(), c, 0);
	}
	return 0;
}

int cmd_ports(const char *, const char *, rte_tel_data *d)
{
	state &s = g();
	std::lock_guard<std::mutex> lk(s.mu);
	rte_tel_data_start_dict(d);
	if (!s.attached)
		return 0;
	for (const port_copy &p : s.ports) {
		rte_tel_data *c = rte_tel_data_alloc();
		if (c == nullptr)
			return -ENOMEM;
		rte_tel_data_start_dict(c);
		add_str(c, "driver", p.driver);
		rte_tel_data_add_dict_int(c, "port_id", p.port_id);
		rte_tel_data_add_dict_string(c, "link_layer",
					     p.attr.link == link_layer::ethernet ? "ethernet" : "infiniband");
		rte_tel_data_add_dict_u64(c, "active_mtu", p.attr.active_mtu);
		rte_tel_data_add_dict_u64(c, "max_ah", p.attr.max_ah);
		rte_tel_data_add_dict_u64(c, "pkey", p.attr.pkey);
		rte_tel_data_add_dict_int(c, "numa_node", p.attr.numa_node);
		if (!p.mac.empty())
			add_str(c, "mac", p.mac);
		for (size_t i = 0; i < p.attr.gids.size() && i < 8; i++)
			add_str(c, ("gid" + std::to_string(i)).c_str(), format_gid(p.attr.gids[i]));
		if (p.port_id >= 0 && rte_eth_dev_is_valid_port(uint16_t(p.port_id))) {
			rte_ether_addr mac;
			if (p.mac.empty() && rte_eth_macaddr_get(uint16_t(p.port_id), &mac) == 0) {
				char b[RTE_ETHER_ADDR_FMT_SIZE];
				rte_ether_format_addr(b, sizeof(b), &mac);
				rte_tel_data_add_dict_string(c, "mac", b);
			}
			rte_eth_stats st;
			if (rte_eth_stats_get(uint16_t(p.port_id), &st) == 0) {
				rte_tel_data_add_dict_u64(c, "eth_ipackets", st.ipackets);
				rte_tel_data_add_dict_u64(c, "eth_opackets", st.opackets);
				rte_tel_data_add_dict_u64(c, "eth_ibytes", st.ibytes);
				rte_tel_data_add_dict_u64(c, "eth_obytes", st.obytes);
				rte_tel_data_add_dict_u64(c, "eth_imissed", st.imissed);
				rte_tel_data_add_dict_u64(c, "eth_ierrors", st.ierrors);
				rte_tel_data_add_dict_u64(c, "eth_oerrors", st.oerrors);
				rte_tel_data_add_dict_u64(c, "eth_rx_nombuf", st.rx_nombuf);
			}
		}
		rte_tel_data_add_dict_container(d, p.name.c_str(), c, 0);
	}
	return 0;
}

/* The ah_client_counters words, named as in ah_service.h. */
template <class F> void for_each_client_counter(const uint64_t *w, F &&f)
{
	ah_client_counters c;
	memcpy(&c, w, sizeof(c));
	f("hits", c.hits);
	f("misses", c.misses);
	f("requests", c.requests);
	f("flushed", c.flushed);
	f("reply_bad_wc", c.reply_bad_wc);
#define X(name, desc) f(#name, c.name);
	RDGRAM_PEND_DROPS(X)
#undef X
}

int cmd_qps(const char *, const char *params, rte_tel_data *d)
{
	state &s = g();
	std::lock_guard<std::mutex> lk(s.mu);
	rte_tel_data_start_dict(d);
	if (!s.attached)
		return 0;
	const std::string only = params != nullptr ? params : "";
	bool found = false;
	for (const qp_info &q : s.a.qps) {
		if (!only.empty() && only != q.name)
			continue;
		found = true;
		rte_tel_data *c = rte_tel_data_alloc();
		if (c == nullptr)
			return -ENOMEM;
		rte_tel_data_start_dict(c);
		rte_tel_data_add_dict_u64(c, "lcore", q.lcore);
		rte_tel_data_add_dict_int(c, "port_id", q.port_id);
		rte_tel_data_add_dict_u64(c, "qpn", q.qpn);
		qp_snapshot snap;
		const bool have = q.pub != nullptr && q.pub->read(&snap);
		rte_tel_data_add_dict_int(c, "published", have ? 1 : 0);
		if (have) {
			/* Microseconds since the poll thread last published. */
			rte_tel_data_add_dict_u64(c, "age_us", uint64_t(age_s(snap.published_tsc) * 1e6));
			if (snap.driver_name() != nullptr)
				rte_tel_data_add_dict_string(c, "driver", snap.driver_name());
			snap.for_each([&](const xstat_name &n, uint64_t v) { rte_tel_data_add_dict_u64(c, n.name, v); });
			rte_tel_data_add_dict_u64(c, "rx_drops", snap.drops(drop_side::rx));
			rte_tel_data_add_dict_u64(c, "tx_drops", snap.drops(drop_side::tx));
			rte_tel_data_add_dict_u64(c, "drops", snap.drops());
			if (snap.has_client) {
				for_each_client_counter(snap.client, [&](const char *name, uint64_t v) {
					rte_tel_data_add_dict_u64(c, (std::string("ah_") + name).c_str(), v);
				});
				rte_tel_data_add_dict_u64(c, "ah_waiting_messages", snap.waiting_messages);
			}
		}
		rte_tel_data_add_dict_container(d, q.name.c_str(), c, 0);
	}
	if (!only.empty() && !found)
		return -EINVAL; /* DPDK answers null for a failed command */
	return 0;
}

/* One QP's counters as DPDK's /ethdev/xstats: name -> {value, kind,
 * description}. */
int cmd_xstats(const char *, const char *params, rte_tel_data *d)
{
	state &s = g();
	std::lock_guard<std::mutex> lk(s.mu);
	rte_tel_data_start_dict(d);
	if (!s.attached)
		return 0;
	if (params == nullptr || *params == 0)
		return -EINVAL; /* which QP */
	for (const qp_info &q : s.a.qps) {
		if (q.name != params)
			continue;
		qp_snapshot snap;
		if (q.pub == nullptr || !q.pub->read(&snap))
			return 0; /* not published yet: empty */
		int rc = 0;
		snap.for_each([&](const xstat_name &n, uint64_t v) {
			rte_tel_data *c = rte_tel_data_alloc();
			if (c == nullptr) {
				rc = -ENOMEM;
				return;
			}
			rte_tel_data_start_dict(c);
			rte_tel_data_add_dict_u64(c, "value", v);
			rte_tel_data_add_dict_string(c, "kind", counter_kind_name(n.kind));
			add_str(c, "description", n.desc);
			rte_tel_data_add_dict_container(d, n.name, c, 0);
		});
		return rc;
	}
	return -EINVAL;
}

/* The ICRC plan (crc32_choose.h): the kernel of each size class, whether
 * measured, and the ns per call it timed. Made at the first call when no
 * queue made it yet. */
int cmd_icrc(const char *, const char *, rte_tel_data *d)
{
	const crc32_plan &p = crc32_chosen();
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "plan", crc32_plan_describe(p).c_str());
	rte_tel_data_add_dict_int(d, "measured", p.measured ? 1 : 0);
	rte_tel_data_add_dict_u64(d, "took_us", p.took_us);
	for (unsigned c = 0; c < crc32_plan::classes; c++) {
		rte_tel_data *t = rte_tel_data_alloc();
		if (t == nullptr)
			return -ENOMEM;
		rte_tel_data_start_dict(t);
		rte_tel_data_add_dict_string(t, "kernel", crc32_kernel_name(p.kernel[c]));
		for (crc32_kernel k : {crc32_kernel::table, crc32_kernel::pclmul, crc32_kernel::avx2, crc32_kernel::avx512})
			if (const float ns = p.ns[c][unsigned(k)]; ns > 0)
				rte_tel_data_add_dict_u64(t, (std::string(crc32_kernel_name(k)) + "_ps").c_str(),
							  uint64_t(ns * 1000));
		const std::string name = c + 1 < crc32_plan::classes ? "up_to_" + std::to_string(crc32_plan::class_len[c])
								     : "above_" + std::to_string(crc32_plan::class_len[c - 1]);
		rte_tel_data_add_dict_container(d, name.c_str(), t, 0);
	}
	return 0;
}

int cmd_ah(const char *, const char *, rte_tel_data *d)
{
	state &s = g();
	std::lock_guard<std::mutex> lk(s.mu);
	rte_tel_data_start_dict(d);
	if (!s.attached)
		return 0;
	ah_summary m;
	const bool have = seqlock_read(s.sum.seq, s.sum.w, &m, summary_words);
	rte_tel_data_add_dict_int(d, "published", have ? 1 : 0);
	if (!have)
		return 0;
	rte_tel_data_add_dict_u64(d, "age_us", uint64_t(age_s(m.published_tsc) * 1e6));
	if (m.have_registry) {
		rte_tel_data_add_dict_u64(d, "live", m.live);
		rte_tel_data_add_dict_u64(d, "capacity", m.capacity);
		rte_tel_data_add_dict_u64(d, "referenced", m.live - m.unreferenced);
		rte_tel_data_add_dict_u64(d, "unreferenced", m.unreferenced);
		rte_tel_data_add_dict_u64(d, "memory_bytes", m.memory_bytes);
		rte_tel_data_add_dict_u64(d, "entry_bytes", m.entry_bytes);
		rte_tel_data_add_dict_u64(d, "created", m.created);
		rte_tel_data_add_dict_u64(d, "reused", m.reused);
		rte_tel_data_add_dict_u64(d, "evicted", m.evicted);
		rte_tel_data_add_dict_u64(d, "device_enomem_retries", m.device_enomem_retries);
		rte_tel_data_add_dict_u64(d, "failed", m.failed);
	}
	rte_tel_data_add_dict_u64(d, "device_live_ahs", m.device_live);
	rte_tel_data_add_dict_u64(d, "reclaim_pending", m.reclaim_pending);
	if (m.have_service) {
		rte_tel_data_add_dict_u64(d, "svc_requests", m.svc_requests);
		rte_tel_data_add_dict_u64(d, "svc_answered_cached", m.svc_answered_cached);
		rte_tel_data_add_dict_u64(d, "svc_created", m.svc_created);
		rte_tel_data_add_dict_u64(d, "svc_failed", m.svc_failed);
		rte_tel_data_add_dict_u64(d, "svc_neigh_waits", m.svc_neigh_waits);
		rte_tel_data_add_dict_u64(d, "svc_app_creates", m.svc_app_creates);
		rte_tel_data_add_dict_u64(d, "svc_app_destroys", m.svc_app_destroys);
	}
	return 0;
}

int cmd_pending(const char *, const char *, rte_tel_data *d)
{
	state &s = g();
	std::lock_guard<std::mutex> lk(s.mu);
	rte_tel_data_start_dict(d);
	if (!s.attached)
		return 0;
	uint64_t msgs = 0, dests = 0, drops = 0, clients = 0;
	for (const qp_info &q : s.a.qps) {
		qp_snapshot snap;
		if (q.pub == nullptr || !q.pub->read(&snap) || !snap.has_client)
			continue;
		clients++;
		msgs += snap.waiting_messages;
		dests += snap.waiting_destinations;
		ah_client_counters c;
		memcpy(&c, snap.client, sizeof(c));
		drops += c.drops();
		rte_tel_data *t = rte_tel_data_alloc();
		if (t == nullptr)
			return -ENOMEM;
		rte_tel_data_start_dict(t);
		rte_tel_data_add_dict_u64(t, "waiting_messages", snap.waiting_messages);
		rte_tel_data_add_dict_u64(t, "waiting_destinations", snap.waiting_destinations);
		for_each_client_counter(snap.client,
					[&](const char *name, uint64_t v) { rte_tel_data_add_dict_u64(t, name, v); });
		rte_tel_data_add_dict_u64(t, "drops", c.drops());
		rte_tel_data_add_dict_container(d, q.name.c_str(), t, 0);
	}
	rte_tel_data_add_dict_u64(d, "clients", clients);
	rte_tel_data_add_dict_u64(d, "total_waiting_messages", msgs);
	rte_tel_data_add_dict_u64(d, "total_waiting_destinations", dests);
	rte_tel_data_add_dict_u64(d, "total_drops", drops);
	return 0;
}

bool g_registered = false; /* main thread */

} // namespace

int attach(attachment a)
{
	state &s = g();
	{
		std::lock_guard<std::mutex> lk(s.mu);
		if (s.attached)
			return EBUSY;
	}
	register_log_types();
	if (!g_registered) {
		struct {
			const char *cmd;
			telemetry_cb fn;
			const char *help;
		} cmds[] = {
			{"/rdgram/lcores", cmd_lcores, "rdgram poll lcores: role, CPU, NUMA node. No parameters"},
			{"/rdgram/ports", cmd_ports, "rdgram ports: driver, MAC, GIDs, MTU, ethdev totals. No parameters"},
			{"/rdgram/qps", cmd_qps,
			 "rdgram QP counters of every driver, every drop reason. Parameters: none (all) or a QP name"},
			{"/rdgram/xstats", cmd_xstats,
			 "rdgram QP counters with kind and description. Parameters: a QP name"},
			{"/rdgram/ah", cmd_ah, "rdgram AH registry summary. No parameters"},
			{"/rdgram/pending", cmd_pending, "rdgram AH pending queues. No parameters"},
			{"/rdgram/icrc", cmd_icrc,
			 "rdgram ICRC kernel per frame size, chosen by measurement (ps per call). No parameters"},
		};
		for (const auto &c : cmds) {
			const int rc = rte_telemetry_register_cmd(c.cmd, c.fn, c.help);
			if (rc != 0) {
				RDGRAM_LOG(telemetry, ERR, "cannot register %s: %s", c.cmd, strerror(-rc));
				return -rc;
			}
		}
		g_registered = true;
	}
	std::vector<port_copy> ports;
	for (const port_info &p : a.ports)
		ports.push_back(port_copy{p.name, p.dev != nullptr ? p.dev->driver_name() : "", p.mac, p.port_id,
					  p.dev != nullptr ? p.dev->port() : port_attr{}});
	control_thread *ctl = a.ctl;
	const bool poll_ah = ctl != nullptr && (a.service != nullptr || a.registry != nullptr || !a.ah_devices.empty());
	{
		std::lock_guard<std::mutex> lk(s.mu);
		s.a = std::move(a);
		s.ports = std::move(ports);
		s.next_summary = 0;
		s.attached = true;
	}
	if (poll_ah && ctl->add_poller(summary_poller, &s) != 0)
		RDGRAM_LOG(telemetry, WARNING, "no control-thread poller slot: /rdgram/ah stays empty");
	return 0;
}

void detach()
{
	state &s = g();
	control_thread *ctl;
	{
		std::lock_guard<std::mutex> lk(s.mu);
		if (!s.attached)
			return;
		ctl = s.a.ctl;
	}
	if (ctl != nullptr && ctl->running())
		ctl->remove_poller(summary_poller, &s);
	std::lock_guard<std::mutex> lk(s.mu);
	s.attached = false;
	s.a = attachment{};
	s.ports.clear();
	s.sum.seq.store(0, std::memory_order_relaxed);
}

/* ---- the socket --------------------------------------------------------- */

std::string socket_path()
{
	return std::string(rte_eal_get_runtime_dir()) + "/dpdk_telemetry.v2";
}

int secure_socket(std::string *err)
{
	const std::string dir = rte_eal_get_runtime_dir();
	const std::string sock = socket_path();
	struct stat st;
	if (stat(sock.c_str(), &st) != 0) {
		const int e = errno;
		if (err != nullptr)
			*err = "no telemetry socket at " + sock + ": " + strerror(e);
		return e;
	}
	if (chmod(dir.c_str(), 0700) != 0 || chmod(sock.c_str(), 0600) != 0) {
		const int e = errno;
		if (err != nullptr)
			*err = "cannot make " + sock + " owner-only: " + strerror(e);
		return e;
	}
	return 0;
}

} // namespace rdgram::telemetry
