// The signature trailer: the last 192 bytes of a signed .kiln file, after every section the
// 64-byte header (runtime/artifact_header.h) covers, so that the header's sizes, offsets and
// checksums are the same before and after `kiln sign` and a runtime that knows no trailer
// ignores it. It holds the signer's Ed25519 public key and signature and, for encrypted
// weights (format version kEncryptedWeightsFormatVersion), the AES-256-GCM nonce, tag and key
// id. Written by tools/io/artifact_signer.cc, read by runtime/signature.cc; docs/security.md
// and schema/VERSIONS.md describe it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/artifact_header.h"

namespace kiln {

inline constexpr char kTrailerMagic[8] = {'K', 'I', 'L', 'N', 'S', 'I', 'G', '\0'};
// SignatureTrailer::flags: the weights section is AES-256-GCM ciphertext.
inline constexpr uint32_t kTrailerWeightsEncrypted = 1;
inline constexpr uint32_t kAes256KeyBytes = 32;
inline constexpr uint32_t kEd25519PublicKeyBytes = 32;

// All integers little-endian, as in the header.
struct SignatureTrailer {
  char magic[8];                 // kTrailerMagic
  uint32_t trailer_bytes;        // sizeof(SignatureTrailer)
  uint32_t flags;                // kTrailerWeightsEncrypted or 0; other bits must be 0
  uint64_t artifact_bytes;       // the bytes before the trailer: the trailer's file offset
  uint8_t public_key[32];        // the signer's Ed25519 public key (raw, RFC 8032)
  char key_id[32];               // encrypted: the AES-256 key's name, NUL-padded; else zeros
  uint8_t nonce[12];             // encrypted: the AES-256-GCM nonce (96 bits); else zeros
  uint8_t tag[16];               // encrypted: the AES-256-GCM tag of the whole weights section
  uint8_t reserved[12];          // zeros
  uint8_t signature[64];         // Ed25519 over SignedMessage (runtime/signature.h)
};
static_assert(sizeof(SignatureTrailer) == 192);

// The bytes of the trailer that the signature covers: all but the signature.
inline constexpr uint32_t kTrailerSignedBytes = 128;

// Whether the file of `size` bytes ends with a trailer: it is at least a header and a trailer
// long and its last 192 bytes start with kTrailerMagic. Copies them to *out when so; checks
// nothing else (CheckTrailer, runtime/signature.h, does).
inline bool FindTrailer(const uint8_t* data, size_t size, SignatureTrailer* out) {
  if (size < sizeof(ArtifactHeader) + sizeof(SignatureTrailer)) return false;
  std::memcpy(out, data + size - sizeof *out, sizeof *out);
  return std::memcmp(out->magic, kTrailerMagic, sizeof kTrailerMagic) == 0;
}

}  // namespace kiln
