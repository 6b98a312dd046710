#!/bin/sh
# Checks what a shared Kiln library exports (ctest runtime_exports and compiler_exports):
#   check_exports.sh LIB [--expected LIST] [--forbidden LIST] [--update LIST]
# Every defined dynamic symbol of LIB (nm -D --defined-only, demangled) must be in namespace
# kiln ("kiln::...") or a C function named kiln_*. --expected: LIST is the exact export list,
# one demangled name a line, sorted (LC_ALL=C); a missing or an extra export fails and is
# named. --forbidden: none of LIST's names may be exported (libkiln_compiler.so must leave
# the runtime's API to libkiln_runtime.so). --update: writes LIB's exports to LIST (after an
# intended change of the public API; review the diff).
set -eu
lib=$1; shift
[ -f "$lib" ] || { echo "check_exports: no $lib (build it first)"; exit 1; }
exports=$(nm -D --defined-only -C -j "$lib" | LC_ALL=C sort -u)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '%s\n' "$exports" > "$tmp/exports"
fail=0
stray=$(grep -v -e '^kiln::' -e '^kiln_' "$tmp/exports" || true)
if [ -n "$stray" ]; then
  echo "FAIL: $lib exports symbols outside namespace kiln and the kiln_* C API:"; echo "$stray"; fail=1
fi
while [ $# -gt 0 ]; do
  case $1 in
    --expected)
      LC_ALL=C comm -13 "$2" "$tmp/exports" > "$tmp/extra"
      LC_ALL=C comm -23 "$2" "$tmp/exports" > "$tmp/missing"
      if [ -s "$tmp/extra" ]; then
        echo "FAIL: $lib exports what $2 does not list (hidden by mistake? else add it):"; cat "$tmp/extra"; fail=1
      fi
      if [ -s "$tmp/missing" ]; then
        echo "FAIL: $lib does not export what $2 lists (a public declaration without KILN_API?):"; cat "$tmp/missing"; fail=1
      fi ;;
    --forbidden)
      LC_ALL=C comm -12 "$2" "$tmp/exports" > "$tmp/both"
      if [ -s "$tmp/both" ]; then
        echo "FAIL: $lib also exports what $2 lists:"; cat "$tmp/both"; fail=1
      fi ;;
    --update) cp "$tmp/exports" "$2"; echo "wrote $(wc -l < "$2") exports of $lib to $2" ;;
    *) echo "check_exports: unknown option $1"; exit 2 ;;
  esac
  shift 2
done
[ $fail = 0 ] && echo "ok: $lib exports $(wc -l < "$tmp/exports") symbols, all in namespace kiln or kiln_*"
exit $fail
