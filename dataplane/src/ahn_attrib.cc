/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * ahn_attrib's control side (rdgram/ahn_attrib.h): unknown senders answered
 * with an AH per address from the registry, ahn_map bindings, incarnations
 * forgotten, and the registry's evictions followed. Control thread only.
 */
#include "rdgram/ahn_attrib.h"

#include <deque>
#include <unordered_map>
#include <vector>

namespace rdgram {

struct ahn_attrib::impl {
	static constexpr unsigned max_clients = ahn_attrib::max_clients;

	/* The public methods' state and bodies: rdgram/ahn_attrib.h says what
	 * each does. */
	int init(device &dev, ah_registry &reg, const ahn_attrib_config &cfg)
	{
		fini();
		if (dev.port().max_ah == 0 || dev.port().max_ah > 65535)
			return EINVAL;
		if (int rc = map_.init(cfg.max_peers, cfg.socket, cfg.qsbr); rc != 0)
			return rc;
		if (int rc = by_gid_.init(cfg.max_senders, cfg.socket, cfg.qsbr); rc != 0) {
			map_.fini();
			return rc;
		}
		dev_ = &dev;
		reg_ = &reg;
		cfg_ = cfg;
		gids_.build(dev.port().gids);
		pc_.assign(cfg.max_peers, peer_ctl{});
		forget_cyc_ = cfg.forget_after_us * rte_get_tsc_hz() / 1000000;
		if (int rc = reg.add_evict_hook(&impl::evict_hook, this); rc != 0) {
			reg_ = nullptr;
			fini();
			return rc;
		}
		return 0;
	}
	void fini()
	{
		if (reg_ != nullptr)
			reg_->remove_evict_hook(&impl::evict_hook, this);
		reg_ = nullptr;
		dev_ = nullptr;
		map_.fini();
		by_gid_.fini();
		senders_.clear();
		peer_of_.clear();
		pc_.clear();
		forget_q_.clear();
		nclients_ = 0;
	}

	/* (Control thread.) Requests still in its ring are dropped. */
	void remove_client(ahn_attrib_client &c)
	{
		for (unsigned i = 0; i < nclients_; i++)
			if (clients_[i] == &c) {
				clients_[i] = clients_[--nclients_];
				return;
			}
	}

	/* Answers the clients' unknown senders, forgets old incarnations,
	 * reclaims. (Control thread.) true when it did work. */
	bool poll(uint64_t now)
	{
		bool work = false;
		for (unsigned i = 0; i < nclients_; i++) {
			ahn_sender s[32];
			RDGRAM_AHN_RING_BEGIN();
			const unsigned n = rte_ring_sc_dequeue_burst_elem(clients_[i]->req_, s, sizeof(ahn_sender), 32,
									  nullptr);
			RDGRAM_AHN_RING_END();
			for (unsigned j = 0; j < n; j++)
				handle(s[j]);
			work |= n != 0;
		}
		while (!forget_q_.empty() && forget_q_.front().deadline <= now) {
			const forget_rec f = forget_q_.front();
			forget_q_.pop_front();
			peer_ctl &p = pc_[f.peer];
			if (p.epoch != f.epoch || p.state != pc_previous)
				continue; /* gone with its address's AH */
			map_.forget(f.peer);
			drop_peer(f.peer);
			st_.forgotten++;
			work = true;
		}
		map_.reclaim();
		by_gid_.reclaim();
		return work;
	}

