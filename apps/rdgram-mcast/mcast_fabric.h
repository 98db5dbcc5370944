/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast: what the set-up on a driver (mcast_soft.h, mcast_verbs.h)
 * hands the poll loop: the publisher's queue with an AH and a Q_Key per
 * group, and the subscribers' queues. A fabric is the node type's owner:
 * Node is a driver's device, queue (member q) and set-up state for one
 * publisher or subscriber. (Main thread.)
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
	using queue_type = decltype(Node::q);

	fabric_nodes() = default;
	fabric_nodes(const fabric_nodes &) = delete;
	fabric_nodes &operator=(const fabric_nodes &) = delete;

	/* The publisher's queue; nullptr without one (--mode sub). */
	queue_type *pub_queue() const { return pub_ != nullptr ? &pub_->q : nullptr; }
	const std::vector<ah_handle> &group_ahs() const { return ahs_; }     /* per group */
	const std::vector<uint32_t> &group_qkeys() const { return qkeys_; }  /* per group */
	size_t subscribers() const { return subs_.size(); }
	queue_type *sub_queue(size_t k) const { return &subs_[k]->q; }

protected:
	~fabric_nodes() = default;
	/* A new node called name (messages say which). */
	Node *add(const std::string &name)
	{
		nodes_.push_back(std::make_unique<Node>());
		nodes_.back()->name = name;
		return nodes_.back().get();
	}

	const mcast_config *c_ = nullptr;
	runtime *rt_ = nullptr;
	std::vector<std::unique_ptr<Node>> nodes_; /* in the order opened */
	Node *pub_ = nullptr;                      /* set once its AHs exist */
	std::vector<Node *> subs_;                 /* once joined */
	std::vector<ah_handle> ahs_;
	std::vector<uint32_t> qkeys_;
};

} // namespace rdgram::mcast

#endif
