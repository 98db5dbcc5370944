/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The switch's data path: poll and send on the poll lcore, drain once it
 * stopped.
 */
#include "coll_switch.h"

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

namespace rdgram::coll {

bool eth_switch::poll()
{
	bool moved = false;
	for (sw_port &in : ports) {
		rte_mbuf *m[32];
		const unsigned n = rte_ring_dequeue_burst(in.from, (void **)m, 32, nullptr);
		moved |= n != 0;
		for (unsigned i = 0; i < n; i++) {
			const auto *e = rte_pktmbuf_mtod(m[i], const rte_ether_hdr *);
			const uint8_t *d = e->dst_addr.addr_bytes;
			const uint32_t r = uint32_t(d[4]) << 8 | d[5];
			if (m[i]->data_len < sizeof(*e) || d[0] != 0x02 || d[1] || d[2] || d[3] != 0xc0 ||
			    r >= ports.size()) {
				st.unknown_dst++;
				rte_pktmbuf_free(m[i]);
				continue;
			}
			sw_port &out = ports[r];
			out.out[out.nout++] = m[i];
		}
		/* One burst per output port per input burst. */
		for (sw_port &out : ports)
			if (out.nout != 0)
				send(out);
	}
	return moved;
}

void eth_switch::drain()
{
	for (sw_port &p : ports)
		for (rte_ring *r : {p.from, p.to}) {
			rte_mbuf *m[32];
			unsigned n;
			while ((n = rte_ring_dequeue_burst(r, (void **)m, 32, nullptr)) != 0) {
				rte_pktmbuf_free_bulk(m, n);
				st.in_flight_at_stop += n;
			}
		}
}

void eth_switch::send(sw_port &out)
{
	const unsigned k = rte_ring_enqueue_burst(out.to, (void **)out.out, out.nout, nullptr);
	st.forwarded += k;
	st.full += out.nout - k;
	for (unsigned i = k; i < out.nout; i++)
		rte_pktmbuf_free(out.out[i]);
	out.nout = 0;
}

} // namespace rdgram::coll
