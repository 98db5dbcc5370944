/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "mcast.h"

#include "rdgram/config.h"
#include "soft_config_toml.h"

namespace rdgram::mcast {

void load_mcast_config(const std::string &path, mcast_config &c)
{
	apps::app_config_file f(path, {.table = "mcast", .max_workers = 64}, c);
	table_reader &r = f.root();
	if (auto *t = f.table("mcast")) {
		c.mode = t->get_enum("mode", c.mode, {"pub", "sub", "both"});
		if (t->has("groups")) {
			c.groups = t->get_ip_array("groups");
			for (const auto &g : c.groups)
				if (!g.is_multicast())
					t->fail("groups", "IPv4 (224/4) or IPv6 (ff00::/8) multicast addresses");
		}
		c.subscribers = uint32_t(t->get_int("subscribers", c.subscribers, 1, 8));
		c.rate = t->get_double("rate", c.rate, 0, 1e9);
		c.count = uint64_t(t->get_int("count", int64_t(c.count), 0, int64_t(1) << 48));
		c.duration = t->get_double("duration", c.duration, 0, 86400 * 7);
		c.size = uint32_t(t->get_int("size", c.size, sizeof(msg_hdr), 4096));
		c.status_interval = t->get_double("status_interval", c.status_interval, 0, 3600);
		/* One number each here (0: none); the command line takes several. */
		if (uint64_t v = uint64_t(t->get_int("skip_seq", 0, 0, int64_t(1) << 48)); v != 0)
			c.skip_seq = {v};
		if (uint64_t v = uint64_t(t->get_int("dup_seq", 0, 0, int64_t(1) << 48)); v != 0)
			c.dup_seq = {v};
		c.qkey = uint32_t(t->get_int("qkey", c.qkey, 0, 0x7fffffff));
		c.qpn = uint32_t(t->get_int("qpn", c.qpn, 2, 0xfffffe));
		c.publisher_id = uint32_t(t->get_int("publisher_id", c.publisher_id, 0, 0xffffffff));
		c.idle_timeout = t->get_double("idle_timeout", c.idle_timeout, 0.01, 3600);
		for (const char *k : {"port", "devargs"})
			t->refuse_renamed(k, "the port's DPDK device is 'devargs', in [port]");
		for (const char *k : {"addresses", "vlan", "ecn"})
			t->refuse_renamed(k, std::string("the port's settings are in [port] (") + k + ")");
		c.hist_csv = t->get_string("hist_csv", c.hist_csv);
		c.hist_plot = t->get_string("hist_plot", c.hist_plot);
		c.worker_groups = t->get_enum("worker_groups", c.worker_groups, {"split", "all"});
		c.device = t->get_string("device", c.device);
		c.local = t->get_string("local", c.local);
	}
	/* The first port table is the port (a single-port app). */
	if (auto ports = soft::load_ports(r, {.name_prefix = "port", .devargs_required = false,
					      .addresses_required = false, .defaults = c.port, .extra = {}});
	    !ports.empty())
		c.port = ports[0];
	f.finish();
}

const char *config_refusal(const mcast_config &c, bool qkey_given)
{
	const bool has_pub = c.mode != "sub", has_sub = c.mode != "pub";
	const bool verbs = c.driver == "verbs";
	if (c.groups.size() > 8)
		return "at most 8 groups";
	if (has_pub && c.count == 0 && c.duration == 0)
		return "the publisher needs --count or --duration";
	/* Each publisher worker sends its own groups (a group's sequence
	 * numbers come from one thread); split subscriber workers likewise. */
	if (has_pub && c.workers > c.groups.size())
		return "more --workers than groups: each publisher worker publishes groups of its own (g % workers)";
	if (has_sub && c.worker_groups == "split" && c.workers > c.groups.size())
		return "more --workers than groups: with --worker-groups split each subscriber worker takes groups of "
		       "its own (or use --worker-groups all)";
	if (!verbs && c.qpn + (c.workers - 1) > 0xfffffe)
		return "--qpn + --workers - 1 passes 0xfffffe (worker w's QP is --qpn + w)";
#ifndef RDGRAM_MCAST_VERBS
	if (verbs)
		return "this rdgram-mcast was built without the verbs driver's multicast (libibverbs-dev, librdmacm-dev)";
#endif
	if (verbs && (!c.port.devargs.empty() || !c.port.addresses.empty()))
		return "--port/--address are for the soft driver; verbs takes --device and --local";
	if (verbs && qkey_given)
		return "with the verbs driver the Q_Key is the group's (rdma_cm gives it): --qkey does not apply";
	if (!verbs && (!c.device.empty() || !c.local.empty()))
		return "--device/--local are for --driver verbs";
	if (verbs)
		return nullptr; /* the rest are the soft driver's rules */
	if (c.mode != "both" && c.port.devargs.empty())
		return "--mode pub/sub need --port or [port] devargs (an ethdev's devargs)";
	if (c.mode != "both" && c.port.addresses.empty())
		return "--mode pub/sub need --address or [port] addresses";
	if (c.mode == "both" && (!c.port.devargs.empty() || !c.port.addresses.empty()))
		return "--port/--address are for --mode pub/sub; --mode both makes its own net_ring ports";
	if (!has_pub && (!c.skip_seq.empty() || !c.dup_seq.empty()))
		return "--skip-seq/--dup-seq are publisher faults (--mode pub or both)";
	if (!has_sub && (!c.hist_csv.empty() || !c.hist_plot.empty()))
		return "--hist-csv/--hist-plot need a subscriber (--mode sub or both)";
	if (!c.hist_plot.empty() && !(c.hist_plot.ends_with(".svg") || c.hist_plot.ends_with(".png")))
		return "--hist-plot wants a file ending in .svg or .png";
	if (c.mode != "both")
		for (const auto &g : c.groups)
			if (sgid_index_for(c.port.addresses, g) < 0)
				return "every group needs an --address of its family (IPv4 or IPv6)";
	return nullptr;
}

} // namespace rdgram::mcast
