// artifact_check: runs a compiled artifact on one test case exported by
// tests/edge/export_case.py (raw tensors and a manifest, no protobuf) and compares every
// output with the reference (onnxruntime's) the way np.allclose does:
// |got - want| <= atol + rtol * |want|, a NaN matching only a NaN; integer and bool outputs
// must be equal. Built from the runtime alone, so that a cross build (scripts/aarch64.sh)
// can run it on the target, or under qemu-user.
//
//   artifact_check MODEL.kiln CASE_DIR [--atol 1e-4] [--rtol 1e-3] [--runs 1] [--threads 1]
//
// Every run (on one CPU context with --threads threads) is checked. One line per output
// with its worst absolute error and its worst error relative to the tolerance (<= 1
// passes), then "result: ok|FAIL", the runs and the median time per run.
// Exit status: 0 every output matches, 1 an output differs or Load/Create/Run fails,
// 2 a bad command line or an unreadable case.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/half.h"

namespace {

struct Tensor {
  std::string name;
  kiln::DType dtype = kiln::DType::kUndefined;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};

struct Case {
  std::vector<Tensor> inputs, outputs;
};

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Reads CASE_DIR/manifest.txt and the files it names; false with a message on stderr.
bool ReadCase(const std::string& dir, Case& c) {
  const std::string path = dir + "/manifest.txt";
  std::ifstream manifest(path);
  if (!manifest) {
    std::fprintf(stderr, "artifact_check: cannot open %s\n", path.c_str());
    return false;
  }
  std::string line;
  for (int number = 1; std::getline(manifest, line); ++number) {
    std::istringstream fields(line);
    std::string kind, file;
    Tensor t;
    int dtype = 0, rank = -1;
    fields >> kind >> t.name >> dtype >> rank;
    for (int d = 0; d < rank && fields; ++d) fields >> t.dims.emplace_back();
    fields >> file;
    t.dtype = static_cast<kiln::DType>(dtype);
    int64_t elements = 1;
    for (int64_t d : t.dims) elements = d < 0 ? -1 : elements * d;
    const size_t want = static_cast<size_t>(elements) * kiln::DTypeSize(t.dtype);
    if (!fields || (kind != "input" && kind != "output") || rank < 0 || rank > kiln::kMaxRank ||
        !kiln::IsValidDType(dtype) || elements < 0) {
      std::fprintf(stderr, "artifact_check: %s:%d: expected 'input|output NAME DTYPE RANK DIM... FILE', found '%s'\n",
                   path.c_str(), number, line.c_str());
      return false;
    }
    std::ifstream data(dir + "/" + file, std::ios::binary);
    t.bytes.resize(want);
    if (!data.read(reinterpret_cast<char*>(t.bytes.data()), static_cast<std::streamsize>(want)) ||
        data.peek() != std::char_traits<char>::eof()) {
      std::fprintf(stderr, "artifact_check: %s/%s: expected exactly %zu bytes (%s %s)\n", dir.c_str(),
                   file.c_str(), want, std::string(kiln::DTypeName(t.dtype)).c_str(), DimsText(t.dims).c_str());
      return false;
    }
    (kind == "input" ? c.inputs : c.outputs).push_back(std::move(t));
  }
  return true;
}

// Element i of a floating-point tensor as a double.
double FloatAt(kiln::DType dtype, const uint8_t* data, int64_t i) {
  switch (dtype) {
    case kiln::DType::kFloat32: { float v; std::memcpy(&v, data + 4 * i, 4); return v; }
    case kiln::DType::kFloat64: { double v; std::memcpy(&v, data + 8 * i, 8); return v; }
    case kiln::DType::kFloat16: { uint16_t v; std::memcpy(&v, data + 2 * i, 2); return kiln::HalfToFloat(v); }
    default: { uint16_t v; std::memcpy(&v, data + 2 * i, 2); return kiln::BF16ToFloat(v); }
  }
}

bool IsFloat(kiln::DType dtype) {
  return dtype == kiln::DType::kFloat32 || dtype == kiln::DType::kFloat64 || dtype == kiln::DType::kFloat16 ||
         dtype == kiln::DType::kBFloat16;
}

// Compares one output; prints its line when `report`. True when it matches.
bool Compare(const Tensor& want, const kiln::TensorView& got, double atol, double rtol, bool report) {
  const std::vector<int64_t> got_dims(got.dims, got.dims + std::max(0, got.rank));
  if (got.dtype != want.dtype || got_dims != want.dims) {
    std::printf("output %s: expected %s %s, found %s %s\n", want.name.c_str(),
                std::string(kiln::DTypeName(want.dtype)).c_str(), DimsText(want.dims).c_str(),
                std::string(kiln::DTypeName(got.dtype)).c_str(), DimsText(got_dims).c_str());
    return false;
  }
  const auto* g = static_cast<const uint8_t*>(got.data);
  const int64_t n = got.num_elements();
  if (!IsFloat(want.dtype)) {
    const bool equal = std::memcmp(g, want.bytes.data(), want.bytes.size()) == 0;
    if (report || !equal)
      std::printf("output %s: %s %s %s\n", want.name.c_str(), std::string(kiln::DTypeName(want.dtype)).c_str(),
                  DimsText(want.dims).c_str(), equal ? "equal" : "DIFFERS");
    return equal;
  }
  double max_abs = 0, worst = 0;
  int64_t worst_at = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = FloatAt(want.dtype, g, i), w = FloatAt(want.dtype, want.bytes.data(), i);
    const double err = std::isnan(x) && std::isnan(w) ? 0 : std::fabs(x - w);
    const double ratio = std::isnan(err) || std::isinf(err) ? INFINITY : err / (atol + rtol * std::fabs(w));
    if (!(ratio <= worst)) worst = ratio, worst_at = i;
    if (err > max_abs) max_abs = err;
  }
  const bool ok = worst <= 1;
  if (report || !ok)
    std::printf("output %s: %s %s max_abs %.3g worst_ratio %.3g at %lld (got %.9g, want %.9g) %s\n",
                want.name.c_str(), std::string(kiln::DTypeName(want.dtype)).c_str(), DimsText(want.dims).c_str(),
                max_abs, worst, static_cast<long long>(worst_at), FloatAt(want.dtype, g, worst_at),
                FloatAt(want.dtype, want.bytes.data(), worst_at), ok ? "ok" : "MISMATCH");
  return ok;
}

