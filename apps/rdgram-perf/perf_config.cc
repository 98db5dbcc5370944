/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "perf_config.h"

#include <string>

#include <rte_config.h>

#include "bootstrap.h"
#include "rdgram/config.h"
#include "soft_config_toml.h"

namespace rdgram::perf {

perf_config::perf_config()
{
	parse_mac("02:00:00:00:00:01", &server.mac);
	parse_mac("02:00:00:00:00:02", &client.mac);
	parse_ip("10.0.0.1", &server.address);
	parse_ip("10.0.0.2", &client.address);
	server.qpn = 0x100;
	client.qpn = 0x101;
}

static void load_endpoint(table_reader t, endpoint_config &e)
{
	t.refuse_renamed("vdev", "the port's DPDK device is 'devargs', in [port] or in a [[port]] named after the side");
	e.mac = t.get_mac("mac", e.mac);
	if (auto a = t.get_ip("address")) {
		if (a->is_multicast() || a->is_zero())
			t.fail("address", "a unicast IPv4 or IPv6 address");
		e.address = *a;
	}
	e.qpn = uint32_t(t.get_int("qpn", e.qpn, 2, 0xffffff));
	/* A privileged Q_Key (high bit set) needs privilege on real HCAs. */
	e.qkey = uint32_t(t.get_int("qkey", e.qkey, 0, 0x7fffffff));
	e.lcores = t.get_string("lcores", e.lcores);
	e.lid = uint16_t(t.get_int("lid", e.lid, 0, 0xbfff)); /* unicast LIDs */
	t.finish();
}

void load_perf_config(const std::string &path, perf_config &c)
{
	apps::app_config_file f(path, {.table = "perf", .max_workers = RTE_MAX_LCORE}, c, &c.rdma);
	table_reader &r = f.root();
	if (auto *t = f.table("perf")) {
		c.test = t->get_enum("test", c.test, {"lat", "bw", "both", "txonly"});
		c.mode = t->get_enum("mode", c.mode, {"loopback", "server", "client"});
		c.size = uint32_t(t->get_int("size", c.size, 0, 4096));
		c.lat_iters = uint64_t(t->get_int("lat_iterations", int64_t(c.lat_iters), 1, 100000000));
		c.bw_iters = uint64_t(t->get_int("bw_iterations", int64_t(c.bw_iters), 1, 10000000000));
		c.warmup = uint64_t(t->get_int("warmup", int64_t(c.warmup), 0, 10000000));
		c.inline_size = uint32_t(t->get_int("inline_size", c.inline_size, 0, 4096));
		c.tx_depth = uint32_t(t->get_int("tx_depth", c.tx_depth, 1, 65536));
		c.cq_mod = uint32_t(t->get_int("cq_mod", c.cq_mod, 1, 1024));
		c.timeout_s = t->get_double("timeout", c.timeout_s, 0.1, 86400);
		c.ctl_max_nap_us = uint32_t(t->get_int("ctl_max_nap_us", c.ctl_max_nap_us, 20, 1000000));
		c.use_imm = t->get_bool("immediate", c.use_imm);
		c.dests = uint32_t(t->get_int("dests", c.dests, 0, 1 << 24));
		c.dest_order = t->get_enum("dest_order", c.dest_order, {"rr", "random"});
	}
	c.ports = soft::load_ports(r, {.name_prefix = "port", .devargs_required = false, .addresses_required = false,
				       .defaults = c, .extra = {}});
	if (auto *t = f.table("rdma")) {
		c.rdma.oob = t->get_string("oob", c.rdma.oob);
		c.rdma.oob_proto = t->get_enum("oob_proto", c.rdma.oob_proto, {"rdgram", "perftest", "ud_pingpong"});
		/* Checked as the exchange will split it (bootstrap.h), so a
		 * bad value fails here, at its line, not at run time. */
		std::string host;
		uint16_t port;
		if (!c.rdma.oob.empty() && !coll::split_hostport(c.rdma.oob, &host, &port))
			t->fail("oob", "\"host:port\" of the TCP exchange (e.g. \"192.0.2.1:18515\")");
	}
	if (auto t = r.get_table("server"))
		load_endpoint(*t, c.server);
	if (auto t = r.get_table("client"))
		load_endpoint(*t, c.client);
	f.finish();
	if (c.server.address.is_v4_mapped() != c.client.address.is_v4_mapped())
		throw config_error(path + ":1:1: server.address and client.address must both be IPv4 or both IPv6");
	/* The side the file names (the command line may name another, and
	 * selects again). */
	select_port(c);
}

void select_port(perf_config &c)
{
	const soft::port_config *p = c.ports.empty() ? nullptr : &c.ports[0];
	for (const auto &x : c.ports)
		if (x.name == c.mode)
			p = &x;
	if (p == nullptr)
		return;
	c.port = *p;
	static_cast<soft::soft_port_params &>(c) = *p;
	if (c.mode == "loopback")
		return;
	endpoint_config &self = c.mode == "server" ? c.server : c.client;
	const endpoint_config &other = c.mode == "server" ? c.client : c.server;
	if (p->set_mac)
		self.mac = p->mac;
	if (p->addresses.empty())
		return;
	for (const auto &a : p->addresses)
		if (a.is_v4_mapped() == other.address.is_v4_mapped()) {
			self.address = a;
			return;
		}
	throw config_error(p->where + ": key 'port.addresses': expected an " +
			   (other.address.is_v4_mapped() ? "IPv4" : "IPv6") + " address, the family of the " +
			   (c.mode == "server" ? "client" : "server") + "'s address");
}

} // namespace rdgram::perf