	/* Handles one unknown sender now. (Control thread.) */
	void handle(const ahn_sender &s)
	{
		st_.requests++;
		const peer_key pk{s.sgid, s.qpn & 0xffffff, s.connid};
		if (peer_of_.count(pk) != 0) {
			st_.duplicates++;
			return;
		}
		auto it = senders_.find(s.sgid);
		if (it == senders_.end()) {
			ibv_ah_attr a;
			if (attr_for(s, &a) != 0) {
				st_.failed++;
				return;
			}
			const int pr = dev_->prepare_ah(a);
			if (pr == EINPROGRESS) {
				st_.neigh_wait++;
				return;
			}
			int err = pr;
			ah_handle h = ah_null;
			if (pr == 0)
				h = reg_->acquire(a, &err);
			if (err != 0) {
				(err == ENOMEM ? st_.busy : st_.failed)++;
				return;
			}
			/* Unreferenced from the start: cached in LRU order, the
			 * first to go when the device table is full. */
			reg_->release(h);
			if (h.slot >= ahn_map::ahn_unknown) {
				st_.failed++;
				return;
			}
			ah_key k;
			ahn_attrib_client::gid_key(s.sgid, &k);
			if (by_gid_.insert(k, h) != 0) {
				st_.failed++;
				return;
			}
			it = senders_.emplace(s.sgid, sender_rec{h, {}}).first;
			st_.ahs_created++;
		}
		sender_rec &sr = it->second;
		const uint64_t cookie = cfg_.cookie_of != nullptr ? cfg_.cookie_of(cfg_.cookie_arg, s) : ++seq_;
		uint32_t peer;
		const int rc = map_.bind(uint16_t(sr.h.slot), pk.qpn, pk.connid, cookie, &peer);
		if (rc != 0) {
			st_.failed++;
			return;
		}
		/* A new incarnation of (address, qpn): the old one is kept for
		 * its late datagrams, then forgotten. */
		for (uint32_t o : sr.peers)
			if (pc_[o].state == pc_current && pc_[o].key.qpn == pk.qpn) {
				pc_[o].state = pc_previous;
				forget_q_.push_back({o, pc_[o].epoch, rte_get_tsc_cycles() + forget_cyc_});
			}
		peer_ctl &p = pc_[peer];
		p.key = pk;
		p.epoch++;
		p.state = pc_current;
		sr.peers.push_back(peer);
		peer_of_.emplace(pk, peer);
		st_.bound++;
	}

	const ahn_map &map() const { return map_; }
	const dest_cache &by_gid() const { return by_gid_; }
	/* (Control thread.) */
	const ahn_attrib_stats &stats() const { return st_; }
	size_t senders() const { return senders_.size(); }
	/* The AH this component holds for an address (ah_null if none).
	 * (Control thread.) */
	ah_handle sender_ah(const wire::gid &g) const
	{
		auto it = senders_.find(g);
		return it == senders_.end() ? ah_null : it->second.h;
	}

	enum : uint8_t { pc_free, pc_current, pc_previous };
	struct peer_key {
		wire::gid sgid;
		uint32_t qpn, connid;
		bool operator==(const peer_key &o) const
		{
			return sgid == o.sgid && qpn == o.qpn && connid == o.connid;
		}
	};
	struct peer_key_hash {
		size_t operator()(const peer_key &k) const
		{
			uint64_t w[2];
			memcpy(w, k.sgid.raw, 16);
			return size_t(ah_key_mum(w[0] ^ 0xe7037ed1a0b428dbull,
						 w[1] ^ (uint64_t(k.qpn) << 32 | k.connid)));
		}
	};
	struct gid_hasher {
		size_t operator()(const wire::gid &g) const
		{
			uint64_t w[2];
			memcpy(w, g.raw, 16);
			return size_t(ah_key_mum(w[0] ^ 0x8ebc6af09c88c6e3ull, w[1] ^ 0x589965cc75374cc3ull));
		}
	};
	struct sender_rec {
		ah_handle h;
		std::vector<uint32_t> peers; /* current and previous */
	};
	struct peer_ctl {
		peer_key key{};
		uint32_t epoch = 0; /* bumped per bind: forget_q entries of an
				     * earlier use of the record are ignored */
		uint8_t state = pc_free;
	};
	struct forget_rec {
		uint32_t peer, epoch;
		uint64_t deadline;
	};

	/* One AH per sender address (EFA: one ahn per address), so the
	 * reply attributes are the address's, not one datagram's: traffic
	 * class and flow label 0, hop limit 0xff as init_ah_from_wc sets it,
	 * our GID the datagram was sent to (the first unicast one of the
	 * family for multicast). 0 or EINVAL. */
	int attr_for(const ahn_sender &s, ibv_ah_attr *a) const
	{
		const bool v4 = s.sgid.is_v4_mapped();
		if (s.sgid.is_zero() || s.sgid.is_multicast() || (v4 && s.sgid.v4() == 0) ||
		    v4 != s.dgid.is_v4_mapped())
			return EINVAL;
		const int idx = s.dgid.is_multicast() ? gids_.first_unicast(v4) : gids_.find(s.dgid);
		if (idx < 0 || idx > UINT8_MAX)
			return EINVAL;
		memset(a, 0, sizeof(*a));
		a->is_global = 1;
		a->port_num = 1;
		memcpy(a->grh.dgid.raw, s.sgid.raw, 16);
		a->grh.sgid_index = uint8_t(idx);
		a->grh.hop_limit = 0xff;
		return 0;
	}

