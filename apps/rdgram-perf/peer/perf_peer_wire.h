/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The out-of-band TCP messages of the standard tools rdgram-perf can be
 * the peer of (--oob-proto): their exact bytes, their parsing, and a
 * guess at what a peer that speaks something else is speaking. Pure
 * functions, no sockets (perf_peer_oob.h does the I/O).
 *
 * perftest 4.5-0.17 (Debian's package; it reports version "6.06"),
 * src/perftest_communication.c:
 *   exchange_versions   16 bytes: the version string, NUL-padded
 *                       (strncpy(user_param.version, VERSION, 16))
 *   check_sys_data      two 4-byte big-endian ints, each its own
 *                       exchange: cycle_buffer (the page size) and
 *                       cache_line_size; only when the peer's version is
 *                       >= 5.32
 *   check_mtu           2 bytes: sprintf("%d") of the ibv_mtu enum (1 =
 *                       256 ... 5 = 4096) and its NUL (peer >= 5.31); the
 *                       smaller valid MTU of the two wins
 *   ethernet_write_keys KEY_PRINT_FMT_GID into char[KEY_MSG_SIZE_GID]
 *                       (108 bytes with the NUL) when the port has a GID
 *                       index (always on RoCE), KEY_PRINT_FMT into
 *                       char[KEY_MSG_SIZE] (59) when it has none
 *   ctx_close_connection a last hand-shake, then "done" (5 bytes with
 *                       its NUL) written by each side; nobody reads it
 *                       (HEAD no longer writes it)
 * Each exchange (ctx_xchg_data_ethernet, ctx_hand_shake): the client
 * writes then reads, the server reads then writes; each message is one
 * write() of its fixed size and one read() of the same size.
 *
 * rdma-core 44 libibverbs/examples/ud_pingpong.c (pp_client_exch_dest,
 * pp_server_exch_dest) and pingpong.c (gid_to_wire_gid): one message of
 * sizeof "0000:000000:000000:00000000000000000000000000000000" = 52 bytes,
 * "%04x:%06x:%06x:%s" of LID, QPN, PSN and the GID as 32 hex digits. The
 * GID digits are its 16 bytes in order: gid_to_wire_gid prints four
 * 32-bit words loaded from the GID's memory with "%08x" of htobe32(),
 * which on any host prints the word's bytes in memory order.
 */
#ifndef RDGRAM_PERF_PEER_WIRE_H
#define RDGRAM_PERF_PEER_WIRE_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace rdgram::perf::peer_wire {

/* Both tools: TCP port, Q_Key (perftest DEF_QKEY; ud_pingpong's literal),
 * the GRH room a UD receiver adds to its buffers (UD_ADDITION; size + 40). */
inline constexpr uint16_t default_port = 18515;
inline constexpr uint32_t qkey = 0x11111111;
inline constexpr uint32_t grh_room = 40;

/* ---- perftest ---- */

/* The version rdgram-perf says it is: perftest 4.5-0.17's. Below 6.28 a
 * HEAD perftest skips its binary parameter negotiation (negotiate_params),
 * and at or above 5.70 check_version_compatibility accepts it. */
inline constexpr const char *perftest_version = "6.06";
inline constexpr size_t version_len = 16;     /* MAX_VERSION */
inline constexpr double min_peer_version = 5.70;
inline constexpr size_t key_len_gid = 108;    /* KEY_MSG_SIZE_GID */
inline constexpr size_t key_len = 59;         /* KEY_MSG_SIZE */
inline constexpr size_t mtu_len = 2;          /* sizeof(char[2]) for peers >= 5.31 */
inline constexpr size_t done_len = 5;         /* sizeof "done" */
/* What perftest sends as system data: sysconf(_SC_PAGESIZE) and the
 * cache line (get_cache_line_size). The larger of each side's wins. */
inline constexpr uint32_t sys_cycle_buffer = 4096;
inline constexpr uint32_t sys_cache_line = 64;

/* struct pingpong_dest as the key message carries it. */
struct perftest_dest {
	uint32_t lid = 0;
	uint32_t out_reads = 1; /* SEND tests: 1 (check_link_and_mtu) */
	uint32_t qpn = 0;
	uint32_t psn = 0;
	uint32_t rkey = 0;
	uint64_t vaddr = 0;
	uint8_t gid[16] = {};
	uint32_t srqn = 0;
	bool operator==(const perftest_dest &o) const
	{
		return lid == o.lid && out_reads == o.out_reads && qpn == o.qpn && psn == o.psn && rkey == o.rkey &&
		       vaddr == o.vaddr && memcmp(gid, o.gid, 16) == 0 && srqn == o.srqn;
	}
};

/* The version message: the string and NULs to 16 bytes. */
inline std::string perftest_version_msg(const char *v = perftest_version)
{
	std::string m(version_len, '\0');
	memcpy(m.data(), v, std::min(strlen(v), version_len - 1));
	return m;
}

/* A 4-byte big-endian int (hton_int). */
inline std::string be32_msg(uint32_t v)
{
	const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
	return std::string(b, 4);
}
inline uint32_t be32_of(const char *b)
{
	return uint32_t(uint8_t(b[0])) << 24 | uint32_t(uint8_t(b[1])) << 16 | uint32_t(uint8_t(b[2])) << 8 |
	       uint32_t(uint8_t(b[3]));
}

/* IB MTU bytes <-> enum ibv_mtu (IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5;
 * perftest MTU_SIZE(i) = 1 << (7 + i)). 0: not an IB MTU. */
inline int mtu_enum(uint32_t bytes)
{
	for (int e = 1; e <= 5; e++)
		if (bytes == 1u << (7 + e))
			return e;
	return 0;
}
inline uint32_t mtu_bytes(int e) { return e >= 1 && e <= 5 ? 1u << (7 + e) : 0; }

/* The MTU message: "%d" of the enum and its NUL. */
inline std::string perftest_mtu_msg(int e)
{
	char b[mtu_len + 2] = {};
	snprintf(b, sizeof(b), "%d", e);
	return std::string(b, mtu_len);
}
/* The peer's MTU enum, 0 when the message is not one. */
inline int parse_perftest_mtu(const char *b)
{
	return b[0] >= '1' && b[0] <= '5' && b[1] == '\0' ? b[0] - '0' : 0;
}

/* The key message, exactly as ethernet_write_keys writes it (its size
 * includes the NUL sprintf leaves at the end). */
inline std::string perftest_key_msg(const perftest_dest &d, bool with_gid)
{
	char b[key_len_gid + 16] = {};
	if (with_gid) {
		const uint8_t *g = d.gid;
		snprintf(b, sizeof(b),
			 "%04x:%04x:%06x:%06x:%08x:%016llx:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:"
			 "%02x:%02x:%02x:%02x:%08x:",
			 d.lid, d.out_reads, d.qpn, d.psn, d.rkey, (unsigned long long)d.vaddr, g[0], g[1], g[2], g[3],
			 g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15], d.srqn);
		return std::string(b, key_len_gid);
	}
	snprintf(b, sizeof(b), "%04x:%04x:%06x:%06x:%08x:%016llx:%08x", d.lid, d.out_reads, d.qpn, d.psn, d.rkey,
		 (unsigned long long)d.vaddr, d.srqn);
	return std::string(b, key_len);
}

