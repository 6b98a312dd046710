// The artifact's provenance (schema/kiln.fbs, Provenance; docs/reproducibility.md): the options
// that shaped its bytes, the model's SHA-256, and the libraries the compiler was built against.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "compiler/compile.h"
#include "kiln/status.h"

namespace kiln::compiler {

// Every option of `options` that can change the artifact's bytes, in `kiln compile` syntax and
// a fixed order, with host-dependent defaults resolved ("--cpu-targets=host" as the targets it
// means on this machine). Left out, since they change no byte: the kernel cache, the NVRTC
// threads, the log and progress callbacks. A constant input appears as NAME=sha256:HEX, its
// data's digest, not the path it was read from.
std::vector<std::string> ProvenanceFlags(const CompileOptions& options);

// The libraries the compiler was built against or compiles with, as (name, version): "CUDA"
// (cuda.h), "NVRTC" (the library loaded at run time, for GPU archs only: a CPU-only artifact
// holds nothing of NVRTC's, and its bytes must not depend on whether this machine has NVRTC),
// "cuBLASLt", "cuDNN" (their headers), "LLVM", "ONNX", "FlatBuffers"; those absent from this
// build are left out.
std::vector<std::pair<std::string, std::string>> ProvenanceLibraries(const CompileOptions& options);

// SHA-256 of `size` bytes, 64 lowercase hex digits (OpenSSL's libcrypto).
std::string Sha256Hex(const void* data, size_t size);

// SHA-256 of the file at `path`, read in 1 MiB pieces. Errors: kNotFound (cannot be opened),
// kDataLoss (a read fails), naming the file.
Result<std::string> FileSha256Hex(const std::string& path);

}  // namespace kiln::compiler
