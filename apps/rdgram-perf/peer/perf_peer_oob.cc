/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "perf_peer_oob.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap.h"

namespace rdgram::perf {

using namespace peer_wire;

namespace {

int fail(std::string *err, int e, const std::string &m)
{
	*err = m;
	return e;
}

/* Milliseconds to wait in one poll(): at most 1 with an idle hook. */
int slice_ms(peer_link::clock::time_point deadline, bool idle)
{
	const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - peer_link::clock::now()).count();
	if (left <= 0)
		return 0;
	return idle ? 1 : int(std::min<int64_t>(left, 1000));
}

void no_delay(int fd)
{
	const int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

} // namespace

void peer_link::close()
{
	if (fd_ >= 0)
		::close(fd_);
	fd_ = -1;
}

/* Waits until fd is ready for events, calling the idle hook meanwhile.
 * 0, or ETIMEDOUT at the deadline. */
int peer_link::wait(int fd, short events, const char *what, std::string *err)
{
	for (;;) {
		pollfd pf{fd, events, 0};
		const int ms = slice_ms(deadline_, bool(idle_));
		const int rc = ms > 0 ? ::poll(&pf, 1, ms) : ::poll(&pf, 1, 0);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return fail(err, errno, std::string(what) + ": poll: " + strerror(errno));
		if (clock::now() >= deadline_)
			return fail(err, ETIMEDOUT, std::string("timed out waiting for the peer in ") + what);
		if (idle_)
			idle_();
	}
}

int peer_link::open(const std::string &hostport, bool server, clock::time_point deadline, std::string *err)
{
	close();
	deadline_ = deadline;
	std::string host;
	uint16_t port;
	if (!coll::split_hostport(hostport, &host, &port))
		return fail(err, EINVAL, "expected HOST:PORT, got '" + hostport + "'");
	addrinfo hints{}, *ai = nullptr;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = server ? AI_PASSIVE : 0;
	if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &ai); rc != 0)
		return fail(err, EINVAL, host + ": " + gai_strerror(rc));
	if (server) {
		const int ls = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		const int one = 1;
		if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
		    ::bind(ls, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(ls, 1) != 0) {
			const int e = errno;
			if (ls >= 0)
				::close(ls);
			freeaddrinfo(ai);
			return fail(err, e, "listen on " + hostport + ": " + strerror(e));
		}
		freeaddrinfo(ai);
		int rc = wait(ls, POLLIN, "client connection", err);
		if (rc == 0) {
			fd_ = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
			if (fd_ < 0)
				rc = fail(err, errno, std::string("accept: ") + strerror(errno));
		}
		/* One client, as perftest's and ud_pingpong's servers take. */
		::close(ls);
		if (rc == 0)
			no_delay(fd_);
		return rc;
	}
	/* Client: non-blocking connect, so an unreachable host costs no more
	 * than the deadline; refused: the server is not up yet, try again. */
	int last = 0;
	for (;;) {
		const int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			last = errno;
			break;
		}
		int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
		if (rc != 0 && errno == EINPROGRESS) {
			std::string werr;
			rc = wait(fd, POLLOUT, "connection", &werr);
			if (rc == 0) {
				int so = 0;
				socklen_t sl = sizeof(so);
				getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl);
				rc = so;
			}
			errno = rc;
		}
		if (rc == 0) {
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
			no_delay(fd);
			fd_ = fd;
			freeaddrinfo(ai);
			return 0;
		}
		last = errno;
		::close(fd);
		if (clock::now() >= deadline_)
			break;
		/* About 100 ms before the next try, polling meanwhile. */
		const auto next = clock::now() + std::chrono::milliseconds(100);
		while (clock::now() < next && clock::now() < deadline_) {
			if (idle_)
				idle_();
			else
				usleep(1000);
		}
	}
	freeaddrinfo(ai);
	return fail(err, ETIMEDOUT,
		    "cannot connect to " + hostport + " before the timeout: " + strerror(last ? last : ETIMEDOUT));
}

int peer_link::read_msg(void *buf, size_t n, const char *what, std::string *err, const prefix_fn &prefix)
{
	auto *p = static_cast<char *>(buf);
	size_t got = 0;
	while (got < n) {
		if (int rc = wait(fd_, POLLIN, what, err); rc != 0) {
			if (rc == ETIMEDOUT && got > 0)
				*err = std::string("the peer stopped in the middle of ") + what + " (" + std::to_string(got) +
				       " of " + std::to_string(n) + " bytes) and sent nothing more before the timeout";
			return rc;
		}
		const ssize_t k = ::recv(fd_, p + got, n - got, 0);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k < 0)
			return fail(err, errno, std::string(what) + ": " + strerror(errno));
		if (k == 0) {
			std::string m = "the peer closed the connection during " + std::string(what) + " (" +
					std::to_string(got) + " of " + std::to_string(n) + " bytes)";
			if (got > 0 && prefix) {
				std::string perr;
				if (!prefix(p, got, &perr))
					m = perr;
			}
			return fail(err, ECONNRESET, m);
		}
		got += size_t(k);
		if (prefix && !prefix(p, got, err))
			return EPROTO;
	}
	return 0;
}

