/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast's command line: options over the config file, the default
 * groups, and the refusals (one line, exit 2).
 */
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "app_start.h"
#include "cli.h"
#include "driver.h"
#include "mcast.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"

namespace rdgram::mcast {

namespace {

int parse_seq_list(const std::vector<std::string> &in, std::vector<uint64_t> &out, const char *opt)
{
	for (const auto &s : in) {
		char *end = nullptr;
		errno = 0;
		const unsigned long long v = strtoull(s.c_str(), &end, 0);
		if (s.empty() || s[0] == '-' || *end != '\0' || errno != 0 || v == 0) {
			fprintf(stderr, "rdgram-mcast: %s wants sequence numbers >= 1, got '%s'\n", opt, s.c_str());
			return 2;
		}
		out.push_back(v);
	}
	return 0;
}

} // namespace

int parse_command_line(const split_args &sa, mcast_config &c)
{
	cli::parser app{"rdgram-mcast",
			"rdgram-mcast: UD multicast publisher/subscriber (market-data style) over the soft RoCEv2 "
			"driver, or an RDMA device with --driver verbs.\nUsage: rdgram-mcast [EAL args --] [options]. With no options: one publisher and two "
			"subscribers in one process (--mode both) over net_ring ports, groups 239.1.1.1 and ff15::1:1.",
			34};
	app.config("-c,--config", "TOML config file ([mcast], [eal]); options below override it",
		   [&](const std::string &path) { load_mcast_config(path, c); });
	/* Not fields: addresses and sequence numbers, converted and checked
	 * below. */
	std::vector<std::string> groups, addrs, skip, dup;
	app.add("--mode", c.mode, "pub, sub, or both (publisher + --subscribers in one process) [both]")
		.one_of({"pub", "sub", "both"});
	app.add("-g,--group", groups, "multicast group, IPv4 224/4 or IPv6 ff00::/8; repeat for several, "
				      "at most 8 [239.1.1.1 and ff15::1:1]");
	app.add("--subscribers", c.subscribers, "both: subscribers in the process [2]").range(1u, 8u);
	app.add("--rate", c.rate, "publisher: messages per second per group, token bucket on the TSC; 0: "
				  "unpaced [100000]").range(0.0, 1e9);
	app.add("-n,--count", c.count, "publisher: messages per group; 0: until --duration [20000]")
		.range(uint64_t(0), uint64_t(1) << 48);
	app.add("--duration", c.duration, "seconds to run; 0: until --count (pub) or idle (sub) [0]")
		.range(0.0, 604800.0);
	app.add("-s,--size", c.size, "payload bytes per message, 32-byte header included [64]")
		.range(uint32_t(sizeof(msg_hdr)), 4096u);
	app.add("--status-interval", c.status_interval, "seconds between status lines on stderr; 0: none [1]")
		.range(0.0, 3600.0);
	app.add("--skip-seq", skip, "fault: never send this sequence number (a gap); repeatable [none]");
	app.add("--dup-seq", dup, "fault: send this sequence number twice (a duplicate); repeatable [none]");
	app.add("--qkey", c.qkey, "Q_Key of the groups' QPs, below 0x80000000 [0x11111111]").range(0u, 0x7fffffffu);
	app.add("--qpn", c.qpn, "local QP number [0x100]").range(2u, 0xfffffeu);
	app.add("--publisher-id", c.publisher_id, "publisher id carried in every message; subscribers count "
						  "others as foreign [1]").range(0u, 0xffffffffu);
	app.add("--idle-timeout", c.idle_timeout, "sub: stop this many seconds after the last message (none yet: run "
						  "until --duration or Ctrl-C) [2]")
		.range(0.01, 3600.0);
	app.add("--port", c.port.devargs, "pub/sub: ethdev devargs, e.g. net_af_packet0,iface=veth0 [none]");
	app.add("--capture", c.capture, apps::capture_help)
		.one_of({"auto", "on", "off"});
	app.add("--address", addrs, "pub/sub: the port's IPv4/IPv6 address; repeat for both families [none]");
	app.add("--driver", c.driver, "soft (RoCEv2 over a DPDK port) or verbs (an RDMA device; groups joined "
				      "through rdma_cm, the subscriber's QP attached with ibv_attach_mcast); mlx5 and efa "
				      "say why they cannot [soft]");
	app.add("--workers", c.workers, "poll threads, each with its own queue of every port and its own QPs; "
					"the main lcore may be one (-l 0,1 -- --workers 2) [1]")
		.range(1u, 64u);
	app.add("--worker-groups", c.worker_groups, "subscriber workers: split (worker w takes the groups g with "
						    "g % workers == w, as a feed handler shards its channels) or all "
						    "(every worker's QP attaches every group and receives every "
						    "datagram); publisher workers always split [split]")
		.one_of({"split", "all"});
	app.add("--device", c.device, "verbs: RDMA device name [the first with an active port]");
	app.add("--local", c.local, "verbs: the port's IP address rdma_cm joins from (InfiniBand: its IPoIB "
				    "address) [the port's RoCEv2 GID of the group's family]");
	app.add("--hist-csv", c.hist_csv, "write each subscriber's one-way latency histogram as CSV "
					  "(lower_ns,count,cumulative_fraction); -subK before the suffix with "
					  "several subscribers [none]");
	app.add("--hist-plot", c.hist_plot, "draw the histogram with gnuplot into FILE.svg or FILE.png "
					    "(CSV next to it unless --hist-csv) [none]");
	if (int rc = app.parse(sa.app); rc >= 0)
		return rc;
	if (!groups.empty()) {
		c.groups.clear();
		for (const auto &g : groups) {
			wire::gid x;
			if (!parse_ip(g, &x) || !x.is_multicast()) {
				fprintf(stderr, "rdgram-mcast: --group %s is not an IPv4 or IPv6 multicast address\n",
					g.c_str());
				return 2;
			}
			c.groups.push_back(x);
		}
	}
	if (!addrs.empty()) {
		c.port.addresses.clear();
		for (const auto &a : addrs) {
			wire::gid x;
			if (!parse_ip(a, &x) || x.is_multicast() || x.is_zero()) {
				fprintf(stderr, "rdgram-mcast: --address %s is not a unicast IP address\n", a.c_str());
				return 2;
			}
			c.port.addresses.push_back(x);
		}
	}
	if (!skip.empty()) {
		c.skip_seq.clear();
		if (parse_seq_list(skip, c.skip_seq, "--skip-seq") != 0)
			return 2;
	}
	if (!dup.empty()) {
		c.dup_seq.clear();
		if (parse_seq_list(dup, c.dup_seq, "--dup-seq") != 0)
			return 2;
	}
	if (c.groups.empty()) {
		wire::gid a, b;
		parse_ip("239.1.1.1", &a);
		parse_ip("ff15::1:1", &b);
		c.groups = {a, b};
	}
	/* The driver, named once (apps/common/driver.h): unknown, or not
	 * built with meson's reason. */
	{
		apps::driver_kind k;
		std::string err;
		if (apps::parse_driver(c.driver, &k, &err) != 0) {
			fprintf(stderr, "rdgram-mcast: %s\n", err.c_str());
			return 2;
		}
	}
	const char *bad = config_refusal(c, app.count("--qkey") != 0);
	if (bad != nullptr) {
		fprintf(stderr, "rdgram-mcast: %s (see --help)\n", bad);
		return 2;
	}
	if (!c.hist_plot.empty() && c.hist_csv.empty())
		c.hist_csv = c.hist_plot.substr(0, c.hist_plot.rfind('.')) + ".csv";
	return -1;
}

} // namespace rdgram::mcast
