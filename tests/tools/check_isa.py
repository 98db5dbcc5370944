#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Checks that a generic build (-Dcpu_instruction_set=generic, -march=x86-64-v2)
executes nothing beyond x86-64-v2 outside the functions meant to.

    check_isa.py FILE|DIR...

Disassembles every ELF file given (or found under a directory: executables,
.o and .a files) with objdump and lists, per function, the instructions a
v2 CPU lacks: any VEX/EVEX instruction (AVX, AVX2, AVX-512: mnemonics v*,
ymm/zmm registers, opmask registers), PCLMULQDQ, AES-NI, SHA, GFNI, BMI1/2,
LZCNT, MOVBE, ADX. (tzcnt is left out: GCC writes `rep bsf`, which objdump
shows as tzcnt and which runs as bsf on older CPUs.)

Such instructions are allowed only in functions compiled with a target
attribute on purpose (cpu_isa.h's RDGRAM_TARGET_*, crc32.h's
RDGRAM_CRC32_TARGET_*), which the run-time selection calls only on CPUs that
have them; their names are ALLOWED below. Anything else is reported and the
exit status is 1. Exit 77 (skip) when objdump is missing.
"""
import os
import re
import shutil
import subprocess
import sys

# Functions with target attributes, by (demangled) name: the ICRC kernels
# and their helpers (all in crc32_detail), the mlx5 run writers and the
# loops compiled for them.
ALLOWED = re.compile(r"rdgram::crc32_detail::"
                     r"|rdgram::mlx5::(run_loop_avx(2|512)|block_writer_avx(2|512))")

BEYOND_V2 = re.compile(
    r"^(v(?!err|erw|m)\w+"  # VEX/EVEX encoded (not verr/verw/vm* of VMX)
    r"|pclmul\w*|aes\w+|sha(1|256)\w+|gf2p8\w+"
    r"|andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx"
    r"|lzcnt|movbe|adcx|adox)$")
WIDE_REG = re.compile(r"%(ymm|zmm)\d+|%k[0-7]\b")


def elf_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs[:] = [d for d in dirs if d not in ("meson-private", "meson-logs", "meson-info")]
                for f in files:
                    yield os.path.join(root, f)
        else:
            yield p


def is_elf_or_archive(path):
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return False
    return head[:4] == b"\x7fELF" or head == b"!<arch>\n"


def check(path):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", path],
                         capture_output=True, text=True, errors="replace")
    if out.returncode != 0:
        return None, [f"{path}: objdump failed: {out.stderr.strip()}"]
    bad = {}
    allowed_used = set()
    fn = "?"
    for line in out.stdout.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            fn = m.group(1)
            continue
        parts = line.split("\t")
        if len(parts) < 2 or not re.match(r"^\s*[0-9a-f]+:$", parts[0]):
            continue
        insn = parts[1].strip()
        mnem = insn.split(" ", 1)[0]
        if mnem in ("rep", "repz", "repnz", "lock", "notrack", "bnd", "data16", "cs", "ds"):
            rest = insn.split(" ", 1)[1:] or [""]
            mnem = rest[0].strip().split(" ", 1)[0]
        if BEYOND_V2.match(mnem) or WIDE_REG.search(insn):
            if ALLOWED.search(fn):
                allowed_used.add(fn)
            else:
                bad.setdefault(fn, []).append(insn)
    problems = [f"{path}: {fn}: {len(v)} instruction(s) beyond x86-64-v2, e.g. {v[0]!r}"
                for fn, v in sorted(bad.items())]
    return allowed_used, problems


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    if shutil.which("objdump") is None:
        print("check_isa: objdump not found (binutils)")
        return 77
    files = [f for f in elf_files(sys.argv[1:]) if is_elf_or_archive(f)]
    if not files:
        print("check_isa: no ELF file given", file=sys.stderr)
        return 1
    problems = []
    allowed = set()
    for f in files:
        used, p = check(f)
        problems += p
        allowed |= used or set()
    for p in problems:
        print(p)
    print(f"check_isa: {len(files)} file(s); {len(allowed)} target-attributed function(s) "
          f"use wider instructions; {len(problems)} other function(s) do")
    for fn in sorted(allowed):
        print(f"  allowed: {fn[:160]}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
