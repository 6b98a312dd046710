// embed: the smallest program that loads a Kiln artifact and runs it. Links only the runtime
// (Kiln::runtime, or `pkg-config --cflags --libs kiln-runtime`).
//
//   kiln compile model.onnx -o model.kiln --arch none
//   embed model.kiln                                  # every input zeros, at its declared shape
//   embed model.kiln input=1x576@audio.raw state=2x1x128
//
// Each argument after the artifact sets one input by name: "=DIMS" its shape ("1x576"; "="
// alone for a scalar), "@FILE" its data: the raw bytes of the input's dtype in C order, as
// numpy's tofile() writes them, exactly as many as the shape needs. An input without a file
// is zeros; one without a shape has the model's declared shape, which must then be constant.
// Runs once on the CPU backend and prints one line per output, in the model's order:
//   'NAME' DTYPE [D0, D1, ...] = V0 V1 ... (first 8 of N)
// floats with enough digits to round-trip (%.9g, %.17g for float64), integers exactly.
// Exit status: 0 done; 1 the runtime refused (loading, creating the context or running: its
// Status is printed) or standard output could not be written; 2 a bad command line or input
// file.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "kiln/runtime.h"

namespace {

constexpr int64_t kShown = 8;  // values printed per output

int Usage() {
  std::fprintf(stderr, "usage: embed MODEL.kiln [NAME=DIMS] [NAME@FILE] [NAME=DIMS@FILE] ...\n"
                       "  DIMS: 1x576 (empty for a scalar); FILE: raw little-endian data of the input's dtype\n");
  return 2;
}

// One input as given on the command line, or as declared by the model.
struct Input {
  std::vector<int64_t> dims;
  bool has_dims = false;
  std::string file;
  std::vector<uint64_t> storage;  // 8-byte aligned, as every dtype needs
};

std::string JoinDims(const int64_t* dims, int rank) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// "1x576" -> {1, 576}; "" -> {} (a scalar). False on anything else.
bool ParseDims(const std::string& text, std::vector<int64_t>& dims) {
  dims.clear();
  if (text.empty()) return true;
  size_t pos = 0;
  while (true) {
    size_t end = text.find('x', pos);
    std::string part = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 18)
      return false;
    dims.push_back(std::stoll(part));
    if (end == std::string::npos) return dims.size() <= static_cast<size_t>(kiln::kMaxRank);
    pos = end + 1;
  }
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  float magnitude;
  if (exp == 0) {
    magnitude = std::ldexp(static_cast<float>(mant), -24);  // zero or subnormal
  } else if (exp == 31) {
    magnitude = mant ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  }
  uint32_t bits;
  std::memcpy(&bits, &magnitude, 4);
  bits |= sign;
  std::memcpy(&magnitude, &bits, 4);
  return magnitude;
}

std::string FormatValue(kiln::DType dtype, const void* data, int64_t i) {
  char buf[64];
  auto at = [&](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, static_cast<const char*>(data) + i * sizeof(v), sizeof(v));
    return v;
  };
  switch (dtype) {
    case kiln::DType::kFloat32: std::snprintf(buf, sizeof buf, "%.9g", at(float{})); break;
    case kiln::DType::kFloat64: std::snprintf(buf, sizeof buf, "%.17g", at(double{})); break;
    case kiln::DType::kFloat16: std::snprintf(buf, sizeof buf, "%.9g", HalfToFloat(at(uint16_t{}))); break;
    case kiln::DType::kBFloat16: {
      uint32_t bits = static_cast<uint32_t>(at(uint16_t{})) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      std::snprintf(buf, sizeof buf, "%.9g", f);
      break;
    }
    case kiln::DType::kInt8: std::snprintf(buf, sizeof buf, "%d", at(int8_t{})); break;
    case kiln::DType::kInt16: std::snprintf(buf, sizeof buf, "%d", at(int16_t{})); break;
    case kiln::DType::kInt32: std::snprintf(buf, sizeof buf, "%" PRId32, at(int32_t{})); break;
    case kiln::DType::kInt64: std::snprintf(buf, sizeof buf, "%" PRId64, at(int64_t{})); break;
    case kiln::DType::kUInt8:
    case kiln::DType::kBool: std::snprintf(buf, sizeof buf, "%u", at(uint8_t{})); break;
    case kiln::DType::kUInt16: std::snprintf(buf, sizeof buf, "%u", at(uint16_t{})); break;
    case kiln::DType::kUInt32: std::snprintf(buf, sizeof buf, "%" PRIu32, at(uint32_t{})); break;
    case kiln::DType::kUInt64: std::snprintf(buf, sizeof buf, "%" PRIu64, at(uint64_t{})); break;
    default: return "?";
  }
  return buf;
}

