/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "ah_app.h"

#include "rdgram/config.h"
#include "soft_config_toml.h"

namespace rdgram::ahtool {

void load_ah_config(const std::string &path, ah_app_config &c)
{
	apps::app_config_file f(path, {.table = "ah", .max_workers = 128}, c);
	table_reader &r = f.root();
	if (auto *t = f.table("ah")) {
		c.ipv6 = t->get_bool("ipv6", c.ipv6);
		c.capacity = uint32_t(t->get_int("capacity", c.capacity, 1, 1 << 24));
		/* Port settings: the port table's since it exists. */
		for (const char *k : {"max_ah", "neigh_ttl_ms", "vlan", "ecn", "mac", "addresses"})
			t->refuse_renamed(k, std::string("the port's settings are in [port] (") + k + ")");
		for (const char *k : {"port", "devargs"})
			t->refuse_renamed(k, "the port's DPDK device is 'devargs', in [port]");
		if (t->has("to"))
			c.to = t->get_ip_array("to");
		for (const auto &g : c.to)
			if (g.is_multicast() || g.is_zero())
				t->fail("to", "unicast IPv4 or IPv6 addresses");
		c.ping_qpn = uint32_t(t->get_int("ping_qpn", c.ping_qpn, 2, 0xfffffe));
		c.ping_qkey = uint32_t(t->get_int("ping_qkey", c.ping_qkey, 0, 0x7fffffff));
		c.hold_s = t->get_double("hold", c.hold_s, 0, 86400);
		c.json = t->get_bool("json", c.json);
	}
	if (auto *t = f.table("inspect")) {
		c.dests = uint32_t(t->get_int("dests", c.dests, 0, 65536));
		c.resolved = uint32_t(t->get_int("resolved", c.resolved, 0, 1024));
		c.flows = uint32_t(t->get_int("flows", c.flows, 1, 1 << 20));
		c.release = uint32_t(t->get_int("release", c.release, 0, 1 << 24));
	}
	if (auto *t = f.table("bench")) {
		c.count = uint32_t(t->get_int("count", c.count, 1, 1 << 22));
		c.lookup_s = t->get_double("lookup_seconds", c.lookup_s, 0.01, 600);
	}
	if (auto *t = f.table("storm")) {
		c.batch = uint32_t(t->get_int("batch", c.batch, 1, 1 << 24));
		c.storm_dests = uint32_t(t->get_int("dests", c.storm_dests, 1, 1 << 24));
		c.storm_resolve = t->get_bool("resolve", c.storm_resolve);
		c.timeout_s = t->get_double("timeout", c.timeout_s, 0.1, 3600);
	}
	/* The first port table is the local port (a single-port app). */
	if (auto ports = soft::load_ports(r, {.name_prefix = "port", .devargs_required = false,
					      .addresses_required = false, .defaults = c.port, .extra = {}});
	    !ports.empty())
		c.port = ports[0];
	f.finish();
}

} // namespace rdgram::ahtool
