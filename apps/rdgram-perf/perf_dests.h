/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf txonly --dests N: the destinations the client cycles through,
 * prepared before the timed loop so that loop only walks an array of
 * handles (no RNG call, allocation or syscall per message). Each message
 * still takes the whole soft send path: the AH table lookup of its handle
 * (generation check, AV read), the AV copy into the frame, the headers and
 * the ICRC.
 */
#ifndef RDGRAM_PERF_DESTS_H
#define RDGRAM_PERF_DESTS_H

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <rte_byteorder.h>

#include "perf_config.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "soft_device.h"

namespace rdgram::perf {

/* N distinct destination GIDs: the peer's address plus 0..N-1 in its last
 * 32 bits (IPv4: 10.0.0.1 on, a /8 holds 16 M), skipping our own address,
 * zero and multicast; each a static neighbour (no ARP/ND), the first with
 * the peer's MAC, the others with a locally administered MAC of their own
 * (02:52 then the index). Static neighbours have no table limit; each costs
 * a hash-map entry and its slot list on the control thread's heap. */
inline std::vector<soft::neighbour> dest_neighbours(const endpoint_config &peer, const endpoint_config &self,
						     uint32_t n)
{
	std::vector<soft::neighbour> v;
	v.reserve(n);
	v.push_back({peer.address, peer.mac});
	uint32_t base;
	memcpy(&base, peer.address.raw + 12, 4);
	base = rte_be_to_cpu_32(base);
	for (uint32_t i = 1, off = 1; i < n; off++) {
		soft::neighbour d{peer.address, {}};
		const uint32_t a = rte_cpu_to_be_32(base + off);
		memcpy(d.ip.raw + 12, &a, 4);
		if (d.ip == self.address || d.ip.is_multicast() || d.ip.is_zero())
			continue;
		d.mac.addr_bytes[0] = 0x02;
		d.mac.addr_bytes[1] = 0x52;
		const uint32_t be = rte_cpu_to_be_32(i);
		memcpy(d.mac.addr_bytes + 2, &be, 4);
		v.push_back(d);
		i++;
	}
	return v;
}

/* Creates one AH per destination in one control-thread call, then orders
 * them: as created (round robin) or a fixed-seed permutation (random, the
 * same in every run). (Main thread.) 0 or the errno of the failed
 * create_ah (printed); *out holds the AHs created either way. */
inline int create_dests(runtime &rt, soft::soft_device &dev, const std::vector<soft::neighbour> &ns, bool random,
			std::vector<ah_handle> *out)
{
	int err = 0;
	size_t failed_at = 0;
	out->reserve(ns.size());
	rt.ctl().call([&] {
		ibv_ah_attr a{};
		a.is_global = 1;
		a.port_num = 1;
		a.grh.sgid_index = 0;
		a.grh.hop_limit = 64;
		for (size_t i = 0; i < ns.size(); i++) {
			memcpy(a.grh.dgid.raw, ns[i].ip.raw, 16);
			const ah_handle h = dev.create_ah(a, &err);
			if (err != 0) {
				failed_at = i;
				return;
			}
			out->push_back(h);
		}
	});
	if (err != 0) {
		fprintf(stderr, "rdgram-perf: --dests %zu: creating the AH to %s failed: %s\n", ns.size(),
			format_gid(ns[failed_at].ip).c_str(), strerror(err));
		return err;
	}
	if (random) {
		std::mt19937_64 rng(0x5eed);
		std::shuffle(out->begin(), out->end(), rng);
	}
	return 0;
}

} // namespace rdgram::perf

#endif
