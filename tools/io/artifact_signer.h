// tools/io/artifact_signer.h: what `kiln sign` does to an artifact's bytes: optionally encrypt
// its weights with AES-256-GCM, then append the signature trailer (runtime/signature_trailer.h)
// with an Ed25519 signature over SignedMessage (runtime/signature.h). The private key never
// reaches the runtime: only this tool side signs. OpenSSL's libcrypto does the cryptography.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::io {

struct SignOptions {
  // The signer's Ed25519 private key, a PEM "PRIVATE KEY" block (`openssl genpkey -algorithm
  // ed25519`). Unencrypted PEM only.
  std::string private_key_pem;
  // Encrypt the weights section with AES-256-GCM under weights_key (32 bytes, e.g. `openssl rand
  // 32`) and a fresh random 96-bit nonce; the artifact becomes format version 10
  // (kEncryptedWeightsFormatVersion) and its trailer names key_id (text, at most 32 bytes,
  // which LoadOptions::weights_key receives).
  bool encrypt_weights = false;
  std::array<uint8_t, 32> weights_key{};
  std::string key_id;
};

// The signed artifact made from `artifact`: a .kiln file, unsigned or signed (its old trailer is
// dropped and, for weights encrypted before, its nonce, tag and key id kept). An unencrypted
// input must load (Model::Load: the bytes are a valid artifact). Thread-safe; allocates the
// output. Errors: kInvalidArgument (the key is not an Ed25519 private key in PEM, a key id over
// 32 bytes, encrypting weights that are encrypted already), the input's load error, kInternal
// (libcrypto failed).
Result<std::vector<uint8_t>> SignArtifact(std::span<const uint8_t> artifact, const SignOptions& options);

}  // namespace kiln::io
