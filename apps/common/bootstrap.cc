/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "bootstrap.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace rdgram::coll {

namespace {

bool parse_uint(const char *s, int *out)
{
	if (s == nullptr || *s == '\0')
		return false;
	char *end;
	errno = 0;
	const long v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0 || v > 1 << 24)
		return false;
	*out = int(v);
	return true;
}

using clk = std::chrono::steady_clock;

int ms_left(clk::time_point deadline)
{
	const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clk::now()).count();
	return d < 0 ? 0 : int(d);
}

/* Reads or writes exactly n bytes before the deadline. 0 or errno. */
int io_all(int fd, void *buf, size_t n, bool wr, clk::time_point deadline)
{
	auto *p = static_cast<uint8_t *>(buf);
	while (n > 0) {
		pollfd pf{fd, short(wr ? POLLOUT : POLLIN), 0};
		const int rc = ::poll(&pf, 1, ms_left(deadline));
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return errno;
		if (rc == 0)
			return ETIMEDOUT;
		const ssize_t k = wr ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k < 0)
			return errno;
		if (k == 0)
			return ECONNRESET;
		p += k;
		n -= size_t(k);
	}
	return 0;
}

/* Bytes as text when printable ("6.06"), else as hex (0x52505246). */
std::string printable(const void *p, size_t n)
{
	const auto *b = static_cast<const uint8_t *>(p);
	bool text = true;
	for (size_t i = 0; i < n; i++)
		text &= b[i] >= 0x20 && b[i] < 0x7f;
	std::string out = text ? "\"" : "0x";
	for (size_t i = 0; i < n; i++) {
		char x[4];
		snprintf(x, sizeof(x), text ? "%c" : "%02x", b[i]);
		out += x;
	}
	return text ? out + "\"" : out;
}

struct __attribute__((packed)) hello {
	uint32_t magic;
	uint32_t size;
	rank_addr addr;
};

} // namespace

bool detect_launcher(launch_env *out, std::string *err)
{
	*out = launch_env{};
	if (const char *r = getenv("OMPI_COMM_WORLD_RANK")) {
		out->launcher = "Open MPI";
		if (!parse_uint(r, &out->rank) || !parse_uint(getenv("OMPI_COMM_WORLD_SIZE"), &out->size) ||
		    out->rank >= out->size) {
			*err = "bad OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE in the environment";
			return false;
		}
		return true;
	}
	if (const char *r = getenv("PMIX_RANK"); r != nullptr && getenv("PMIX_NAMESPACE") != nullptr) {
		out->launcher = "PMIx";
		if (!parse_uint(r, &out->rank)) {
			*err = "bad PMIX_RANK in the environment";
			return false;
		}
		return true;
	}
	return true;
}

bool split_hostport(const std::string &s, std::string *host, uint16_t *port)
{
	const size_t c = s.rfind(':');
	if (c == std::string::npos || c == 0 || c + 1 >= s.size())
		return false;
	int p;
	if (!parse_uint(s.c_str() + c + 1, &p) || p == 0 || p > 65535)
		return false;
	*host = s.substr(0, c);
	if (host->size() > 2 && host->front() == '[' && host->back() == ']')
		*host = host->substr(1, host->size() - 2);
	*port = uint16_t(p);
	return true;
}

void rendezvous::close_all()
{
	for (int fd : fds_)
		if (fd >= 0)
			::close(fd);
	fds_.clear();
	if (listen_fd_ >= 0)
		::close(listen_fd_);
	listen_fd_ = -1;
}

