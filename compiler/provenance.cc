#include "compiler/provenance.h"

#include <openssl/evp.h>

#include <cstdio>
#include <memory>

#include <flatbuffers/base.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <onnx/common/version.h>

#include "compiler/codegen/cpu/targets.h"
#include "compiler/codegen/nvrtc_compiler.h"

#ifdef KILN_HAVE_NVRTC
#include <cublas_api.h>
#include <cuda.h>
#include <cudnn_version.h>
#endif
#ifdef KILN_HAVE_LLVM
#include <llvm/Config/llvm-config.h>
#endif

namespace kiln::compiler {
namespace {

using DigestContext = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

std::string Hex(const unsigned char* digest, unsigned size) {
  std::string out;
  for (unsigned i = 0; i < size; ++i) out += fmt::format("{:02x}", digest[i]);
  return out;
}

std::string Dims(const std::vector<int64_t>& dims) { return fmt::format("{}", fmt::join(dims, ",")); }

}  // namespace

std::vector<std::string> ProvenanceFlags(const CompileOptions& options) {
  std::vector<std::string> flags;
  flags.push_back("--arch=" + (options.archs.empty() ? std::string("none") : fmt::format("{}", fmt::join(options.archs, ","))));
  std::vector<std::string> targets;
  if (auto parsed = codegen::cpu::ParseCpuTargets(options.cpu_targets); parsed.ok())
    for (const codegen::cpu::CpuTarget* t : *parsed) targets.push_back(t->name);
  flags.push_back("--cpu-targets=" + (targets.empty() ? std::string("none") : fmt::format("{}", fmt::join(targets, ","))));
  flags.push_back(fmt::format("--cpu-layout={}", options.cpu_channels_last ? "nhwc" : "nchw"));
  flags.push_back(fmt::format("--precision={}", passes::PrecisionName(options.precision.precision)));
  const DType io = options.precision.io_dtype;
  flags.push_back(
      fmt::format("--io-precision={}", io == DType::kFloat16 ? "fp16" : io == DType::kBFloat16 ? "bf16" : "declared"));
  for (const std::string& k : options.precision.keep_fp32) flags.push_back("--keep-fp32=" + k);
  for (const auto& [name, dims] : options.input_shapes) flags.push_back("--shape=" + name + "=" + Dims(dims));
  for (const auto& [name, data] : options.constant_inputs)
    flags.push_back("--constant-input=" + name + "=sha256:" + Sha256Hex(data->bytes.data(), data->bytes.size()));
  for (const Profile& p : options.profiles) flags.push_back("--profile=" + p.text);
  if (options.loop_scan_bound != 0) flags.push_back(fmt::format("--loop-scan-bound={}", options.loop_scan_bound));
  if (!options.fuse) flags.push_back("--no-fuse");
  return flags;
}

std::vector<std::pair<std::string, std::string>> ProvenanceLibraries(const CompileOptions& options) {
  std::vector<std::pair<std::string, std::string>> libs;
#ifdef KILN_HAVE_NVRTC
  libs.emplace_back("CUDA", fmt::format("{}.{}", CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10));
  // A compile with GPU archs has loaded NVRTC (RunPipeline checks it first).
  if (const std::string nvrtc = codegen::NvrtcVersion(); !options.archs.empty() && !nvrtc.empty())
    libs.emplace_back("NVRTC", nvrtc);
  libs.emplace_back("cuBLASLt", fmt::format("{}.{}.{}", CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH));
  libs.emplace_back("cuDNN", fmt::format("{}.{}.{}", CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL));
#endif
#ifdef KILN_HAVE_LLVM
  libs.emplace_back("LLVM", LLVM_VERSION_STRING);
#endif
  libs.emplace_back("ONNX", onnx::LAST_RELEASE_VERSION);
  libs.emplace_back("FlatBuffers", fmt::format("{}.{}.{}", FLATBUFFERS_VERSION_MAJOR, FLATBUFFERS_VERSION_MINOR,
                                               FLATBUFFERS_VERSION_REVISION));
  return libs;
}

std::string Sha256Hex(const void* data, size_t size) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned digest_size = 0;
  EVP_Digest(data, size, digest, &digest_size, EVP_sha256(), nullptr);
  return Hex(digest, digest_size);
}

Result<std::string> FileSha256Hex(const std::string& path) {
  std::unique_ptr<FILE, decltype(&std::fclose)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return NotFound("cannot open '" + path + "' to hash it");
  DigestContext ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    return Internal("OpenSSL could not start a SHA-256 digest");
  std::vector<unsigned char> buffer(1 << 20);
  for (;;) {
    const size_t n = std::fread(buffer.data(), 1, buffer.size(), f.get());
    if (n > 0) EVP_DigestUpdate(ctx.get(), buffer.data(), n);
    if (n < buffer.size()) break;
  }
  if (std::ferror(f.get())) return DataLoss("reading '" + path + "' to hash it failed");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned digest_size = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &digest_size);
  return Hex(digest, digest_size);
}

}  // namespace kiln::compiler
