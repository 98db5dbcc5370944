/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The destination key: an ibv_ah_attr with every field verbs ignores
 * zeroed, as one 32-byte comparable value, and its hashes. The AH registry
 * (control thread) and the destination cache (poll threads) both key on it.
 */
#ifndef RDGRAM_AH_KEY_H
#define RDGRAM_AH_KEY_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string_view>

#include <infiniband/verbs.h>

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

/* The ibv_ah_attr a normalized key stands for (the inverse of ah_key::of
 * for every field the key keeps). */
inline ibv_ah_attr attr_of(const ah_key &k)
{
	ibv_ah_attr a;
	memset(&a, 0, sizeof(a));
	a.dlid = k.dlid;
	a.sl = k.sl;
	a.src_path_bits = k.src_path_bits;
	a.static_rate = k.static_rate;
	a.is_global = k.is_global;
	a.port_num = k.port_num;
	if (k.is_global) {
		memcpy(a.grh.dgid.raw, k.dgid, 16);
		a.grh.flow_label = k.flow_label;
		a.grh.sgid_index = k.sgid_index;
		a.grh.hop_limit = k.hop_limit;
		a.grh.traffic_class = k.traffic_class;
	}
	return a;
}

/* For std::unordered_map and friends. */
struct ah_key_hash {
	size_t operator()(const ah_key &k) const
	{
		return std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char *>(&k), sizeof(k)));
	}
};

/* A well-mixed 64-bit hash of a key: three 64x64->128 multiplies folded
 * hi^lo ("mum", the wyhash core) over the key's four 64-bit words, two of
 * them independent. Every bit depends on every key bit, so low bits can pick
 * a bucket and high bits serve as a tag. (The same function as
 * dest_cache::hash.) */
inline uint64_t ah_key_mum(uint64_t a, uint64_t b)
{
	const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
	return uint64_t(r) ^ uint64_t(r >> 64);
}
inline uint64_t ah_key_hash64(const ah_key &k)
{
	uint64_t w[4];
	memcpy(w, &k, sizeof(w));
	const uint64_t a = ah_key_mum(w[0] ^ 0xa0761d6478bd642full, w[1] ^ 0xe7037ed1a0b428dbull);
	const uint64_t b = ah_key_mum(w[2] ^ 0x8ebc6af09c88c6e3ull, w[3] ^ 0x589965cc75374cc3ull);
	return ah_key_mum(a ^ 0x1d8e4e27c47d124full, b ^ 0x2d358dccaa6c78a5ull);
}

} // namespace rdgram

#endif
