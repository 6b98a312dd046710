#!/usr/bin/env bash
# oneDNN 2.6 (Debian's libdnnl-dev) against oneDNN 3.x (a tree with include/ and lib/, such as PyPI's
# onednn-devel-cpu-gomp + onednn-cpu-gomp wheels unpacked) on the primitives Kiln's CPU backend uses:
# benchmarks/onednn_versions.cc built twice with plain g++ -O2, run alternately (2.6, 3.x, three
# rounds, at 1 and 2 OpenMP threads), then the graph API's attention on 3.x with the environment
# settings that name a graph compiler, beside Kiln's own Attention kernel (when build/kiln and
# build/venv exist). Not part of Kiln's build, tests or CI.
#
#   bash benchmarks/onednn_versions.sh [ONEDNN3_DIR]      # default build/onednn-3.2
#
# Getting the 3.2 tree (build/ is ignored by git):
#   pip download onednn-devel-cpu-gomp==2023.2.0 onednn-cpu-gomp==2023.2.0 --no-deps -d /tmp/onednn32
#   mkdir -p build/onednn-3.2 && for w in /tmp/onednn32/*.whl; do python3 -m zipfile -e "$w" build/onednn-3.2; done
#   then move *.data/data/include and *.data/data/lib/libdnnl.so.3.2 to build/onednn-3.2/{include,lib}
#   (the wheel stores libdnnl.so, .so.3 and .so.3.2 as three copies; make the first two links)
#
# Environment: KILN (default build/kiln) and PY (default build/venv/bin/python) for Kiln's attention
# figures; ROUNDS (3); SECONDS_PER_CASE (0.4). Every timed run holds /tmp/bench.lock (flock), one
# round and thread count at a time, so that others benchmarking on the machine interleave. Raw
# figures go to build/onednn-bench/raw/, the summary to build/onednn-bench/onednn_versions.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
D3=$(cd "${1:-$ROOT/build/onednn-3.2}" && pwd)
OUT=$ROOT/build/onednn-bench
KILN=${KILN:-$ROOT/build/kiln}
PY=${PY:-$ROOT/build/venv/bin/python}
ROUNDS=${ROUNDS:-3}
SECS=${SECONDS_PER_CASE:-0.4}
LOCK=/tmp/bench.lock
mkdir -p "$OUT/raw"
rm -f "$OUT"/raw/*

SRC=$ROOT/benchmarks/onednn_versions.cc
nice -n 19 g++ -O2 -std=c++17 -Wall "$SRC" -o "$OUT/onednn_versions-2.6" -ldnnl
nice -n 19 g++ -O2 -std=c++17 -Wall -I"$D3/include" "$SRC" -o "$OUT/onednn_versions-3" \
  -L"$D3/lib" -Wl,-rpath,"$D3/lib" -ldnnl
ldd "$OUT/onednn_versions-2.6" | grep 'libdnnl.so.2' > /dev/null || { echo "2.6 build is not on libdnnl.so.2" >&2; exit 1; }
ldd "$OUT/onednn_versions-3" | grep "$D3/lib/libdnnl.so.3" > /dev/null || { echo "3.x build is not on $D3" >&2; exit 1; }

{
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
  for v in 2.6 3; do
    OMP_NUM_THREADS=1 ONEDNN_VERBOSE=1 "$OUT/onednn_versions-$v" --only 'matmul_f32 1x' --seconds 0.01 2>&1 \
      | grep -E '^# oneDNN|info,cpu,isa|info,cpu,runtime' | sed 's/^# //; s/^/# /' || true
  done
} > "$OUT/raw/header.txt"
cat "$OUT/raw/header.txt"

# The primitives: A B per round and thread count, under one lock each (about 20 s).
for r in $(seq 1 "$ROUNDS"); do
  for t in 1 2; do
    flock "$LOCK" bash -c "
      OMP_NUM_THREADS=$t '$OUT/onednn_versions-2.6' --seconds $SECS > '$OUT/raw/prim-2.6-t$t-r$r.tsv'
      OMP_NUM_THREADS=$t '$OUT/onednn_versions-3' --seconds $SECS > '$OUT/raw/prim-3-t$t-r$r.tsv'"
    echo "round $r, $t thread(s): done, load $(cut -d" " -f1-3 /proc/loadavg)" | tee -a "$OUT/raw/loads.txt"
  done
done

# The graph API's attention on 3.x: which partitions each environment setting gives (the graph
# verbose line names the backends the library registered), once per setting at 1 thread.
declare -a ENVS=(
  ""
  "ONEDNN_EXPERIMENTAL_GRAPH_COMPILER=1"
  "_ONEDNN_GRAPH_BACKEND_COMPILER=1"
  "_ONEDNN_DISABLE_COMPILER_BACKEND=0 _DNNL_DISABLE_COMPILER_BACKEND=0 _ONEDNN_GRAPH_DISABLE_COMPILER_BACKEND=0 _DNNL_GRAPH_DISABLE_COMPILER_BACKEND=0"
)
for i in "${!ENVS[@]}"; do
  e=${ENVS[$i]}
  flock "$LOCK" env $e OMP_NUM_THREADS=1 ONEDNN_GRAPH_VERBOSE=1 "$OUT/onednn_versions-3" --sdpa --seconds 0.2 \
    > "$OUT/raw/sdpa-env$i.txt" 2>&1 || true
  { echo "## env: ${e:-(none)}"; grep -E 'info,backend|^sdpa' "$OUT/raw/sdpa-env$i.txt" | cut -f1,2,4; } \
    >> "$OUT/raw/sdpa-envs.txt"
done
cat "$OUT/raw/sdpa-envs.txt"

# Kiln's Attention op on the same masked attention (benchmarks/attention.py's graph), compiled once.
have_kiln=0
if [ -x "$KILN" ] && [ -x "$PY" ]; then
  have_kiln=1
  ROOT_DIR="$ROOT" "$PY" - "$OUT/attn" <<'EOF'
import os, sys
sys.path.insert(0, os.path.join(os.environ.get("ROOT_DIR", "."), "benchmarks"))
import attention
for h, s in [(12, 512), (6, 1500)]:
    attention.write(sys.argv[1], h, s, True)
EOF
  for m in attn-h12-s512-mask attn-h6-s1500-mask; do
    nice -n 19 "$KILN" compile "$OUT/attn/$m/model.onnx" -o "$OUT/attn/$m.kiln" --arch none > /dev/null
  done
fi

# Timed attention: oneDNN graph (3.x) and Kiln, alternately, per round and thread count.
for r in $(seq 1 "$ROUNDS"); do
  for t in 1 2; do
    flock "$LOCK" bash -c "
      OMP_NUM_THREADS=$t '$OUT/onednn_versions-3' --sdpa --seconds $SECS > '$OUT/raw/sdpa-3-t$t-r$r.tsv'
      if [ $have_kiln = 1 ]; then
        for m in attn-h12-s512-mask attn-h6-s1500-mask; do
          '$KILN' bench '$OUT/attn/'\$m.kiln --inputs '$OUT/attn/'\$m/test_data_set_0 --threads $t \
            --duration $SECS --json '$OUT/raw/kiln-'\$m-t$t-r$r.json -q > /dev/null
        done
      fi"
    echo "attention round $r, $t thread(s): done, load $(cut -d" " -f1-3 /proc/loadavg)" | tee -a "$OUT/raw/loads.txt"
  done
done

python3 - "$OUT" <<'EOF'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
rows = {}   # (case, version, threads) -> [median ms per round]; version 2.6, 3 or kiln
fastest = {}  # (case, version, threads) -> [fastest call's ms per round]
impl = {}   # (case, version) -> implementation oneDNN chose
for f in glob.glob(os.path.join(out, "raw", "*.tsv")):
    _, ver, t, _ = re.match(r"(prim|sdpa)-([\d.]+)-t(\d)-r(\d+)\.tsv", os.path.basename(f)).groups()
    for line in open(f):
        if line.startswith("#") or not line.strip():
            continue
        case, ms, best, what, err = line.rstrip("\n").split("\t")
        rows.setdefault((case, ver, int(t)), []).append(float(ms))
        fastest.setdefault((case, ver, int(t)), []).append(float(best))
        impl[(case, ver)] = what
for f in glob.glob(os.path.join(out, "raw", "kiln-*.json")):
    m, t, _ = re.match(r"kiln-attn-(.*)-mask-t(\d)-r(\d+)\.json", os.path.basename(f)).groups()
    h, s = re.match(r"h(\d+)-s(\d+)", m).groups()
    lat = json.load(open(f))["latency_ms"]
    rows.setdefault((f"attention {h}x{s}x64", "kiln", int(t)), []).append(lat["p50"])
    fastest.setdefault((f"attention {h}x{s}x64", "kiln", int(t)), []).append(lat.get("min", float("nan")))
def med(k):
    x = rows.get(k)
    return statistics.median(x) if x else float("nan")
def best(k):
    x = fastest.get(k)
    return min(x) if x else float("nan")
def fmt(x):
    return "-" if x != x else (f"{x:.3f}" if x < 10 else f"{x:.1f}")
def ratio(a, b):
    return fmt(b / a) if a == a and b == b else "-"
cases = []
for f in sorted(glob.glob(os.path.join(out, "raw", "prim-*-t1-r1.tsv")), reverse=True):
    for line in open(f):
        if not line.startswith("#") and line.strip() and line.split("\t")[0] not in cases:
            cases.append(line.split("\t")[0])
lines = [open(os.path.join(out, "raw", "header.txt")).read().rstrip(), "",
         "Median of the rounds' medians, ms; ratio 3.x / 2.6 (below 1: 3.x faster); 'fastest': the fastest",
         "single call of all rounds at T=2.", "",
         "| case | 2.6 T=1 | 3.x T=1 | ratio | 2.6 T=2 | 3.x T=2 | ratio | 2.6 T=2 fastest | 3.x T=2 fastest | 2.6 implementation | 3.x implementation |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
for c in cases:
    a1, b1, a2, b2 = med((c, "2.6", 1)), med((c, "3", 1)), med((c, "2.6", 2)), med((c, "3", 2))
    lines.append(f"| {c} | {fmt(a1)} | {fmt(b1)} | {ratio(a1, b1)} | {fmt(a2)} | {fmt(b2)} | {ratio(a2, b2)} "
                 f"| {fmt(best((c, '2.6', 2)))} | {fmt(best((c, '3', 2)))} "
                 f"| {impl.get((c, '2.6'), '-')} | {impl.get((c, '3'), '-')} |")
sdpa = []
for f in sorted(glob.glob(os.path.join(out, "raw", "sdpa-3-t1-r1.tsv"))):
    for line in open(f):
        if not line.startswith("#") and line.strip():
            sdpa.append(line.split("\t")[0])
lines += ["", "Attention (masked, f32): oneDNN 3.x's graph API against Kiln's Attention op, ms.", "",
          "| case | T=1 | T=2 | T=2 fastest | partitions |", "|---|---:|---:|---:|---|"]
for c in sdpa:
    lines.append(f"| oneDNN {c} | {fmt(med((c, '3', 1)))} | {fmt(med((c, '3', 2)))} | {fmt(best((c, '3', 2)))} "
                 f"| {impl.get((c, '3'), '-')} |")
for c in sorted({k[0] for k in rows if k[1] == "kiln"}):
    lines.append(f"| Kiln {c} | {fmt(med((c, 'kiln', 1)))} | {fmt(med((c, 'kiln', 2)))} | {fmt(best((c, 'kiln', 2)))} "
                 f"| one Attention op |")
lines += ["", "Load average after each locked run (another process on the second CPU slows the first too):", "```",
          open(os.path.join(out, "raw", "loads.txt")).read().rstrip(), "```"]
lines += ["", "Rounds (ms): " + json.dumps({f"{c} | {v} | T={t}": x for (c, v, t), x in sorted(rows.items())})]
text = "\n".join(lines) + "\n"
open(os.path.join(out, "onednn_versions.md"), "w").write(text)
print(text)
EOF
