/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/soft queue set-up (control path, out of line): attach binds a
 * soft_queue to its port queue, the AV replica of its poll thread's node
 * and the device's slow-path rings; the QPs, their multicast attachments,
 * the ICRC kernel and receive attribution by ahn are set here, before the
 * poll thread runs (or by it, between bursts); detach frees the TX stash
 * at teardown.
 */
#include "soft_datapath.h"

#include <cerrno>
#include <cstring>

#include <rte_mbuf.h>

#include "rdgram/burst_guard.h"

namespace rdgram::soft {

void soft_queue::attach(uint16_t port, uint16_t queue, rte_mempool *mp, const ah_table<soft_av> *ahs,
			const soft_port_view &view, rte_ring *ctl_rx, rte_ring *ctl_tx, int socket)
{
	port_ = port;
	queue_ = queue;
	guard_ = burst_guard::slot_for(port, queue);
	mp_ = mp;
	/* The AV replica on the poll thread's node: two words, so the TX
	 * lookup does not go through the table object. */
	ahs_ = ahs != nullptr ? ahs->for_socket(socket) : ah_table<soft_av>::view{};
	view_ = view;
	ctl_rx_ = ctl_rx;
	ctl_tx_ = ctl_tx;
	set_crc_plan(crc32_chosen());
}

unsigned soft_queue::detach()
{
	const unsigned n = nstash_ + nagain_;
	rte_pktmbuf_free_bulk(stash_, nstash_);
	rte_pktmbuf_free_bulk(again_, nagain_);
	nstash_ = 0;
	nagain_ = 0;
	mp_ = nullptr;
	steer_ = nullptr;
	return n;
}

void soft_queue::set_crc_kernel(crc32_kernel k)
{
	crc32_plan p;
	for (auto &x : p.kernel)
		x = k;
	set_crc_plan(p);
}

void soft_queue::set_crc_plan(const crc32_plan &p)
{
	crc_plan_ = p;
	crc_uniform_ = p.uniform();
	crc_ = p.kernel[0];
}

int soft_queue::add_qp(uint32_t qpn, uint32_t qkey, bool privileged)
{
	if (nqp_ == max_qps)
		return ENOSPC;
	if ((qkey & qkey_controlled) && !privileged)
		return EPERM;
	if (steer_ != nullptr)
		if (int rc = steer_->claim(qpn, queue_); rc != 0)
			return rc;
	qps_[nqp_++] = soft_qp{qpn, qkey, 0, privileged};
	return 0;
}

int soft_queue::remove_qp(uint32_t qpn)
{
	unsigned qi = 0;
	while (qi < nqp_ && qps_[qi].qpn != qpn)
		qi++;
	if (qi == nqp_)
		return EINVAL;
	/* Its groups go with it; the groups of the QPs after it follow their
	 * QP down one index. */
	unsigned k = 0;
	for (unsigned i = 0; i < nmc_; i++) {
		if (mc_[i].qi == qi) {
			const wire::gid g = mc_[i].gid;
			mc_[i].qi = ~0u; /* not a member any more for members_of */
			if (steer_ != nullptr && members_of(g) == 0)
				steer_->leave(g, queue_);
			continue;
		}
		mc_[k] = mc_[i];
		mc_[k].qi -= mc_[k].qi > qi ? 1 : 0;
		k++;
	}
	nmc_ = k;
	if (steer_ != nullptr)
		steer_->release(qpn, queue_);
	for (unsigned i = qi; i + 1 < nqp_; i++)
		qps_[i] = qps_[i + 1];
	nqp_--;
	if (sq_ >= nqp_)
		sq_ = 0;
	return 0;
}

unsigned soft_queue::members_of(const wire::gid &g) const
{
	unsigned n = 0;
	for (unsigned i = 0; i < nmc_; i++)
		n += mc_[i].qi != ~0u && mc_[i].gid == g;
	return n;
}

int soft_queue::attach_mcast(uint32_t qpn, const wire::gid &g)
{
	if (!g.is_multicast())
		return EINVAL;
	unsigned qi = 0;
	while (qi < nqp_ && qps_[qi].qpn != qpn)
		qi++;
	if (qi == nqp_)
		return EINVAL;
	for (unsigned i = 0; i < nmc_; i++)
		if (mc_[i].gid == g && mc_[i].qi == qi)
			return 0;
	if (nmc_ == max_mcast)
		return ENOMEM;
	/* The port learns this queue has members with its first one. */
	if (steer_ != nullptr && members_of(g) == 0)
		if (int rc = steer_->join(g, queue_); rc != 0)
			return rc;
	mc_[nmc_++] = mcast_member{g, qi};
	return 0;
}

int soft_queue::detach_mcast(uint32_t qpn, const wire::gid &g)
{
	if (!g.is_multicast())
		return EINVAL;
	for (unsigned i = 0; i < nmc_; i++)
		if (mc_[i].gid == g && qps_[mc_[i].qi].qpn == qpn) {
			mc_[i] = mc_[--nmc_];
			if (steer_ != nullptr && members_of(g) == 0)
				steer_->leave(g, queue_);
			return 0;
		}
	return EINVAL;
}

void soft_queue::report_ahn(const dest_cache *by_gid)
{
	ahn_ = by_gid;
}

} // namespace rdgram::soft
