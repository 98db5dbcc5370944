/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "rv_config.h"

#include <cctype>
#include <set>

#include <infiniband/verbs.h>

#include "rdgram/config.h"
#include "soft_config_toml.h"

namespace rdgram::rv {

namespace {

void load_port(table_reader t, rv_port_config &p)
{
	p.name = t.get_string("name", p.name);
	if (p.name.empty() || p.name.size() >= IBV_SYSFS_NAME_MAX)
		t.fail("name", "a device name of 1 to 63 characters");
	for (char c : p.name)
		if (!isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
			t.fail("name", "a device name of letters, digits, '_', '-' and '.'");
	if (!t.has("device"))
		t.fail("device", "the DPDK port's devargs (net_memif0,role=server,..., net_af_packet0,iface=...)");
	p.device = t.get_string("device", p.device);
	if (p.device.empty())
		t.fail("device", "the DPDK port's devargs, not empty");
	p.mac = t.get_mac("mac", p.mac, &p.set_mac);
	if (!t.has("addresses"))
		t.fail("addresses", "the port's IPv4 and IPv6 addresses (its GID table)");
	p.addresses = t.get_ip_array("addresses");
	if (p.addresses.empty())
		t.fail("addresses", "at least one IPv4 or IPv6 address");
	for (const auto &a : p.addresses)
		if (a.is_multicast() || a.is_zero())
			t.fail("addresses", "unicast IPv4 or IPv6 addresses");
	soft::load_soft_port(t, p);
	p.nb_mbufs = uint32_t(t.get_int("mbufs", p.nb_mbufs, 1023, 1 << 22));
	if (t.has("neighbours"))
		for (auto n : t.get_table_array("neighbours")) {
			rv_neighbour nc{};
			auto ip = n.get_ip("ip");
			if (!ip)
				n.fail("ip", "the neighbour's IPv4 or IPv6 address");
			nc.ip = *ip;
			bool given = false;
			nc.mac = n.get_mac("mac", nc.mac, &given);
			if (!given)
				n.fail("mac", "the neighbour's MAC address");
			n.finish();
			p.neighbours.push_back(nc);
		}
	t.finish();
}

} // namespace

rv_config load_config(const std::string &path)
{
	rv_config c;
	toml::table root = parse_config_file(path);
	table_reader r(root, "", path);
	if (auto t = r.get_table("eal")) {
		c.eal_args = t->get_string_array("args");
		t->finish();
	}
	if (!r.has("port"))
		throw config_error(path + ": no [[port]]: give one table per verbs device");
	std::set<std::string> names;
	size_t i = 0;
	for (auto t : r.get_table_array("port")) {
		rv_port_config p;
		p.name = "rdg";
		p.name += std::to_string(i++);
		load_port(t, p);
		if (!names.insert(p.name).second)
			t.fail("name", "a device name not used twice");
		c.ports.push_back(p);
	}
	r.finish();
	return c;
}

} // namespace rdgram::rv
