/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The control-path interface every driver implements. Virtual calls are
 * fine here: nothing in this file runs per packet.
 */
#ifndef RDGRAM_DEVICE_H
#define RDGRAM_DEVICE_H

#include <cstdint>
#include <string>
#include <vector>

#include <infiniband/verbs.h>

#include "rdgram/queue_params.h"
#include "rdgram/ud.h"
#include "rdgram/wire.h"

namespace rdgram {

enum class link_layer : uint8_t { infiniband, ethernet };

/* The port facts the AH layer needs (ibv_query_port + the GID table). */
struct port_attr {
	link_layer link = link_layer::ethernet;
	bool grh_required = true; /* IBV_QPF_GRH_REQUIRED: RoCE always */
	uint32_t max_ah = 0;      /* ibv_device_attr.max_ah */
	uint32_t active_mtu = 0;  /* bytes: largest UD payload */
	uint16_t pkey = 0xffff;   /* P_Key table entry 0 */
	uint16_t lid = 0;
	int numa_node = 0;       /* the device's; SOCKET_ID_ANY (-1) when unknown (drivers/common/ibv) */
	std::vector<wire::gid> gids; /* index = sgid_index */
};

/*
 * The queue contract, not virtual because every driver's queue type
 * differs (the poll loop is a template over it): each device also has
 *
 *     using queue_type = X_queue;
 *     int create_queue(const queue_params &p, queue_type &q);
 *         0 or an errno value, error() explaining it; EINVAL for a field
 *         of p the driver cannot honour (queue_params.h). Every queue
 *         receives into the device's mempool.
 *     void destroy_queue(queue_type &q);
 *         no poll thread may use q any more; every mbuf q holds goes back.
 *     int register_mempool(rte_mempool *mp);
 *         memory a queue may also SEND from (queues created afterwards
 *         know it); 0 when already registered; soft: 0, nothing to do.
 *     rte_mempool *mempool() const;
 *         the device's pool: *_config::pool when given (the caller keeps
 *         it), otherwise nb_mbufs made at open on the port's NUMA node and
 *         freed at close.
 *
 * (Control path: main or control thread, before and after the queue's
 * poll thread runs.)
 */
class device {
public:
	virtual ~device() = default;
	virtual const char *driver_name() const = 0;
	virtual const port_attr &port() const = 0;

	/* ibv_create_ah(3) semantics. (Control thread only.) Returns a live
	 * handle, or ah_null with *err set to an errno value. */
	virtual ah_handle create_ah(const ibv_ah_attr &attr, int *err) = 0;
	/* ibv_destroy_ah(3) semantics. (Control thread only.) 0 or an errno
	 * value; a stale or already destroyed handle gives EINVAL. */
	virtual int destroy_ah(ah_handle h) = 0;
	/* Frees AH slots whose grace period has ended. (Control thread only.) */
	virtual void reclaim() {}
	/* AH slots destroyed but still waiting for their grace period (they
	 * become free without any eviction). (Control thread only.) */
	virtual uint32_t reclaim_pending() const { return 0; }
	/* Neighbour readiness for attr's destination, without blocking.
	 * (Control thread only.) 0: create_ah(attr) needs nothing from the
	 * network (neighbour known, multicast, or an IB port); EINPROGRESS:
	 * resolution is running (this call starts it if needed) and poll()
	 * moves it on; otherwise the errno create_ah(attr) would fail with:
	 * ETIMEDOUT (the neighbour never answered), EHOSTUNREACH (no way to
	 * resolve it, e.g. a static-only table without the entry), EINVAL. */
	virtual int prepare_ah(const ibv_ah_attr &attr)
	{
		(void)attr;
		return 0;
	}
	/* Control-thread housekeeping, called every control-loop iteration:
	 * neighbour frames, retries, TTL re-resolution, AH slot reclamation.
	 * now is rte_get_tsc_cycles(). Returns true when it did any work. */
	virtual bool poll(uint64_t now)
	{
		(void)now;
		reclaim();
		return false;
	}
	virtual uint32_t live_ahs() const = 0;
};

} // namespace rdgram

#endif
