/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "soft_config_toml.h"

#include <cctype>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>

#include "rdgram/config.h"

namespace rdgram::soft {

namespace {

struct key_range {
	const char *name;
	int64_t min, max;
};

/* The integer keys and their ranges (soft_config_toml.h). */
constexpr key_range ranges[] = {
	{"mtu", 256, 4096},
	{"pkey", 1, 0xffff},
	{"max_ah", 1, 1 << 24},
	{"neigh_ttl_ms", 1, 86400000},
	{"neigh_retry_ms", 1, 60000},
	{"neigh_retries", 1, 100},
	{"neigh_fail_hold_ms", 0, 86400000},
	{"vlan", 1, 4094},
};

int64_t get_key(table_reader &t, const char *name, int64_t def)
{
	for (const key_range &r : ranges)
		if (strcmp(r.name, name) == 0) {
			const int64_t v = t.get_int(name, def, r.min, r.max);
			if (strcmp(name, "mtu") == 0 && (v & (v - 1)) != 0)
				t.fail(name, "one of 256, 512, 1024, 2048, 4096");
			return v;
		}
	throw std::invalid_argument(std::string("not a soft port key: ") + name);
}

} // namespace

void load_soft_port(table_reader &t, soft_port_params &p)
{
	p.mtu = uint32_t(get_key(t, "mtu", p.mtu));
	p.pkey = uint16_t(get_key(t, "pkey", p.pkey));
	p.max_ah = uint32_t(get_key(t, "max_ah", p.max_ah));
	p.resolve = t.get_bool("resolve", p.resolve);
	p.neigh_ttl_ms = uint32_t(get_key(t, "neigh_ttl_ms", p.neigh_ttl_ms));
	p.neigh_retry_ms = uint32_t(get_key(t, "neigh_retry_ms", p.neigh_retry_ms));
	p.neigh_retries = uint32_t(get_key(t, "neigh_retries", p.neigh_retries));
	p.neigh_fail_hold_ms = uint32_t(get_key(t, "neigh_fail_hold_ms", p.neigh_fail_hold_ms));
	const char *names[] = {"auto", "software", "flow"};
	const std::string s = t.get_enum("steer", names[unsigned(p.steer)], {"auto", "software", "flow"});
	p.steer = s == "software" ? steer_mode::software : s == "flow" ? steer_mode::flow : steer_mode::automatic;
	if (t.has("vlan")) /* absent: p's (0, untagged, by default) */
		p.vlan = uint16_t(get_key(t, "vlan", 1));
	p.ecn = t.get_bool("ecn", p.ecn);
}

uint32_t get_soft_key(table_reader &t, const char *name, uint32_t def)
{
	return uint32_t(get_key(t, name, def));
}

namespace {

/* Keys other apps' tables or older configs used for what a port table
 * calls otherwise: one line naming the new key. */
struct renamed_key {
	const char *key, *hint;
};
constexpr renamed_key renamed[] = {
	{"vdev", "the port's DPDK device is 'devargs'"},
	{"device", "the port's DPDK device is 'devargs' ('device' names an RDMA device, in [rdma])"},
	{"port", "the port's DPDK device is 'devargs' ('port' is an RDMA port number, in [rdma])"},
	{"address", "the port's addresses are 'addresses', a list"},
	{"steering", "the key is 'steer'"},
	{"nb_mbufs", "the key is 'mbufs'"},
};

bool family_of(const std::vector<wire::gid> &addrs, const wire::gid &g)
{
	for (const auto &a : addrs)
		if (a.is_v4_mapped() == g.is_v4_mapped())
			return true;
	return false;
}

void load_one(table_reader &t, port_config &p, const port_rules &rules, size_t i)
{
	for (const renamed_key &k : renamed)
		t.refuse_renamed(k.key, k.hint);
	p.where = t.position();
	p.name = t.get_string("name", p.name);
	if (p.name.empty() || p.name.size() > 63)
		t.fail("name", "a port name of 1 to 63 characters");
	for (char c : p.name)
		if (!isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
			t.fail("name", "a port name of letters, digits, '_', '-' and '.'");
	if (rules.devargs_required && !t.has("devargs"))
		t.fail("devargs", "the port's DPDK device (net_memif0,role=server,..., net_af_packet0,iface=..., "
				  "or a port given to the EAL with --vdev or -a)");
	p.devargs = t.get_string("devargs", p.devargs);
	if (t.has("devargs") && p.devargs.empty())
		t.fail("devargs", "the port's DPDK device, not empty");
	p.mac = t.get_mac("mac", p.mac, &p.set_mac);
	if (rules.addresses_required && !t.has("addresses"))
		t.fail("addresses", "the port's IPv4 and IPv6 addresses (its GID table)");
	if (t.has("addresses")) {
		p.addresses = t.get_ip_array("addresses");
		if (p.addresses.empty())
			t.fail("addresses", "at least one IPv4 or IPv6 address");
		for (const auto &a : p.addresses)
			if (a.is_multicast() || a.is_zero())
				t.fail("addresses", "unicast IPv4 or IPv6 addresses");
	}
	load_soft_port(t, p);
	p.nb_mbufs = uint32_t(t.get_int("mbufs", p.nb_mbufs, 1023, 1 << 22));
	p.queues = uint16_t(t.get_int("queues", p.queues, 1, 64));
	if (t.has("neighbours"))
		for (auto n : t.get_table_array("neighbours")) {
			neighbour nc{};
			auto ip = n.get_ip("ip");
			if (!ip)
				n.fail("ip", "the neighbour's IPv4 or IPv6 address");
			if (ip->is_multicast() || ip->is_zero())
				n.fail("ip", "a unicast IPv4 or IPv6 address");
			if (!p.addresses.empty() && !family_of(p.addresses, *ip))
				n.fail("ip", std::string("an address of a family the port has (its addresses are ") +
						     (p.addresses[0].is_v4_mapped() ? "IPv4" : "IPv6") + " only)");
			nc.ip = *ip;
			bool given = false;
			nc.mac = n.get_mac("mac", nc.mac, &given);
			if (!given)
				n.fail("mac", "the neighbour's MAC address");
			n.finish();
			p.neighbours.push_back(nc);
		}
	if (rules.extra)
		rules.extra(t, p, i);
	t.finish();
}

} // namespace

std::vector<port_config> load_ports(table_reader &root, const port_rules &rules)
{
	std::vector<port_config> out;
	if (!root.has("port"))
		return out;
	std::vector<table_reader> tables = root.get_tables("port");
	std::set<std::string> names;
	for (size_t i = 0; i < tables.size(); i++) {
		port_config p;
		static_cast<soft_port_params &>(p) = rules.defaults;
		p.name = rules.name_prefix + std::to_string(i);
		load_one(tables[i], p, rules, i);
		if (!names.insert(p.name).second)
			tables[i].fail("name", "a port name not used twice");
		out.push_back(std::move(p));
	}
	return out;
}

port_rules verbs_port_rules()
{
	return port_rules{.name_prefix = "rdg", .devargs_required = true, .addresses_required = true, .defaults = {},
			  .extra = [](table_reader &t, port_config &p, size_t) {
				  p.kind = t.get_enum("kind", p.kind, {"soft", "mlx5"});
			  }};
}

port_file load_port_file(const std::string &path, const port_rules &rules)
{
	port_file f;
	toml::table root = parse_config_file(path);
	table_reader r(root, "", path);
	if (auto t = r.get_table("eal")) {
		f.eal_args = t->get_string_array("args");
		t->finish();
	}
	f.ports = load_ports(r, rules);
	if (f.ports.empty())
		throw config_error(path + ":1:1: no [[port]]: give one table per device, with its devargs and addresses");
	r.finish();
	return f;
}

std::string need_devargs(const port_config &p)
{
	if (!p.devargs.empty())
		return "";
	if (p.where.empty())
		return "no [port] table with devargs, the port's DPDK device";
	return p.where + ": key 'port.devargs': expected the port's DPDK device (net_memif0,role=server,..., "
			 "net_af_packet0,iface=...)";
}

} // namespace rdgram::soft
