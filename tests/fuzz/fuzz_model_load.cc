// Fuzz target: artifact bytes (checksums fixed up) -> Model::Load -> a CPU ExecutionContext -> Run on inputs that
// fit the first entry's prologue (zeros, then arbitrary bytes when the zeros ran). Every
// step may fail with a Status; none may crash, leak, hang or touch memory it does not own.
//
// A Model whose context would hold over 256 MiB is refused (LoadOptions::max_context_bytes).
// Inputs: a symbolic dim takes the smallest value in its range that is a multiple of its
// divisor, at least 1 (one value per symbol, so later uses agree); inputs over kMaxInputBytes
// in all are not run (the harness would allocate them, not the runtime).
// Seeds: artifacts from `kiln compile --arch none` (scripts/sanitize.sh makes them), and one
// with native CPU code (fuzz_native_seed.cc, made by the same script).
//
// Native code (Artifact.native_code) is machine code: a mutated blob would run whatever the
// mutation made of it. So it is only loaded (chosen, verified and mapped, which runs none of
// it, and unmapped with the Model), never run: the Model that runs is loaded with
// LoadOptions::native_code false, and interprets every generated kernel.
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/artifact_header.h"
#include "runtime/checksum.h"
#include "runtime/model_impl.h"

namespace {

constexpr uint64_t kMaxInputBytes = 16 << 20;
constexpr uint64_t kMaxContextBytes = 256 << 20;

// The dims of input `in` for `prologue`, binding symbols in `symbols` (-1: unbound); false
// when no dim value fits.
bool PickDims(const kiln::PrologueInput& in, std::vector<int64_t>& symbols, std::vector<int64_t>& dims) {
  dims.clear();
  for (const kiln::PrologueDim& d : in.dims) {
    if (d.symbol < 0) {
      if (d.value < 0) return false;
      dims.push_back(d.value);
      continue;
    }
    if (static_cast<size_t>(d.symbol) >= symbols.size()) return false;
    int64_t& v = symbols[d.symbol];
    if (v < 0) {
      const int64_t div = d.divisor < 1 ? 1 : d.divisor;
      const int64_t lo = d.min < 1 ? 1 : d.min;
      if (lo > INT64_MAX - div) return false;
      v = (lo + div - 1) / div * div;
      if (v > d.max) v = d.min;
    }
    dims.push_back(v);
  }
  return true;
}

// The bytes with the header's checksums recomputed where its sections lie in the file, so
// that mutations reach the FlatBuffer Verifier and the semantic checks instead of stopping
// at a checksum mismatch (Load's tamper check, which the tests cover).
std::vector<uint8_t> WithChecksums(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  kiln::ArtifactHeader h;
  if (size < sizeof h) return bytes;
  std::memcpy(&h, data, sizeof h);
  auto in_file = [&](uint64_t offset, uint64_t n) { return offset <= size && n <= size - offset; };
  if (in_file(h.flatbuffer_offset, h.flatbuffer_size))
    h.flatbuffer_checksum = kiln::ArtifactChecksum(h.format_version, data + h.flatbuffer_offset, h.flatbuffer_size);
  if (in_file(h.weights_offset, h.weights_size))
    h.weights_checksum = kiln::ArtifactChecksum(h.format_version, data + h.weights_offset, h.weights_size);
  std::memcpy(bytes.data(), &h, sizeof h);
  return bytes;
}

uint64_t Bytes(kiln::DType dtype, const std::vector<int64_t>& dims) {
  uint64_t n = kiln::DTypeSize(dtype);
  for (int64_t d : dims)
    if (d < 0 || (d > 0 && n > kMaxInputBytes / static_cast<uint64_t>(d))) return UINT64_MAX;
    else n *= static_cast<uint64_t>(d);
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A context may hold at most kMaxContextBytes: a larger declared arena is refused as
  // kResourceExhausted (at Load when constant, at Run when symbolic), never allocated.
  kiln::LoadOptions load;
  load.max_context_bytes = kMaxContextBytes;
  const std::vector<uint8_t> bytes = WithChecksums(data, size);
  {
    auto with_native = kiln::Model::Load(bytes, load);  // reaches the native code's checks; runs nothing
    if (!with_native.ok()) return 0;
    for (const kiln::NativeCodeInfo& n : with_native->native_code()) (void)n.target.size();
  }
  load.native_code = false;  // what runs below interprets: fuzzed machine code never runs
  auto model = kiln::Model::Load(bytes, load);
  if (!model.ok()) return 0;
  // What a caller reads after Load: every string and table of the Model.
  for (const kiln::EntryInfo& e : model->entries()) (void)e.prologue_text.size();
  kiln::ContextOptions options;
  options.device = kiln::Device::kCpu;
  options.cpu.threads = 1;
  options.max_loop_iterations = 1000;  // a run-time Loop that would spin keeps the input fast
  auto ctx = kiln::ExecutionContext::Create(*model, options);
  if (!ctx.ok() || model->impl().prepared.empty()) return 0;

  const kiln::Prologue& prologue = model->impl().prepared[0].prologue;
  std::vector<int64_t> symbols(prologue.symbols.size(), -1);
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<kiln::TensorView> inputs;
  uint64_t total = 0;
  std::vector<int64_t> dims;
  for (const kiln::PrologueInput& in : prologue.inputs) {
    if (!PickDims(in, symbols, dims) || dims.size() > static_cast<size_t>(kiln::kMaxRank)) return 0;
    const uint64_t bytes = Bytes(in.dtype, dims);
    if (bytes > kMaxInputBytes || (total += bytes) > kMaxInputBytes) return 0;
    buffers.emplace_back(bytes + 1);  // never empty: the data pointer is non-null
    inputs.push_back(kiln::TensorView::Host(buffers.back().data(), in.dtype, dims.data(),
                                            static_cast<int32_t>(dims.size())));
  }
  std::vector<kiln::TensorView> outputs;
  if (!ctx->Run(inputs, outputs).ok()) return 0;
  // Again on arbitrary values (indices out of range, NaN, huge counts): errors, not crashes.
  // A bool element is 0 or 1 by the API's contract (kiln/tensor.h).
  uint64_t x = 0x9E3779B97F4A7C15ull ^ size;
  for (size_t i = 0; i < buffers.size(); ++i)
    for (uint8_t& byte : buffers[i]) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      byte = static_cast<uint8_t>(inputs[i].dtype == kiln::DType::kBool ? x & 1 : x);
    }
  (void)ctx->Run(inputs, outputs);
  return 0;
}
