// Signed artifacts and encrypted weights (runtime/signature.h, runtime/weights_cipher.h,
// tools/io/artifact_signer.h): signatures Kiln makes verify with the `openssl` command line, and
// one the command line makes over the documented message verifies in Kiln; every refusal
// (no signature, another signer, a changed section or trailer, a truncated file, no key, a
// wrong key) is its own Status; decrypted weights equal the clear ones (checked with libcrypto
// directly and by running the model); and a file changed after a Load that verified it does
// not change what the model computes.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/runtime.h"
#include "runtime/signature.h"
#include "runtime/signature_trailer.h"
#include "tests/runtime/artifact_builder_test_util.h"
#include "tests/temp_dir.h"
#include "tools/io/artifact_signer.h"

namespace kiln {
namespace {

using testing::AddModelSpec;
using testing::BuildArtifact;
using testing::ReadBytes;
using testing::ReadHeader;
using testing::TempDir;
using testing::WriteBytes;

// The `openssl` command line, its output discarded: its exit status.
int SigOpenssl(const std::string& args) { return std::system(("openssl " + args + " > /dev/null 2>&1").c_str()); }

// Two Ed25519 key pairs made by the openssl command line: a.pem/a.pub.pem, b.pem/b.pub.pem.
struct SigKeys {
  TempDir dir;
  std::string a_private, a_public, b_public;
  SigKeys() {
    for (const char* k : {"a", "b"}) {
      REQUIRE(SigOpenssl("genpkey -algorithm ed25519 -out " + dir / (std::string(k) + ".pem")) == 0);
      REQUIRE(SigOpenssl("pkey -in " + dir / (std::string(k) + ".pem") + " -pubout -out " +
                         dir / (std::string(k) + ".pub.pem")) == 0);
    }
    a_private = ReadBytes(dir / "a.pem");
    a_public = ReadBytes(dir / "a.pub.pem");
    b_public = ReadBytes(dir / "b.pub.pem");
  }
};

std::vector<uint8_t> SigUnsigned() {
  testing::ArtifactSpec spec = AddModelSpec();
  spec.format_version = 3;
  return BuildArtifact(spec);
}

std::vector<uint8_t> SigSigned(const SigKeys& keys, const std::vector<uint8_t>& artifact) {
  io::SignOptions options;
  options.private_key_pem = keys.a_private;
  Result<std::vector<uint8_t>> out = io::SignArtifact(artifact, options);
  REQUIRE(out.ok());
  return *out;
}

std::string SigStr(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

// SHA-256 with libcrypto directly (not Kiln's DigestSections).
std::string SigSha256(const uint8_t* p, size_t n) {
  uint8_t d[32];
  unsigned len = 0;
  REQUIRE(EVP_Digest(p, n, d, &len, EVP_sha256(), nullptr) == 1);
  return std::string(reinterpret_cast<char*>(d), 32);
}

// The message docs/security.md specifies, built here from the file's bytes.
std::string SigMessage(const std::vector<uint8_t>& file) {
  const ArtifactHeader h = ReadHeader(file);
  const uint8_t* trailer = file.data() + file.size() - 192;
  return "KILN signature 1" + std::string(reinterpret_cast<const char*>(trailer), 128) +
         SigSha256(file.data(), h.header_bytes) + SigSha256(file.data() + h.flatbuffer_offset, h.flatbuffer_size) +
         SigSha256(file.data() + h.weights_offset, h.weights_size);
}

// y = x + w of the test model for x = {1..6}: w = {10, 20, 30}.
std::vector<float> SigRun(const Model& model) {
  auto ctx = ExecutionContext::Create(model, {.device = Device::kCpu, .cpu = {.threads = 1}});
  REQUIRE(ctx.ok());
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {2, 3})};
  std::vector<TensorView> out;
  REQUIRE(ctx->Run(in, out).ok());
  const float* y = static_cast<const float*>(out[0].data);
  return std::vector<float>(y, y + 6);
}

const std::vector<float> kSigExpected = {11, 22, 33, 14, 25, 36};

LoadOptions SigTrusting(std::vector<std::string> keys) {
  LoadOptions o;
  o.trusted_public_keys = std::move(keys);
  return o;
}

TEST_CASE("sign: Kiln's Ed25519 signature verifies with openssl pkeyutl over the documented message") {
  SigKeys keys;
  const std::vector<uint8_t> unsigned_bytes = SigUnsigned();
  const std::vector<uint8_t> signed_bytes = SigSigned(keys, unsigned_bytes);
  // The header's sections are untouched: the unsigned file followed by 192 bytes.
  REQUIRE(signed_bytes.size() == unsigned_bytes.size() + 192);
  CHECK(std::equal(unsigned_bytes.begin(), unsigned_bytes.end(), signed_bytes.begin()));
  CHECK(std::memcmp(signed_bytes.data() + unsigned_bytes.size(), "KILNSIG\0", 8) == 0);

  const std::string message = SigMessage(signed_bytes);
  WriteBytes(keys.dir / "message", message);
  WriteBytes(keys.dir / "signature", SigStr(signed_bytes).substr(signed_bytes.size() - 64));
  const std::string verify = "pkeyutl -verify -pubin -inkey " + keys.dir / "a.pub.pem" + " -rawin -in " +
                             keys.dir / "message" + " -sigfile " + keys.dir / "signature";
  CHECK(SigOpenssl(verify) == 0);
  // The check can fail: another key, or one bit of a digest flipped.
  CHECK(SigOpenssl("pkeyutl -verify -pubin -inkey " + keys.dir / "b.pub.pem" + " -rawin -in " + keys.dir / "message" +
                   " -sigfile " + keys.dir / "signature") != 0);
  std::string changed = message;
  changed[200] ^= 1;
  WriteBytes(keys.dir / "message", changed);
  CHECK(SigOpenssl(verify) != 0);

  // The unsigned and the signed artifact load alike when no signature is required.
  CHECK(Model::Load(unsigned_bytes).ok());
  auto model = Model::Load(signed_bytes, SigTrusting({keys.a_public}));
  REQUIRE(model.ok());
  CHECK(SigRun(*model) == kSigExpected);
  CHECK(Model::Load(signed_bytes, SigTrusting({keys.b_public, keys.a_public})).ok());  // any listed key
}

TEST_CASE("sign: a signature openssl pkeyutl makes over the documented message verifies in Kiln") {
  SigKeys keys;
  std::vector<uint8_t> file = SigUnsigned();
  // The raw public key: the last 32 bytes of its DER SubjectPublicKeyInfo.
  REQUIRE(SigOpenssl("pkey -pubin -in " + keys.dir / "a.pub.pem" + " -outform DER -out " + keys.dir / "a.der") == 0);
  const std::string der = ReadBytes(keys.dir / "a.der");
  REQUIRE(der.size() == 44);
  SignatureTrailer t{};
  std::memcpy(t.magic, "KILNSIG", 8);
  t.trailer_bytes = 192;
  t.artifact_bytes = file.size();
  std::memcpy(t.public_key, der.data() + 12, 32);
  const auto* tb = reinterpret_cast<const uint8_t*>(&t);
  file.insert(file.end(), tb, tb + sizeof t);
  WriteBytes(keys.dir / "message", SigMessage(file));
  REQUIRE(SigOpenssl("pkeyutl -sign -inkey " + keys.dir / "a.pem" + " -rawin -in " + keys.dir / "message" + " -out " +
                     keys.dir / "signature") == 0);
  const std::string signature = ReadBytes(keys.dir / "signature");
  REQUIRE(signature.size() == 64);
  std::memcpy(file.data() + file.size() - 64, signature.data(), 64);
  auto model = Model::Load(file, SigTrusting({keys.a_public}));
  REQUIRE(model.ok());
  CHECK(SigRun(*model) == kSigExpected);
}

TEST_CASE("sign: Load refuses a missing, foreign, broken or truncated signature before reading anything else") {
  SigKeys keys;
  const std::vector<uint8_t> unsigned_bytes = SigUnsigned();
  const std::vector<uint8_t> good = SigSigned(keys, unsigned_bytes);
  const ArtifactHeader h = ReadHeader(good);
  const size_t trailer_at = unsigned_bytes.size();

  Status st = Model::Load(unsigned_bytes, SigTrusting({keys.a_public})).status();
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  CHECK(st.message() == "a signature is required (LoadOptions::trusted_public_keys) but the artifact is not signed: "
                        "expected a 192-byte signature trailer starting with \"KILNSIG\" at the end of the file (" +
                            std::to_string(unsigned_bytes.size()) + " bytes), found none");

  SignatureTrailer t;
  std::memcpy(&t, good.data() + trailer_at, sizeof t);
  st = Model::Load(good, SigTrusting({keys.b_public})).status();
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  CHECK(st.message() == "the artifact is signed by Ed25519 public key " + HexBytes(t.public_key, 32) +
                            ", which is not among the 1 trusted public key(s) (LoadOptions::trusted_public_keys)");

  st = Model::Load(good, SigTrusting({"-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----\n"})).status();
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("LoadOptions::trusted_public_keys[0] is not an Ed25519 public key in PEM") == 0);
  // An RSA key is a PEM public key, but not Ed25519.
  REQUIRE(SigOpenssl("genpkey -algorithm rsa -pkeyopt rsa_keygen_bits:1024 -out " + keys.dir / "rsa.pem") == 0);
  REQUIRE(SigOpenssl("pkey -in " + keys.dir / "rsa.pem" + " -pubout -out " + keys.dir / "rsa.pub.pem") == 0);
  CHECK(Model::Load(good, SigTrusting({keys.a_public, ReadBytes(keys.dir / "rsa.pub.pem")})).status().code() ==
        StatusCode::kInvalidArgument);

