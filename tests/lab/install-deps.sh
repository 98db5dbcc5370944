#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs the Debian packages the lab needs (QEMU, Debian's kernel with
# rdma_rxe, busybox-static, rdma-core's and perftest's tools), only those
# missing. Idempotent; scripts/install-deps.sh does the work.
exec "$(dirname "$0")/../../scripts/install-deps.sh" lab
