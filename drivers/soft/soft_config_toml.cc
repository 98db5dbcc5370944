/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "soft_config_toml.h"

#include <cstring>
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

} // namespace rdgram::soft