  // One byte changed in each section and in the signed part of the trailer: the signature fails
  // (kDataLoss) before the header's checksums would have caught it.
  const std::vector<std::pair<const char*, size_t>> bytes = {
      {"header (weights checksum)", 48},
      {"FlatBuffer", h.flatbuffer_offset + h.flatbuffer_size / 2},
      {"weights", h.weights_offset + 1},
      {"trailer (key id)", trailer_at + 64},
      {"signature", good.size() - 1}};
  for (const auto& flipped : bytes) {
    // Not a structured binding: clang 14 (the sanitizer build's) refuses one in CAPTURE's lambda.
    const char* what = flipped.first;
    const size_t at = flipped.second;
    CAPTURE(what);
    std::vector<uint8_t> bad = good;
    bad[at] ^= 0x10;
    st = Model::Load(bad, SigTrusting({keys.a_public})).status();
    CHECK(st.code() == StatusCode::kDataLoss);
    CHECK(st.message().find("the Ed25519 signature in the trailer at file offset " + std::to_string(trailer_at) +
                            " does not verify under public key " + HexBytes(t.public_key, 32) +
                            ": the header, FlatBuffer, weights or trailer changed after signing (SHA-256 found: "
                            "header ") == 0);
    // Without a required signature the checksum catches the changed sections, as before.
    if (at < trailer_at) CHECK(Model::Load(bad).status().code() == StatusCode::kDataLoss);
  }

