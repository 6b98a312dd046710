// The fixed 64-byte header at the start of every .kiln file (see schema/kiln.fbs).
#pragma once

#include <cstdint>

namespace kiln {

inline constexpr char kArtifactMagic[8] = {'K', 'I', 'L', 'N', 'A', 'R', 'T', '\0'};
inline constexpr uint64_t kWeightsAlignment = 256;
inline constexpr uint64_t kWeightAlignment = 64;  // each weight inside the blob
// The first format with value symbols (InputCheck.values); the writer uses it only for the
// artifacts that have them, and the version before it for the others (schema/VERSIONS.md).
inline constexpr uint32_t kValueSymbolsFormatVersion = 4;
// The first format with run-time dims (Entry.runtime_dims) and value checks of floating-point
// inputs, used only by artifacts that have them.
inline constexpr uint32_t kRuntimeDimsFormatVersion = 5;
// The first format with predicated instructions (Instruction.when: a run-time If), used only by
// artifacts that have them.
inline constexpr uint32_t kPredicatesFormatVersion = 6;
// The first format with run-time Loops (kiln.LoopBegin / kiln.LoopEnd instructions), used only
// by artifacts that have them.
inline constexpr uint32_t kLoopsFormatVersion = 7;
// The first format with rooms (Entry.rooms: a while loop's scan rows, which the runtime grows),
// used only by artifacts that have them.
inline constexpr uint32_t kRoomsFormatVersion = 8;
// The first format with float32 value symbols (an InputCheck.values element of a float32 input
// that binds a symbol to its bits) and the expression op FloorMulF32, used only by artifacts
// that have them.
inline constexpr uint32_t kFloatSymbolsFormatVersion = 9;
// The first format whose weights may be AES-256-GCM ciphertext: the signature trailer
// (runtime/signature_trailer.h) says whether they are, and holds the nonce and tag. Used only by
// artifacts with encrypted weights (`kiln sign --encrypt-weights`).
inline constexpr uint32_t kEncryptedWeightsFormatVersion = 10;
// The largest value of a room (Room.initial, and what a context doubles it to).
inline constexpr int64_t kMaxRoom = int64_t{1} << 40;

struct ArtifactHeader {
  char magic[8];
  uint32_t header_bytes;      // sizeof(ArtifactHeader)
  uint32_t format_version;
  uint64_t flatbuffer_offset;
  uint64_t flatbuffer_size;
  uint64_t weights_offset;    // multiple of kWeightsAlignment
  uint64_t weights_size;
  uint64_t weights_checksum;     // of the weights blob: ArtifactChecksum (runtime/checksum.h)
  uint64_t flatbuffer_checksum;  // of the FlatBuffer section, the same way
};
static_assert(sizeof(ArtifactHeader) == 64);

}  // namespace kiln
