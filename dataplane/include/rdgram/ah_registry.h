/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The AH registry: one AH per distinct destination on the host, shared by
 * every QP and poll thread. It lives on the control thread (every method:
 * control thread only, NOT thread safe) above a driver's create/destroy:
 *
 *  - deduplicated by normalized attributes: fields verbs ignores (the GRH
 *    when is_global is 0) do not split entries;
 *  - reference counted: acquire() takes a reference, release() drops it;
 *    an entry without references stays cached for the next acquire until
 *    it is evicted;
 *  - capacity = min(configured capacity, device max_ah); at capacity the
 *    least recently released unreferenced entry is evicted (destroyed in
 *    the driver, which defers slot reuse past an RCU grace period);
 *  - when the device itself says ENOMEM (a full hardware table: EFA, or
 *    other users of the device), one unreferenced entry is evicted and the
 *    creation retried once;
 *  - ENOMEM to the caller only when every entry is referenced.
 */
#ifndef RDGRAM_AH_REGISTRY_H
#define RDGRAM_AH_REGISTRY_H

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <list>
#include <string_view>
#include <unordered_map>

#include "rdgram/device.h"

namespace rdgram {

/* ibv_ah_attr with every field verbs ignores zeroed, as one comparable key. */
struct ah_key {
	uint8_t dgid[16];
	uint32_t flow_label;
	uint16_t dlid;
	uint8_t sgid_index, hop_limit, traffic_class, sl, src_path_bits, static_rate;
	uint8_t is_global, port_num;
	uint8_t pad[2];

	static ah_key of(const ibv_ah_attr &a)
	{
		ah_key k;
		memset(&k, 0, sizeof(k));
		k.dlid = a.dlid;
		k.sl = a.sl;
		k.src_path_bits = a.src_path_bits;
		k.static_rate = a.static_rate;
		k.is_global = a.is_global ? 1 : 0;
		k.port_num = a.port_num;
		if (k.is_global) {
			memcpy(k.dgid, a.grh.dgid.raw, 16);
			k.flow_label = a.grh.flow_label;
			k.sgid_index = a.grh.sgid_index;
			k.hop_limit = a.grh.hop_limit;
			k.traffic_class = a.grh.traffic_class;
		}
		return k;
	}
	bool operator==(const ah_key &o) const { return memcmp(this, &o, sizeof(*this)) == 0; }
};
static_assert(sizeof(ah_key) == 32);

struct ah_key_hash {
	size_t operator()(const ah_key &k) const
	{
		return std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char *>(&k), sizeof(k)));
	}
};

struct ah_registry_stats {
	uint64_t created, reused, evicted, device_enomem_retries, failed;
};

class ah_registry {
public:
	/* capacity: configured limit; the device's max_ah caps it. */
	ah_registry(device &dev, uint32_t capacity)
		: dev_(dev), cap_(dev.port().max_ah != 0 && dev.port().max_ah < capacity ? dev.port().max_ah
											: capacity)
	{
	}
	ah_registry(const ah_registry &) = delete;
	ah_registry &operator=(const ah_registry &) = delete;
	~ah_registry() { clear(); }

	/* A referenced handle for attr, creating the AH on a miss. On failure
	 * ah_null with *err set (the driver's errno; ENOMEM when the registry
	 * is full of referenced entries). */
	ah_handle acquire(const ibv_ah_attr &attr, int *err)
	{
		const ah_key k = ah_key::of(attr);
		if (auto it = by_key_.find(k); it != by_key_.end()) {
			entry &e = it->second;
			if (e.refs++ == 0)
				lru_.erase(e.lru_pos);
			st_.reused++;
			*err = 0;
			return e.h;
		}
		if (by_key_.size() >= cap_ && !evict_one()) {
			st_.failed++;
			*err = ENOMEM;
			return ah_null;
		}
		int e = 0;
		ah_handle h = dev_.create_ah(attr, &e);
		if (e == ENOMEM && evict_one()) {
			st_.device_enomem_retries++;
			h = dev_.create_ah(attr, &e);
		}
		if (e != 0) {
			st_.failed++;
			*err = e;
			return ah_null;
		}
		entry &n = by_key_[k];
		n.h = h;
		n.refs = 1;
		by_handle_[pack(h)] = k;
		st_.created++;
		*err = 0;
		return h;
	}

	/* Drops one reference. 0, or EINVAL for a handle the registry does not
	 * hold or holds no reference to. */
	int release(ah_handle h)
	{
		auto it = by_handle_.find(pack(h));
		if (it == by_handle_.end())
			return EINVAL;
		entry &e = by_key_.at(it->second);
		if (e.refs == 0)
			return EINVAL;
		if (--e.refs == 0)
			e.lru_pos = lru_.insert(lru_.end(), it->second);
		return 0;
	}

	/* Evicts every unreferenced entry (e.g. at shutdown, or on demand). */
	unsigned trim()
	{
		unsigned n = 0;
		while (evict_one())
			n++;
		return n;
	}
	/* Destroys everything, referenced or not (shutdown). */
	void clear()
	{
		for (auto &[k, e] : by_key_) {
			if (hook_ != nullptr)
				hook_(hook_arg_, k, e.h);
			dev_.destroy_ah(e.h);
		}
		by_key_.clear();
		by_handle_.clear();
		lru_.clear();
	}

	/* Called with each entry the registry evicts or clears, just before
	 * the driver destroys its AH (the AH service erases it from the
	 * dest_cache there). */
	using evict_hook = void (*)(void *arg, const ah_key &k, ah_handle h);
	void set_evict_hook(evict_hook fn, void *arg)
	{
		hook_ = fn;
		hook_arg_ = arg;
	}

	uint32_t capacity() const { return cap_; }
	size_t size() const { return by_key_.size(); }
	size_t unreferenced() const { return lru_.size(); }
	uint32_t refs(ah_handle h) const
	{
		auto it = by_handle_.find(pack(h));
		return it == by_handle_.end() ? 0 : by_key_.at(it->second).refs;
	}
	const ah_registry_stats &stats() const { return st_; }

private:
	struct entry {
		ah_handle h{};
		uint32_t refs = 0;
		std::list<ah_key>::iterator lru_pos{};
	};
	static uint64_t pack(ah_handle h) { return uint64_t(h.slot) << 32 | h.gen; }

	bool evict_one()
	{
		if (lru_.empty())
			return false;
		const ah_key k = lru_.front();
		lru_.pop_front();
		auto it = by_key_.find(k);
		if (hook_ != nullptr)
			hook_(hook_arg_, k, it->second.h);
		dev_.destroy_ah(it->second.h);
		by_handle_.erase(pack(it->second.h));
		by_key_.erase(it);
		st_.evicted++;
		return true;
	}

	device &dev_;
	const uint32_t cap_;
	std::unordered_map<ah_key, entry, ah_key_hash> by_key_;
	std::unordered_map<uint64_t, ah_key> by_handle_;
	std::list<ah_key> lru_; /* unreferenced entries, least recently released first */
	ah_registry_stats st_{};
	evict_hook hook_ = nullptr;
	void *hook_arg_ = nullptr;
};

} // namespace rdgram

#endif
