/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Every driver's counter set (stats.h, drivers/<d>/<d>_counters.h) as
 * xstats: each field once in the iteration, under its own name and in
 * list order, the drop sums by the rule, and each set published through
 * /rdgram/ telemetry, read back over the telemetry socket as a client
 * does, hardware drivers' drops included.
 */
#include <cerrno>
#include <cstring>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <rte_cycles.h>

#include "../../drivers/efa/efa_counters.h"
#include "../../drivers/mlx5/mlx5_counters.h"
#include "../../drivers/soft/soft_counters.h"
#include "../../drivers/verbs/verbs_counters.h"
#include "eal_env.h"
#include "rdgram/telemetry.h"

using namespace rdgram;

namespace {

/* Fills every field of s with its position (1, 2, ...) in the list order
 * of its X-macros, and returns the sum of the drops (by the kind each
 * list gives) and of their rx_/tx_ parts, computed from the lists, not
 * from the set's own tables. */
struct expected {
	uint64_t n = 0, drops = 0, rx = 0, tx = 0;
	std::vector<std::string> names;
};
#define FILL(name, kind, desc)                                                  \
	s.name = ++e.n;                                                         \
	e.names.push_back(#name);                                               \
	if (counter_kind::kind == counter_kind::drop) {                          \
		e.drops += s.name;                                              \
		(std::string(#name).rfind("rx_", 0) == 0 ? e.rx : e.tx) += s.name; \
	}

template <class S> void check_set(S &s, const expected &e)
{
	SCOPED_TRACE(S::driver);
	/* Every field is in the table (all are uint64_t, no padding). */
	EXPECT_EQ(sizeof(S), 8 * size_t(S::xstat_count));
	ASSERT_EQ(S::xstat_count, e.n);
	unsigned i = 0;
	s.for_each([&](const xstat_name &n, uint64_t v) {
		EXPECT_EQ(n.name, e.names[i]);
		EXPECT_EQ(v, i + 1) << n.name;
		EXPECT_NE(strlen(n.desc), 0u) << n.name;
		EXPECT_LT(strlen(n.desc), 128u) << n.name << ": longer than a telemetry string";
		if (n.kind == counter_kind::drop) {
			EXPECT_TRUE(n.rx() || n.tx()) << n.name;
		}
		i++;
	});
	EXPECT_EQ(i, e.n);
	EXPECT_EQ(s.drops(), e.drops);
	EXPECT_EQ(s.rx_drops(), e.rx);
	EXPECT_EQ(s.tx_drops(), e.tx);
	EXPECT_EQ(s.rx_drops() + s.tx_drops(), s.drops());
	S twice = s;
	twice += s;
	twice.for_each([&, j = 0u](const xstat_name &n, uint64_t v) mutable {
		EXPECT_EQ(v, 2 * (++j)) << n.name;
	});
}

/* The kind of one counter of a set, by name (nullptr: none). */
template <class S> const xstat_name *find(const char *name)
{
	for (const xstat_name &n : S::xstat_names)
		if (strcmp(n.name, name) == 0)
			return &n;
	return nullptr;
}

TEST(Xstats, SoftSet)
{
	soft::soft_counters s{};
	expected e;
	RDGRAM_QP_COUNTERS(FILL)
	RDGRAM_SOFT_COUNTERS(FILL)
	check_set(s, e);
	EXPECT_EQ(find<soft::soft_counters>("rx_to_control")->kind, counter_kind::event);
	EXPECT_EQ(find<soft::soft_counters>("rx_bad_icrc")->kind, counter_kind::drop);
}

TEST(Xstats, VerbsSet)
{
	verbs::verbs_counters s{};
	expected e;
	RDGRAM_QP_COUNTERS(FILL)
	RDGRAM_VERBS_COUNTERS(FILL)
	check_set(s, e);
	/* The refused part of a chain goes back to the caller: not a drop. */
	ASSERT_NE(find<verbs::verbs_counters>("tx_post_refused"), nullptr);
	EXPECT_EQ(find<verbs::verbs_counters>("tx_post_refused")->kind, counter_kind::event);
	EXPECT_EQ(find<verbs::verbs_counters>("tx_wc_errors")->kind, counter_kind::drop);
	EXPECT_EQ(find<verbs::verbs_counters>("tx_post_errors"), nullptr);
}

TEST(Xstats, EfaSet)
{
	efa::efa_counters s{};
	expected e;
	RDGRAM_QP_COUNTERS(FILL)
	RDGRAM_EFA_COUNTERS(FILL)
	check_set(s, e);
	/* WRs the driver had taken and frees: a drop. */
	ASSERT_NE(find<efa::efa_counters>("tx_post_lost"), nullptr);
	EXPECT_EQ(find<efa::efa_counters>("tx_post_lost")->kind, counter_kind::drop);
	EXPECT_EQ(find<efa::efa_counters>("rx_sgid_read")->kind, counter_kind::event);
	EXPECT_EQ(find<efa::efa_counters>("tx_post_errors"), nullptr);
}

TEST(Xstats, Mlx5Set)
{
	mlx5::mlx5_counters s{};
	expected e;
	RDGRAM_QP_COUNTERS(FILL)
	RDGRAM_MLX5_COUNTERS(FILL)
	check_set(s, e);
	EXPECT_EQ(find<mlx5::mlx5_counters>("doorbells")->kind, counter_kind::event);
	EXPECT_EQ(find<mlx5::mlx5_counters>("rx_cqe_err")->kind, counter_kind::drop);
}

/* ---- through telemetry -------------------------------------------------- */

/* One request over the telemetry socket, as dpdk-telemetry.py sends it. */
std::string ask(const std::string &cmd)
{
	const std::string path = telemetry::socket_path();
	const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (fd < 0)
		return "socket: " + std::string(strerror(errno));
	sockaddr_un a{};
	a.sun_family = AF_UNIX;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
	std::string out;
	timeval tv{5, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
		out = "connect " + path + ": " + strerror(errno);
	} else {
		static char buf[1 << 16];
		ssize_t n = recv(fd, buf, sizeof(buf), 0); /* the greeting */
		if (n > 0 && send(fd, cmd.data(), cmd.size(), 0) == ssize_t(cmd.size()) &&
		    (n = recv(fd, buf, sizeof(buf), 0)) > 0)
			out.assign(buf, size_t(n));
		else
			out = "no reply to " + cmd;
	}
	close(fd);
	return out;
}

/* The JSON object after "key": (no nested objects in a QP's entry).
 * DPDK writes no spaces. */
std::string object_of(const std::string &json, const std::string &key)
{
	const size_t k = json.find("\"" + key + "\":{");
	if (k == std::string::npos)
		return "";
	const size_t b = json.find('{', k);
	return json.substr(b, json.find('}', b) - b + 1);
}
/* "name":v as a whole member of obj. */
bool has(const std::string &obj, const std::string &name, uint64_t v)
{
	const std::string f = "\"" + name + "\":" + std::to_string(v);
	for (size_t at = obj.find(f); at != std::string::npos; at = obj.find(f, at + 1)) {
		const char next = at + f.size() < obj.size() ? obj[at + f.size()] : 0;
		if (next == ',' || next == '}')
			return true;
	}
	return false;
}

TEST(Xstats, EveryDriverThroughTelemetry)
{
	soft::soft_counters sc{};
	verbs::verbs_counters vc{};
	efa::efa_counters ec{};
	mlx5::mlx5_counters mc{};
	sc.rx_bad_icrc = 3;
	sc.tx_stale_ah = 1;
	vc.tx_wc_errors = 7;
	vc.rx_wc_errors = 2;
	vc.tx_post_refused = 11; /* an event: not in the sums */
	ec.tx_post_lost = 5;
	ec.rx_cqe_errors = 4;
	mc.rx_cqe_err = 6;
	mc.tx_cqe_stray = 1;
	mc.doorbells = 99;

	telemetry::qp_publisher pub[4];
	const uint64_t now = rte_get_tsc_cycles();
	pub[0].publish(sc, nullptr, now);
	pub[1].publish(vc, nullptr, now);
	pub[2].publish(ec, nullptr, now);
	pub[3].publish(mc, nullptr, now);
	telemetry::attachment a;
	const char *names[] = {"soft_q", "verbs_q", "efa_q", "mlx5_q"};
	for (unsigned i = 0; i < 4; i++)
		a.qps.push_back(telemetry::qp_info{names[i], 0, -1, 0x100 + i, &pub[i]});
	a.app = "test_xstats";
	ASSERT_EQ(telemetry::attach(std::move(a)), 0);

	const std::string all = ask("/rdgram/qps");
	const std::string s = object_of(all, "soft_q"), v = object_of(all, "verbs_q"), e = object_of(all, "efa_q"),
			  m = object_of(all, "mlx5_q");
	EXPECT_NE(s.find("\"driver\":\"soft\""), std::string::npos) << all;
	EXPECT_TRUE(has(s, "rx_bad_icrc", 3)) << s;
	EXPECT_TRUE(has(s, "drops", 4)) << s;
	EXPECT_NE(v.find("\"driver\":\"verbs\""), std::string::npos) << all;
	EXPECT_TRUE(has(v, "tx_wc_errors", 7)) << v;
	EXPECT_TRUE(has(v, "tx_post_refused", 11)) << v;
	EXPECT_TRUE(has(v, "tx_drops", 7)) << v;
	EXPECT_TRUE(has(v, "rx_drops", 2)) << v;
	EXPECT_NE(e.find("\"driver\":\"efa\""), std::string::npos) << all;
	EXPECT_TRUE(has(e, "tx_post_lost", 5)) << e;
	EXPECT_TRUE(has(e, "drops", 9)) << e;
	EXPECT_NE(m.find("\"driver\":\"mlx5\""), std::string::npos) << all;
	EXPECT_TRUE(has(m, "rx_cqe_err", 6)) << m;
	EXPECT_TRUE(has(m, "doorbells", 99)) << m;
	EXPECT_TRUE(has(m, "drops", 7)) << m;
	/* Every counter of a set is there, under its name. */
	verbs::verbs_counters{}.for_each([&](const xstat_name &n, uint64_t) {
		EXPECT_NE(v.find("\"" + std::string(n.name) + "\":"), std::string::npos) << n.name;
	});

	/* One QP as xstats: value, kind and description. */
	const std::string x = ask("/rdgram/xstats,efa_q");
	const std::string lost = object_of(x, "tx_post_lost");
	EXPECT_NE(lost.find("\"value\":5"), std::string::npos) << x;
	EXPECT_NE(lost.find("\"kind\":\"drop\""), std::string::npos) << x;
	EXPECT_NE(lost.find("ibv_wr_complete"), std::string::npos) << x;
	EXPECT_NE(object_of(x, "rx_sgid_read").find("\"kind\":\"event\""), std::string::npos) << x;
	EXPECT_NE(ask("/rdgram/xstats,nosuch").find("null"), std::string::npos);

	telemetry::detach();
}

} // namespace
