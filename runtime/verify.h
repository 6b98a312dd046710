// Kiln's semantic checks on an artifact whose FlatBuffer has already passed
// flatbuffers::Verifier: every index, offset and enum in range, so the loader and the
// context may index without checking. Each failure is kDataLoss naming the section, e.g.
// "entry 0 tensor 17: shape expr 900 out of range (exprs: 312)"; an op without a CPU
// kernel is kUnimplemented.
#pragma once

#include <cstdint>

#include "kiln/status.h"
#include "schema/kiln_generated.h"

namespace kiln {

Status VerifyArtifact(const fb::Artifact& artifact, uint64_t weights_size);

}  // namespace kiln
