/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast: the market-data message, the publisher's pacing and the
 * subscriber's per-stream sequence tracking. Everything here runs on a poll
 * thread per message: no heap, no syscall, no lock.
 */
#ifndef RDGRAM_MCAST_H
#define RDGRAM_MCAST_H

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "app_config.h"
#include "rdgram/wire.h"
#include "soft_config_toml.h"

namespace rdgram {
struct split_args; /* rdgram/runtime.h */
}

namespace rdgram::mcast {

/* The message header at the start of every payload (host byte order: the
 * tool talks to itself). tsc is the publisher's rte_rdtsc() just before the
 * send; one-way latency is receive TSC minus it, meaningful only when both
 * ends read the same TSC: one process (--mode both) or one host with an
 * invariant TSC (pub and sub processes side by side). */
struct msg_hdr {
	uint32_t magic;
	uint32_t publisher;
	uint64_t seq;
	uint64_t tsc;
	uint32_t group; /* index in the publisher's group list */
	uint32_t len;   /* whole payload, header included */
};
static_assert(sizeof(msg_hdr) == 32);
inline constexpr uint32_t msg_magic = 0x434d4452; /* "RDMC" */

/* Options (command line over config file). */
/* app_common: eal_args, capture; driver: "soft" (RoCEv2 over a DPDK port:
 * port, addresses) or "verbs" (an RDMA device through rdma-core; groups
 * joined through rdma_cm, the subscriber's QP attached with
 * ibv_attach_mcast); workers (--workers): poll threads, each with its own
 * queue of every port and its own QPs. The publisher's workers each own
 * the groups g with g % workers == w (a group's sequence numbers come from
 * one thread, as a feed's channel does). A subscriber's workers take
 * worker_groups: "split" (the same ownership: a feed handler's channels
 * sharded over its cores) or "all" (every worker's QP attaches every
 * group and receives every datagram, as that many receivers on separate
 * cores would). */
struct mcast_config : apps::app_common {
	std::string mode = "both";         /* pub, sub, both */
	std::vector<wire::gid> groups;     /* empty: 239.1.1.1 and ff15::1:1 */
	uint32_t subscribers = 2;          /* both: how many */
	double rate = 100000;              /* messages/s per group; 0: as fast as possible */
	uint64_t count = 20000;            /* messages per group; 0: until duration */
	double duration = 0;               /* seconds; 0: until count */
	uint32_t size = 64;                /* payload bytes, >= 32 */
	double status_interval = 1;        /* seconds; 0: off */
	std::vector<uint64_t> skip_seq;    /* fault: sequence numbers never sent */
	std::vector<uint64_t> dup_seq;     /* fault: sequence numbers sent twice */
	uint32_t qkey = 0x11111111;
	uint32_t qpn = 0x100;              /* the subscriber's QP (pub: source QP) */
	uint32_t publisher_id = 1;
	double idle_timeout = 2;           /* sub: stop this long after the last message */
	/* soft: [port] (soft_config_toml.h, docs/PORTS.md). pub/sub: the
	 * port, its devargs and addresses required (--port, --address);
	 * both: its settings (vlan, ecn, ...) for every net_ring port. */
	soft::port_config port;
	std::string hist_csv, hist_plot;
	std::string device;                /* verbs: ibv device; empty: the first with an active port */
	std::string local;                 /* verbs: the port's IP address for rdma_cm; empty: its RoCEv2 GID */
	std::string worker_groups = "split";
};

/* Whether worker w of n takes group g (subscriber with all_groups: every
 * group; publisher: never all). */
inline bool worker_takes(uint32_t g, uint32_t w, uint32_t n, bool all_groups)
{
	return all_groups || g % n == w;
}

/* Reads [mcast] of a TOML file into c; throws config_error with file:line:col. */
void load_mcast_config(const std::string &path, mcast_config &c);

/* The app's arguments (sa.app; -c's config file under them) into c, the
 * default groups filled in and the combination checked. -1 when the app
 * goes on; otherwise the exit status: 0 after --help, 2 after a one-line
 * error on stderr. */
int parse_command_line(const split_args &sa, mcast_config &c);

/* Why c cannot run (one line for the user), or nullptr. qkey_given: --qkey
 * was on the command line. */
const char *config_refusal(const mcast_config &c, bool qkey_given);

/* The index in addrs of the first address of g's family (IPv4 or IPv6),
 * or -1. */
inline int sgid_index_for(const std::vector<wire::gid> &addrs, const wire::gid &g)
{
	for (size_t i = 0; i < addrs.size(); i++)
		if (addrs[i].is_v4_mapped() == g.is_v4_mapped())
			return int(i);
	return -1;
}

/*
 * Sequence tracking of one stream (publisher, group): gaps (sequence numbers
 * skipped, counted as missing), late arrivals of a missing number
 * (reordered: no longer missing), duplicates, and numbers too old for the
 * window. A window of the last `window` numbers remembers which arrived.
 * (One writer: the subscriber's poll thread; the counters are relaxed
 * atomics so the status line can read them.)
 */
class seq_tracker {
public:
	static constexpr uint64_t window = 4096;

