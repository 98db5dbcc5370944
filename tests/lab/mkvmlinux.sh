#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The lab guest's kernel as an uncompressed ELF with a PVH entry point,
# taken out of the packaged bzImage: QEMU then jumps straight into it
# (its pvh.bin option ROM) instead of running the bzImage's own XZ
# decompressor under TCG. On this 2-vCPU machine that cut a guest's boot,
# QEMU start to rxe0 up, from about 10 s to about 6 s.
#
# usage: mkvmlinux.sh KVER OUT
# Rebuilds only when OUT is older than this script or the bzImage. Exit 1
# with one line when the image is not an XZ bzImage holding an ELF with a
# PVH note (XEN_ELFNOTE_PHYS32_ENTRY, CONFIG_PVH): the lab then boots the
# bzImage as it is.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kver=${1:?usage: mkvmlinux.sh KVER OUT}
out=${2:?usage: mkvmlinux.sh KVER OUT}
img=/boot/vmlinuz-$kver
[[ -r $img ]] || { echo "mkvmlinux: $img missing" >&2; exit 1; }
if [[ -f $out && $out -nt $here/mkvmlinux.sh && $out -nt $img ]]; then
	exit 0
fi
mkdir -p "$(dirname "$out")"
python3 - "$img" "$out.tmp.$$" <<'PY' || { rm -f "$out.tmp.$$"; exit 1; }
import lzma, struct, sys

img, out = sys.argv[1], sys.argv[2]
data = open(img, "rb").read()

def fail(why):
    print(f"mkvmlinux: {img}: {why}", file=sys.stderr)
    sys.exit(1)

# A bzImage's payload: the first XZ stream (magic FD 37 7A 58 5A 00) that
# decompresses to an ELF image.
elf = None
at = data.find(b"\xfd7zXZ\x00")
while at >= 0 and elf is None:
    try:
        d = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[at:])
        if d[:4] == b"\x7fELF":
            elf = d
    except lzma.LZMAError:
        pass
    at = data.find(b"\xfd7zXZ\x00", at + 1)
if elf is None:
    fail("no XZ-compressed ELF inside (another compression?)")
if elf[4] != 2 or elf[5] != 1:
    fail("not a little-endian ELF64 kernel")

# The PVH entry: an ELF note named "Xen" of type 18 in a PT_NOTE segment.
phoff, = struct.unpack_from("<Q", elf, 0x20)
phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
pvh = False
for i in range(phnum):
    p_type, _flags, p_offset, _va, _pa, p_filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
    if p_type != 4:  # PT_NOTE
        continue
    pos, end = p_offset, p_offset + p_filesz
    while pos + 12 <= end:
        namesz, descsz, ntype = struct.unpack_from("<III", elf, pos)
        name = elf[pos + 12:pos + 12 + namesz].rstrip(b"\0")
        if name == b"Xen" and ntype == 18:
            pvh = True
        pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
if not pvh:
    fail("the kernel has no PVH entry note (CONFIG_PVH)")
open(out, "wb").write(elf)
PY
mv "$out.tmp.$$" "$out"
