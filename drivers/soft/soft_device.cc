/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "soft_device.h"
#include "soft_port.h"

#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_jhash.h>
#include <rte_kvargs.h>
#include <rte_mbuf.h>

#include "rdgram/log.h"

namespace rdgram::soft {

namespace {
bool valid_ib_mtu(uint32_t m)
{
	return m == 256 || m == 512 || m == 1024 || m == 2048 || m == 4096;
}

/* Frames for or from the control thread in flight at once: a burst of
 * requests from many prepare_ah calls, or of ARP/ND from the wire. More
 * wait for their retransmission (out) or are dropped and counted (in). */
constexpr unsigned ctl_ring_size = 1024;
constexpr uint32_t no_neigh = UINT32_MAX;

/* What a port's PMD asks of the receive buffers and frames, apart from what
 * the MTU makes: a PMD may copy a whole ring slot into each mbuf whatever
 * the frame in it, and a kernel-backed port may cut frames short. */
struct port_limits {
	std::string driver;               /* rte_eth_dev_info driver_name */
	uint32_t rx_data = 0;             /* bytes past the headroom every RX mbuf must hold */
	std::string rx_data_why;
	uint32_t max_frame = UINT32_MAX;  /* longest Ethernet frame (no FCS) carried whole */
	std::string max_frame_why;
};

/* The value of key in a port's devargs ("" when absent). */
std::string devarg(const rte_devargs *da, const char *key)
{
	std::string v;
	if (da == nullptr || da->args == nullptr)
		return v;
	if (rte_kvargs *kv = rte_kvargs_parse(da->args, nullptr); kv != nullptr) {
		if (const char *s = rte_kvargs_get(kv, key); s != nullptr)
			v = s;
		rte_kvargs_free(kv);
	}
	return v;
}

/* The MTU of a kernel interface in this thread's network namespace
 * (SIOCGIFMTU, netdevice(7)); 0 when it cannot be read. */
uint32_t iface_mtu(const char *name)
{
	ifreq ifr{};
	if (name == nullptr || strlen(name) >= sizeof(ifr.ifr_name))
		return 0;
	const int s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0)
		return 0;
	memcpy(ifr.ifr_name, name, strlen(name));
	const int rc = ioctl(s, SIOCGIFMTU, &ifr);
	::close(s);
	return rc == 0 && ifr.ifr_mtu > 0 ? uint32_t(ifr.ifr_mtu) : 0;
}

port_limits limits_of(uint16_t port)
{
	port_limits l;
	rte_eth_dev_info di{};
	if (rte_eth_dev_info_get(port, &di) != 0)
		return l;
	l.driver = di.driver_name != nullptr ? di.driver_name : "?";
	/* rte_eth_rx_queue_setup refuses (EINVAL) a pool whose data room is
	 * below RTE_PKTMBUF_HEADROOM + min_rx_bufsize. */
	if (di.min_rx_bufsize > 0) {
		l.rx_data = di.min_rx_bufsize;
		l.rx_data_why = l.driver + "'s min_rx_bufsize";
	}
	if (l.driver == "net_af_xdp" && 2048 > l.rx_data) {
		/* Its eth_rx_queue_setup, when built without
		 * XDP_UMEM_UNALIGNED_CHUNK_FLAG, wants ETH_AF_XDP_FRAME_SIZE
		 * (XSK_UMEM__DEFAULT_FRAME_SIZE, 2048) in every mbuf (ENOMEM
		 * otherwise). */
		l.rx_data = 2048;
		l.rx_data_why = "net_af_xdp's 2048-byte umem frame";
	}
	if (l.driver == "net_af_packet") {
		const rte_devargs *da = di.device != nullptr ? rte_dev_devargs(di.device) : nullptr;
		/* DFLT_FRAME_SIZE unless framesz= (atoi, as the PMD reads it). */
		const int given = atoi(devarg(da, "framesz").c_str());
		const uint32_t fs = given > 0 ? uint32_t(given) : 2048;
		/* Its eth_rx_queue_setup wants every mbuf to hold a whole ring
		 * frame's data area, framesz less TPACKET2_HDRLEN -
		 * sizeof(sockaddr_ll), and fails with ENOMEM otherwise ("2016
		 * bytes will not fit in mbuf"). */
		const uint32_t slot = uint32_t(TPACKET2_HDRLEN - sizeof(sockaddr_ll));
		if (fs > slot && fs - slot > l.rx_data) {
			l.rx_data = fs - slot;
			l.rx_data_why = "net_af_packet's frame (framesz " + std::to_string(fs) + " less its " +
					std::to_string(slot) + "-byte tpacket2 header)";
		}
		/* Linux tpacket_rcv (net/packet/af_packet.c) puts a TPACKET_V2
		 * frame's MAC header at TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - 14
		 * (66) and cuts what passes the end of the slot: longer frames
		 * arrive truncated. */
		const uint32_t macoff = uint32_t(TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - RTE_ETHER_HDR_LEN);
		if (fs > macoff) {
			l.max_frame = fs - macoff;
			l.max_frame_why = "net_af_packet's framesz " + std::to_string(fs) + " holds frames of " +
					  std::to_string(l.max_frame) + " bytes (give framesz= and blocksz= a power of two above the frame + " +
					  std::to_string(macoff) + ")";
		}
		/* The kernel drops what exceeds the interface MTU, sending
		 * (tpacket_snd) and receiving (a veth: is_skb_forwardable). */
		const std::string ifname = devarg(da, "iface");
		if (const uint32_t m = iface_mtu(ifname.c_str()); m != 0 && m + RTE_ETHER_HDR_LEN < l.max_frame) {
			l.max_frame = m + RTE_ETHER_HDR_LEN;
			l.max_frame_why = "interface " + ifname + " has MTU " + std::to_string(m) +
					  " (ip link set " + ifname + " mtu ...)";
		}
	}
	return l;
}

void free_ring(rte_ring *&r)
{
	if (r == nullptr)
		return;
	void *m;
	while (rte_ring_dequeue(r, &m) == 0) {
		RDGRAM_TSAN_ACQUIRE(m);
		rte_pktmbuf_free(static_cast<rte_mbuf *>(m));
	}
	rte_ring_free(r);
	r = nullptr;
}
} // namespace

