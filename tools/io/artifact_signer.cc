// `kiln sign` (tools/io/artifact_signer.h) on OpenSSL's EVP API: Ed25519 signing, AES-256-GCM
// encryption, RAND_bytes for the nonce.
#include "tools/io/artifact_signer.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "kiln/runtime.h"
#include "runtime/artifact_header.h"
#include "runtime/checksum.h"
#include "runtime/signature.h"
#include "runtime/signature_trailer.h"
#include "schema/kiln_generated.h"

namespace kiln::io {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

Result<Pkey> ReadPrivateKey(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  Pkey key(bio ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr) : nullptr);
  BIO_free(bio);
  if (!key || EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519)
    return InvalidArgument("the signing key is not an Ed25519 private key in PEM (\"-----BEGIN PRIVATE KEY-----\", "
                           "as `openssl genpkey -algorithm ED25519` writes it)");
  return key;
}

// Encrypts the weights of `body` (an unencrypted artifact) in place and raises its format
// version to kEncryptedWeightsFormatVersion, in the header and the FlatBuffer; the header's
// weights checksum becomes that of the clear weights under the new version's hash.
Status EncryptWeights(std::vector<uint8_t>& body, const SignOptions& options, SignatureTrailer& t) {
  ArtifactHeader h;
  std::memcpy(&h, body.data(), sizeof h);
  uint8_t* fbuf = body.data() + h.flatbuffer_offset;
  auto* root = flatbuffers::GetMutableRoot<flatbuffers::Table>(fbuf);
  const uint32_t version = std::max(h.format_version, kEncryptedWeightsFormatVersion);
  if (!root->SetField<uint32_t>(fb::Artifact::VT_FORMAT_VERSION, version, 0))
    return Internal("the artifact's FlatBuffer stores no format_version to raise");
  h.format_version = version;
  h.flatbuffer_checksum = ArtifactChecksum(version, fbuf, h.flatbuffer_size);
  uint8_t* w = body.data() + h.weights_offset;
  h.weights_checksum = ArtifactChecksum(version, w, h.weights_size);
  std::memcpy(body.data(), &h, sizeof h);

  t.flags |= kTrailerWeightsEncrypted;
  std::memcpy(t.key_id, options.key_id.data(), options.key_id.size());
  if (RAND_bytes(t.nonce, sizeof t.nonce) != 1) return Internal("RAND_bytes failed: no nonce");
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  bool ok = ctx && EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, options.weights_key.data(), t.nonce) == 1;
  for (uint64_t done = 0; ok && done < h.weights_size;) {
    const int n = static_cast<int>(std::min<uint64_t>(h.weights_size - done, uint64_t{1} << 30));
    int out = 0;
    ok = EVP_EncryptUpdate(ctx, w + done, &out, w + done, n) == 1 && out == n;
    done += static_cast<uint64_t>(n);
  }
  int last = 0;
  ok = ok && EVP_EncryptFinal_ex(ctx, w + h.weights_size, &last) == 1 &&
       EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, sizeof t.tag, t.tag) == 1;
  EVP_CIPHER_CTX_free(ctx);
  return ok ? Status::Ok() : Internal("AES-256-GCM encryption failed in libcrypto");
}

}  // namespace

Result<std::vector<uint8_t>> SignArtifact(std::span<const uint8_t> artifact, const SignOptions& options) {
  KILN_ASSIGN_OR_RETURN(Pkey key, ReadPrivateKey(options.private_key_pem));
  if (options.key_id.size() > sizeof(SignatureTrailer::key_id))
    return InvalidArgument("key id '" + options.key_id + "' is " + std::to_string(options.key_id.size()) +
                           " bytes, over 32");
  SignatureTrailer t{};
  std::memcpy(t.magic, kTrailerMagic, sizeof t.magic);
  t.trailer_bytes = sizeof t;
  // A signed input: sign its bytes before the trailer again, keeping its encryption.
  SignatureTrailer old;
  std::span<const uint8_t> body = artifact;
  bool encrypted = false;
  if (FindTrailer(artifact.data(), artifact.size(), &old)) {
    if (old.artifact_bytes != artifact.size() - sizeof old)
      return DataLoss("the artifact's signature trailer says it follows " + std::to_string(old.artifact_bytes) +
                      " bytes, but it is at file offset " + std::to_string(artifact.size() - sizeof old));
    body = artifact.first(old.artifact_bytes);
    encrypted = (old.flags & kTrailerWeightsEncrypted) != 0;
    if (encrypted) {
      if (options.encrypt_weights) return InvalidArgument("the artifact's weights are encrypted already");
      t.flags = old.flags;
      std::memcpy(t.key_id, old.key_id, sizeof t.key_id);
      std::memcpy(t.nonce, old.nonce, sizeof t.nonce);
      std::memcpy(t.tag, old.tag, sizeof t.tag);
    }
  }
  if (!encrypted) {
    Result<Model> model = Model::Load(body);  // a valid artifact: its header's sections can be trusted
    if (!model.ok()) return model.status();
  } else {
    // Not loadable without the weights key: check the header's sections lie in the bytes.
    ArtifactHeader h;
    if (body.size() < sizeof h) return DataLoss("the artifact is shorter than its header");
    std::memcpy(&h, body.data(), sizeof h);
    auto inside = [&](uint64_t offset, uint64_t size) { return offset <= body.size() && size <= body.size() - offset; };
    if (std::memcmp(h.magic, kArtifactMagic, sizeof h.magic) != 0 || !inside(0, h.header_bytes) ||
        !inside(h.flatbuffer_offset, h.flatbuffer_size) || !inside(h.weights_offset, h.weights_size))
      return DataLoss("the encrypted artifact's header is malformed: a section lies outside its " +
                      std::to_string(body.size()) + " bytes");
  }
  std::vector<uint8_t> out(body.begin(), body.end());
  if (options.encrypt_weights) KILN_RETURN_IF_ERROR(EncryptWeights(out, options, t));

  ArtifactHeader h;
  std::memcpy(&h, out.data(), sizeof h);
  t.artifact_bytes = out.size();
  if (encrypted) KILN_RETURN_IF_ERROR(CheckTrailer(out.size() + sizeof t, h, t));
  size_t n = sizeof t.public_key;
  if (EVP_PKEY_get_raw_public_key(key.get(), t.public_key, &n) != 1 || n != sizeof t.public_key)
    return Internal("cannot read the Ed25519 public key of the signing key");
  SectionDigests d;
  KILN_RETURN_IF_ERROR(DigestSections(out.data(), h, &d));
  const std::array<uint8_t, kSignedMessageBytes> message = SignedMessage(t, d);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  size_t signature_bytes = sizeof t.signature;
  const bool ok = ctx && EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key.get()) == 1 &&
                  EVP_DigestSign(ctx, t.signature, &signature_bytes, message.data(), message.size()) == 1 &&
                  signature_bytes == sizeof t.signature;
  EVP_MD_CTX_free(ctx);
  if (!ok) return Internal("Ed25519 signing failed in libcrypto");
  const auto* tb = reinterpret_cast<const uint8_t*>(&t);
  out.insert(out.end(), tb, tb + sizeof t);
  return out;
}

}  // namespace kiln::io
