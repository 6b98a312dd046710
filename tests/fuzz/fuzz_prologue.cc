// Fuzz target: arbitrary tensor metadata (input count, data pointer, memory kind, dtype, rank,
// dims) and, for the inputs whose values the prologue reads (value symbols), arbitrary element
// values, against a real artifact's prologues. Each entry's prologue runs on the metadata and,
// when it fails, formats its reason; then, when every input's bytes fit a capped buffer, the
// context runs the model on them, their bytes also taken from the fuzz input (so data-dependent
// sizes, run-time dims, vary): a miss must be a kInvalidArgument naming the check, a hit must
// run. Nothing may crash, leak or hang.
//
// The artifacts: $KILN_FUZZ_ARTIFACT, or `--artifact=PATH[,PATH...]` on the command line (the
// first fuzz byte picks one; scripts/sanitize.sh compiles them from real and small models with
// `kiln compile --arch none`).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/model_impl.h"

namespace {

constexpr uint64_t kMaxRunBytes = 4 << 20;  // all inputs together, when the model is run

struct Target {
  kiln::Model model;
  kiln::ExecutionContext ctx;
  std::vector<kiln::PrologueScratch> scratch;  // one per entry
};

std::vector<Target>& Targets() {
  static std::vector<Target> targets;
  return targets;
}

void Die(const std::string& what) {
  std::fprintf(stderr, "fuzz_prologue: %s\n", what.c_str());
  std::exit(2);
}

// A dim worth trying for prologue dim `d` of the artifact's input (`expected`, may be null).
int64_t PickDim(FuzzedDataProvider& in, const kiln::PrologueDim* expected) {
  static constexpr int64_t kExtremes[] = {0, -1, INT64_MIN, INT64_MAX, INT32_MAX, int64_t{1} << 32,
                                          int64_t{1} << 62};
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      if (expected != nullptr) {
        if (expected->symbol < 0) return expected->value;
        const int64_t span = in.ConsumeIntegralInRange<int64_t>(0, 3);
        return expected->min + span * (expected->divisor < 1 ? 1 : expected->divisor);
      }
      [[fallthrough]];
    case 1:
      return in.ConsumeIntegralInRange<int64_t>(0, 8);
    case 2:
      return kExtremes[in.ConsumeIntegralInRange<size_t>(0, std::size(kExtremes) - 1)];
    default:
      return in.ConsumeIntegral<int64_t>();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  std::string paths;
  if (const char* env = std::getenv("KILN_FUZZ_ARTIFACT")) paths = env;
  for (int i = 1; i < *argc; ++i)
    if (std::strncmp((*argv)[i], "--artifact=", 11) == 0) paths = (*argv)[i] + 11;
  if (paths.empty()) Die("set KILN_FUZZ_ARTIFACT or pass --artifact=PATH[,PATH...] (.kiln files)");
  for (size_t begin = 0; begin <= paths.size();) {
    const size_t comma = std::min(paths.find(',', begin), paths.size());
    const std::string path = paths.substr(begin, comma - begin);
    begin = comma + 1;
    if (path.empty()) continue;
    auto model = kiln::Model::Load(path);
    if (!model.ok()) Die(model.status().ToString());
    kiln::ContextOptions options;
    options.device = kiln::Device::kCpu;
    options.cpu.threads = 1;
    auto ctx = kiln::ExecutionContext::Create(*model, options);
    if (!ctx.ok()) Die(ctx.status().ToString());
    std::vector<kiln::PrologueScratch> scratch(model->impl().prepared.size());
    for (size_t e = 0; e < scratch.size(); ++e) scratch[e].Resize(model->impl().prepared[e].prologue);
    Targets().push_back(Target{*model, std::move(*ctx), std::move(scratch)});
  }
  if (Targets().empty()) Die("no artifact in '" + paths + "'");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Target& t = Targets()[in.ConsumeIntegralInRange<size_t>(0, Targets().size() - 1)];
  const kiln::Prologue& first = t.model.impl().prepared[0].prologue;

  // Mostly the model's input count, sometimes one fewer or more.
  const int delta = in.ConsumeIntegralInRange<int>(-1, 3);
  const size_t count = delta == -1 ? (first.inputs.empty() ? 0 : first.inputs.size() - 1)
                                   : first.inputs.size() + (delta == 3 ? 1 : 0);
  std::vector<kiln::TensorView> views(count);
  std::vector<uint64_t> bytes(count, 0);
  uint64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    const kiln::PrologueInput* expected = i < first.inputs.size() ? &first.inputs[i] : nullptr;
    kiln::TensorView& v = views[i];
    const bool keep_dtype = expected != nullptr && in.ConsumeBool();
    v.dtype = keep_dtype ? expected->dtype : static_cast<kiln::DType>(in.ConsumeIntegralInRange<int32_t>(-1, 18));
    const int32_t expected_rank = expected ? static_cast<int32_t>(expected->dims.size()) : 0;
    v.rank = in.ConsumeBool() ? expected_rank : in.ConsumeIntegralInRange<int32_t>(-2, kiln::kMaxRank + 1);
    // A view has room for kMaxRank dims; a larger rank is only ever compared, never read
    // (kiln/tensor.h: TensorView::Host sets kMaxRank + 1 for "too many dims").
    for (int32_t d = 0; d < v.rank && d < kiln::kMaxRank; ++d)
      v.dims[d] = PickDim(in, expected && d < expected_rank ? &expected->dims[d] : nullptr);
    v.memory = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? static_cast<kiln::MemoryKind>(in.ConsumeIntegral<int8_t>())
                                                         : kiln::MemoryKind::kHost;
    const int64_t b = v.rank >= 0 && v.rank <= kiln::kMaxRank ? v.num_bytes() : INT64_MAX;
    bytes[i] = b < 0 ? UINT64_MAX : static_cast<uint64_t>(b);
    total = bytes[i] > kMaxRunBytes || total > kMaxRunBytes - bytes[i] ? UINT64_MAX : total + bytes[i];
  }
  // Data: a buffer that holds every input's bytes when they fit the cap; otherwise a pointer
  // no prologue-passing Run may follow, so only the prologues run. Sometimes null or odd.
  std::vector<std::vector<uint64_t>> buffers(count);
  const bool runnable = total <= kMaxRunBytes;
  for (size_t i = 0; i < count; ++i) {
    buffers[i].assign(runnable ? bytes[i] / 8 + 2 : 2, 0);
    char* base = reinterpret_cast<char*>(buffers[i].data());
    // The elements: fuzz bytes as far as they go (value inputs are written over below).
    if (runnable) {
      const std::vector<uint8_t> fill = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, bytes[i]));
      if (!fill.empty()) std::memcpy(base, fill.data(), fill.size());
    }
    switch (in.ConsumeIntegralInRange<int>(0, 7)) {
      case 0: views[i].data = nullptr; break;
      case 1: views[i].data = base + 1; break;  // misaligned for any element wider than a byte
      default: views[i].data = base; break;
    }
    // A value input's elements, as far as its buffer holds them: near what the prologue
    // expects, small, extreme or anything.
    const kiln::PrologueInput* expected = i < first.inputs.size() ? &first.inputs[i] : nullptr;
    if (expected == nullptr || expected->values.empty()) continue;
    const size_t room = buffers[i].size() * 8 - 1;
    const bool wide = views[i].dtype != kiln::DType::kInt32;
    for (size_t k = 0; k < expected->values.size() && (k + 1) * (wide ? 8 : 4) <= room; ++k) {
      const int64_t v = PickDim(in, &expected->values[k]);
      char* at = base + 1 + k * (wide ? 8 : 4);  // the misaligned view reads from base + 1
      if (views[i].data == base) at -= 1;
      if (wide) std::memcpy(at, &v, 8);
      else {
        const int32_t v32 = static_cast<int32_t>(v);
        std::memcpy(at, &v32, 4);
      }
    }
  }
  for (size_t e = 0; e < t.scratch.size(); ++e) {
    const kiln::PreparedEntry& pe = t.model.impl().prepared[e];
    kiln::PrologueFailure why;
    if (!kiln::RunPrologue(pe.prologue, pe.exprs, views, kiln::MemoryKind::kHost, t.scratch[e], &why))
      (void)kiln::FormatPrologueFailure(pe.prologue, pe.exprs, why, kiln::MemoryKind::kHost).size();
  }
  if (!runnable) return 0;
  // Misaligned data holds its bytes only from base + 1 on: the buffer has 8 spare bytes.
  std::vector<kiln::TensorView> outputs;
  const kiln::Status st = t.ctx.Run(views, outputs);
  if (!st.ok() && st.code() != kiln::StatusCode::kInvalidArgument) {
    std::fprintf(stderr, "Run failed with an unexpected code: %s\n", st.ToString().c_str());
    std::abort();
  }
  return 0;
}