bool ParseNumber(const char* text, double lo, double& out) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v >= lo) || !std::isfinite(v)) return false;
  out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string artifact, case_dir;
  double atol = 1e-4, rtol = 1e-3, runs = 1, threads = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = true;
    if (a == "--atol" || a == "--rtol" || a == "--runs" || a == "--threads") {
      double& v = a == "--atol" ? atol : a == "--rtol" ? rtol : a == "--runs" ? runs : threads;
      ok = next != nullptr && ParseNumber(next, a == "--runs" || a == "--threads" ? 1 : 0, v) &&
           (a != "--threads" || v <= 256);
      ++i;
    } else if (a.rfind("--", 0) != 0 && artifact.empty()) {
      artifact = a;
    } else if (a.rfind("--", 0) != 0 && case_dir.empty()) {
      case_dir = a;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "artifact_check: bad argument '%s' (usage: artifact_check MODEL.kiln CASE_DIR "
                           "[--atol A] [--rtol R] [--runs N] [--threads T])\n", a.c_str());
      return 2;
    }
  }
  Case c;
  if (artifact.empty() || case_dir.empty()) {
    std::fprintf(stderr, "artifact_check: expected MODEL.kiln CASE_DIR\n");
    return 2;
  }
  if (!ReadCase(case_dir, c)) return 2;

  auto model = kiln::Model::Load(artifact);
  if (!model.ok()) {
    std::printf("result: FAIL loading %s: %s\n", artifact.c_str(), model.status().ToString().c_str());
    return 1;
  }
  const auto& infos = model->inputs();
  const auto& out_infos = model->outputs();
  if (infos.size() != c.inputs.size() || out_infos.size() != c.outputs.size()) {
    std::printf("result: FAIL: the artifact has %zu inputs and %zu outputs, the case %zu and %zu\n", infos.size(),
                out_infos.size(), c.inputs.size(), c.outputs.size());
    return 1;
  }
  std::vector<kiln::TensorView> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Tensor& t = c.inputs[i];
    if (infos[i].name != t.name) {
      std::printf("result: FAIL: input %zu is '%s' in the artifact, '%s' in the case\n", i, infos[i].name.c_str(),
                  t.name.c_str());
      return 1;
    }
    inputs.push_back(kiln::TensorView::Host(t.bytes.data(), t.dtype, t.dims.data(), static_cast<int32_t>(t.dims.size())));
  }
  kiln::ContextOptions options;
  options.device = kiln::Device::kCpu;
  options.cpu_threads = static_cast<int>(threads);
  auto context = kiln::ExecutionContext::Create(*model, options);
  if (!context.ok()) {
    std::printf("result: FAIL creating a context: %s\n", context.status().ToString().c_str());
    return 1;
  }
  std::vector<double> times;
  bool ok = true;
  for (int r = 0; r < static_cast<int>(runs) && ok; ++r) {
    std::vector<kiln::TensorView> outputs;
    const auto start = std::chrono::steady_clock::now();
    const kiln::Status status = context->Run(inputs, outputs);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (!status.ok()) {
      std::printf("result: FAIL: run %d: %s\n", r, status.ToString().c_str());
      return 1;
    }
    for (size_t o = 0; o < c.outputs.size(); ++o) ok = Compare(c.outputs[o], outputs[o], atol, rtol, r == 0) && ok;
    if (!ok) std::printf("(run %d)\n", r);
  }
  std::sort(times.begin(), times.end());
  std::printf("result: %s runs %zu median_ms %.3f (%s; atol %g, rtol %g)\n", ok ? "ok" : "FAIL", times.size(),
              times[times.size() / 2], context->device_note().c_str(), atol, rtol);
  return ok ? 0 : 1;
}
