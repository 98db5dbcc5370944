/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast: what the set-up on a driver (mcast_soft.h, mcast_verbs.h)
 * hands the poll loop, per worker: its queue of the publisher with an AH
 * and a Q_Key per group, and its queue of every subscriber. A fabric is
 * the node type's owner: Node is a driver's device, queues and set-up
 * state for one publisher or subscriber (soft: one device, a queue per
 * worker; verbs: a device and queue per worker). (Main thread.)
 */
#ifndef RDGRAM_MCAST_FABRIC_H
#define RDGRAM_MCAST_FABRIC_H

#include <memory>
#include <string>
#include <vector>

#include "mcast.h"
#include "rdgram/device.h"
#include "rdgram/runtime.h"

namespace rdgram::mcast {

template <class Node> class fabric_nodes {
public:
	using queue_type = typename Node::queue_type;

	fabric_nodes() = default;
	fabric_nodes(const fabric_nodes &) = delete;
	fabric_nodes &operator=(const fabric_nodes &) = delete;

	unsigned workers() const { return nw_; }
	/* Worker w's queue of the publisher; nullptr without one (--mode sub). */
	queue_type *pub_queue(unsigned w) const { return pubq_.empty() ? nullptr : pubq_[w]; }
	/* Worker w's AH and Q_Key per group index (set for the groups it publishes). */
	const std::vector<ah_handle> &group_ahs(unsigned w) const { return ahs_[w]; }
	const std::vector<uint32_t> &group_qkeys(unsigned w) const { return qkeys_[w]; }
	size_t subscribers() const { return subq_.size(); }
	/* Worker w's queue of subscriber k. */
	queue_type *sub_queue(size_t k, unsigned w) const { return subq_[k][w]; }

protected:
	~fabric_nodes() = default;
	/* A new node called name (messages say which). */
	Node *add(const std::string &name)
	{
		nodes_.push_back(std::make_unique<Node>());
		nodes_.back()->name = name;
		return nodes_.back().get();
	}
	/* The workers' names for messages: "" with one, " (worker w)" with several. */
	std::string worker_tag(unsigned w) const { return nw_ > 1 ? " (worker " + std::to_string(w) + ")" : ""; }

	const mcast_config *c_ = nullptr;
	runtime *rt_ = nullptr;
	unsigned nw_ = 1;
	std::vector<std::unique_ptr<Node>> nodes_;       /* in the order opened */
	std::vector<queue_type *> pubq_;                 /* per worker, once its AHs exist */
	std::vector<std::vector<queue_type *>> subq_;    /* [subscriber][worker], once joined */
	std::vector<std::vector<ah_handle>> ahs_;        /* [worker][group] */
	std::vector<std::vector<uint32_t>> qkeys_;       /* [worker][group] */
};

} // namespace rdgram::mcast

#endif
