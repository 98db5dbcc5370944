/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "coll_config.h"

#include "rdgram/config.h"
#include "soft_config_toml.h"

namespace rdgram::coll {

void load_coll_config(const std::string &path, coll_config &c)
{
	apps::app_config_file f(path, {.table = "job", .max_workers = 128, .workers_table = "poll", .min_gid_index = -1},
				c, &c.rdma);
	table_reader &r = f.root();
	if (auto *t = f.table("job")) {
		c.mode = t->get_enum("mode", c.mode, {"threads", "procs"});
		c.ranks = uint32_t(t->get_int("ranks", c.ranks, 1, max_procs_ranks));
		c.rank = int32_t(t->get_int("rank", c.rank, -1, max_procs_ranks - 1));
		c.bootstrap = t->get_enum("bootstrap", c.bootstrap, {"auto", "pmix", "tcp"});
		c.job = t->get_string("job", c.job);
		c.rendezvous = t->get_string("rendezvous", c.rendezvous);
		for (const char *k : {"port", "devargs"})
			t->refuse_renamed(k, "the port's DPDK device is 'devargs', in [port]");
		for (const char *k : {"mtu", "vlan", "ecn"})
			t->refuse_renamed(k, std::string("the port's settings are in [port] (") + k + ")");
		c.json = t->get_string("json", c.json);
		c.timeout_s = t->get_double("timeout", c.timeout_s, 0.1, 3600);
		c.qkey = uint32_t(t->get_int("qkey", c.qkey, 0, 0x7fffffff));
	}
	if (auto *t = f.table("collectives")) {
		c.iters = uint32_t(t->get_int("iters", c.iters, 1, 1000000));
		c.size = uint32_t(t->get_int("size", c.size, 1, max_size));
		c.rto_us = uint32_t(t->get_int("rto_us", c.rto_us, 1, 10000000));
		c.drop_rate = t->get_double("drop_rate", c.drop_rate, 0, 0.5);
		c.seed = uint64_t(t->get_int("seed", int64_t(c.seed), 0, INT64_MAX));
	}
	if (auto *t = f.table("poll")) {
		c.idle = t->get_enum("idle", c.idle, {"busy", "yield", "sleep"});
		c.idle_spins = uint32_t(t->get_int("idle_spins", c.idle_spins, 0, 100000000));
		c.idle_sleep_us = uint32_t(t->get_int("idle_sleep_us", c.idle_sleep_us, 1, 1000000));
	}
	/* The first port table is every rank's (a single-port app). */
	if (auto ports = soft::load_ports(r, {.name_prefix = "port", .devargs_required = false,
					      .addresses_required = false, .defaults = c.port, .extra = {}});
	    !ports.empty())
		c.port = ports[0];
	f.finish();
}

} // namespace rdgram::coll
