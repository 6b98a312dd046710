// The Ed25519 signature of a .kiln file: which bytes it covers (SignedMessage), how Load finds
// the trailer (runtime/signature_trailer.h) and checks it against LoadOptions::
// trusted_public_keys. The hashing and the signature check are OpenSSL's libcrypto; nothing
// here is Kiln's own cryptography. `kiln sign` (tools/io/artifact_signer.h) makes the same
// message with the private key. Not in a selective runtime (cmake/selective.cmake).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "kiln/status.h"
#include "runtime/artifact_header.h"
#include "runtime/signature_trailer.h"

namespace kiln {

// SHA-256 of each section as stored in the file (the weights as ciphertext when encrypted):
// the header [0, header_bytes), the FlatBuffer section (which holds any native code and every
// GPU image) and the weights section.
struct SectionDigests {
  uint8_t header[32];
  uint8_t flatbuffer[32];
  uint8_t weights[32];
};

// What the Ed25519 signature signs, 240 bytes: the 16 ASCII bytes "KILN signature 1", the
// trailer's first kTrailerSignedBytes (its sizes, flags, public key, key id, nonce and tag),
// then the three digests in file order. Bytes outside the three sections and the trailer
// (alignment padding, which the runtime never reads) are not covered.
inline constexpr size_t kSignedMessageBytes = 16 + kTrailerSignedBytes + 3 * 32;
std::array<uint8_t, kSignedMessageBytes> SignedMessage(const SignatureTrailer& trailer, const SectionDigests& digests);

// The digests of `data`'s sections, whose header `h` CheckHeader (runtime/model.cc) accepted:
// every section lies inside the file. About 2 GB/s with the CPU's SHA extensions
// (benchmarks/signature_benchmark.cc). Thread-safe. Errors: kInternal (libcrypto failed).
Status DigestSections(const uint8_t* data, const ArtifactHeader& h, SectionDigests* out);

// A trailer FindTrailer found, against the file: its size field, its artifact_bytes (the file
// size less the trailer), flags and reserved bytes, every section inside artifact_bytes, and
// encrypted weights only from format kEncryptedWeightsFormatVersion. kDataLoss naming the field,
// the value expected and the value found.
Status CheckTrailer(size_t size, const ArtifactHeader& h, const SignatureTrailer& t);

// LoadOptions::trusted_public_keys against the file: a trailer (else kFailedPrecondition: no
// signature), checked (CheckTrailer), whose public key is one of `trusted` (each PEM; one that is
// not an Ed25519 public key is kInvalidArgument naming its index; a signer not among them is
// kFailedPrecondition giving the key in hex), and whose signature verifies over SignedMessage
// (else kDataLoss: a section or the trailer changed after signing, with the digests found).
// Reads nothing beyond the header's section bounds before the signature verifies.
Status VerifySignature(const uint8_t* data, size_t size, const ArtifactHeader& h,
                       std::span<const std::string> trusted);

// 32 bytes as 64 lowercase hex digits (a public key, a digest).
std::string HexBytes(const uint8_t* bytes, size_t n);

}  // namespace kiln