	/* Returns false for a duplicate or too-old number. */
	bool on_seq(uint64_t s)
	{
		if (!started_) {
			started_ = true;
			hi_ = s;
			set(s);
			return true;
		}
		if (s > hi_) {
			/* Clear the bits the window moves over; a jump past the
			 * whole window clears it all. */
			const uint64_t step = s - hi_;
			if (step >= window)
				memset(bits_, 0, sizeof(bits_));
			else
				for (uint64_t x = hi_ + 1; x <= s; x++)
					clr(x);
			add(missing_, step - 1);
			hi_ = s;
			set(s);
			return true;
		}
		if (hi_ - s >= window) {
			add(too_old_, 1);
			return false;
		}
		if (test(s)) {
			add(dups_, 1);
			return false;
		}
		set(s);
		add(missing_, ~uint64_t(0)); /* -1: it was counted missing */
		add(reordered_, 1);
		return true;
	}
	/* Messages after hi the publisher says it sent (end of run). */
	void tail(uint64_t last)
	{
		if (started_ && last > hi_)
			add(missing_, last - hi_);
	}
	uint64_t missing() const { return missing_.load(std::memory_order_relaxed); }
	uint64_t dups() const { return dups_.load(std::memory_order_relaxed); }
	uint64_t reordered() const { return reordered_.load(std::memory_order_relaxed); }
	uint64_t too_old() const { return too_old_.load(std::memory_order_relaxed); }
	bool started() const { return started_; }
	uint64_t highest() const { return hi_; }

private:
	static void add(std::atomic<uint64_t> &a, uint64_t v)
	{
		a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
	}
	void set(uint64_t s) { bits_[(s % window) / 64] |= 1ull << (s % 64); }
	void clr(uint64_t s) { bits_[(s % window) / 64] &= ~(1ull << (s % 64)); }
	bool test(uint64_t s) const { return bits_[(s % window) / 64] >> (s % 64) & 1; }

	bool started_ = false;
	uint64_t hi_ = 0;
	uint64_t bits_[window / 64]{};
	std::atomic<uint64_t> missing_{0}, dups_{0}, reordered_{0}, too_old_{0};
};

/* Token bucket on the TSC: one token per message, refilled at rate, at most
 * burst stored. take() is a load, a compare and an add. */
class pacer {
public:
	void init(double rate, uint64_t tsc_hz, uint64_t now, uint32_t burst = 32)
	{
		per_ = rate > 0 ? uint64_t(double(tsc_hz) / rate) : 0;
		if (per_ == 0)
			per_ = rate > 0 ? 1 : 0;
		cap_ = per_ * burst;
		t_ = now;
	}
	/* How many messages (up to want) may go now. */
	uint32_t take(uint64_t now, uint32_t want)
	{
		if (per_ == 0)
			return want;
		if (now > t_ + cap_)
			t_ = now - cap_; /* idle too long: a burst at most */
		uint32_t n = 0;
		while (n < want && t_ + per_ <= now) {
			t_ += per_;
			n++;
		}
		return n;
	}

private:
	uint64_t per_ = 0, cap_ = 0, t_ = 0;
};

} // namespace rdgram::mcast

#endif
