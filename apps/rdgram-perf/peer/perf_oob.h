/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf --oob: the server and the client swap what each needs to
 * reach the other (QPN, GID, LID, Q_Key) over one TCP connection before
 * the test, as perftest does. It is a two-rank rendezvous
 * (apps/common/bootstrap.h): the server is rank 0 and listens on
 * host:port, the client is rank 1 and connects, retrying until the
 * timeout. The hello magic "RPRF" keeps an rdgram-coll rank 0 on the same
 * port from pairing with it. This is --oob-proto rdgram (the default);
 * perftest's and ibv_ud_pingpong's exchanges are perf_peer_oob.h's.
 */
#ifndef RDGRAM_PERF_OOB_H
#define RDGRAM_PERF_OOB_H

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap.h"

namespace rdgram::perf {

inline constexpr uint32_t oob_magic = 0x52505246; /* "RPRF" */

struct oob_addr {
	uint8_t gid[16];
	uint32_t qpn, qkey;
	uint16_t lid;
	uint8_t mac[6]; /* soft driver: the port's MAC (no ARP needed); else 0 */
};

/* Swaps self for the peer's address. server: listen (rank 0), else
 * connect (rank 1). 0, or an errno value with *err (ETIMEDOUT, EPROTO for
 * a peer that is not an rdgram-perf of the other role, ...). */
inline int oob_exchange(const std::string &hostport, bool server, const oob_addr &self, double timeout_s,
			oob_addr *peer, std::string *err)
{
	coll::rendezvous rv(oob_magic);
	coll::rank_addr me{};
	me.rank = server ? 0 : 1;
	memcpy(me.gid, self.gid, 16);
	me.qpn = self.qpn;
	me.qkey = self.qkey;
	me.lid = self.lid;
	memcpy(me.mac, self.mac, 6);
	std::vector<coll::rank_addr> table;
	if (int rc = rv.exchange(hostport, me.rank, 2, me, timeout_s, &table); rc != 0) {
		*err = rv.error();
		return rc;
	}
	const coll::rank_addr &p = table[server ? 1 : 0];
	memcpy(peer->gid, p.gid, 16);
	peer->qpn = p.qpn;
	peer->qkey = p.qkey;
	peer->lid = p.lid;
	memcpy(peer->mac, p.mac, 6);
	return 0;
}

} // namespace rdgram::perf

#endif
