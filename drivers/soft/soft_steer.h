/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/soft steering between the queues of one port: every QP belongs to
 * one queue (the poll thread that added it), and a datagram for it is
 * delivered by that queue's poll thread whatever queue the port put it on.
 *
 * A port spreads frames its own way (RSS, af_packet fanout, memif's queue
 * pairs, or rte_flow rules where it has them: soft_device's `steer`), so a
 * frame may land on the wrong queue. Its poll thread parses it up to the
 * destination QPN, finds the owner here, and hands the mbuf to the owner's
 * hand-off ring (a burst per owner and rx_burst, rte_ring multi-producer,
 * lock-free); the owner's rx_burst takes its ring before the port and parses
 * what it finds in full. A full ring is a named drop on the queue that
 * handed (rx_handoff_full), never a wait.
 *
 * Multicast: every QP attached to a group receives its copy (ibv_attach_mcast
 * (3)), on whichever queue it lives: the group table here says which queues
 * have members; the queue that got the frame sends a copy to each other one,
 * and each queue copies once more for its second and later local members.
 *
 * Threads: claim/release/join/leave from any thread (a mutex orders them:
 * the set-up path); owner(), group_queues() and the rings from the poll
 * threads, lock-free.
 */
#ifndef RDGRAM_SOFT_STEER_H
#define RDGRAM_SOFT_STEER_H

#include <atomic>
#include <cstring>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <rte_hash.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include "rdgram/wire.h"

namespace rdgram::soft {

/* How a handed frame is tagged (mbuf hash.usr, which the receiving queue
 * owns once it dequeued the frame; a port's RSS hash there is no longer
 * needed): bit 31 marks a frame that came through a hand-off ring. */
namespace handoff_tag {
inline constexpr uint32_t handed = 1u << 31;     /* unicast: deliver here or drop */
inline constexpr uint32_t group_copy = 1u << 30; /* a group's copy: local members only */
inline constexpr uint32_t member = 1u << 29;     /* a group's copy for QPN (low 24 bits) */
inline constexpr uint32_t qpn_mask = 0xffffffu;
} // namespace handoff_tag

class soft_steer {
public:
	static constexpr unsigned max_queues = 64; /* a group's queue set is a 64-bit mask */
	static constexpr unsigned max_groups = 64;

	soft_steer() = default;
	soft_steer(const soft_steer &) = delete;
	soft_steer &operator=(const soft_steer &) = delete;
	~soft_steer() { fini(); }

	/* Rings of ring_size frames for nb_queues queues on socket; the QPN
	 * table for max_qpns QPs (freed keys are reclaimed through qs when
	 * given, so a poll thread's lookup never reads a reused key). 0, or
	 * an errno value with *err. */
	int init(unsigned nb_queues, unsigned ring_size, unsigned max_qpns, int socket, rte_rcu_qsbr *qs,
		 std::string *err);
	/* Frees the frames still in the rings; returns how many. */
	unsigned fini();
	/* Frees the frames waiting in queue q's ring (a queue that stopped);
	 * returns how many. (No poll thread may use q.) */
	unsigned drain(uint16_t q);

	unsigned nb_queues() const { return unsigned(rings_.size()); }
	rte_ring *ring(uint16_t q) const { return rings_[q]; }

	/* QP qpn belongs to queue q. 0; EEXIST: another queue has it;
	 * ENOSPC: table full. */
	int claim(uint32_t qpn, uint16_t q);
	void release(uint32_t qpn, uint16_t q);
	/* The queue that owns qpn, or -1. (Poll threads; lock-free.) */
	int owner(uint32_t qpn) const
	{
		void *d;
		return rte_hash_lookup_data(qpns_, &qpn, &d) >= 0 ? int(uintptr_t(d)) : -1;
	}

	/* Queue q has its first member of g (join) or lost its last (leave).
	 * join: 0; ENOMEM: max_groups groups on the port. */
	int join(const wire::gid &g, uint16_t q);
	void leave(const wire::gid &g, uint16_t q);
	/* The queues with members of the group a frame is sent to: dst is
	 * its 4-byte IPv4 or 16-byte IPv6 destination. (Poll threads;
	 * lock-free: a group being re-used may be misread for a moment, and
	 * a queue that gets a copy it has no member for counts it as
	 * rx_unknown_qpn.) */
	uint64_t group_queues(bool v4, const uint8_t *dst) const
	{
		uint64_t m = 0;
		for (unsigned i = 0; i < ngroups_.load(std::memory_order_acquire); i++) {
			const uint64_t q = groups_[i].queues.load(std::memory_order_acquire);
			if (q == 0)
				continue;
			wire::gid g;
			groups_[i].get(&g);
			if (v4 ? g.is_v4_mapped() && memcmp(g.raw + 12, dst, 4) == 0 : memcmp(g.raw, dst, 16) == 0)
				m |= q;
		}
		return m;
	}

private:
	/* The GID as two atomic words: an entry re-used for another group
	 * while a poll thread reads it gives a mismatch or the new group,
	 * never undefined behaviour. */
	struct group {
		std::atomic<uint64_t> w[2]{};
		std::atomic<uint64_t> queues{0};
		void get(wire::gid *g) const
		{
			const uint64_t a = w[0].load(std::memory_order_relaxed), b = w[1].load(std::memory_order_relaxed);
			memcpy(g->raw, &a, 8);
			memcpy(g->raw + 8, &b, 8);
		}
		void set(const wire::gid &g)
		{
			uint64_t a, b;
			memcpy(&a, g.raw, 8);
			memcpy(&b, g.raw + 8, 8);
			w[0].store(a, std::memory_order_relaxed);
			w[1].store(b, std::memory_order_relaxed);
		}
		bool is(const wire::gid &g) const
		{
			wire::gid x;
			get(&x);
			return x == g;
		}
	};
	std::mutex mu_;
	std::vector<rte_ring *> rings_;
	rte_hash *qpns_ = nullptr;
	bool rcu_ = false;
	group groups_[max_groups];
	std::atomic<unsigned> ngroups_{0};
};

} // namespace rdgram::soft

#endif