rte_ether_addr multicast_mac(const wire::gid &g)
{
	rte_ether_addr m{};
	if (g.is_v4_mapped()) {
		m.addr_bytes[0] = 0x01;
		m.addr_bytes[1] = 0x00;
		m.addr_bytes[2] = 0x5e;
		m.addr_bytes[3] = g.raw[13] & 0x7f;
		m.addr_bytes[4] = g.raw[14];
		m.addr_bytes[5] = g.raw[15];
	} else {
		m.addr_bytes[0] = 0x33;
		m.addr_bytes[1] = 0x33;
		memcpy(&m.addr_bytes[2], &g.raw[12], 4);
	}
	return m;
}

soft_device::~soft_device() { close(); }

int soft_device::open(const soft_config &cfg)
{
	cfg_ = cfg;
	if (!valid_ib_mtu(cfg.mtu)) {
		err_ = "mtu must be one of 256, 512, 1024, 2048, 4096";
		return EINVAL;
	}
	if (cfg.addresses.empty()) {
		err_ = "the port needs at least one IPv4 or IPv6 address";
		return EINVAL;
	}
	if (cfg.vlan > 4094) {
		err_ = "vlan " + std::to_string(cfg.vlan) + ": an 802.1Q VLAN ID is 1 to 4094 (0: untagged)";
		return EINVAL;
	}
	if (cfg.neigh_ttl_ms == 0 || cfg.neigh_retry_ms == 0 || cfg.neigh_retries == 0) {
		err_ = "neigh_ttl_ms, neigh_retry_ms and neigh_retries must be at least 1";
		return EINVAL;
	}
	if (!rte_eth_dev_is_valid_port(cfg.port_id)) {
		err_ = "no DPDK port " + std::to_string(cfg.port_id);
		return ENODEV;
	}
	const int socket = rte_eth_dev_socket_id(cfg.port_id) < 0 ? 0 : rte_eth_dev_socket_id(cfg.port_id);

	char name[RTE_MEMPOOL_NAMESIZE];
	/* Room for the largest frame (headers + MTU payload + pad + ICRC),
	 * for what the caller asked (min_data_room), and for what the PMD
	 * copies into each buffer: whichever is largest. */
	const port_limits lim = limits_of(cfg.port_id);
	const uint32_t tag_len = cfg.vlan != 0 ? 4 : 0; /* 802.1Q */
	uint32_t room = RTE_PKTMBUF_HEADROOM + uint32_t(wire::hdr_len_v6 + wire::immdt_len) + tag_len + cfg.mtu + 8;
	std::string room_why = cfg.vlan != 0 ? "the MTU's largest frame (802.1Q-tagged headers + MTU + ICRC + pad)"
					     : "the MTU's largest frame (headers + MTU + ICRC + pad)";
	if (RTE_PKTMBUF_HEADROOM + uint64_t(cfg.min_data_room) > room) {
		room = RTE_PKTMBUF_HEADROOM + cfg.min_data_room;
		room_why = "min_data_room";
	}
	if (RTE_PKTMBUF_HEADROOM + uint64_t(lim.rx_data) > room) {
		room = RTE_PKTMBUF_HEADROOM + lim.rx_data;
		room_why = lim.rx_data_why;
	}
	if (room > UINT16_MAX) {
		err_ = "mbuf data room " + std::to_string(room) + " (the headroom plus " + room_why +
		       ") exceeds an mbuf's 65535";
		return EINVAL;
	}
	if (cfg.pool != nullptr) {
		if (rte_pktmbuf_data_room_size(cfg.pool) < room) {
			err_ = "pool: data room " + std::to_string(rte_pktmbuf_data_room_size(cfg.pool)) +
			       " is short of " + std::to_string(room) + ", the headroom plus " + room_why;
			return EINVAL;
		}
		mp_ = cfg.pool;
		own_mp_ = false;
	} else {
		snprintf(name, sizeof(name), "rdgram_soft%u", cfg.port_id);
		mp_ = rte_pktmbuf_pool_create_by_ops(name, cfg.nb_mbufs, 256, 0, uint16_t(room), socket,
						     RDGRAM_MEMPOOL_OPS);
		if (mp_ == nullptr) {
			err_ = std::string("mempool: ") + rte_strerror(rte_errno);
			return rte_errno ? rte_errno : ENOMEM;
		}
		own_mp_ = true;
	}
	/* Neighbour frames: in from any poll thread (multi-producer), out from
	 * the control thread to queue 0's poll thread (one each side). */
	static std::atomic<unsigned> ring_seq{0};
	const unsigned rs = ring_seq.fetch_add(1);
	snprintf(name, sizeof(name), "rdgram_nrx%u", rs);
	ctl_rx_ = rte_ring_create(name, ctl_ring_size, socket, RING_F_SC_DEQ);
	snprintf(name, sizeof(name), "rdgram_ntx%u", rs);
	ctl_tx_ = rte_ring_create(name, ctl_ring_size, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (ctl_rx_ == nullptr || ctl_tx_ == nullptr) {
		err_ = std::string("neighbour rings: ") + rte_strerror(rte_errno);
		return rte_errno ? rte_errno : ENOMEM;
	}

	rte_eth_conf conf{};
	/* A VLAN port: the tag inserted by the port where it can (the TX
	 * path writes it otherwise); received tags are taken either way. */
	vlan_tx_offload_ = false;
	if (cfg.vlan != 0) {
		rte_eth_dev_info di{};
		if (rte_eth_dev_info_get(cfg.port_id, &di) == 0 && (di.tx_offload_capa & RTE_ETH_TX_OFFLOAD_VLAN_INSERT)) {
			conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_VLAN_INSERT;
			vlan_tx_offload_ = true;
		}
	}
	int rc = rte_eth_dev_configure(cfg.port_id, cfg.nb_queues, cfg.nb_queues, &conf);
	if (rc < 0) {
		err_ = std::string("rte_eth_dev_configure: ") + strerror(-rc);
		return -rc;
	}
	uint16_t nrx = cfg.rx_desc, ntx = cfg.tx_desc;
	rte_eth_dev_adjust_nb_rx_tx_desc(cfg.port_id, &nrx, &ntx);
	nrx_ = nrx;
	ntx_ = ntx;
	queue_live_.assign(cfg.nb_queues, false);
	/* Several queues: a datagram that lands on the wrong one is handed
	 * to its QP's (soft_steer.h). A ring holds a port ring's worth. */
	if (cfg.nb_queues > 1) {
		std::string serr;
		if (int e = steer_.init(cfg.nb_queues, rte_align32pow2(nrx < 512 ? 512 : nrx),
					cfg.nb_queues * soft_queue::max_qps, socket, cfg.qsbr, &serr);
		    e != 0) {
			err_ = "steering: " + serr;
			return e;
		}
	}
	for (uint16_t q = 0; q < cfg.nb_queues; q++) {
		rc = rte_eth_rx_queue_setup(cfg.port_id, q, nrx, unsigned(socket), nullptr, mp_);
		if (rc == 0)
			rc = rte_eth_tx_queue_setup(cfg.port_id, q, ntx, unsigned(socket), nullptr);
		if (rc < 0) {
			err_ = "queue " + std::to_string(q) + " set-up on port " + std::to_string(cfg.port_id) + " (" +
			       lim.driver + ", mbuf data room " + std::to_string(rte_pktmbuf_data_room_size(mp_)) +
			       "): " + strerror(-rc) + " (the PMD's log says why)";
			return -rc;
		}
	}
	/* A port that cuts frames below the MTU's largest still carries the
	 * shorter ones: say which datagrams it loses, once, and go on (the
	 * default MTU, 4096, on a default net_af_packet is common and works
	 * for small messages). */
	bool any_v6 = false;
	for (const auto &g : cfg.addresses)
		any_v6 |= !g.is_v4_mapped();
	const uint32_t hdr = uint32_t((any_v6 ? wire::hdr_len_v6 : wire::hdr_len_v4) + wire::icrc_len) + tag_len;
	if (hdr + wire::immdt_len + cfg.mtu > lim.max_frame)
		RDGRAM_LOG(soft, WARNING,
			   "port %u: mtu %u makes frames of up to %u bytes, but %s: datagrams above %u bytes (%u with "
			   "immediate data) are lost",
			   cfg.port_id, cfg.mtu, hdr + uint32_t(wire::immdt_len) + cfg.mtu, lim.max_frame_why.c_str(),
			   lim.max_frame > hdr ? lim.max_frame - hdr : 0,
			   lim.max_frame > hdr + wire::immdt_len ? lim.max_frame - hdr - uint32_t(wire::immdt_len) : 0);
	if (cfg.set_mac) {
		rte_ether_addr m = cfg.mac;
		rte_eth_dev_default_mac_addr_set(cfg.port_id, &m); /* best effort */
	}
	rc = rte_eth_dev_start(cfg.port_id);
	if (rc < 0) {
		err_ = std::string("rte_eth_dev_start: ") + strerror(-rc);
		return -rc;
	}
	started_ = true;
	if (cfg.nb_queues > 1 && cfg.steer != steer_mode::software) {
		std::string why;
		if (int e = install_flows(&why); e != 0) {
			if (cfg.steer == steer_mode::flow) {
				err_ = "steer = \"flow\": " + why;
				return e;
			}
			steering_ = "software (" + why + ")";
		}
	} else if (cfg.nb_queues > 1) {
		steering_ = "software (steer = \"software\")";
	}
	if (cfg.set_mac)
		mac_ = cfg.mac;
	else
		rte_eth_macaddr_get(cfg.port_id, &mac_);
	/* NS arrive at the solicited-node groups of our IPv6 addresses: a NIC
	 * that filters multicast must let them in (best effort: net_ring and
	 * af_packet take everything anyway). */
	std::vector<rte_ether_addr> groups;
	for (const auto &g : cfg.addresses)
		if (!g.is_v4_mapped())
			groups.push_back(solicited_node_mac(g.raw));
	if (cfg.resolve && !groups.empty() &&
	    rte_eth_dev_set_mc_addr_list(cfg.port_id, groups.data(), uint32_t(groups.size())) != 0)
		rte_eth_allmulticast_enable(cfg.port_id);

	std::vector<int> nodes = cfg.av_nodes;
	if (nodes.empty())
		nodes.push_back(socket);
	int e = ahs_.init(cfg.max_ah, nodes.data(), unsigned(nodes.size()), cfg.qsbr);
	if (e != 0) {
		err_ = "AH table allocation failed";
		return e;
	}
	if (cfg.report_ahn) {
		if (cfg.max_ah > 0xffff) {
			err_ = "report_ahn needs max_ah <= 65535 (an ahn is 16 bits, 0xFFFF = none)";
			return EINVAL;
		}
		if (int rc = ahn_by_gid_.init(cfg.max_ah, nodes[0], cfg.qsbr); rc != 0) {
			err_ = "ahn table allocation failed";
			return rc;
		}
		gid_of_slot_.assign(cfg.max_ah, wire::gid{});
	}
	attr_.link = link_layer::ethernet;
	attr_.grh_required = true;
	attr_.max_ah = cfg.max_ah;
	attr_.active_mtu = cfg.mtu;
	attr_.pkey = cfg.pkey;
	attr_.numa_node = socket;
	attr_.gids = cfg.addresses;

	neigh_params np;
	np.resolve = cfg.resolve;
	np.ttl_ms = cfg.neigh_ttl_ms;
	np.retry_ms = cfg.neigh_retry_ms;
	np.retries = cfg.neigh_retries;
	np.fail_hold_ms = cfg.neigh_fail_hold_ms;
	neigh_.init(np, mac_, cfg.addresses, cfg.neighbours, mp_, ctl_tx_, &ahs_);
	return 0;
}

unsigned soft_device::drain_control_frames()
{
	unsigned n = 0;
	for (rte_ring *r : {ctl_rx_, ctl_tx_}) {
		void *m;
		while (r != nullptr && rte_ring_dequeue(r, &m) == 0) {
			RDGRAM_TSAN_ACQUIRE(m);
			rte_pktmbuf_free(static_cast<rte_mbuf *>(m));
			n++;
		}
	}
	return n;
}

int soft_device::install_flows(std::string *why)
{
	const uint16_t port = cfg_.port_id;
	for (size_t i = 0; i < cfg_.addresses.size(); i++) {
		const wire::gid &g = cfg_.addresses[i];
		const uint16_t queue = uint16_t(i % cfg_.nb_queues);
		rte_flow_attr attr{};
		attr.ingress = 1;
		rte_flow_item_ipv4 v4{}, v4m{};
		rte_flow_item_ipv6 v6{}, v6m{};
		rte_flow_item pat[3]{};
		pat[0].type = RTE_FLOW_ITEM_TYPE_ETH;
		if (g.is_v4_mapped()) {
			v4.hdr.dst_addr = g.v4();
			v4m.hdr.dst_addr = RTE_BE32(0xffffffff);
			pat[1].type = RTE_FLOW_ITEM_TYPE_IPV4;
			pat[1].spec = &v4;
			pat[1].mask = &v4m;
		} else {
			memcpy(v6.hdr.dst_addr, g.raw, 16);
			memset(v6m.hdr.dst_addr, 0xff, 16);
			pat[1].type = RTE_FLOW_ITEM_TYPE_IPV6;
			pat[1].spec = &v6;
			pat[1].mask = &v6m;
		}
		pat[2].type = RTE_FLOW_ITEM_TYPE_END;
		rte_flow_action_queue qa{};
		qa.index = queue;
		rte_flow_action act[2]{};
		act[0].type = RTE_FLOW_ACTION_TYPE_QUEUE;
		act[0].conf = &qa;
		act[1].type = RTE_FLOW_ACTION_TYPE_END;
		rte_flow_error fe{};
		int rc = rte_flow_validate(port, &attr, pat, act, &fe);
		rte_flow *f = rc == 0 ? rte_flow_create(port, &attr, pat, act, &fe) : nullptr;
		if (f == nullptr) {
			rte_eth_dev_info info{};
			rte_eth_dev_info_get(port, &info);
			*why = std::string(info.driver_name != nullptr ? info.driver_name : "port") +
			       ": rte_flow refused address " + std::to_string(i) + " -> queue " + std::to_string(queue) +
			       ": " + (fe.message != nullptr ? fe.message : rte_strerror(rte_errno));
			const int e = rte_errno != 0 ? rte_errno : ENOTSUP;
			remove_flows();
			return e;
		}
		flows_.push_back(f);
	}
	steering_ = "rte_flow (" + std::to_string(flows_.size()) + " rule(s): address i -> queue i % " +
		    std::to_string(cfg_.nb_queues) + "), software hand-off for the rest";
	return 0;
}

void soft_device::remove_flows()
{
	for (rte_flow *f : flows_) {
		rte_flow_error fe{};
		if (rte_eth_dev_is_valid_port(cfg_.port_id))
			rte_flow_destroy(cfg_.port_id, f, &fe);
	}
	flows_.clear();
}

void soft_device::close()
{
	remove_flows();
	steering_.clear();
	if (started_) {
		/* The owner may have closed the port already (to count the
		 * mbufs its queues gave back before the pool goes). */
		if (rte_eth_dev_is_valid_port(cfg_.port_id)) {
			flush_kernel_tx(cfg_.port_id);
			rte_eth_dev_stop(cfg_.port_id);
		}
		started_ = false;
	}
	/* Frames still in flight between the threads go back to the pool. */
	handoff_freed_ += steer_.fini();
	free_ring(ctl_rx_);
	free_ring(ctl_tx_);
	neigh_.clear();
	ahn_by_gid_.fini();
	ahs_by_gid_.clear();
	gid_of_slot_.clear();
	joined_.clear();
	ahs_.fini();
	/* The mempool outlives the port's queues: free it only after stop. The
	 * port itself (a vdev) belongs to whoever probed it. */
	if (mp_ != nullptr && own_mp_)
		rte_mempool_free(mp_);
	mp_ = nullptr;
	own_mp_ = false;
	queue_live_.clear();
	nrx_ = ntx_ = 0;
}

int soft_device::check_attr(const ibv_ah_attr &a, wire::gid &dg) const
{
	/* ibv_create_ah(3): EINVAL for a bad port, a missing GRH on a port that
	 * requires one (RoCE: IBV_QPF_GRH_REQUIRED), or a bad sgid_index. */
	if (a.port_num != 1)
		return EINVAL;
	if (!a.is_global)
		return EINVAL;
	if (a.grh.sgid_index >= attr_.gids.size())
		return EINVAL;
	memcpy(dg.raw, a.grh.dgid.raw, 16);
	const wire::gid &sg = attr_.gids[a.grh.sgid_index];
	if (dg.is_zero() || dg.is_v4_mapped() != sg.is_v4_mapped())
		return EINVAL;
	if (a.grh.flow_label > 0xfffff)
		return EINVAL;
	/* On a VLAN port the SL is the frame's 802.1Q priority (3 bits). */
	if (cfg_.vlan != 0 && a.sl > 7)
		return EINVAL;
	return 0;
}

int soft_device::prepare_ah(const ibv_ah_attr &a)
{
	wire::gid dg;
	if (int e = check_attr(a, dg); e != 0)
		return e;
	if (dg.is_multicast())
		return 0;
	return neigh_.prepare(dg, rte_get_tsc_cycles());
}

int soft_device::make_av(const ibv_ah_attr &a, soft_av &av, uint32_t *neigh_id) const
{
	wire::gid dg;
	if (int e = check_attr(a, dg); e != 0)
		return e;
	const wire::gid &sg = attr_.gids[a.grh.sgid_index];

	rte_ether_addr dmac{};
	*neigh_id = no_neigh;
	if (dg.is_multicast()) {
		dmac = multicast_mac(dg);
	} else if (int e = neigh_.usable(dg, &dmac, neigh_id); e != 0) {
		/* EHOSTUNREACH: no usable entry (prepare_ah resolves);
		 * ETIMEDOUT: the neighbour never answered. */
		return e;
	}

	memset(&av, 0, sizeof(av));
	av.sl = a.sl;
	/* The TOS byte / traffic class: DSCP and ECN as the AH says; with
	 * ecn, ECT(0) where it says no ECN (RFC 3168: 10). */
	uint8_t tclass = a.grh.traffic_class;
	if (cfg_.ecn && (tclass & 3) == 0)
		tclass |= 2;
	auto *eth = reinterpret_cast<rte_ether_hdr *>(av.hdr);
	rte_ether_addr_copy(&dmac, &eth->dst_addr);
	rte_ether_addr_copy(&mac_, &eth->src_addr);
	/* UDP source port: from the flow label (kernel RoCE does the same) or,
	 * with none, a hash of the GID pair so flows still spread over ECMP. */
	uint32_t fl = a.grh.flow_label;
	if (fl == 0)
		fl = rte_jhash(dg.raw, 16, rte_jhash(sg.raw, 16, 0)) & 0xfffff;
	const uint16_t sport = wire::udp_sport_from_flow_label(fl);
	const uint8_t ttl = a.grh.hop_limit ? a.grh.hop_limit : 64;
	if (dg.is_v4_mapped()) {
		eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV4);
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(av.hdr + wire::eth_len);
		ip->version_ihl = 0x45;
		ip->type_of_service = tclass;
		ip->total_length = 0;
		ip->packet_id = 0;
		ip->fragment_offset = RTE_BE16(RTE_IPV4_HDR_DF_FLAG);
		ip->time_to_live = ttl;
		ip->next_proto_id = IPPROTO_UDP;
		ip->hdr_checksum = 0;
		ip->src_addr = sg.v4();
		ip->dst_addr = dg.v4();
		/* Partial one's complement sum with total_length = 0. */
		uint32_t s = rte_raw_cksum(ip, wire::ipv4_len);
		memcpy(av.hdr + av_v4_csum_off, &s, 4);
		auto *udp = reinterpret_cast<rte_udp_hdr *>(ip + 1);
		udp->src_port = rte_cpu_to_be_16(sport);
		udp->dst_port = RTE_BE16(wire::roce_v2_udp_port);
		av.l3 = 4;
	} else {
		eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV6);
		auto *ip = reinterpret_cast<rte_ipv6_hdr *>(av.hdr + wire::eth_len);
		ip->vtc_flow = rte_cpu_to_be_32(6u << 28 | uint32_t(tclass) << 20 | a.grh.flow_label);
		ip->payload_len = 0;
		ip->proto = IPPROTO_UDP;
		ip->hop_limits = ttl;
		memcpy(ip->src_addr, sg.raw, 16);
		memcpy(ip->dst_addr, dg.raw, 16);
		auto *udp = reinterpret_cast<rte_udp_hdr *>(ip + 1);
		udp->src_port = rte_cpu_to_be_16(sport);
		udp->dst_port = RTE_BE16(wire::roce_v2_udp_port);
		av.l3 = 6;
	}
	return 0;
}

