#!/bin/sh
# Fails the build when an object compiled in an instruction-set region (runtime/fused/
# interpreter_avx2.cc, interpreter_avx512.cc: functions built for AVX2, AVX-512) holds a weak (COMDAT)
# function with AVX code. Such a
# copy of an inline function or template (the standard library's, Kiln's headers') may be the
# one the linker keeps for the whole library, and would then run on CPUs without AVX. The
# headers must come before the region, so that these copies stay baseline code.
# usage: check_isa_comdat.sh OBJECT... (nothing to check without one)
for obj in "$@"; do
  [ -n "$obj" ] || continue
  weak=$(objdump -t "$obj" | awk '$2 == "w" && $3 == "F" { print $4 }' | sort -u)
  objdump -d --no-show-raw-insn "$obj" | awk -v weak="$weak" -v obj="$obj" '
    BEGIN { n = split(weak, w, "\n"); for (i = 1; i <= n; i++) W[w[i]] = 1 }
    /^Disassembly of section / { sec = $4; sub(/:$/, "", sec); next }
    (sec in W) && /\t/ {
      split($0, f, "\t")
      if (f[2] ~ /^v|%ymm|%zmm/ && !(sec in seen)) {
        seen[sec] = 1
        print obj ": weak function section " sec " has AVX code: " f[2]
        bad = 1
      }
    }
    END { exit bad }' || exit 1
done