int peer_link::write_msg(const void *buf, size_t n, const char *what, std::string *err)
{
	const auto *p = static_cast<const char *>(buf);
	size_t done = 0;
	while (done < n) {
		if (int rc = wait(fd_, POLLOUT, what, err); rc != 0)
			return rc;
		const ssize_t k = ::send(fd_, p + done, n - done, MSG_NOSIGNAL);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k < 0)
			return fail(err, errno == EPIPE ? ECONNRESET : errno,
				    std::string("the peer closed the connection before ") + what + ": " + strerror(errno));
		done += size_t(k);
	}
	return 0;
}

bool peer_link::peer_spoke() const
{
	if (fd_ < 0)
		return true;
	pollfd pf{fd_, POLLIN, 0};
	return ::poll(&pf, 1, 0) > 0;
}

std::string peer_link::finish(double linger_s)
{
	std::string got;
	if (fd_ < 0)
		return got;
	::shutdown(fd_, SHUT_WR);
	const auto end = std::min(deadline_, clock::now() + std::chrono::milliseconds(int64_t(linger_s * 1000)));
	const auto saved = deadline_;
	deadline_ = end;
	for (;;) {
		std::string e;
		if (wait(fd_, POLLIN, "the end", &e) != 0)
			break;
		char b[64];
		const ssize_t k = ::recv(fd_, b, sizeof(b), 0);
		if (k <= 0)
			break;
		got.append(b, size_t(k));
	}
	deadline_ = saved;
	close();
	return got;
}

/* ---- perftest ---- */

int perftest_session::xchg(const std::string &mine, char *theirs, size_t n, const char *what, std::string *err,
			   const peer_link::prefix_fn &prefix)
{
	if (client_) {
		if (int rc = l_.write_msg(mine.data(), mine.size(), what, err); rc != 0)
			return rc;
		return l_.read_msg(theirs, n, what, err, prefix);
	}
	if (int rc = l_.read_msg(theirs, n, what, err, prefix); rc != 0)
		return rc;
	return l_.write_msg(mine.data(), mine.size(), what, err);
}

int perftest_session::hello(int my_mtu, perftest_hello *out, std::string *err)
{
	/* The peer's first bytes tell what it speaks: refuse anything but a
	 * perftest version as soon as it shows. */
	auto version_prefix = [](const char *b, size_t n, std::string *e) {
		const proto_guess g = guess_protocol(b, n);
		if (g == proto_guess::perftest || g == proto_guess::incomplete)
			return true;
		*e = std::string("the peer does not speak perftest's exchange: it speaks ") + proto_guess_name(g) +
		     ", its first bytes are " + detail::quote(b, n, 24);
		return false;
	};
	char v[version_len];
	if (int rc = xchg(perftest_version_msg(), v, sizeof(v), "the version exchange", err, version_prefix);
	    rc != 0) {
		if (rc == ECONNRESET && client_)
			*err += ": it may not be perftest (an ibv_ud_pingpong server closes so after reading our "
				"version as its address)";
		return rc;
	}
	if (!parse_perftest_version(v, &out->peer_version_num, err))
		return EPROTO;
	out->peer_version.assign(v, strnlen(v, sizeof(v)));
	/* check_version_compatibility: perftest refuses peers below 5.70. */
	if (out->peer_version_num < min_peer_version)
		return fail(err, EPROTO,
			    "the peer is perftest " + out->peer_version +
				    ", older than 5.70: perftest 6.06 refuses it too (check_version_compatibility)");
	/* check_sys_data (peer >= 5.32, true from here): page size, cache line. */
	char s[4];
	if (int rc = xchg(be32_msg(sys_cycle_buffer), s, 4, "the system data exchange (page size)", err); rc != 0)
		return rc;
	out->peer_cycle_buffer = be32_of(s);
	if (int rc = xchg(be32_msg(sys_cache_line), s, 4, "the system data exchange (cache line)", err); rc != 0)
		return rc;
	out->peer_cache_line = be32_of(s);
	/* check_mtu (peer >= 5.31: 2 bytes). */
	char m[mtu_len];
	if (int rc = xchg(perftest_mtu_msg(my_mtu), m, sizeof(m), "the MTU exchange", err); rc != 0)
		return rc;
	out->peer_mtu = parse_perftest_mtu(m);
	if (out->peer_mtu == 0)
		return fail(err, EPROTO,
			    "the peer's MTU message is not an ibv_mtu value (1 to 5): " + detail::quote(m, sizeof(m)));
	out->mtu = std::min(my_mtu, out->peer_mtu);
	return 0;
}