ah_handle soft_device::create_ah(const ibv_ah_attr &a, int *err)
{
	if (unlikely(inject_left_ != 0)) {
		*err = inject_err_;
		inject_left_--;
		injected_++;
		return ah_null;
	}
	uint32_t slot, nid;
	soft_av av;
	if (int e = make_av(a, av, &nid); e != 0) {
		*err = e;
		return ah_null;
	}
	if (!ahs_.reserve(&slot)) {
		*err = ENOMEM;
		return ah_null;
	}
	ahs_.av_at(slot) = av;
	*err = 0;
	ah_handle h = ahs_.publish(slot);
	/* The neighbour keeps the slot, to rewrite its MAC if it moves. */
	if (nid != no_neigh) {
		neigh_.add_ah(nid, slot);
		if (cfg_.report_ahn) {
			wire::gid g;
			memcpy(g.raw, a.grh.dgid.raw, 16);
			ahn_add(slot, h.gen, g);
		}
	}
	return h;
}

int soft_device::destroy_ah(ah_handle h)
{
	int rc = ahs_.retire(h);
	if (rc == 0) {
		neigh_.remove_ah(h.slot);
		if (cfg_.report_ahn)
			ahn_remove(h.slot);
	}
	return rc;
}

namespace {
ah_key gid_key(const wire::gid &g)
{
	ah_key k;
	memset(&k, 0, sizeof(k));
	memcpy(k.dgid, g.raw, 16);
	return k;
}
} // namespace