	void drop_peer(uint32_t peer)
	{
		peer_ctl &p = pc_[peer];
		peer_of_.erase(p.key);
		auto it = senders_.find(p.key.sgid);
		if (it != senders_.end()) {
			auto &v = it->second.peers;
			for (size_t i = 0; i < v.size(); i++)
				if (v[i] == peer) {
					v[i] = v.back();
					v.pop_back();
					break;
				}
		}
		p.state = pc_free;
	}

	/* The registry destroys an AH (capacity, device ENOMEM, trim): if it is
	 * an address's AH here, its peers go first (lookups miss at once; the
	 * driver reuses the slot only after a grace period). */
	static void evict_hook(void *arg, const ah_key &k, ah_handle h)
	{
		auto *self = static_cast<impl *>(arg);
		wire::gid g;
		memcpy(g.raw, k.dgid, 16);
		auto it = self->senders_.find(g);
		if (it == self->senders_.end() || !(it->second.h == h))
			return;
		for (uint32_t p : it->second.peers) {
			if (self->pc_[p].state == pc_current) {
				self->map_.unbind(p); /* its previous ones too */
				self->st_.unbound++;
			}
			self->peer_of_.erase(self->pc_[p].key);
			self->pc_[p].state = pc_free;
		}
		ah_key gk;
		ahn_attrib_client::gid_key(g, &gk);
		self->by_gid_.erase(gk);
		self->senders_.erase(it);
		self->st_.evicted++;
	}

	device *dev_ = nullptr;
	ah_registry *reg_ = nullptr;
	control_thread *ctl = nullptr; /* start()'s */
	ahn_attrib_config cfg_{};
	gid_index gids_;
	ahn_map map_;
	dest_cache by_gid_; /* sender address -> our AH (slot = ahn) */
	std::unordered_map<wire::gid, sender_rec, gid_hasher> senders_;
	std::unordered_map<peer_key, uint32_t, peer_key_hash> peer_of_;
	std::vector<peer_ctl> pc_;
	std::deque<forget_rec> forget_q_;
	ahn_attrib_client *clients_[max_clients]{};
	unsigned nclients_ = 0;
	uint64_t forget_cyc_ = 0;
	uint64_t seq_ = 0;
	ahn_attrib_stats st_{};
};

ahn_attrib::ahn_attrib() : p_(std::make_unique<impl>()) {}
ahn_attrib::~ahn_attrib() { p_->fini(); }

int ahn_attrib::init(device &dev, ah_registry &reg, const ahn_attrib_config &cfg) { return p_->init(dev, reg, cfg); }
void ahn_attrib::fini() { p_->fini(); }

int ahn_attrib::start(control_thread &ctl)
{
	p_->ctl = &ctl;
	return ctl.add_poller(&ahn_attrib::poll_cb, this);
}

void ahn_attrib::stop()
{
	if (p_->ctl != nullptr)
		p_->ctl->remove_poller(&ahn_attrib::poll_cb, this);
	p_->ctl = nullptr;
}

int ahn_attrib::add_client(ahn_attrib_client &c, const ahn_attrib_client_config &cc)
{
	if (p_->nclients_ == max_clients)
		return ENOSPC;
	static unsigned seq;
	char name[RTE_RING_NAMESIZE];
	snprintf(name, sizeof(name), "rdgram_ahnq%u", seq++);
	c.fini();
	c.req_ = rte_ring_create_elem(name, sizeof(ahn_sender), rte_align32pow2(cc.ring_size), cc.socket,
				      RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (c.req_ == nullptr)
		return rte_errno;
	c.map_ = &p_->map_;
	c.by_gid_ = &p_->by_gid_;
	c.reask_cyc_ = cc.reask_us * rte_get_tsc_hz() / 1000000;
	c.ctr_ = {};
	memset(c.recent_, 0, sizeof(c.recent_));
	p_->clients_[p_->nclients_++] = &c;
	return 0;
}

void ahn_attrib::remove_client(ahn_attrib_client &c) { p_->remove_client(c); }
bool ahn_attrib::poll(uint64_t now) { return p_->poll(now); }
void ahn_attrib::handle(const ahn_sender &s) { p_->handle(s); }
const ahn_map &ahn_attrib::map() const { return p_->map_; }
const dest_cache &ahn_attrib::by_gid() const { return p_->by_gid_; }
const ahn_attrib_stats &ahn_attrib::stats() const { return p_->st_; }
size_t ahn_attrib::senders() const { return p_->senders_.size(); }
ah_handle ahn_attrib::sender_ah(const wire::gid &g) const { return p_->sender_ah(g); }

} // namespace rdgram
