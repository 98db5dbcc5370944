/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * libFuzzer target: the TOML loaders. The input is the text of a config
 * file, given to
 *   - rdgram-perf's load_perf_config (apps/rdgram-perf/perf_config.cc), read
 *     from a file as the app does (a memfd);
 *   - rdgram's table_reader (dataplane/src/config.cc) through a schema that
 *     calls every getter, nested tables and arrays of tables included;
 *   - parse_ip / parse_mac on the raw text (short inputs).
 * toml++ itself is compiled into this target (TOML_IMPLEMENTATION in
 * toml_impl.cc) so that its parser is instrumented too: coverage guides the
 * fuzzer through the grammar, and ASan watches it.
 *
 * Invariants (abort): each loader either returns or throws config_error
 * whose message starts "<file>:<line>:<column>: " with line and column >= 1
 * and inside the text (any other exception escapes and aborts); a loaded
 * perf_config is within the documented ranges; every address and MAC a
 * getter returns formats and parses back to itself; no UB, no leak.
 */
#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "fuzz_common.h"
#include "perf_config.h"
#include "rdgram/config.h"

using namespace rdgram;
using namespace rdgram::fuzz;

namespace {

int memfd = -1;
std::string memfd_path;

/* "<file>:<line>:<col>: ..." with 1 <= line <= lines in text + 1 and
 * 1 <= col <= text size + 1. */
void check_error(const config_error &e, const std::string &file, const std::string &text)
{
	const std::string m = e.what();
	if (m.compare(0, file.size() + 1, file + ":") != 0) {
		fprintf(stderr, "config error without the file name: %s\n", m.c_str());
		FUZZ_CHECK(!"error starts with file:");
	}
	unsigned long line = 0, col = 0;
	int used = 0;
	const char *p = m.c_str() + file.size() + 1;
	if (sscanf(p, "%lu:%lu: %n", &line, &col, &used) != 2 || used == 0) {
		fprintf(stderr, "config error without line:column: %s\n", m.c_str());
		FUZZ_CHECK(!"error has line:column");
	}
	size_t lines = 1;
	for (char c : text)
		lines += c == '\n';
	if (line < 1 || line > lines || col < 1 || col > text.size() + 1) {
		fprintf(stderr, "config error position %lu:%lu outside the text (%zu lines, %zu bytes): %s\n", line,
			col, lines, text.size(), m.c_str());
		FUZZ_CHECK(!"error position inside the text");
	}
}

void check_gid(const wire::gid &g)
{
	wire::gid back{};
	FUZZ_CHECK(parse_ip(format_gid(g), &back) && back == g);
}
void check_mac(const rte_ether_addr &m)
{
	char s[32];
	snprintf(s, sizeof(s), "%02x:%02x:%02x:%02x:%02x:%02x", m.addr_bytes[0], m.addr_bytes[1], m.addr_bytes[2],
		 m.addr_bytes[3], m.addr_bytes[4], m.addr_bytes[5]);
	rte_ether_addr back{};
	FUZZ_CHECK(parse_mac(s, &back) && rte_is_same_ether_addr(&back, &m));
}

void perf_loader(const std::string &text)
{
	FUZZ_CHECK(ftruncate(memfd, 0) == 0);
	FUZZ_CHECK(pwrite(memfd, text.data(), text.size(), 0) == ssize_t(text.size()));
	perf::perf_config c;
	try {
		perf::load_perf_config(memfd_path, c);
	} catch (const config_error &e) {
		check_error(e, memfd_path, text);
		if (verbose())
			printf("perf: %s\n", e.what());
		return;
	}
	if (verbose())
		printf("perf: loaded\n");
	FUZZ_CHECK(c.test == "lat" || c.test == "bw" || c.test == "both" || c.test == "txonly");
	FUZZ_CHECK(c.mode == "loopback" || c.mode == "server" || c.mode == "client");
	FUZZ_CHECK(c.size <= 4096 && c.inline_size <= 4096);
	FUZZ_CHECK(c.lat_iters >= 1 && c.bw_iters >= 1 && c.tx_depth >= 1 && c.cq_mod >= 1);
	FUZZ_CHECK(c.timeout_s >= 0.1 && c.timeout_s <= 86400);
	FUZZ_CHECK(c.mtu >= 256 && c.mtu <= 4096 && (c.mtu & (c.mtu - 1)) == 0);
	FUZZ_CHECK(c.pkey >= 1 && c.max_ah >= 1);
	FUZZ_CHECK(c.neigh_retries >= 1 && c.neigh_retries <= 100);
	for (const perf::endpoint_config *e : {&c.server, &c.client}) {
		FUZZ_CHECK(e->qpn >= 2 && e->qpn <= 0xffffff && e->qkey <= 0x7fffffff);
		FUZZ_CHECK(!e->address.is_multicast() && !e->address.is_zero());
		check_gid(e->address);
		check_mac(e->mac);
	}
	FUZZ_CHECK(c.server.address.is_v4_mapped() == c.client.address.is_v4_mapped());
}

/* Every getter of table_reader, on keys a fuzzer finds in the dictionary;
 * tables nest three deep. */
void read_table(table_reader &t, int depth)
{
	(void)t.get_int("int", 0, -1000, 1000);
	(void)t.get_int("big", 0, INT64_MIN, INT64_MAX);
	(void)t.get_bool("bool", false);
	(void)t.get_double("float", 0, -1e9, 1e9);
	(void)t.get_string("str", "");
	(void)t.get_enum("enum", "a", {"a", "b", "c"});
	(void)t.get_string_array("strs");
	bool given = false;
	const rte_ether_addr mac = t.get_mac("mac", rte_ether_addr{}, &given);
	if (given)
		check_mac(mac);
	if (auto ip = t.get_ip("ip"))
		check_gid(*ip);
	for (const auto &g : t.get_ip_array("ips"))
		check_gid(g);
	if (depth < 3) {
		if (auto sub = t.get_table("sub"))
			read_table(*sub, depth + 1);
		for (auto &e : t.get_table_array("list"))
			read_table(e, depth + 1);
	}
	if (t.has("fail"))
		t.fail("fail", "nothing");
	t.finish();
}

void generic_reader(const std::string &text)
{
	static const std::string file = "fuzz.toml";
	try {
		toml::table root = parse_config_text(text, file);
		table_reader r(root, "", file);
		read_table(r, 0);
	} catch (const config_error &e) {
		check_error(e, file, text);
		if (verbose())
			printf("generic: %s\n", e.what());
		return;
	}
	if (verbose())
		printf("generic: loaded\n");
}

/* toml++ 3.3.0 (Debian 12's libtomlplusplus) reaches __builtin_unreachable
 * in impl::is_non_ascii_horizontal_whitespace() for the code points of its
 * lookup blocks 0, 11 and 63 that are not whitespace: U+00A1..U+0499,
 * U+2C5E..U+3057 and U+FB26..U+FEFE, except U+3000 (upstream issues #190,
 * #295; fixed by PR #305). This fuzzer found it at once ("m" U+FEFB). The
 * Debian library (GCC -O2) happens to report a parse error for such input,
 * but the behaviour is undefined; inputs holding such a code point
 * anywhere are skipped so that the fuzzer keeps exploring rdgram's code. */
bool hits_toml_unicode_ub(const std::string &s)
{
	for (size_t i = 0; i < s.size(); i++) {
		const auto b = [&](size_t k) { return uint8_t(s[k]); };
		uint32_t c;
		if (b(i) >= 0xc2 && b(i) <= 0xdf && i + 1 < s.size() && (b(i + 1) & 0xc0) == 0x80)
			c = uint32_t(b(i) & 0x1f) << 6 | (b(i + 1) & 0x3f);
		else if ((b(i) & 0xf0) == 0xe0 && i + 2 < s.size() && (b(i + 1) & 0xc0) == 0x80 &&
			 (b(i + 2) & 0xc0) == 0x80)
			c = uint32_t(b(i) & 0x0f) << 12 | uint32_t(b(i + 1) & 0x3f) << 6 | (b(i + 2) & 0x3f);
		else
			continue;
		if (c <= 0xa0 || c >= 0xfeff || c == 0x3000)
			continue;
		const uint32_t block = (c - 0xa0) / 0x3fa;
		if (block == 0 || block == 11 || block == 63)
			return true;
	}
	return false;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
	memfd = memfd_create("fuzz.toml", 0);
	FUZZ_CHECK(memfd >= 0);
	memfd_path = "/proc/self/fd/" + std::to_string(memfd);
	return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 1 << 16)
		return -1;
	const std::string text(reinterpret_cast<const char *>(data), size);
	if (hits_toml_unicode_ub(text))
		return -1; /* a known toml++ bug, not rdgram's: see above */
	perf_loader(text);
	generic_reader(text);
	if (size <= 64) {
		wire::gid g{};
		if (parse_ip(text, &g))
			check_gid(g);
		rte_ether_addr m{};
		if (parse_mac(text, &m))
			check_mac(m);
	}
	return 0;
}