/* The first live AH to a GID is the one receives report (EFA has one AH
 * per address: any of ours names the sender). */
void soft_device::ahn_add(uint32_t slot, uint32_t gen, const wire::gid &g)
{
	auto &v = ahs_by_gid_[g];
	v.push_back(slot);
	gid_of_slot_[slot] = g;
	if (v.size() == 1)
		ahn_by_gid_.insert(gid_key(g), ah_handle{slot, gen});
}

void soft_device::ahn_remove(uint32_t slot)
{
	auto it = ahs_by_gid_.find(gid_of_slot_[slot]);
	gid_of_slot_[slot] = wire::gid{};
	if (it == ahs_by_gid_.end())
		return; /* multicast: never reported */
	auto &v = it->second;
	const bool was_reported = !v.empty() && v.front() == slot;
	v.erase(std::remove(v.begin(), v.end(), slot), v.end());
	if (!was_reported)
		return;
	const ah_key k = gid_key(it->first);
	ahn_by_gid_.erase(k);
	if (v.empty()) {
		ahs_by_gid_.erase(it);
		return;
	}
	/* Another AH to the same sender takes over. Its generation: the one
	 * ah_table holds for the slot (only the slot is reported). */
	ahn_by_gid_.insert(k, ah_handle{v.front(), 1});
}

