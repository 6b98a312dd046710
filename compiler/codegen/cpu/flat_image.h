// An ELF64 relocatable object (x86-64 or aarch64, little-endian), as LLVM writes one for a CPU
// target, linked into a flat image that needs no relocation where it is mapped: the code
// sections first, then the read-only data, each at its alignment, with every reference between
// them resolved PC-relative (on aarch64 also page-relative, which holds because the runtime maps
// the image at a page boundary). The link refuses what the runtime could not map safely or run
// without a loader: an undefined symbol (a call into a library), a writable, zero-filled or
// initialiser section, a relocation of a kind not listed in flat_image.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::codegen::cpu {

// Links `object`; `symbols` are the functions to find, their offsets in the image returned in
// `offsets` in the same order. Unwind tables (.eh_frame) are left out. Errors: kInternal
// naming the section, symbol or relocation it refused, or what of the ELF file is malformed.
Result<std::vector<uint8_t>> LinkFlatImage(const std::vector<uint8_t>& object, const std::vector<std::string>& symbols,
                                           std::vector<uint32_t>* offsets);

}  // namespace kiln::codegen::cpu
