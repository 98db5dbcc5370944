/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "coll_config.h"

#include "rdgram/config.h"
#include "soft_config_toml.h"

namespace rdgram::coll {

void load_coll_config(const std::string &path, coll_config &c)
{
	toml::table root = parse_config_file(path);
	table_reader r(root, "", path);
	if (auto t = r.get_table("eal")) {
		c.eal_args = t->get_string_array("args");
		c.capture = t->get_enum("capture", c.capture, {"auto", "on", "off"});
		t->finish();
	}
	if (auto t = r.get_table("job")) {
		c.driver = t->get_string("driver", c.driver);
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
		t->finish();
	}
	if (auto t = r.get_table("collectives")) {
		c.iters = uint32_t(t->get_int("iters", c.iters, 1, 1000000));
		c.size = uint32_t(t->get_int("size", c.size, 1, max_size));
		c.rto_us = uint32_t(t->get_int("rto_us", c.rto_us, 1, 10000000));
		c.drop_rate = t->get_double("drop_rate", c.drop_rate, 0, 0.5);
		c.seed = uint64_t(t->get_int("seed", int64_t(c.seed), 0, INT64_MAX));
		t->finish();
	}
	if (auto t = r.get_table("rdma")) {
		apps::read_rdma_keys(*t, c.rdma, -1);
		t->finish();
	}
	if (auto t = r.get_table("poll")) {
		c.workers = uint32_t(t->get_int("workers", c.workers, 1, 128));
		c.idle = t->get_enum("idle", c.idle, {"busy", "yield", "sleep"});
		c.idle_spins = uint32_t(t->get_int("idle_spins", c.idle_spins, 0, 100000000));
		c.idle_sleep_us = uint32_t(t->get_int("idle_sleep_us", c.idle_sleep_us, 1, 1000000));
		t->finish();
	}
	/* The first port table is every rank's (a single-port app). */
	if (auto ports = soft::load_ports(r, {.name_prefix = "port", .devargs_required = false,
					      .addresses_required = false, .defaults = c.port, .extra = {}});
	    !ports.empty())
		c.port = ports[0];
	r.finish();
}

} // namespace rdgram::coll
