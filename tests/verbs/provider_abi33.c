/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * A provider of another private ABI (IBVERBS_PRIVATE_33), for
 * mlx5_devinfo.sh: its constructor registers at verbs_register_driver_33,
 * which rdgram's libibverbs.so.1 does not have, so dlopen refuses it
 * (linked against the stand-in libibverbs_abi33.c for the version). */
struct verbs_device_ops;
void verbs_register_driver_33(const struct verbs_device_ops *ops);

static const char ops[64];

__attribute__((constructor)) static void register_driver(void)
{
	verbs_register_driver_33((const struct verbs_device_ops *)ops);
}