  // Truncated: the trailer's last byte gone, or the weights cut.
  std::vector<uint8_t> cut(good.begin(), good.end() - 1);
  CHECK(Model::Load(cut, SigTrusting({keys.a_public})).status().code() == StatusCode::kFailedPrecondition);
  cut.assign(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(h.weights_offset + 4));
  st = Model::Load(cut, SigTrusting({keys.a_public})).status();
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message().find("weights section [") == 0);
  // Bytes added after the trailer: it is no longer at the end.
  std::vector<uint8_t> longer = good;
  longer.insert(longer.end() - 192, uint8_t{0});
  st = Model::Load(longer, SigTrusting({keys.a_public})).status();
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() == "signature trailer at file offset " + std::to_string(trailer_at + 1) + ": artifact_bytes reads " +
                            std::to_string(trailer_at) + ", expected " + std::to_string(trailer_at + 1) +
                            " (the file is " + std::to_string(longer.size()) + " bytes: truncated, or bytes added?)");
}

TEST_CASE("sign: Load(path) with a required signature runs from a private copy that later writes do not reach") {
  SigKeys keys;
  const std::vector<uint8_t> good = SigSigned(keys, SigUnsigned());
  const std::string path = keys.dir / "model.kiln";
  WriteBytes(path, SigStr(good));
  auto model = Model::Load(path, SigTrusting({keys.a_public}));
  REQUIRE(model.ok());
  // Overwrite the weights in the file itself (same inode), after the check.
  const int fd = ::open(path.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  const float other[3] = {-1, -1, -1};
  REQUIRE(::pwrite(fd, other, sizeof other, static_cast<off_t>(ReadHeader(good).weights_offset)) == sizeof other);
  ::close(fd);
  CHECK(SigRun(*model) == kSigExpected);
  // A new Load sees the change, and refuses it.
  CHECK(Model::Load(path, SigTrusting({keys.a_public})).status().code() == StatusCode::kDataLoss);
}

TEST_CASE("sign: encrypted weights decrypt in place under the key the callback gives, and only under it") {
  SigKeys keys;
  const std::vector<uint8_t> clear = SigUnsigned();
  std::array<uint8_t, 32> key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(7 * i + 1);
  io::SignOptions options;
  options.private_key_pem = keys.a_private;
  options.encrypt_weights = true;
  options.weights_key = key;
  options.key_id = "prod-2026";
  Result<std::vector<uint8_t>> made = io::SignArtifact(clear, options);
  REQUIRE(made.ok());
  const std::vector<uint8_t>& sealed = *made;
  const ArtifactHeader hc = ReadHeader(clear), he = ReadHeader(sealed);
  CHECK(he.format_version == kEncryptedWeightsFormatVersion);
  REQUIRE(he.weights_size == hc.weights_size);
  SignatureTrailer t;
  REQUIRE(FindTrailer(sealed.data(), sealed.size(), &t));
  CHECK(t.flags == kTrailerWeightsEncrypted);
  CHECK(std::string(t.key_id) == "prod-2026");

  // The file holds no clear weight; libcrypto itself decrypts them back to the clear ones.
  const uint8_t* w = sealed.data() + he.weights_offset;
  CHECK(std::memcmp(w, clear.data() + hc.weights_offset, hc.weights_size) != 0);
  std::vector<uint8_t> plain(he.weights_size);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int n = 0, last = 0;
  REQUIRE(EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), t.nonce) == 1);
  REQUIRE(EVP_DecryptUpdate(ctx, plain.data(), &n, w, static_cast<int>(he.weights_size)) == 1);
  REQUIRE(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, t.tag) == 1);
  CHECK(EVP_DecryptFinal_ex(ctx, plain.data() + n, &last) == 1);
  EVP_CIPHER_CTX_free(ctx);
  CHECK(std::memcmp(plain.data(), clear.data() + hc.weights_offset, hc.weights_size) == 0);

  std::string asked;
  LoadOptions o = SigTrusting({keys.a_public});
  o.weights_key = [&](std::string_view id, std::span<uint8_t, 32> out) {
    asked = id;
    std::copy(key.begin(), key.end(), out.begin());
    return Status::Ok();
  };
  auto model = Model::Load(sealed, o);
  REQUIRE(model.ok());
  CHECK(asked == "prod-2026");
  CHECK(model->format_version() == kEncryptedWeightsFormatVersion);
  CHECK(SigRun(*model) == kSigExpected);
  // From a file (read into private memory: a key callback is set), without a required signature.
  const std::string path = keys.dir / "sealed.kiln";
  WriteBytes(path, SigStr(sealed));
  LoadOptions key_only;
  key_only.weights_key = o.weights_key;
  auto from_file = Model::Load(path, key_only);
  REQUIRE(from_file.ok());
  CHECK(SigRun(*from_file) == kSigExpected);

  // No key.
  Status st = Model::Load(path).status();
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  CHECK(st.message() == "'" + path + "': the weights are encrypted, and LoadOptions::weights_key is not set");
  st = Model::Load(sealed, SigTrusting({keys.a_public})).status();
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  CHECK(st.message() == "the weights (AES-256-GCM, key id 'prod-2026', 12 bytes) are encrypted, and "
                        "LoadOptions::weights_key is not set");
  // A wrong key: kInvalidArgument when the signature vouches for the weights, else kDataLoss.
  LoadOptions wrong = SigTrusting({keys.a_public});
  wrong.weights_key = [&](std::string_view, std::span<uint8_t, 32> out) {
    std::copy(key.begin(), key.end(), out.begin());
    out[31] ^= 1;
    return Status::Ok();
  };
  st = Model::Load(sealed, wrong).status();
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "the weights (AES-256-GCM, key id 'prod-2026', 12 bytes) do not decrypt under the key "
                        "LoadOptions::weights_key gave: the AES-256-GCM tag does not match, and the signature "
                        "verified, so the key is wrong");
  wrong.trusted_public_keys.clear();
  CHECK(Model::Load(sealed, wrong).status().code() == StatusCode::kDataLoss);
  // The callback's own error, with context.
  LoadOptions refusing;
  refusing.weights_key = [](std::string_view, std::span<uint8_t, 32>) { return NotFound("no such key in the vault"); };
  st = Model::Load(sealed, refusing).status();
  CHECK(st.code() == StatusCode::kNotFound);
  CHECK(st.message() == "LoadOptions::weights_key for key id 'prod-2026': no such key in the vault");
  // Changed ciphertext without a required signature: the GCM tag catches it.
  std::vector<uint8_t> bad = sealed;
  bad[he.weights_offset] ^= 1;
  CHECK(Model::Load(bad, key_only).status().code() == StatusCode::kDataLoss);
  // The trailer cut off: the weights are read as clear, and their checksum (of the clear
  // weights) fails.
  std::vector<uint8_t> stripped(sealed.begin(), sealed.end() - 192);
  st = Model::Load(stripped, key_only).status();
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message().find("weights checksum mismatch") == 0);
  // Signed again with another key: the encryption is kept; encrypting twice is refused.
  io::SignOptions again;
  again.private_key_pem = keys.a_private;
  Result<std::vector<uint8_t>> resigned = io::SignArtifact(sealed, again);
  REQUIRE(resigned.ok());
  CHECK(Model::Load(*resigned, o).ok());
  CHECK(io::SignArtifact(sealed, options).status().code() == StatusCode::kInvalidArgument);
}