namespace detail {
inline bool hex_field(const char *&p, const char *end, unsigned width, uint64_t *v)
{
	if (end - p < ptrdiff_t(width))
		return false;
	uint64_t x = 0;
	for (unsigned i = 0; i < width; i++) {
		const char c = p[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return false;
		x = x << 4 | uint64_t(d);
	}
	p += width;
	*v = x;
	return true;
}
inline bool colon(const char *&p, const char *end)
{
	if (p >= end || *p != ':')
		return false;
	p++;
	return true;
}
/* The first bytes of b, printable, for an error message. */
inline std::string quote(const char *b, size_t n, size_t max = 40)
{
	std::string s = "\"";
	for (size_t i = 0; i < n && i < max; i++) {
		const unsigned char c = uint8_t(b[i]);
		char e[8];
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
			s += char(c);
		else {
			snprintf(e, sizeof(e), "\\x%02x", c);
			s += e;
		}
	}
	return s + (n > max ? "...\"" : "\"");
}
} // namespace detail

/* Parses a key message of key_len_gid (with_gid) or key_len bytes. The
 * fields are fixed-width hex as the writer's format makes them. false
 * with *err for anything else. */
inline bool parse_perftest_key(const char *b, size_t n, bool with_gid, perftest_dest *d, std::string *err)
{
	const size_t want = with_gid ? key_len_gid : key_len;
	const char *p = b, *end = b + n;
	uint64_t v[7] = {};
	static constexpr unsigned w[6] = {4, 4, 6, 6, 8, 16};
	bool ok = n == want;
	for (unsigned i = 0; ok && i < 6; i++)
		ok = detail::hex_field(p, end, w[i], &v[i]) && detail::colon(p, end);
	perftest_dest out;
	if (ok && with_gid) {
		for (unsigned i = 0; ok && i < 16; i++) {
			uint64_t x = 0;
			ok = detail::hex_field(p, end, 2, &x) && detail::colon(p, end);
			out.gid[i] = uint8_t(x);
		}
		ok = ok && detail::hex_field(p, end, 8, &v[6]) && detail::colon(p, end);
	} else if (ok) {
		ok = detail::hex_field(p, end, 8, &v[6]);
	}
	ok = ok && p == end - 1 && *p == '\0';
	if (!ok) {
		*err = std::string("malformed perftest key message (") + std::to_string(want) + " bytes " +
		       (with_gid ? "with" : "without") + " a GID expected): " + detail::quote(b, n, 60);
		return false;
	}
	out.lid = uint32_t(v[0]);
	out.out_reads = uint32_t(v[1]);
	out.qpn = uint32_t(v[2]);
	out.psn = uint32_t(v[3]);
	out.rkey = uint32_t(v[4]);
	out.vaddr = v[5];
	out.srqn = uint32_t(v[6]);
	*d = out;
	return true;
}

/* The peer's version from its 16-byte message: perftest reads it with
 * atof(); "X.YY" and NULs. false with *err when it is no version at all
 * (then guess_protocol says what the peer speaks instead). */
inline bool parse_perftest_version(const char *b, double *v, std::string *err)
{
	size_t len = strnlen(b, version_len);
	bool ok = len > 0 && len < version_len;
	size_t dots = 0;
	for (size_t i = 0; ok && i < len; i++) {
		if (b[i] == '.')
			dots++;
		else if (b[i] < '0' || b[i] > '9')
			ok = false;
	}
	for (size_t i = len; ok && i < version_len; i++)
		ok = b[i] == '\0';
	ok = ok && dots == 1 && b[0] != '.' && b[len - 1] != '.';
	if (!ok) {
		*err = "the peer's version message is not a perftest version: " + detail::quote(b, version_len);
		return false;
	}
	*v = strtod(std::string(b, len).c_str(), nullptr);
	return true;
}

/* ---- ibv_ud_pingpong ---- */

inline constexpr size_t pp_len = 52; /* sizeof "0000:000000:000000:" + 32 hex digits */

struct pp_dest {
	uint32_t lid = 0, qpn = 0, psn = 0;
	uint8_t gid[16] = {};
};

inline std::string pp_msg(const pp_dest &d)
{
	char b[pp_len + 16] = {};
	int k = snprintf(b, sizeof(b), "%04x:%06x:%06x:", d.lid, d.qpn, d.psn);
	for (int i = 0; i < 16; i++)
		k += snprintf(b + k, sizeof(b) - size_t(k), "%02x", d.gid[i]);
	return std::string(b, pp_len);
}

/* sscanf("%x:%x:%x:%s") then wire_gid_to_gid, held to the writer's
 * fixed widths. */
inline bool parse_pp_msg(const char *b, size_t n, pp_dest *d, std::string *err)
{
	const char *p = b, *end = b + n;
	uint64_t v[3] = {};
	bool ok = n == pp_len && detail::hex_field(p, end, 4, &v[0]) && detail::colon(p, end) &&
		  detail::hex_field(p, end, 6, &v[1]) && detail::colon(p, end) && detail::hex_field(p, end, 6, &v[2]) &&
		  detail::colon(p, end);
	pp_dest out;
	for (int i = 0; ok && i < 16; i++) {
		uint64_t x = 0;
		ok = detail::hex_field(p, end, 2, &x);
		out.gid[i] = uint8_t(x);
	}
	ok = ok && p == end - 1 && *p == '\0';
	if (!ok) {
		*err = "malformed ibv_ud_pingpong address message (52 bytes \"LID:QPN:PSN:GID\" expected): " +
		       detail::quote(b, n, 60);
		return false;
	}
	out.lid = uint32_t(v[0]);
	out.qpn = uint32_t(v[1]);
	out.psn = uint32_t(v[2]);
	*d = out;
	return true;
}

/* ---- the checks both sides make ---- */

inline bool gid_is_v4(const uint8_t *g)
{
	static constexpr uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(g, pfx, 12) == 0;
}
inline bool gid_is_zero(const uint8_t *g)
{
	static constexpr uint8_t z[16] = {};
	return memcmp(g, z, 16) == 0;
}

/* Before the AH: "" when the peer's GID can be reached from ours, else
 * the reason. perftest's ctx_check_gid_compatibility refuses an IPv4 GID
 * against an IPv6 one; a peer without a GID (ud_pingpong without -g, or
 * perftest without -x on InfiniBand) cannot be reached on RoCE.
 * tool: "perftest" or "ibv_ud_pingpong", for the hint. */
inline std::string check_peer_gid(const uint8_t *ours, const uint8_t *theirs, bool with_gid, const char *tool,
				  const std::string &ours_str, const std::string &theirs_str)
{
	if (!with_gid)
		return "";
	if (gid_is_zero(theirs))
		return std::string("the peer sent no GID: on RoCE, run ") + tool +
		       (strcmp(tool, "perftest") == 0 ? " with -x" : " with -g") + " <index of a RoCE v2 GID>";
	if (gid_is_v4(ours) != gid_is_v4(theirs))
		return "GID types differ: ours " + ours_str + " is " + (gid_is_v4(ours) ? "IPv4" : "IPv6") +
		       ", the peer's " + theirs_str + " " + (gid_is_v4(theirs) ? "IPv4" : "IPv6") +
		       " (perftest: \"Found Incompatibility issue with GID types\"): use GIDs of one IP version";
	return "";
}

/* After check_mtu: "" when size fits the agreed MTU (the smaller of the
 * two), else the reason, as perftest refuses a -s over it ("Max message
 * size in UD cannot be greater than MTU"). MTUs in bytes. */
inline std::string check_size_mtu(uint32_t size, uint32_t ours, uint32_t theirs)
{
	const uint32_t m = std::min(ours, theirs);
	if (size <= m)
		return "";
	return "size " + std::to_string(size) + " is above the MTU both sides support, " + std::to_string(m) + " (ours " +
	       std::to_string(ours) + ", the peer's " + std::to_string(theirs) +
	       "; perftest: \"Max message size in UD cannot be greater than MTU\")";
}

/* ---- what a peer speaks ---- */

enum class proto_guess { unknown, perftest, ud_pingpong, rdgram_perf, rdgram_coll, incomplete };

/* Guesses the exchange a peer speaks from the first n bytes it sent:
 * perftest starts with its version ("6.06\0..."), ibv_ud_pingpong with
 * "hhhh:hhhhhh:", rdgram's rendezvous with a little-endian magic
 * (apps/common/bootstrap.h: "RPRF" for rdgram-perf, "RCOL" for
 * rdgram-coll). incomplete: too few bytes to tell yet. */
inline proto_guess guess_protocol(const char *b, size_t n)
{
	auto is_hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
	auto is_dig = [](char c) { return c >= '0' && c <= '9'; };
	if (n >= 4 && memcmp(b, "FRPR", 4) == 0)
		return proto_guess::rdgram_perf;
	if (n >= 4 && memcmp(b, "LOCR", 4) == 0)
		return proto_guess::rdgram_coll;
	/* ud_pingpong: "hhhh:" */
	bool pp = true;
	for (size_t i = 0; pp && i < n && i < 12; i++)
		pp = i == 4 || i == 11 ? b[i] == ':' : is_hex(b[i]);
	if (pp)
		return n >= 12 ? proto_guess::ud_pingpong : proto_guess::incomplete;
	/* perftest: digits, one dot, digits, NUL */
	size_t i = 0;
	while (i < n && is_dig(b[i]))
		i++;
	if (i == n)
		return i <= 3 ? proto_guess::incomplete : proto_guess::unknown;
	if (i == 0 || b[i] != '.')
		return proto_guess::unknown;
	i++;
	while (i < n && is_dig(b[i]))
		i++;
	if (i == n)
		return proto_guess::incomplete;
	return b[i] == '\0' ? proto_guess::perftest : proto_guess::unknown;
}

inline const char *proto_guess_name(proto_guess g)
{
	switch (g) {
	case proto_guess::perftest: return "perftest's exchange (--oob-proto perftest)";
	case proto_guess::ud_pingpong: return "ibv_ud_pingpong's exchange (--oob-proto ud_pingpong)";
	case proto_guess::rdgram_perf: return "rdgram-perf's own rendezvous (--oob-proto rdgram)";
	case proto_guess::rdgram_coll: return "rdgram-coll's rendezvous";
	default: return "an exchange rdgram-perf does not know";
	}
}

} // namespace rdgram::perf::peer_wire

#endif