int perftest_session::hand_shake(const perftest_dest &mine, bool with_gid, perftest_dest *theirs, const char *what,
				 std::string *err)
{
	const size_t n = with_gid ? key_len_gid : key_len;
	/* A peer without a GID index (perftest without -x on InfiniBand)
	 * sends 59 bytes and waits: say so rather than wait for 108. */
	auto no_gid = [](const char *b, size_t got, std::string *e) {
		perftest_dest d;
		std::string ignored;
		if (got != key_len || !parse_perftest_key(b, got, false, &d, &ignored))
			return true;
		*e = "the peer's key message has no GID (59 bytes): on RoCE run perftest with -x <index of a "
		     "RoCE v2 GID>; on InfiniBand give rdgram-perf no [rdma] gid_index";
		return false;
	};
	char b[key_len_gid];
	if (int rc = xchg(perftest_key_msg(mine, with_gid), b, n, what, err, with_gid ? peer_link::prefix_fn(no_gid)
										       : peer_link::prefix_fn());
	    rc != 0)
		return rc;
	perftest_dest d;
	if (!parse_perftest_key(b, n, with_gid, &d, err)) {
		if (n_ == 0)
			*err += with_gid ? " (a peer without a GID index sends 59 bytes: run it with -x on RoCE)" : "";
		return EPROTO;
	}
	if (n_ == 0) {
		first_ = d;
	} else if (!(d == first_)) {
		char m[200];
		snprintf(m, sizeof(m),
			 "the peer's hand-shake %d (%s) is not its first key message again (QPN 0x%06x, was 0x%06x): "
			 "does it run more than one QP? rdgram-perf is the peer of one (no -q)",
			 n_ + 1, what, d.qpn, first_.qpn);
		return fail(err, EPROTO, m);
	}
	n_++;
	*theirs = d;
	return 0;
}

int perftest_session::close(const perftest_dest &mine, bool with_gid, bool *got_done, std::string *err)
{
	perftest_dest d;
	*got_done = false;
	if (int rc = hand_shake(mine, with_gid, &d, "the closing hand-shake", err); rc != 0)
		return rc;
	/* 6.06: each side writes "done" and closes; nobody reads it. */
	if (int rc = l_.write_msg("done", done_len, "\"done\"", err); rc != 0)
		return rc;
	const std::string rest = l_.finish(2.0);
	*got_done = rest.size() >= done_len && memcmp(rest.data(), "done", done_len) == 0;
	return 0;
}

/* ---- ibv_ud_pingpong ---- */

namespace {

bool pp_prefix(const char *b, size_t n, std::string *e)
{
	const proto_guess g = guess_protocol(b, n);
	if (g == proto_guess::ud_pingpong || g == proto_guess::incomplete)
		return true;
	*e = std::string("the peer does not speak ibv_ud_pingpong's exchange: it speaks ") + proto_guess_name(g) +
	     ", its first bytes are " + detail::quote(b, n, 24);
	return false;
}

} // namespace

int ud_pingpong_client(peer_link &l, const pp_dest &mine, pp_dest *theirs, std::string *err)
{
	const std::string m = pp_msg(mine);
	if (int rc = l.write_msg(m.data(), m.size(), "our address", err); rc != 0)
		return rc;
	char b[pp_len];
	if (int rc = l.read_msg(b, sizeof(b), "the server's address", err, pp_prefix); rc != 0)
		return rc;
	if (!parse_pp_msg(b, sizeof(b), theirs, err))
		return EPROTO;
	if (int rc = l.write_msg("done", done_len, "\"done\"", err); rc != 0)
		return rc;
	l.finish(1.0);
	return 0;
}

int ud_pingpong_server(peer_link &l, const pp_dest &mine, const std::function<int(const pp_dest &, std::string *)> &connect,
		       pp_dest *theirs, std::string *err)
{
	char b[pp_len];
	if (int rc = l.read_msg(b, sizeof(b), "the client's address", err, pp_prefix); rc != 0)
		return rc;
	if (!parse_pp_msg(b, sizeof(b), theirs, err))
		return EPROTO;
	if (int rc = connect(*theirs, err); rc != 0)
		return rc;
	const std::string m = pp_msg(mine);
	if (int rc = l.write_msg(m.data(), m.size(), "our address", err); rc != 0)
		return rc;
	char d[done_len];
	if (int rc = l.read_msg(d, sizeof(d), "the client's \"done\"", err); rc != 0)
		return rc;
	if (memcmp(d, "done", done_len) != 0)
		return fail(err, EPROTO, "the client sent " + detail::quote(d, sizeof(d)) + " where \"done\" belongs");
	l.close();
	return 0;
}

} // namespace rdgram::perf