bool soft_device::poll(uint64_t now)
{
	bool work = false;
	if (ctl_rx_ != nullptr) {
		/* Bounded per call: the control loop has other work too. */
		void *objs[64];
		unsigned budget = 256, n;
		while (budget > 0 &&
		       (n = rte_ring_sc_dequeue_burst(ctl_rx_, objs, budget < 64 ? budget : 64, nullptr)) != 0) {
			for (unsigned i = 0; i < n; i++) {
				RDGRAM_TSAN_ACQUIRE(objs[i]);
				neigh_.input(static_cast<rte_mbuf *>(objs[i]), now);
			}
			budget -= n;
			work = true;
		}
	}
	work |= neigh_.expire(now);
	ahs_.reclaim();
	return work;
}

int soft_device::create_queue(const queue_params &p, soft_queue &q)
{
	if (!started_) {
		err_ = "create_queue: the device is not open";
		return ENODEV;
	}
	auto refuse = [this](const char *field, uint32_t v, const std::string &why) {
		err_ = std::string("queue_params.") + field + " = " + std::to_string(v) + ": " + why;
		return EINVAL;
	};
	if (p.index >= cfg_.nb_queues)
		return refuse("index", p.index, "the port has nb_queues " + std::to_string(cfg_.nb_queues));
	if (p.qkey != 0)
		return refuse("qkey", p.qkey, "soft Q_Keys are per QP (soft_queue::add_qp), not per queue");
	if (p.sq_depth != 0 && p.sq_depth != ntx_)
		return refuse("sq_depth", p.sq_depth,
			      "the port's TX ring has " + std::to_string(ntx_) + " descriptors (tx_desc, fixed at open)");
	if (p.rq_depth != 0 && p.rq_depth != nrx_)
		return refuse("rq_depth", p.rq_depth,
			      "the port's RX ring has " + std::to_string(nrx_) + " descriptors (rx_desc, fixed at open)");
	if (p.max_inline != 0)
		return refuse("max_inline", p.max_inline, "soft builds every frame in an mbuf: no inline sends");
	if (p.signal_every != 0)
		return refuse("signal_every", p.signal_every, "soft has no send completions to signal");
	if (p.recv_batch != 0)
		return refuse("recv_batch", p.recv_batch, "the PMD fills its RX ring itself: nothing is posted");
	if (queue_live_[p.index]) {
		err_ = "create_queue: port queue " + std::to_string(p.index) + " has a live queue (destroy_queue first)";
		return EBUSY;
	}
	soft_port_view v;
	v.pkey = cfg_.pkey;
	v.mtu = cfg_.mtu;
	v.vlan = cfg_.vlan;
	v.vlan_tx_offload = vlan_tx_offload_;
	for (const auto &g : cfg_.addresses) {
		if (g.is_v4_mapped()) {
			if (v.n_v4 < 4)
				v.v4[v.n_v4++] = g.v4();
		} else if (v.n_v6 < 4) {
			memcpy(v.v6[v.n_v6++], g.raw, 16);
		}
	}
	/* Every queue hands ARP/ND in; queue 0 alone sends the control
	 * thread's frames. */
	q.attach(cfg_.port_id, p.index, mp_, &ahs_, v, ctl_rx_, p.index == 0 ? ctl_tx_ : nullptr,
		 p.socket == SOCKET_ID_ANY ? ahs_.replica(0).socket() : p.socket);
	q.report_ahn(cfg_.report_ahn ? &ahn_by_gid_ : nullptr);
	q.set_steer(cfg_.nb_queues > 1 ? &steer_ : nullptr);
	queue_live_[p.index] = true;
	return 0;
}

void soft_device::destroy_queue(soft_queue &q)
{
	if (q.mempool() == nullptr)
		return; /* never attached, or destroyed already */
	/* Its queue pair is free again (if the device was not reopened). */
	if (q.port_id() == cfg_.port_id && q.queue_id() < queue_live_.size()) {
		queue_live_[q.queue_id()] = false;
		/* Its QPNs are free for the port's other queues; what was
		 * handed to it and never taken goes back to the pool. */
		if (q.steer() != nullptr)
			for (unsigned i = 0; i < q.nb_qps(); i++)
				steer_.release(q.qp(i)->qpn, q.queue_id());
		handoff_freed_ += steer_.drain(q.queue_id());
	}
	q.detach();
}

} // namespace rdgram::soft
