/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Counters, as DPDK's xstats: every queue of every driver exposes its
 * counters as (name, description, value) in one iteration, and every
 * counter has one kind. The kinds are the rule, written here once:
 *
 *   traffic  what was delivered to the application or handed to the port
 *            (packets, payload bytes);
 *   drop     a message lost, under a named reason: a WR tx_burst accepted
 *            and never sent, a frame or completion rx_burst received and
 *            never delivered. A drop's name starts with tx_ or rx_ (its
 *            side, checked at compile time). On a loopback path
 *              sent = received + the drops of the sender's tx_ and the
 *                     receiver's rx_ counters
 *            and nothing else enters that sum (tests/common/accounting.h);
 *   event    anything else worth counting, never a lost message: bursts
 *            cut short (the caller keeps the WRs), receive buffers
 *            refused or short (the receive queue is shorter, no message
 *            was in them), completions, doorbells, control frames.
 *
 * A WR a provider refuses is an event when it goes back to the caller
 * (tx_burst returns fewer: verbs' tx_post_refused) and a drop when the
 * driver had accepted it already and frees it (EFA's tx_post_lost).
 *
 * Layout: each driver declares its counters as an X-macro list
 * X(name, kind, description) (drivers/<d>/<d>_counters.h) and a struct
 * that derives from qp_counters (the counters every driver sets, below)
 * with RDGRAM_COUNTER_SET. On the data path a counter is a plain field of
 * the queue's own struct, incremented in place (no indirection per
 * packet); the iteration, the sums by kind and telemetry's copy are
 * control-path.
 */
#ifndef RDGRAM_STATS_H
#define RDGRAM_STATS_H

#include <concepts>
#include <cstdint>
#include <cstring>
#include <iterator>

namespace rdgram {

enum class counter_kind : uint8_t { traffic, drop, event };

inline const char *counter_kind_name(counter_kind k)
{
	return k == counter_kind::traffic ? "traffic" : k == counter_kind::drop ? "drop" : "event";
}

/* One counter's identity: static, in its driver's table. */
struct xstat_name {
	const char *name;
	const char *desc;
	counter_kind kind;

	/* Receive side (rx_...); otherwise send side or neither. */
	constexpr bool rx() const { return name[0] == 'r' && name[1] == 'x' && name[2] == '_'; }
	constexpr bool tx() const { return name[0] == 't' && name[1] == 'x' && name[2] == '_'; }
};

/* Longest description, with its NUL: a telemetry string
 * (RTE_TEL_MAX_STRING_LEN). */
inline constexpr unsigned xstat_desc_max = 128;

/* Compile-time check of the rule's naming half (a drop names its side),
 * unique names, and descriptions that fit a telemetry string. */
constexpr bool xstat_names_valid(const xstat_name *n, unsigned count)
{
	for (unsigned i = 0; i < count; i++) {
		if (n[i].kind == counter_kind::drop && !n[i].rx() && !n[i].tx())
			return false;
		unsigned len = 0;
		while (n[i].desc[len] != 0)
			len++;
		if (len == 0 || len >= xstat_desc_max)
			return false;
		for (unsigned j = 0; j < i; j++) { /* unique names */
			const char *a = n[i].name, *b = n[j].name;
			while (*a != 0 && *a == *b)
				a++, b++;
			if (*a == *b)
				return false;
		}
	}
	return true;
}

enum class drop_side : uint8_t { any, rx, tx };

/* The rule's sum: the counters of kind drop (of one side: rx_ or tx_).
 * n and v: a table and its values, count of each. (Control path.) */
inline uint64_t xstat_drops(const xstat_name *n, const uint64_t *v, unsigned count, drop_side side)
{
	uint64_t t = 0;
	for (unsigned i = 0; i < count; i++)
		if (n[i].kind == counter_kind::drop &&
		    (side == drop_side::any || (side == drop_side::rx ? n[i].rx() : n[i].tx())))
			t += v[i];
	return t;
}

/* The counters every driver's queue sets: the generic slice of each
 * driver's set. X(name, kind, description). */
#define RDGRAM_QP_COUNTERS(X)                                                                  \
	X(rx_pkts, traffic, "packets delivered")                                               \
	X(rx_bytes, traffic, "payload bytes delivered")                                        \
	X(tx_pkts, traffic, "packets handed to the port")                                      \
	X(tx_bytes, traffic, "payload bytes handed to the port")                               \
	X(tx_port_full, event, "bursts cut short: send queue full (the caller keeps the rest)") \
	X(tx_stale_ah, drop, "AH handle generation no longer live")                            \
	X(tx_too_long, drop, "payload above the path MTU")                                     \
	X(tx_bad_mbuf, drop,                                                                   \
	  "payload mbuf unusable: chained where one segment is taken, short of head/tailroom " \
	  "(soft), outside every registered region")

#define RDGRAM_XSTAT_FIELD(name, kind, desc) uint64_t name;
#define RDGRAM_XSTAT_NAME(name, kind, desc) ::rdgram::xstat_name{#name, desc, ::rdgram::counter_kind::kind},
#define RDGRAM_XSTAT_VALUE(name, kind, desc) *v++ = this->name;
#define RDGRAM_XSTAT_ADD(name, kind, desc) this->name += o.name;

/* The generic slice. A driver's queue holds its own set (derived from
 * this); code that needs only these fields may take a qp_counters &, but
 * iterates and sums through the driver's set, never through this slice. */
struct qp_counters {
	RDGRAM_QP_COUNTERS(RDGRAM_XSTAT_FIELD)
};

/* The members of a driver's counter set Self (a struct deriving from
 * qp_counters), from its X-macro LIST of the driver's own counters: the
 * fields, the static name table (the generic counters first), the values
 * in table order, and +=. DRIVER names the driver ("soft", "verbs", ...). */
#define RDGRAM_COUNTER_SET(Self, DRIVER, LIST)                                                          \
	LIST(RDGRAM_XSTAT_FIELD)                                                                        \
	static constexpr const char *driver = DRIVER;                                                   \
	static constexpr ::rdgram::xstat_name xstat_names[] = {RDGRAM_QP_COUNTERS(RDGRAM_XSTAT_NAME)    \
								       LIST(RDGRAM_XSTAT_NAME)};        \
	static constexpr unsigned xstat_count = unsigned(std::size(xstat_names));                       \
	static_assert(::rdgram::xstat_names_valid(xstat_names, xstat_count),                            \
		      "a drop's name starts with rx_ or tx_; names unique; descriptions 1..127 chars");                        \
	/* Values in xstat_names order into v[xstat_count]. (Control path.) */                        \
	void xstat_values(uint64_t *v) const                                                            \
	{                                                                                               \
		RDGRAM_QP_COUNTERS(RDGRAM_XSTAT_VALUE)                                                  \
		LIST(RDGRAM_XSTAT_VALUE)                                                                \
	}                                                                                               \
	Self &operator+=(const Self &o)                                                                 \
	{                                                                                               \
		RDGRAM_QP_COUNTERS(RDGRAM_XSTAT_ADD)                                                    \
		LIST(RDGRAM_XSTAT_ADD)                                                                  \
		return *this;                                                                           \
	}                                                                                               \
	/* f(const xstat_name &, uint64_t value) for every counter. */                                \
	template <class F> void for_each(F &&f) const                                                   \
	{                                                                                               \
		uint64_t v[xstat_count];                                                                \
		xstat_values(v);                                                                        \
		for (unsigned i = 0; i < xstat_count; i++)                                              \
			f(xstat_names[i], v[i]);                                                        \
	}                                                                                               \
	/* Sums of the drops, by the rule (xstat_drops). */                                           \
	uint64_t drops(::rdgram::drop_side side = ::rdgram::drop_side::any) const                      \
	{                                                                                               \
		uint64_t v[xstat_count];                                                                \
		xstat_values(v);                                                                        \
		return ::rdgram::xstat_drops(xstat_names, v, xstat_count, side);                        \
	}                                                                                               \
	uint64_t rx_drops() const { return drops(::rdgram::drop_side::rx); }                           \
	uint64_t tx_drops() const { return drops(::rdgram::drop_side::tx); }

/* A driver's counter set. */
template <class S>
concept counter_set = requires(const S &s, uint64_t *v) {
	{ S::xstat_names[0] } -> std::convertible_to<const xstat_name &>;
	{ S::xstat_count } -> std::convertible_to<unsigned>;
	{ S::driver } -> std::convertible_to<const char *>;
	s.xstat_values(v);
};

} // namespace rdgram

#endif