int rendezvous::exchange(const std::string &hostport, unsigned rank, unsigned size, const rank_addr &self,
			 double timeout_s, std::vector<rank_addr> *table)
{
	std::string host;
	uint16_t port;
	if (!split_hostport(hostport, &host, &port))
		return fail(EINVAL, "rendezvous: expected host:port, got '" + hostport + "'");
	rank_ = rank;
	const auto deadline = clk::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
	addrinfo hints{}, *ai = nullptr;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = rank == 0 ? AI_PASSIVE : 0;
	if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &ai); rc != 0)
		return fail(EINVAL, "rendezvous: " + host + ": " + gai_strerror(rc));
	table->assign(size, rank_addr{});
	int rc = 0;
	if (rank == 0) {
		(*table)[0] = self;
		listen_fd_ = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		const int one = 1;
		if (listen_fd_ < 0 || setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
		    ::bind(listen_fd_, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(listen_fd_, int(size)) != 0) {
			rc = errno;
			freeaddrinfo(ai);
			return fail(rc, "rendezvous: listen on " + hostport + ": " + strerror(rc));
		}
		freeaddrinfo(ai);
		fds_.assign(size, -1);
		for (unsigned got = 1; got < size;) {
			pollfd pf{listen_fd_, POLLIN, 0};
			const int pr = ::poll(&pf, 1, ms_left(deadline));
			if (pr < 0 && errno == EINTR)
				continue;
			if (pr <= 0)
				return fail(ETIMEDOUT, "rendezvous: " + std::to_string(got) + " of " + std::to_string(size) +
							       " ranks arrived before the timeout");
			const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			hello h;
			/* The magic first: a peer of another exchange (perftest's
			 * client sends a 16-byte version and waits) is refused at
			 * once, not at the timeout. */
			if ((rc = io_all(fd, &h.magic, sizeof(h.magic), false, deadline)) != 0) {
				::close(fd);
				return fail(rc, std::string("rendezvous: reading a rank's address: ") + strerror(rc));
			}
			if (h.magic != magic_) {
				::close(fd);
				return fail(EPROTO, "rendezvous: the peer speaks another exchange: it began with " +
							    printable(&h.magic, sizeof(h.magic)) +
							    " (perftest and ibv_ud_pingpong: rdgram-perf --oob-proto)");
			}
			if ((rc = io_all(fd, reinterpret_cast<uint8_t *>(&h) + sizeof(h.magic), sizeof(h) - sizeof(h.magic),
					 false, deadline)) != 0) {
				::close(fd);
				return fail(rc, std::string("rendezvous: reading a rank's address: ") + strerror(rc));
			}
			if (h.size != size || h.addr.rank == 0 || h.addr.rank >= size ||
			    fds_[h.addr.rank] >= 0) {
				::close(fd);
				return fail(EPROTO, "rendezvous: a peer sent rank " + std::to_string(h.addr.rank) +
							    " of " + std::to_string(h.size) + " (expected a new rank of " +
							    std::to_string(size) + ")");
			}
			fds_[h.addr.rank] = fd;
			(*table)[h.addr.rank] = h.addr;
			got++;
		}
		for (unsigned r = 1; r < size; r++)
			if ((rc = io_all(fds_[r], table->data(), sizeof(rank_addr) * size, true, deadline)) != 0)
				return fail(rc, std::string("rendezvous: sending the table: ") + strerror(rc));
		return 0;
	}
	/* Others: rank 0 may not listen yet; retry until the deadline. */
	int fd = -1;
	for (;;) {
		fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		rc = errno;
		if (fd >= 0)
			::close(fd);
		if (ms_left(deadline) == 0) {
			freeaddrinfo(ai);
			return fail(ETIMEDOUT, "rendezvous: cannot reach rank 0 at " + hostport + ": " + strerror(rc));
		}
		usleep(20000);
	}
	freeaddrinfo(ai);
	fds_.push_back(fd);
	hello h{magic_, size, self};
	if ((rc = io_all(fd, &h, sizeof(h), true, deadline)) != 0 ||
	    (rc = io_all(fd, table->data(), sizeof(rank_addr) * size, false, deadline)) != 0)
		return fail(rc, std::string("rendezvous: exchange with rank 0: ") + strerror(rc));
	for (unsigned r = 0; r < size; r++)
		if ((*table)[r].rank != r)
			return fail(EPROTO, "rendezvous: rank 0 sent a malformed table");
	return 0;
}

int rendezvous::finish(double timeout_s, double mine, std::vector<double> *all,
		       const std::function<void()> &at_all)
{
	return finish(timeout_s, std::vector<double>{mine}, all, at_all);
}

int rendezvous::finish(double timeout_s, const std::vector<double> &mine, std::vector<double> *all,
		       const std::function<void()> &at_all)
{
	const auto deadline = clk::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
	const size_t k = mine.size(), bytes = k * sizeof(double);
	uint8_t b = 1;
	int rc;
	if (rank_ == 0) {
		all->assign(fds_.size() * k, 0);
		std::copy(mine.begin(), mine.end(), all->begin());
		for (size_t r = 1; r < fds_.size(); r++)
			if ((rc = io_all(fds_[r], all->data() + r * k, bytes, false, deadline)) != 0)
				return fail(rc, "finish: rank " + std::to_string(r) + ": " + strerror(rc));
		if (at_all)
			at_all();
		for (size_t r = 1; r < fds_.size(); r++)
			if ((rc = io_all(fds_[r], &b, 1, true, deadline)) != 0)
				return fail(rc, "finish: rank " + std::to_string(r) + ": " + strerror(rc));
		return 0;
	}
	std::vector<double> m = mine;
	if ((rc = io_all(fds_[0], m.data(), bytes, true, deadline)) != 0 ||
	    (rc = io_all(fds_[0], &b, 1, false, deadline)) != 0)
		return fail(rc, std::string("finish: rank 0: ") + strerror(rc));
	return 0;
}

} // namespace rdgram::coll
