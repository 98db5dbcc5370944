/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "fwd_config.h"

#include <cstdio>
#include <set>

#include "rdgram/config.h"
#include "soft_config_toml.h"

namespace rdgram::fwd {

namespace {

uint32_t get_qkey(table_reader &t, const char *key, uint32_t def)
{
	/* A privileged Q_Key (high bit set) needs privilege on real HCAs, and
	 * on the send side the high bit means "use the QP's own" (IBA 10.2.5). */
	return uint32_t(t.get_int(key, def, 0, 0x7fffffff));
}

std::optional<uint32_t> opt_int(table_reader &t, const char *key, int64_t min, int64_t max)
{
	if (!t.has(key))
		return std::nullopt;
	return uint32_t(t.get_int(key, 0, min, max));
}

/* rdgram-fwd's own key of a [[port]]: its QPs. */
std::vector<qp_config> load_qps(table_reader &t)
{
	std::vector<qp_config> out;
	if (!t.has("qps"))
		return out;
	std::set<uint32_t> seen;
	for (auto q : t.get_table_array("qps")) {
		qp_config qc{};
		if (!q.has("qpn"))
			q.fail("qpn", "a QP number from 2 to 0xffffff");
		qc.qpn = uint32_t(q.get_int("qpn", 0, 2, 0xffffff));
		qc.qkey = get_qkey(q, "qkey", 0x11111111);
		qc.worker = int(q.get_int("worker", -1, 0, 255));
		if (!seen.insert(qc.qpn).second)
			q.fail("qpn", "a QP number not used twice on the port");
		q.finish();
		out.push_back(qc);
	}
	/* At most 8 per worker (the soft driver's per-queue limit):
	 * check_fwd_config, once the workers are known. */
	if (out.empty() || out.size() > 8 * 64)
		t.fail("qps", "1 to 512 QPs (8 per worker: the soft driver's per-queue limit)");
	return out;
}

void load_peer(table_reader t, peer_config &p)
{
	auto ip = t.get_ip("ip");
	if (!ip)
		t.fail("ip", "the peer's IPv4 or IPv6 address");
	if (ip->is_zero())
		t.fail("ip", "a unicast or multicast address, not zero");
	p.ip = *ip;
	bool given = false;
	rte_ether_addr m = t.get_mac("mac", rte_ether_addr{}, &given);
	if (given)
		p.mac = m;
	if (!t.has("qpn"))
		t.fail("qpn", "the peer's QP number (1 to 0xffffff)");
	p.qpn = uint32_t(t.get_int("qpn", 0, 1, 0xffffff));
	if (t.has("qkey"))
		p.qkey = get_qkey(t, "qkey", 0);
	p.port = t.get_string("port", p.port);
	p.hop_limit = uint8_t(t.get_int("hop_limit", p.hop_limit, 1, 255));
	p.traffic_class = uint8_t(t.get_int("traffic_class", p.traffic_class, 0, 255));
	t.finish();
}

} // namespace

void load_fwd_config(const std::string &path, fwd_config &c)
{
	apps::app_config_file f(path, {.table = "fwd", .max_workers = 64}, c, &c.rdma);
	table_reader &r = f.root();
	if (auto *t = f.table("fwd")) {
		c.mode = t->get_enum("mode", c.mode, {"reflect", "forward"});
		c.duration_s = t->get_double("duration", c.duration_s, 0, 1e9);
		c.max_packets = uint64_t(t->get_int("max_packets", int64_t(c.max_packets), 0, INT64_MAX));
		c.idle_exit_s = t->get_double("idle_exit", c.idle_exit_s, 0, 1e9);
		c.stats_interval_s = t->get_double("stats_interval", c.stats_interval_s, 0, 1e9);
		c.stats_json = t->get_string("stats_json", c.stats_json);
		c.pending_dests = uint32_t(t->get_int("pending_destinations", c.pending_dests, 1, 1 << 20));
		c.pending_per_dest = uint32_t(t->get_int("pending_per_destination", c.pending_per_dest, 1, 1 << 24));
		c.pending_total = uint32_t(t->get_int("pending_total", c.pending_total, 1, 1 << 24));
		c.pending_timeout_ms = uint32_t(t->get_int("pending_timeout_ms", c.pending_timeout_ms, 1, 3600000));
	}
	if (auto *t = f.table("rdma"))
		c.rdma.qkey = get_qkey(*t, "qkey", c.rdma.qkey);
	if (r.has("port")) {
		/* The devargs may come from --port (check_fwd_config). */
		std::vector<std::vector<qp_config>> qps;
		soft::port_rules rules{.name_prefix = "p", .devargs_required = false, .addresses_required = false, .defaults = {},
				       .extra = {}};
		rules.extra = [&qps](table_reader &t, soft::port_config &, size_t) { qps.push_back(load_qps(t)); };
		c.ports.clear();
		for (soft::port_config &sp : soft::load_ports(r, rules)) {
			port_config p;
			static_cast<soft::port_config &>(p) = std::move(sp);
			p.qps = std::move(qps[c.ports.size()]);
			c.ports.push_back(std::move(p));
		}
	}
	if (auto t = r.get_table("peers")) {
		c.peers.clear();
		/* table_reader reads known keys; peers are named by the user, so
		 * walk the raw table for the names and read each through it. */
		for (const auto &[k, v] : *f.doc()["peers"].as_table()) {
			const std::string name(k.str());
			peer_config p;
			p.name = name;
			auto pt = t->get_table(name.c_str());
			if (!pt)
				t->fail(name.c_str(), "a table {ip, qpn, ...}");
			load_peer(*pt, p);
			c.peers.push_back(p);
		}
		t->finish();
	}
	if (r.has("rule")) {
		c.rules.clear();
		for (auto t : r.get_table_array("rule")) {
			rule_config rc;
			rc.match_qpn = opt_int(t, "match_qpn", 1, 0xffffff);
			rc.match_qkey = opt_int(t, "match_qkey", 0, 0x7fffffff);
			if (!t.has("to"))
				t.fail("to", "the name of a peer in [peers]");
			rc.to = t.get_string("to", "");
			bool known = false;
			for (const auto &p : c.peers)
				known |= p.name == rc.to;
			if (!known)
				t.fail("to", "the name of a peer in [peers]");
			rc.rewrite_qkey = opt_int(t, "rewrite_qkey", 0, 0x7fffffff);
			t.finish();
			c.rules.push_back(rc);
		}
	}
	f.finish();
	/* Egress port names must exist. */
	for (const auto &p : c.peers) {
		if (p.port.empty())
			continue;
		bool found = false;
		for (const auto &pc : c.ports)
			found |= pc.name == p.port;
		if (!found)
			throw config_error(path + ": key 'peers." + p.name + ".port': no [[port]] is named '" +
					   p.port + "'");
	}
}

void check_fwd_config(const fwd_config &c)
{
	if (c.workers == 0 || c.workers > 64)
		throw config_error("--workers " + std::to_string(c.workers) + ": 1 to 64");
	if (c.driver != "soft") {
		/* The RDMA drivers: one device ([rdma]), one QP per worker that
		 * the device numbers; [[port]] describes a DPDK port. */
		if (!c.ports.empty())
			throw config_error("driver " + c.driver +
					   " serves the [rdma] device: [[port]] and --port are the soft driver's");
		for (const auto &pe : c.peers) {
			if (pe.mac)
				throw config_error("peer '" + pe.name + "': mac is the soft driver's static neighbour; driver " +
						   c.driver + " resolves it in the provider");
			if (!pe.port.empty())
				throw config_error("peer '" + pe.name + "': port names a [[port]]; driver " + c.driver +
						   " has the one [rdma] device");
		}
		if (c.mode == "forward" && c.rules.empty())
			throw config_error("mode forward needs at least one [[rule]] (and its [peers.NAME])");
		return;
	}
	if (c.ports.empty())
		throw config_error("no port: give [[port]] in the config or --port DEVARGS");
	for (const auto &p : c.ports) {
		if (std::string e = soft::need_devargs(p); !e.empty())
			throw config_error(e + " (or --port)");
		if (p.addresses.empty())
			throw config_error("port '" + p.name + "' has no addresses");
		/* Each worker polls queue w of the port and owns the QPs placed
		 * there: a QP on a queue nobody polls would never be served, and
		 * a worker without a QP on a port could not send from it. */
		std::vector<unsigned> per(c.workers, 0);
		for (size_t k = 0; k < p.qps.size(); k++) {
			const qp_config &q = p.qps[k];
			if (q.worker >= int(c.workers)) {
				char b[32];
				snprintf(b, sizeof(b), "0x%x", q.qpn);
				throw config_error("port '" + p.name + "': QP " + b + " is placed on worker " +
						   std::to_string(q.worker) + " (queue " + std::to_string(q.worker) +
						   "), which no poll thread serves: " + std::to_string(c.workers) +
						   " worker(s), 0 to " + std::to_string(c.workers - 1));
			}
			per[q.worker >= 0 ? unsigned(q.worker) : unsigned(k % c.workers)]++;
		}
		for (unsigned w = 0; w < c.workers; w++) {
			if (per[w] == 0)
				throw config_error("port '" + p.name + "': worker " + std::to_string(w) +
						   " owns no QP (" + std::to_string(c.workers) + " workers, " +
						   std::to_string(p.qps.size()) + " QP(s)): give each worker at least one");
			if (per[w] > 8)
				throw config_error("port '" + p.name + "': worker " + std::to_string(w) + " owns " +
						   std::to_string(per[w]) + " QPs; the soft driver serves 8 per queue");
		}
	}
	if (c.mode == "forward" && c.rules.empty())
		throw config_error("mode forward needs at least one [[rule]] (and its [peers.NAME])");
	for (const auto &pe : c.peers)
		for (const auto &po : c.ports)
			if (pe.port.empty() || pe.port == po.name) {
				/* The AH's source GID must be of the peer's family. */
				bool family = false;
				for (const auto &a : po.addresses)
					family |= a.is_v4_mapped() == pe.ip.is_v4_mapped();
				if (!family)
					throw config_error("peer '" + pe.name + "': its port '" + po.name +
							   "' has no address of the peer's IP family");
				break;
			}
}

/* The worker that owns QP k of port p. */
unsigned qp_worker(const port_config &p, size_t k, unsigned workers)
{
	const int w = p.qps[k].worker;
	return w >= 0 ? unsigned(w) : unsigned(k % workers);
}

} // namespace rdgram::fwd