// Shapes and data of every input, from the command line and the model's declarations.
// Prints the problem and returns false on a bad argument or file.
bool PrepareInputs(const kiln::Model& model, int argc, char** argv, std::vector<Input>& inputs,
                   std::vector<kiln::TensorView>& views) {
  const auto& infos = model.inputs();
  inputs.assign(infos.size(), Input{});
  for (int a = 2; a < argc; ++a) {
    const std::string arg = argv[a];
    const size_t eq = arg.find('='), at = arg.find('@');
    const size_t name_end = std::min(eq, at);
    if (name_end == std::string::npos || (eq != std::string::npos && at != std::string::npos && at < eq)) {
      std::fprintf(stderr, "embed: argument '%s': expected NAME=DIMS, NAME@FILE or NAME=DIMS@FILE\n", arg.c_str());
      return false;
    }
    const std::string name = arg.substr(0, name_end);
    size_t index = 0;
    while (index < infos.size() && infos[index].name != name) ++index;
    if (index == infos.size()) {
      std::string names;
      for (const auto& info : infos) names += (names.empty() ? "'" : ", '") + info.name + "'";
      std::fprintf(stderr, "embed: argument '%s': the model has no input '%s' (its inputs: %s)\n", arg.c_str(),
                   name.c_str(), names.c_str());
      return false;
    }
    Input& in = inputs[index];
    if (at != std::string::npos) in.file = arg.substr(at + 1);
    if (eq != std::string::npos) {
      const std::string text = arg.substr(eq + 1, at == std::string::npos ? std::string::npos : at - eq - 1);
      if (!ParseDims(text, in.dims)) {
        std::fprintf(stderr, "embed: argument '%s': bad shape '%s' (expected at most %d dims like 1x576, empty for a scalar)\n",
                     arg.c_str(), text.c_str(), kiln::kMaxRank);
        return false;
      }
      in.has_dims = true;
    }
  }
  views.clear();
  for (size_t i = 0; i < infos.size(); ++i) {
    const kiln::TensorInfo& info = infos[i];
    Input& in = inputs[i];
    if (!in.has_dims) {
      for (size_t d = 0; d < info.shape.size(); ++d) {
        if (info.shape[d].value < 0) {
          std::fprintf(stderr, "embed: input '%s' dim %zu is '%s', not a constant: give its shape, e.g. %s=%s\n",
                       info.name.c_str(), d, info.shape[d].symbol.c_str(), info.name.c_str(),
                       info.shape.size() == 1 ? "16" : "1x16");
          return false;
        }
        in.dims.push_back(info.shape[d].value);
      }
    }
    kiln::TensorView view = kiln::TensorView::Host(nullptr, info.dtype, in.dims.data(),
                                                   static_cast<int32_t>(in.dims.size()));
    const int64_t bytes = view.num_bytes();
    if (bytes == INT64_MAX) {
      std::fprintf(stderr, "embed: input '%s': shape %s is too large\n", info.name.c_str(),
                   JoinDims(view.dims, view.rank).c_str());
      return false;
    }
    try {
      in.storage.assign((static_cast<uint64_t>(bytes) + 7) / 8, 0);
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "embed: input '%s': cannot allocate %" PRId64 " bytes for %s %s\n", info.name.c_str(), bytes,
                   std::string(kiln::DTypeName(info.dtype)).c_str(), JoinDims(view.dims, view.rank).c_str());
      return false;
    }
    if (!in.file.empty()) {
      std::ifstream f(in.file, std::ios::binary | std::ios::ate);
      if (!f) {
        std::fprintf(stderr, "embed: input '%s': cannot open %s: %s\n", info.name.c_str(), in.file.c_str(),
                     std::strerror(errno));
        return false;
      }
      const int64_t size = static_cast<int64_t>(f.tellg());
      if (size != bytes) {
        std::fprintf(stderr, "embed: input '%s': %s has %" PRId64 " bytes, expected %" PRId64 " (%s %s)\n",
                     info.name.c_str(), in.file.c_str(), size, bytes, std::string(kiln::DTypeName(info.dtype)).c_str(),
                     JoinDims(view.dims, view.rank).c_str());
        return false;
      }
      f.seekg(0);
      if (!f.read(reinterpret_cast<char*>(in.storage.data()), bytes)) {
        std::fprintf(stderr, "embed: input '%s': reading %s failed\n", info.name.c_str(), in.file.c_str());
        return false;
      }
    }
    view.data = in.storage.data();
    views.push_back(view);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return Usage();
  kiln::Result<kiln::Model> model = kiln::Model::Load(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "embed: loading %s: %s\n", argv[1], model.status().ToString().c_str());
    return 1;
  }
  std::vector<Input> inputs;
  std::vector<kiln::TensorView> in_views;
  if (!PrepareInputs(*model, argc, argv, inputs, in_views)) return 2;

  kiln::ContextOptions options;
  options.device = kiln::Device::kCpu;  // outputs in host memory, printable as they are
  kiln::Result<kiln::ExecutionContext> ctx = kiln::ExecutionContext::Create(*model, options);
  if (!ctx.ok()) {
    std::fprintf(stderr, "embed: creating a context: %s\n", ctx.status().ToString().c_str());
    return 1;
  }
  std::vector<kiln::TensorView> outputs;  // filled with views into the context's memory
  if (kiln::Status st = ctx->Run(in_views, outputs); !st.ok()) {
    std::fprintf(stderr, "embed: running %s: %s\n", argv[1], st.ToString().c_str());
    return 1;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const kiln::TensorView& out = outputs[i];
    const int64_t n = out.num_elements();
    std::string line = "'" + model->outputs()[i].name + "' " + std::string(kiln::DTypeName(out.dtype)) + " " +
                       JoinDims(out.dims, out.rank) + " =";
    for (int64_t k = 0; k < n && k < kShown; ++k) line += " " + FormatValue(out.dtype, out.data, k);
    if (n > kShown) line += " (first " + std::to_string(kShown) + " of " + std::to_string(n) + ")";
    std::printf("%s\n", line.c_str());
  }
  return std::fflush(stdout) == 0 && !std::ferror(stdout) ? 0 : 1;
}
