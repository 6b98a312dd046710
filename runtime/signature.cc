// Load's signature check (runtime/signature.h) on OpenSSL's libcrypto: EVP SHA-256 of the
// sections, EVP Ed25519 verification of the 240-byte message.
#include "runtime/signature.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace kiln {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

bool Sha256(const uint8_t* data, uint64_t size, uint8_t out[32]) {
  unsigned int n = 0;
  return EVP_Digest(data, static_cast<size_t>(size), out, &n, EVP_sha256(), nullptr) == 1 && n == 32;
}

// The raw Ed25519 public key of a PEM "PUBLIC KEY" block, or false.
bool RawPublicKey(const std::string& pem, uint8_t out[32]) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return false;
  Pkey key(PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  size_t n = 32;
  return key && EVP_PKEY_get_id(key.get()) == EVP_PKEY_ED25519 &&
         EVP_PKEY_get_raw_public_key(key.get(), out, &n) == 1 && n == 32;
}

}  // namespace

std::string HexBytes(const uint8_t* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kDigits[bytes[i] >> 4];
    s[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return s;
}

std::array<uint8_t, kSignedMessageBytes> SignedMessage(const SignatureTrailer& trailer, const SectionDigests& digests) {
  std::array<uint8_t, kSignedMessageBytes> m;
  std::memcpy(m.data(), "KILN signature 1", 16);
  std::memcpy(m.data() + 16, &trailer, kTrailerSignedBytes);
  std::memcpy(m.data() + 16 + kTrailerSignedBytes, &digests, sizeof digests);
  static_assert(sizeof(SectionDigests) == 96);
  return m;
}

Status DigestSections(const uint8_t* data, const ArtifactHeader& h, SectionDigests* out) {
  if (Sha256(data, h.header_bytes, out->header) && Sha256(data + h.flatbuffer_offset, h.flatbuffer_size, out->flatbuffer) &&
      Sha256(data + h.weights_offset, h.weights_size, out->weights))
    return Status::Ok();
  return Internal("SHA-256 of the artifact's sections failed in libcrypto");
}

Status CheckTrailer(size_t size, const ArtifactHeader& h, const SignatureTrailer& t) {
  // One snprintf per message: far less code than string concatenation (the runtime's size budget).
  const unsigned long long at = size - sizeof t, fb_end = h.flatbuffer_offset + h.flatbuffer_size,
                           w_end = h.weights_offset + h.weights_size;
  char m[256];
  m[0] = 0;
  if (t.trailer_bytes != sizeof t)
    std::snprintf(m, sizeof m, "size field reads %u, expected %zu", t.trailer_bytes, sizeof t);
  else if (t.artifact_bytes != at)
    std::snprintf(m, sizeof m, "artifact_bytes reads %llu, expected %llu (the file is %zu bytes: truncated, or bytes added?)",
                  static_cast<unsigned long long>(t.artifact_bytes), at, size);
  else if ((t.flags & ~kTrailerWeightsEncrypted) != 0 || t.reserved[0] || std::memcmp(t.reserved, t.reserved + 1, 11))
    std::snprintf(m, sizeof m, "flags %u or reserved bytes not 0", t.flags);
  else if (fb_end > at || w_end > at)
    std::snprintf(m, sizeof m, "a section ends at %llu, inside the trailer", fb_end > w_end ? fb_end : w_end);
  else if ((t.flags & kTrailerWeightsEncrypted) && h.format_version < kEncryptedWeightsFormatVersion)
    std::snprintf(m, sizeof m, "encrypted weights in format version %u (expected %u or later)", h.format_version,
                  kEncryptedWeightsFormatVersion);
  if (m[0] == 0) return Status::Ok();
  char where[64];
  std::snprintf(where, sizeof where, "signature trailer at file offset %llu: ", at);
  return DataLoss(std::string(where) + m);
}

Status VerifySignature(const uint8_t* data, size_t size, const ArtifactHeader& h, std::span<const std::string> trusted) {
  // The keys first: a malformed one is the caller's error whatever the file holds.
  std::vector<std::array<uint8_t, 32>> keys(trusted.size());
  char m[512];
  for (size_t i = 0; i < trusted.size(); ++i)
    if (!RawPublicKey(trusted[i], keys[i].data())) {
      std::snprintf(m, sizeof m,
                    "LoadOptions::trusted_public_keys[%zu] is not an Ed25519 public key in PEM (\"-----BEGIN PUBLIC "
                    "KEY-----\", as `openssl pkey -pubout` writes it)",
                    i);
      return InvalidArgument(m);
    }
  SignatureTrailer t;
  if (!FindTrailer(data, size, &t)) {
    std::snprintf(m, sizeof m,
                  "a signature is required (LoadOptions::trusted_public_keys) but the artifact is not signed: expected "
                  "a %zu-byte signature trailer starting with \"KILNSIG\" at the end of the file (%zu bytes), found none",
                  sizeof t, size);
    return FailedPrecondition(m);
  }
  KILN_RETURN_IF_ERROR(CheckTrailer(size, h, t));
  const std::string signer = HexBytes(t.public_key, 32);
  bool known = false;
  for (const auto& k : keys) known = known || std::memcmp(k.data(), t.public_key, 32) == 0;
  if (!known) {
    std::snprintf(m, sizeof m,
                  "the artifact is signed by Ed25519 public key %s, which is not among the %zu trusted public key(s) "
                  "(LoadOptions::trusted_public_keys)",
                  signer.c_str(), keys.size());
    return FailedPrecondition(m);
  }
  SectionDigests d;
  KILN_RETURN_IF_ERROR(DigestSections(data, h, &d));
  const std::array<uint8_t, kSignedMessageBytes> message = SignedMessage(t, d);
  Pkey key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, t.public_key, 32));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok = key && ctx && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, key.get()) == 1 &&
                  EVP_DigestVerify(ctx, t.signature, sizeof t.signature, message.data(), message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (ok) return Status::Ok();
  std::snprintf(m, sizeof m,
                "the Ed25519 signature in the trailer at file offset %zu does not verify under public key %s: the "
                "header, FlatBuffer, weights or trailer changed after signing (SHA-256 found: header %s..., FlatBuffer "
                "%s..., weights %s...)",
                size - sizeof t, signer.c_str(), HexBytes(d.header, 8).c_str(), HexBytes(d.flatbuffer, 8).c_str(),
                HexBytes(d.weights, 8).c_str());
  return DataLoss(m);
}

}  // namespace kiln
