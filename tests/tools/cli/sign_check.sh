#!/bin/sh
# `kiln sign` end to end (ctest cli_sign): a compiled model signed with a key the openssl command
# line made; the signature checked by `openssl pkeyutl -verify` over the message docs/security.md
# specifies, built here from the file with head, tail, od and `openssl dgst`; then `kiln inspect`
# and `kiln run` with --trusted-key and --weights-key, and each refusal's exit status and message.
#
#   sh tests/tools/cli/sign_check.sh KILN MODEL_DIR WORK_DIR
# MODEL_DIR holds model.onnx and test_data_set_0/ (input_0.pb, output_0.pb). Exit 0: all passed.
set -u
kiln=$(realpath "$1") model=$(realpath "$2") work=$3
command -v openssl > /dev/null || { echo "skipped: no openssl command"; exit 77; }
rm -rf "$work" && mkdir -p "$work" || exit 1
cd "$work" || exit 1
fail() { echo "FAILED: $*"; exit 1; }
# expect_fail WHAT TEXT CMD...: CMD exits 1 and its standard error contains TEXT.
expect_fail() {
  what=$1 text=$2; shift 2
  "$@" > out.txt 2> err.txt; rc=$?
  [ $rc = 1 ] || { cat out.txt err.txt; fail "$what: exit $rc, expected 1"; }
  grep -qF -- "$text" err.txt || { cat err.txt; fail "$what: no '$text' in the message"; }
}

for k in a b; do
  openssl genpkey -algorithm ed25519 -out $k.pem 2> /dev/null && openssl pkey -in $k.pem -pubout -out $k.pub.pem ||
    fail "openssl genpkey"
done
"$kiln" compile "$model/model.onnx" -o model.kiln -q > /dev/null || fail "kiln compile"
"$kiln" sign model.kiln --key a.pem -o signed.kiln > sign.txt || fail "kiln sign"
# It prints the public key that openssl derives from the private key.
hex=$(openssl pkey -in a.pem -pubout -outform DER | tail -c 32 | od -An -tx1 | tr -d ' \n')
grep -qF "signed.kiln: signed by Ed25519 public key $hex" sign.txt || { cat sign.txt; fail "kiln sign's key"; }
# The file is the unsigned one and 192 bytes.
[ $(($(wc -c < signed.kiln) - $(wc -c < model.kiln))) = 192 ] || fail "trailer size"
head -c "$(wc -c < model.kiln)" signed.kiln | cmp -s - model.kiln || fail "kiln sign changed the artifact's bytes"

# The message, from the header's fields (little-endian u32 at 8, u64 at 16, 24, 32, 40).
u() { od -An -t "u$1" -j "$2" -N "$1" signed.kiln | tr -d ' '; }
hb=$(u 4 8) fo=$(u 8 16) fs=$(u 8 24) wo=$(u 8 32) ws=$(u 8 40)
section() { tail -c +$(($1 + 1)) signed.kiln | head -c "$2" | openssl dgst -sha256 -binary; }
{ printf 'KILN signature 1'; tail -c 192 signed.kiln | head -c 128; section 0 "$hb"; section "$fo" "$fs"
  section "$wo" "$ws"; } > message
[ "$(wc -c < message)" = 240 ] || fail "message size"
tail -c 64 signed.kiln > signature
openssl pkeyutl -verify -pubin -inkey a.pub.pem -rawin -in message -sigfile signature > /dev/null ||
  fail "openssl pkeyutl -verify refused Kiln's signature"
openssl pkeyutl -verify -pubin -inkey b.pub.pem -rawin -in message -sigfile signature > /dev/null 2>&1 &&
  fail "openssl pkeyutl -verify accepted another key"

# Load with the signature required.
"$kiln" inspect signed.kiln --trusted-key a.pub.pem --no-traces > out.txt || fail "inspect --trusted-key"
grep -qF "signature: Ed25519 by public key $hex, verified (--trusted-key)" out.txt || fail "inspect's signature line"
"$kiln" inspect model.kiln --no-traces | grep -qF "signature: none" || fail "inspect of an unsigned artifact"
"$kiln" run signed.kiln --trusted-key b.pub.pem --trusted-key a.pub.pem --inputs "$model/test_data_set_0" \
  --expected "$model/test_data_set_0" --device cpu > out.txt || { cat out.txt; fail "run --trusted-key"; }
expect_fail "unsigned" "but the artifact is not signed" "$kiln" inspect model.kiln --trusted-key a.pub.pem
expect_fail "another signer" "signed by Ed25519 public key $hex, which is not among the 1 trusted" \
  "$kiln" run signed.kiln --trusted-key b.pub.pem --inputs "$model/test_data_set_0"
# One byte of the FlatBuffer (its native code, its programs) changed.
cp signed.kiln tampered.kiln
printf 'X' | dd of=tampered.kiln bs=1 seek=$((fo + fs / 2)) conv=notrunc 2> /dev/null
expect_fail "tampered" "does not verify under public key $hex" "$kiln" inspect tampered.kiln --trusted-key a.pub.pem
head -c $(($(wc -c < signed.kiln) - 100)) signed.kiln > truncated.kiln
expect_fail "truncated" "but the artifact is not signed" "$kiln" inspect truncated.kiln --trusted-key a.pub.pem

# Encrypted weights.
openssl rand -out w.key 32 && openssl rand -out wrong.key 32 || fail "openssl rand"
"$kiln" sign model.kiln --key a.pem --encrypt-weights w.key --key-id prod-1 -o sealed.kiln > sign.txt ||
  fail "kiln sign --encrypt-weights"
grep -qF "weights encrypted with AES-256-GCM (key id 'prod-1')" sign.txt || { cat sign.txt; fail "sign's report"; }
"$kiln" run sealed.kiln --trusted-key a.pub.pem --weights-key w.key --inputs "$model/test_data_set_0" \
  --expected "$model/test_data_set_0" --device cpu > out.txt || { cat out.txt; fail "run --weights-key"; }
"$kiln" inspect sealed.kiln --weights-key w.key --no-traces > out.txt || fail "inspect --weights-key"
grep -qF "format version 10" out.txt && grep -qF "weights: encrypted with AES-256-GCM, key id 'prod-1'" out.txt ||
  { cat out.txt; fail "inspect of encrypted weights"; }
expect_fail "no key" "are encrypted, and LoadOptions::weights_key is not set" "$kiln" inspect sealed.kiln
expect_fail "wrong key" "signature verified, so the key is wrong" \
  "$kiln" inspect sealed.kiln --trusted-key a.pub.pem --weights-key wrong.key
head -c 16 w.key > short.key
expect_fail "short key file" "holds 16 bytes; an AES-256 key is 32" "$kiln" sign model.kiln --key a.pem \
  --encrypt-weights short.key
echo "cli_sign: all checks passed"
