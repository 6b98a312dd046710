// Model::Load and the header's format version: a well-formed artifact of another format is
// kIncompatible, a damaged version field (or random bytes after the magic) is kDataLoss.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "tests/runtime/artifact_builder_test_util.h"

namespace kiln {
namespace {

using testing::AddModelSpec;
using testing::ArtifactSpec;
using testing::BuildArtifact;

Status LoadVersion(uint32_t version) {
  ArtifactSpec a = AddModelSpec();
  a.format_version = version;
  return Model::Load(BuildArtifact(a)).status();
}

TEST_CASE("format versions: 1 to 10 load, a newer or older artifact is kIncompatible") {
  for (uint32_t v = kMinFormatVersion; v <= kFormatVersion; ++v) CHECK_MESSAGE(LoadVersion(v).ok(), v);
  Status st = LoadVersion(kFormatVersion + 1);
  CHECK(st.code() == StatusCode::kIncompatible);
  CHECK(st.message() == "artifact format version 11 is newer than this runtime supports (1..10)");
  st = LoadVersion(0xFFFFFFFFu);
  CHECK(st.code() == StatusCode::kIncompatible);
  CHECK(st.message() == "artifact format version 4294967295 is newer than this runtime supports (1..10)");
  st = LoadVersion(kMinFormatVersion - 1);
  CHECK(st.code() == StatusCode::kIncompatible);
  CHECK(st.message() == "artifact format version 0 is older than this runtime supports (1..10)");
}

TEST_CASE("format versions: a damaged version field is corruption, not a newer format") {
  std::vector<uint8_t> bytes = BuildArtifact(AddModelSpec());  // format 1
  ArtifactHeader h = testing::ReadHeader(bytes);
  h.format_version = kFormatVersion + 1;
  testing::WriteHeader(bytes, h);
  Status st = Model::Load(bytes).status();
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() ==
        "corrupt file header: format version field reads 11 (this runtime reads 1..10), but the FlatBuffer says format "
        "version 1");

  // A header whose sections fit the file but whose FlatBuffer is not one.
  bytes = BuildArtifact(AddModelSpec());
  h = testing::ReadHeader(bytes);
  h.format_version = kFormatVersion + 1;
  testing::WriteHeader(bytes, h);
  bytes[h.flatbuffer_offset + 4] ^= 0xFF;  // the file identifier "KILN"
  st = Model::Load(bytes).status();
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() == "corrupt file header: format version field reads 11 (this runtime reads 1..10), and bytes 64.." +
                            std::to_string(h.flatbuffer_offset + h.flatbuffer_size) + " are not a Kiln FlatBuffer");
}

TEST_CASE("format versions: random bytes after a valid magic are kDataLoss, never a newer format") {
  std::mt19937 rng(8);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint8_t> bytes(64 + rng() % 4096);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    std::memcpy(bytes.data(), kArtifactMagic, sizeof kArtifactMagic);
    Status st = Model::Load(bytes).status();
    CAPTURE(trial);
    CAPTURE(st.ToString());
    CHECK(st.code() == StatusCode::kDataLoss);
  }
  std::vector<uint8_t> bytes(256, 0xAB);
  std::memcpy(bytes.data(), kArtifactMagic, sizeof kArtifactMagic);
  Status st = Model::Load(bytes).status();
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() ==
        "corrupt file header: format version field reads 2880154539 (this runtime reads 1..10), and its header size "
        "2880154539 or FlatBuffer section [12370169555311111083, +12370169555311111083) does not fit the file (256 "
        "bytes)");
}

}  // namespace
}  // namespace kiln