// kiln_weights_key_fn for the C API case: user data is the key; "refuse" makes it fail.
kiln_status SigCKey(void* user, const char* key_id, uint8_t* key) {
  if (std::string(key_id) == "refuse") return KILN_STATUS_NOT_FOUND;
  std::memcpy(key, user, 32);
  return KILN_STATUS_OK;
}

TEST_CASE("sign: the C API's load options require the signature and call the weights key function") {
  SigKeys keys;
  std::array<uint8_t, 32> key;
  key.fill(0x42);
  io::SignOptions options;
  options.private_key_pem = keys.a_private;
  options.encrypt_weights = true;
  options.weights_key = key;
  options.key_id = "c";
  Result<std::vector<uint8_t>> sealed = io::SignArtifact(SigUnsigned(), options);
  REQUIRE(sealed.ok());
  kiln_load_options lo;
  REQUIRE(kiln_load_options_init(&lo) == KILN_STATUS_OK);
  CHECK(lo.trusted_public_keys == nullptr);
  CHECK(lo.num_trusted_public_keys == 0);
  CHECK((lo.weights_key == nullptr));
  const char* trusted[] = {keys.b_public.c_str(), keys.a_public.c_str()};
  lo.trusted_public_keys = trusted;
  lo.num_trusted_public_keys = 2;
  lo.weights_key = SigCKey;
  lo.weights_key_user_data = key.data();
  kiln_model* model = nullptr;
  CHECK(kiln_model_load_bytes(sealed->data(), sealed->size(), &lo, &model) == KILN_STATUS_OK);
  kiln_model_destroy(model);

  lo.num_trusted_public_keys = 1;  // only b
  CHECK(kiln_model_load_bytes(sealed->data(), sealed->size(), &lo, &model) == KILN_STATUS_FAILED_PRECONDITION);
  CHECK(std::string(kiln_model_last_error(model)).find("which is not among the 1 trusted public key(s)") !=
        std::string::npos);
  kiln_model_destroy(model);
  trusted[0] = nullptr;
  CHECK(kiln_model_load_bytes(sealed->data(), sealed->size(), &lo, &model) == KILN_STATUS_INVALID_ARGUMENT);
  kiln_model_destroy(model);

  // The callback's status fails the load.
  options.key_id = "refuse";
  sealed = io::SignArtifact(SigUnsigned(), options);
  REQUIRE(sealed.ok());
  lo.num_trusted_public_keys = 0;
  CHECK(kiln_model_load_bytes(sealed->data(), sealed->size(), &lo, &model) == KILN_STATUS_NOT_FOUND);
  CHECK(std::string(kiln_model_last_error(model)).find(
            "LoadOptions::weights_key for key id 'refuse': the weights_key callback returned NOT_FOUND") !=
        std::string::npos);
  kiln_model_destroy(model);
}

}  // namespace
}  // namespace kiln
