/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/efa, the AH pieces that run on the control thread: the three
 * verbs/efadv calls an EFA AH needs (ibv_create_ah, efadv_query_ah,
 * ibv_destroy_ah) behind a small table of function pointers, the AV a
 * poll thread reads, and the explanation of an EINVAL.
 *
 * Why function pointers: no EFA device exists where rdgram is built and
 * tested. The table lets a device model that follows the man pages stand
 * in for libibverbs/libefa (tests/unit/test_efa_ah.cc), so the AH logic
 * (ahn query, inlen/comp_mask handling, ENOMEM eviction with the registry,
 * deferred destruction) runs here for real. The production table points
 * straight at the library functions. None of this is per packet.
 */
#ifndef RDGRAM_EFA_AH_H
#define RDGRAM_EFA_AH_H

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include <infiniband/efadv.h>
#include <infiniband/verbs.h>

#include "rdgram/device.h"

namespace rdgram::efa {

/* An EFA receive names its sender by the receiver's AH number, or this
 * value when the receiver has no AH for the sender's address (then the
 * sender's GID comes from efadv_wc_read_sgid on a CQ created with
 * EFADV_WC_EX_WITH_SGID). */
inline constexpr uint16_t ahn_unknown = 0xffff;

/* The calls, with the real signatures and errno conventions:
 *  - create_ah: ibv_create_ah(3): the AH, or NULL with errno set
 *    (EINVAL: bad attributes, a GID the device cannot reach, a bad PD;
 *    ENOMEM: no room in the device's AH table);
 *  - query_ah: efadv_query_ah(3): 0 or an errno value;
 *  - destroy_ah: ibv_destroy_ah(3): 0 or an errno value. */
struct efa_ah_ops {
	ibv_ah *(*create_ah)(ibv_pd *pd, ibv_ah_attr *attr);
	int (*query_ah)(ibv_ah *ah, efadv_ah_attr *attr, uint32_t inlen);
	int (*destroy_ah)(ibv_ah *ah);
};

/* libibverbs + libefa. */
inline constexpr efa_ah_ops verbs_ah_ops{&ibv_create_ah, &efadv_query_ah, &ibv_destroy_ah};

/* The AV a poll thread reads from the AH table: the verbs AH to put in the
 * send WR (ibv_wr_set_ud_addr) and the device's AH number for it (what
 * receives from that address report in wc.slid). 16 bytes. */
struct efa_av {
	ibv_ah *ah;
	uint16_t ahn;
	uint8_t pad[6];
};
static_assert(sizeof(efa_av) == 16);

/* Bytes of efadv_ah_attr a caller must pass for ahn to be returned: the
 * struct up to and including ahn (the library refuses less with EINVAL). */
inline constexpr uint32_t ah_attr_min_inlen = offsetof(efadv_ah_attr, ahn) + sizeof(uint16_t);

/* efadv_query_ah(3) for ah's number. (Control thread.) inlen is the size
 * the caller claims for struct efadv_ah_attr: the driver passes
 * sizeof(struct efadv_ah_attr); tests pass less to check the contract.
 * The library writes only the first inlen bytes.
 *
 * comp_mask: the man page makes it an out field with no values yet; it is
 * zeroed on the way in (the library ignores it) and, on the way out, bits
 * this build does not know only announce fields past what it reads, so
 * they do not invalidate ahn (the usual rdma-core extension rule).
 *
 * Returns 0 with *ahn set, or the library's errno; EINVAL when inlen does
 * not cover ahn (the library says so too: checked here so that a model or
 * a library that failed to refuse cannot hand back an unwritten ahn);
 * EPROTO when the device reports 0xFFFF, the value receives use for "no
 * AH", which no live AH may have. */
inline int query_ahn(const efa_ah_ops &ops, ibv_ah *ah, uint32_t inlen, uint16_t *ahn)
{
	efadv_ah_attr a;
	memset(&a, 0, sizeof(a));
	const int rc = ops.query_ah(ah, &a, inlen);
	if (rc != 0)
		return rc;
	if (inlen < ah_attr_min_inlen)
		return EINVAL;
	if (a.ahn == ahn_unknown)
		return EPROTO;
	*ahn = a.ahn;
	return 0;
}

/* The likely cause of an EINVAL from ibv_create_ah on an EFA port, as text
 * for error(). The errno stays the device's; this only names the suspect,
 * checking the attributes in the order the kernel's EFA driver and the
 * device would refuse them. */
std::string explain_create_einval(const ibv_ah_attr &attr, const port_attr &port);

} // namespace rdgram::efa

#endif
