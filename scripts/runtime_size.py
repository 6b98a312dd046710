#!/usr/bin/env python3
"""The runtime library's size per part, from the linker map of its link.

    runtime_size.py MAP STRIPPED_LIB [--objects] [--budget BYTES]

MAP is the map the link of libkiln_runtime.so writes (cmake/footprint.cmake passes
-Wl,-Map=<build>/libkiln_runtime.map); STRIPPED_LIB the same library stripped (strip --strip-unneeded), whose
file size is the total. Each input section the link kept (after --gc-sections) is counted to
the part of the runtime its object file belongs to: code (.text), read-only data (.rodata,
.data.rel.ro), unwind tables (.eh_frame, .gcc_except_table) and data (.data, .init_array).
What no object owns (ELF headers, dynamic symbols and their relocations, .eh_frame_hdr, the
padding between segments) is the line "ELF overhead": the stripped size less the parts.

Prints one line per part, largest first, with its share of the stripped size; --objects
also prints each object file. Exit status: 0 done; 1 the stripped size passes --budget; 2 the map
holds no input section, or more bytes than the library (not this link's map).
"""
import argparse
import collections
import os
import re
import sys

# The parts, by the object's path: the first pattern that matches names it. The order matters
# (runtime/cpu/onednn/ before runtime/cpu/, runtime/fused/interpreter_avx2 before runtime/fused/).
PARTS = [
    (r"/runtime/kernels/", "CPU kernels (runtime/kernels/)"),
    (r"/runtime/fused/interpreter_avx512\.", "interpreter, AVX-512 build (runtime/fused/)"),
    (r"/runtime/fused/interpreter_avx2\.", "interpreter, AVX2 build (runtime/fused/)"),
    (r"/runtime/fused/interpreter\.", "interpreter, baseline build (runtime/fused/)"),
    (r"/runtime/fused/", "fused programs: loading (runtime/fused/program.cc)"),
    (r"/runtime/cpu/onednn/", "oneDNN glue (runtime/cpu/onednn/)"),
    (r"/runtime/cpu/", "CPU backend (runtime/cpu/)"),
    (r"/runtime/cuda/", "CUDA backend (runtime/cuda/)"),
    (r"/runtime/", "core: load, verify, prologue, context, C API (runtime/*.cc)"),
]
OTHER_OBJECTS = "C runtime start files (crt*.o)"
# Output sections whose bytes are in the stripped file; .bss and .tbss take none.
COUNTED = re.compile(r"^\.(text|rodata|data\.rel\.ro|data|eh_frame|gcc_except_table|init_array|fini_array|tdata)$")
HEX = r"0x[0-9a-fA-F]+"
# An input section: " .name ADDR SIZE FILE", or " .name" alone with "ADDR SIZE FILE" on the next line.
INPUT_WHOLE = re.compile(rf"^ (\S+)\s+({HEX})\s+({HEX})\s+(\S.*)$")
INPUT_NAME = re.compile(r"^ (\S+)\s*$")
INPUT_REST = re.compile(rf"^\s+({HEX})\s+({HEX})\s+(\S.*)$")
OUTPUT = re.compile(rf"^(\.\S+)(?:\s+{HEX}\s+{HEX})?\s*$")


def part_of(obj):
    for pattern, name in PARTS:
        if re.search(pattern, obj):
            return name
    return OTHER_OBJECTS


def read_map(path):
    """Bytes per object file over the counted output sections."""
    per_object = collections.Counter()
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    try:
        start = lines.index("Linker script and memory map")
    except ValueError:
        sys.exit(f"runtime_size.py: {path} is not a GNU ld map (no 'Linker script and memory map')")
    section = None
    pending = None  # an input section's name whose address, size and file are on the next line
    for line in lines[start + 1:]:
        out = OUTPUT.match(line)
        if out:
            section, pending = out.group(1), None
            continue
        if section is None or not COUNTED.match(section):
            continue
        if pending is not None:
            rest = INPUT_REST.match(line)
            pending = None
            if rest and rest.group(3).endswith(".o"):
                per_object[rest.group(3)] += int(rest.group(2), 16)
            continue
        whole = INPUT_WHOLE.match(line)
        if whole:
            if whole.group(4).endswith(".o"):
                per_object[whole.group(4)] += int(whole.group(3), 16)
        elif INPUT_NAME.match(line) and not line.startswith(" *"):
            pending = line.strip()
    return per_object


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("map")
    ap.add_argument("stripped")
    ap.add_argument("--objects", action="store_true", help="also print each object file")
    ap.add_argument("--budget", type=int, help="fail when the stripped size passes this many bytes (0: no budget)")
    args = ap.parse_args()
    per_object = read_map(args.map)
    if not per_object:
        print(f"runtime_size.py: no input sections in {args.map}", file=sys.stderr)
        return 2
    total = os.path.getsize(args.stripped)
    parts = collections.Counter()
    for obj, size in per_object.items():
        parts[part_of(obj)] += size
    overhead = total - sum(parts.values())
    if overhead < 0:
        print(f"runtime_size.py: {args.map} counts {-overhead:,} bytes more than {args.stripped} holds: "
              "not the map of its link", file=sys.stderr)
        return 2
    parts["ELF overhead: headers, dynamic symbols, relocations, .eh_frame_hdr, padding"] = overhead
    budget = ""
    if args.budget:
        budget = f", budget {args.budget:,}: {args.budget - total:,} bytes left" if total <= args.budget else \
                 f", {total - args.budget:,} bytes OVER its budget of {args.budget:,}"
    print(f"{os.path.basename(args.stripped)}, stripped: {total:,} bytes{budget}")
    print(f"  {'part':<74} {'bytes':>11} {'share':>6}")
    for name, size in parts.most_common():
        print(f"  {name:<74} {size:>11,} {100.0 * size / total:>5.1f}%")
        if args.objects and not name.startswith("ELF"):
            for obj, osize in sorted(per_object.items(), key=lambda kv: -kv[1]):
                if part_of(obj) == name:
                    print(f"      {obj.split('.dir/')[-1]:<70} {osize:>11,}")
    return 1 if args.budget and total > args.budget else 0


if __name__ == "__main__":
    sys.exit(main())
