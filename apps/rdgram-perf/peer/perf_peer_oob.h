/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf --oob-proto perftest|ud_pingpong: the TCP side of being the
 * peer of ib_send_lat/ib_send_bw (-c UD) or ibv_ud_pingpong, message for
 * message as their sources do it (perf_peer_wire.h has the bytes and the
 * citations). Control path: blocking-style I/O bounded by one deadline,
 * run on the thread that owns the queue, which keeps polling it between
 * waits (the idle hook): a soft-driver port must answer the peer's ARP or
 * ND while the peer's ibv_create_ah waits for it in the middle of the
 * exchange.
 *
 * Every failure is an errno value and one line in *err: ETIMEDOUT (the
 * peer said nothing in time), ECONNRESET (it closed mid-exchange), EPROTO
 * (it speaks another exchange or version, or its message is malformed).
 */
#ifndef RDGRAM_PERF_PEER_OOB_H
#define RDGRAM_PERF_PEER_OOB_H

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "perf_peer_wire.h"

namespace rdgram::perf {

/* One TCP connection to the peer tool. (NOT thread safe: one owner.) */
class peer_link {
public:
	using clock = std::chrono::steady_clock;
	/* Called about every millisecond while a call waits. */
	using idle_fn = std::function<void()>;
	/* Checks a message's first n bytes as they arrive; false with *err
	 * when they cannot begin the message expected. */
	using prefix_fn = std::function<bool(const char *b, size_t n, std::string *err)>;

	peer_link() = default;
	peer_link(const peer_link &) = delete;
	peer_link &operator=(const peer_link &) = delete;
	~peer_link() { close(); }

	/* server: listens on hostport and accepts one connection, as
	 * perftest's and ud_pingpong's servers do; client: connects, trying
	 * again until the deadline while nobody listens. 0 or errno. */
	int open(const std::string &hostport, bool server, clock::time_point deadline, std::string *err);
	void set_idle(idle_fn f) { idle_ = std::move(f); }
	void set_deadline(clock::time_point d) { deadline_ = d; }
	clock::time_point deadline() const { return deadline_; }
	/* Reads exactly n bytes (what: the message, for errors). */
	int read_msg(void *buf, size_t n, const char *what, std::string *err, const prefix_fn &prefix = {});
	/* Writes n bytes in one send(), as the tools' single write() does. */
	int write_msg(const void *buf, size_t n, const char *what, std::string *err);
	/* Without waiting: true when the peer sent bytes not read yet, closed
	 * or reset the connection. (One poll() call.) */
	bool peer_spoke() const;
	/* Orderly end: shuts our side down, then reads what the peer still
	 * sends until it closes, for at most linger_s (so neither side resets
	 * the other over unread bytes). Returns what it read. */
	std::string finish(double linger_s);
	void close();
	bool is_open() const { return fd_ >= 0; }

private:
	int wait(int fd, short events, const char *what, std::string *err);
	int fd_ = -1;
	idle_fn idle_;
	clock::time_point deadline_{};
};

/* What the first exchanges of perftest's protocol settled. */
struct perftest_hello {
	std::string peer_version;  /* as it sent it */
	double peer_version_num = 0;
	uint32_t peer_cycle_buffer = 0, peer_cache_line = 0;
	int peer_mtu = 0;          /* ibv_mtu enum */
	int mtu = 0;               /* the agreed one: the smaller valid */
};

/* perftest's exchange (send_lat.c / send_bw.c main(), -c UD, one QP, no
 * rdma_cm), one object per connection:
 *   hello()       exchange_versions, check_version_compatibility,
 *                 check_sys_data, check_mtu
 *   hand_shake()  ctx_hand_shake: the first carries the addresses; the
 *                 later ones (after ctx_connect, the remote print, the
 *                 receive posting) the same key message again, which the
 *                 peer's must repeat too
 *   close()       ctx_close_connection: a last hand-shake, "done", end
 * The client writes first in every exchange. */
class perftest_session {
public:
	perftest_session(peer_link &l, bool client) : l_(l), client_(client) {}
	int hello(int my_mtu, perftest_hello *out, std::string *err);
	/* with_gid: 108-byte key messages (the peer uses them when it has a
	 * GID index: always on RoCE), else 59. The first call records the
	 * peer's message; the later ones must match it. */
	int hand_shake(const peer_wire::perftest_dest &mine, bool with_gid, peer_wire::perftest_dest *theirs,
		       const char *what, std::string *err);
	/* The closing hand-shake and "done"; *got_done: the peer's "done"
	 * came (perftest 6.06; HEAD sends none). */
	int close(const peer_wire::perftest_dest &mine, bool with_gid, bool *got_done, std::string *err);
	int hand_shakes() const { return n_; }

private:
	/* One exchange of n bytes: client writes then reads; server reads
	 * then writes. */
	int xchg(const std::string &mine, char *theirs, size_t n, const char *what, std::string *err,
		 const peer_link::prefix_fn &prefix = {});
	peer_link &l_;
	bool client_;
	int n_ = 0;
	peer_wire::perftest_dest first_{};
};

/* ibv_ud_pingpong's exchange. Client (pp_client_exch_dest): writes its
 * message, reads the server's, writes "done". Server
 * (pp_server_exch_dest): reads the client's message, runs connect (it
 * makes its AH there, as pp_connect_ctx does, before answering), writes
 * its own, reads "done". */
int ud_pingpong_client(peer_link &l, const peer_wire::pp_dest &mine, peer_wire::pp_dest *theirs, std::string *err);
int ud_pingpong_server(peer_link &l, const peer_wire::pp_dest &mine,
		       const std::function<int(const peer_wire::pp_dest &, std::string *)> &connect,
		       peer_wire::pp_dest *theirs, std::string *err);

} // namespace rdgram::perf

#endif
