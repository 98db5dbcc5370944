/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * A stand-in libibverbs.so.1 of private ABI 33, only for linking
 * provider_abi33.c: the module then needs IBVERBS_PRIVATE_33 from
 * whatever libibverbs.so.1 the process has, as a real provider built for
 * that ABI does. Never loaded. */
struct verbs_device_ops;
void verbs_register_driver_33(const struct verbs_device_ops *ops);
void verbs_register_driver_33(const struct verbs_device_ops *ops)
{
	(void)ops;
}
