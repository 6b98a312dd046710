// context_stress: many threads, each with its own ExecutionContext on one shared Model, run
// an artifact over and over and check every output bit for bit against a serial reference.
// Built from the runtime alone (no compiler), so scripts/tsan.sh can build it under
// ThreadSanitizer in a few minutes; it is also an ordinary test program in the normal build.
//
//   context_stress model.kiln [--threads 8] [--runs 1000] [--pool-threads 2] [--sets 3]
//                  [--seed 1] [--shape NAME:DIMS]...
//
// Input sets: --sets seeded input sets, built from Model::inputs() (floating types uniform in
// [-1, 1), integer types 0..9, bool 0/1, as kiln bench --random draws them). A dim is, in this
// order: the artifact's constant; given by --shape (the k-th --shape of an input is its shape
// in set k, cycling when fewer are given; '?' leaves a dim to the rules after); bound by a given
// dim of the same symbol; fixed by an entry: the entries that fix every symbol still open
// ("N=1" in EntryInfo::name) take turns, set k using the k-th of them; else, for a dim the
// entries fix differently ("1|4"), its first form. So an artifact with a symbolic dim changes
// shapes between calls when it has several such entries or is given several --shape values.
//
// The reference outputs of each set are computed first, serially, on one context with one
// thread. Then --threads threads each create a context (CPU backend; the odd-numbered ones
// with CpuOptions::threads = --pool-threads, the others with 1) and make --runs runs, run r of thread t
// on set (t + r) % sets: even runs take the context's output views, odd runs copy into
// caller-owned buffers filled with a poison byte first. Every output must equal its set's
// reference bit for bit (the CPU backend gives the same bits at every thread count). Any
// mismatch or error prints the thread, run, set, output, index and values; exit status 1.
// Exit 2: bad command line or an artifact this program cannot make inputs for.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/half.h"
#include "runtime/shape_text.h"

namespace {

struct Options {
  std::string artifact;
  int threads = 8;
  int runs = 1000;
  int pool_threads = 2;
  int sets = 3;
  uint64_t seed = 1;
  std::map<std::string, std::vector<std::vector<int64_t>>> shapes;  // --shape, per input in order
};

struct Tensor {
  kiln::DType dtype = kiln::DType::kUndefined;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
  kiln::TensorView view() const {
    return kiln::TensorView::Host(bytes.data(), dtype, dims.data(), static_cast<int32_t>(dims.size()));
  }
};

struct InputSet {
  std::vector<Tensor> inputs;
  std::vector<kiln::TensorView> views;
  std::vector<Tensor> want;  // reference outputs
};

bool ParseInt(const std::string& text, int64_t& value) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0') return false;
  value = v;
  return true;
}

// "NAME:2x576" ('?' for a dim left to the other rules, read as -1).
bool ParseShape(const std::string& text, std::string& name, std::vector<int64_t>& dims) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  name = text.substr(0, colon);
  dims.clear();
  const std::string list = text.substr(colon + 1);
  if (list.empty()) return true;  // a scalar
  size_t pos = 0;
  for (;;) {
    const size_t x = list.find('x', pos);
    const std::string part = list.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    int64_t v = -1;
    if (part != "?" && (!ParseInt(part, v) || v < 0)) return false;
    dims.push_back(v);
    if (x == std::string::npos) return true;
    pos = x + 1;
  }
}

bool ParseArgs(int argc, char** argv, Options& o) {
  auto count = [](const char* text, int lo, int& out) {
    int64_t v = 0;
    if (!ParseInt(text, v) || v < lo || v > 1'000'000) return false;
    out = static_cast<int>(v);
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = next != nullptr;
    if (a == "--threads" && ok) ok = count(argv[++i], 1, o.threads);
    else if (a == "--runs" && ok) ok = count(argv[++i], 1, o.runs);
    else if (a == "--pool-threads" && ok) ok = count(argv[++i], 1, o.pool_threads);
    else if (a == "--sets" && ok) ok = count(argv[++i], 1, o.sets);
    else if (a == "--seed" && ok) {
      int64_t v = 0;
      ok = ParseInt(argv[++i], v) && v >= 0;
      o.seed = static_cast<uint64_t>(v);
    } else if (a == "--shape" && ok) {
      std::string name;
      std::vector<int64_t> dims;
      ok = ParseShape(argv[++i], name, dims);
      if (ok) o.shapes[name].push_back(dims);
    } else if (a.rfind("--", 0) != 0 && o.artifact.empty()) {
      o.artifact = a;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "context_stress: bad argument '%s'\n", a.c_str());
      return false;
    }
  }
  if (o.artifact.empty()) std::fprintf(stderr, "context_stress: no artifact given\n");
  return !o.artifact.empty();
}

// Symbols an entry's profile fixes: "N=1, T in 1..64; not (T > 1)" gives N = 1.
std::map<std::string, int64_t> FixedByEntry(const std::string& name) {
  std::map<std::string, int64_t> fixed;
  const std::string profile = name.substr(0, name.find("; "));
  size_t pos = 0;
  for (;;) {
    const size_t comma = profile.find(", ", pos);
    const std::string clause = profile.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t eq = clause.find('=');
    int64_t v = 0;
    if (eq != std::string::npos && eq > 0 && ParseInt(clause.substr(eq + 1), v)) fixed[clause.substr(0, eq)] = v;
    if (comma == std::string::npos) return fixed;
    pos = comma + 2;
  }
}

// The shapes of set `k` (see the file comment); false with `error` set when a dim is undecided.
bool ResolveShapes(const kiln::Model& model, const Options& o, int k, std::vector<std::vector<int64_t>>& shapes,
                   std::string& error) {
  const auto& inputs = model.inputs();
  shapes.assign(inputs.size(), {});
  std::map<std::string, int64_t> bound;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const kiln::TensorInfo& t = inputs[i];
    std::vector<int64_t>& dims = shapes[i];
    for (const kiln::DimInfo& d : t.shape) dims.push_back(d.value);
    auto given = o.shapes.find(t.name);
    if (given == o.shapes.end()) continue;
    const std::vector<int64_t>& g = given->second[static_cast<size_t>(k) % given->second.size()];
    if (g.size() != dims.size()) {
      error = "--shape " + t.name + " has rank " + std::to_string(g.size()) + ", the input has rank " +
              std::to_string(dims.size());
      return false;
    }
    for (size_t d = 0; d < dims.size(); ++d) {
      if (g[d] < 0) continue;
      if (dims[d] >= 0 && dims[d] != g[d]) {
        error = "--shape " + t.name + ": dim " + std::to_string(d) + " is " + std::to_string(dims[d]) +
                " in the artifact";
        return false;
      }
      dims[d] = g[d];
      if (t.shape[d].value < 0) bound[t.shape[d].symbol] = g[d];
    }
  }
  for (const auto& given : o.shapes)
    if (std::none_of(inputs.begin(), inputs.end(), [&](const kiln::TensorInfo& t) { return t.name == given.first; })) {
      error = "--shape names '" + given.first + "', which is not an input of the model";
      return false;
    }
  std::vector<std::string> open;
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t d = 0; d < shapes[i].size(); ++d) {
      const std::string& sym = inputs[i].shape[d].symbol;
      if (shapes[i][d] < 0 && !bound.count(sym) && sym.find('|') == std::string::npos) open.push_back(sym);
    }
  if (!open.empty()) {
    std::vector<std::map<std::string, int64_t>> fixing;  // entries fixing every open symbol
    for (const kiln::EntryInfo& e : model.entries()) {
      auto fixed = FixedByEntry(e.name);
      if (std::all_of(open.begin(), open.end(), [&](const std::string& s) { return fixed.count(s) > 0; }))
        fixing.push_back(std::move(fixed));
    }
    if (!fixing.empty())
      for (const auto& [sym, v] : fixing[static_cast<size_t>(k) % fixing.size()]) bound.emplace(sym, v);
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t d = 0; d < shapes[i].size(); ++d) {
      if (shapes[i][d] >= 0) continue;
      const std::string& sym = inputs[i].shape[d].symbol;
      int64_t v = -1;
      if (auto b = bound.find(sym); b != bound.end())
        v = b->second;
      else if (sym.find('|') != std::string::npos && (!ParseInt(sym.substr(0, sym.find('|')), v) || v < 0))
        v = -1;
      if (v < 0) {
        error = "input '" + inputs[i].name + "' dim " + std::to_string(d) + " is symbolic ('" + sym +
                "') and no entry fixes it: pass --shape " + inputs[i].name + ":DIMS";
        return false;
      }
      shapes[i][d] = v;
    }
  return true;
}

// Seeded values for `t` (dtype and dims set), as the file comment says.
bool Fill(Tensor& t, std::mt19937_64& rng) {
  const size_t size = kiln::DTypeSize(t.dtype);
  if (size == 0) return false;
  int64_t n = 1;
  for (int64_t d : t.dims) n *= d;
  t.bytes.resize(static_cast<size_t>(n) * size);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  uint8_t* p = t.bytes.data();
  for (int64_t k = 0; k < n; ++k, p += size) {
    auto put = [&](auto v) { std::memcpy(p, &v, sizeof v); };
    switch (t.dtype) {
      case kiln::DType::kFloat32: put(static_cast<float>(real(rng))); break;
      case kiln::DType::kFloat64: put(real(rng)); break;
      case kiln::DType::kFloat16: put(kiln::FloatToHalf(static_cast<float>(real(rng)))); break;
      case kiln::DType::kBFloat16: put(kiln::FloatToBF16(static_cast<float>(real(rng)))); break;
      case kiln::DType::kBool: put(static_cast<uint8_t>(small(rng) & 1)); break;
      case kiln::DType::kUInt8: put(static_cast<uint8_t>(small(rng))); break;
      case kiln::DType::kInt8: put(static_cast<int8_t>(small(rng))); break;
      case kiln::DType::kUInt16: put(static_cast<uint16_t>(small(rng))); break;
      case kiln::DType::kInt16: put(static_cast<int16_t>(small(rng))); break;
      case kiln::DType::kInt32: put(static_cast<int32_t>(small(rng))); break;
      case kiln::DType::kUInt32: put(static_cast<uint32_t>(small(rng))); break;
      case kiln::DType::kInt64: put(static_cast<int64_t>(small(rng))); break;
      case kiln::DType::kUInt64: put(static_cast<uint64_t>(small(rng))); break;
      case kiln::DType::kUndefined: return false;
    }
  }
  return true;
}

// Element `i` of `t`'s bytes as text, by dtype.
std::string ValueText(kiln::DType dtype, const uint8_t* bytes, int64_t i) {
  const size_t size = kiln::DTypeSize(dtype);
  const uint8_t* p = bytes + static_cast<size_t>(i) * size;
  auto get = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  char buf[64];
  switch (dtype) {
    case kiln::DType::kFloat32: std::snprintf(buf, sizeof buf, "%.9g (0x%08x)", get(float{}), get(uint32_t{})); break;
    case kiln::DType::kFloat64: std::snprintf(buf, sizeof buf, "%.17g", get(double{})); break;
    case kiln::DType::kFloat16: std::snprintf(buf, sizeof buf, "%.6g", kiln::HalfToFloat(get(uint16_t{}))); break;
    case kiln::DType::kBFloat16: std::snprintf(buf, sizeof buf, "%.4g", kiln::BF16ToFloat(get(uint16_t{}))); break;
    default: {  // integers and bool: the raw little-endian value
      uint64_t v = 0;
      std::memcpy(&v, p, size);
      std::snprintf(buf, sizeof buf, "%" PRIu64, v);
    }
  }
  return buf;
}

// Empty when `got` equals `want` bit for bit; else what differs.
std::string Compare(const kiln::TensorView& got, const Tensor& want) {
  const std::vector<int64_t> dims(got.dims, got.dims + std::clamp(got.rank, 0, kiln::kMaxRank));
  if (got.dtype != want.dtype || dims != want.dims)
    return "is " + std::string(kiln::DTypeName(got.dtype)) + kiln::ShapeText(dims) + ", expected " +
           std::string(kiln::DTypeName(want.dtype)) + kiln::ShapeText(want.dims);
  if (want.bytes.empty() || std::memcmp(got.data, want.bytes.data(), want.bytes.size()) == 0) return {};
  const size_t size = kiln::DTypeSize(want.dtype);
  const int64_t n = static_cast<int64_t>(want.bytes.size() / size);
  const auto* g = static_cast<const uint8_t*>(got.data);
  int64_t first = -1, differing = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::memcmp(g + i * size, want.bytes.data() + i * size, size) != 0) {
      if (first < 0) first = i;
      ++differing;
    }
  return std::to_string(differing) + " of " + std::to_string(n) + " elements differ; first at index " +
         std::to_string(first) + ": got " + ValueText(want.dtype, g, first) + ", expected " +
         ValueText(want.dtype, want.bytes.data(), first);
}

std::mutex report_mutex;
std::atomic<int> failures{0};

void Report(const std::string& line) {
  if (failures.fetch_add(1) >= 20) return;  // the first 20 are enough to see the pattern
  std::lock_guard<std::mutex> lock(report_mutex);
  std::fprintf(stderr, "context_stress: FAIL %s\n", line.c_str());
}

// One thread's context and runs; adds the outputs it compared to `checked`.
void Worker(const kiln::Model& model, const Options& o, const std::vector<InputSet>& sets, int t, std::latch& start,
            std::atomic<int64_t>& checked) {
  kiln::ContextOptions opts;
  opts.device = kiln::Device::kCpu;
  opts.cpu.threads = t % 2 ? o.pool_threads : 1;
  auto ctx = kiln::ExecutionContext::Create(model, opts);
  start.arrive_and_wait();
  const std::string who = "thread " + std::to_string(t) + " (cpu.threads " + std::to_string(opts.cpu.threads) + ")";
  if (!ctx.ok()) return Report(who + ": Create: " + ctx.status().ToString());
  std::vector<kiln::TensorView> owned;                      // the context's views, passed back each even run
  std::vector<std::vector<Tensor>> buffers(sets.size());    // caller-owned outputs per set
  std::vector<std::vector<kiln::TensorView>> buffer_views(sets.size());
  for (size_t s = 0; s < sets.size(); ++s) {
    buffers[s] = sets[s].want;
    for (Tensor& b : buffers[s]) buffer_views[s].push_back(b.view());
  }
  const auto& names = model.outputs();
  for (int r = 0; r < o.runs; ++r) {
    const size_t s = static_cast<size_t>(t + r) % sets.size();
    const bool into_caller = r % 2 == 1;
    if (into_caller)
      for (Tensor& b : buffers[s]) std::fill(b.bytes.begin(), b.bytes.end(), uint8_t{0xa5});
    std::vector<kiln::TensorView>& out = into_caller ? buffer_views[s] : owned;
    auto where = [&] {
      return who + " run " + std::to_string(r) + " set " + std::to_string(s) +
             (into_caller ? " (caller-owned outputs)" : " (context's outputs)");
    };
    kiln::Status st = ctx->Run(sets[s].views, out);
    if (!st.ok()) {
      Report(where() + ": Run: " + st.ToString());
      return;
    }
    if (out.size() != sets[s].want.size()) {
      Report(where() + ": " + std::to_string(out.size()) + " outputs, expected " + std::to_string(sets[s].want.size()));
      return;
    }
    bool same = true;
    checked += static_cast<int64_t>(out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const std::string diff = Compare(out[i], sets[s].want[i]);
      if (diff.empty()) continue;
      Report(where() + ": output " + std::to_string(i) + " '" + names[i].name + "' " + diff);
      same = false;
    }
    if (!same) return;
  }
  const kiln::Stats& st = ctx->stats();
  if (st.calls != static_cast<uint64_t>(o.runs) || st.cache_misses != 0)
    Report(who + ": stats say " + std::to_string(st.calls) + " calls and " + std::to_string(st.cache_misses) +
           " cache misses, expected " + std::to_string(o.runs) + " and 0");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: context_stress ARTIFACT.kiln [--threads N] [--runs N] [--pool-threads N] [--sets N] "
                 "[--seed N] [--shape NAME:DIMS]...\n");
    return 2;
  }
  auto model = kiln::Model::Load(o.artifact);
  if (!model.ok()) {
    std::fprintf(stderr, "context_stress: %s: %s\n", o.artifact.c_str(), model.status().ToString().c_str());
    return 2;
  }
  // Inputs and serial references, one context with one thread.
  kiln::ContextOptions serial;
  serial.device = kiln::Device::kCpu;
  serial.cpu.threads = 1;
  auto ref = kiln::ExecutionContext::Create(*model, serial);
  if (!ref.ok()) {
    std::fprintf(stderr, "context_stress: Create: %s\n", ref.status().ToString().c_str());
    return 1;
  }
  std::vector<InputSet> sets(static_cast<size_t>(o.sets));
  for (int k = 0; k < o.sets; ++k) {
    InputSet& set = sets[static_cast<size_t>(k)];
    std::vector<std::vector<int64_t>> shapes;
    std::string error;
    if (!ResolveShapes(*model, o, k, shapes, error)) {
      std::fprintf(stderr, "context_stress: input set %d: %s\n", k, error.c_str());
      return 2;
    }
    std::mt19937_64 rng(o.seed + static_cast<uint64_t>(k));
    std::string text;
    for (size_t i = 0; i < shapes.size(); ++i) {
      Tensor t;
      t.dtype = model->inputs()[i].dtype;
      t.dims = shapes[i];
      if (!Fill(t, rng)) {
        std::fprintf(stderr, "context_stress: input '%s' has dtype %s\n", model->inputs()[i].name.c_str(),
                     std::string(kiln::DTypeName(t.dtype)).c_str());
        return 2;
      }
      text += (i ? ", " : "") + model->inputs()[i].name + kiln::ShapeText(t.dims);
      set.inputs.push_back(std::move(t));
    }
    for (const Tensor& t : set.inputs) set.views.push_back(t.view());
    std::vector<kiln::TensorView> out;
    kiln::Status st = ref->Run(set.views, out);
    if (!st.ok()) {
      std::fprintf(stderr, "context_stress: reference run of set %d (%s): %s\n", k, text.c_str(),
                   st.ToString().c_str());
      return 1;
    }
    for (const kiln::TensorView& v : out) {
      Tensor w;
      w.dtype = v.dtype;
      w.dims.assign(v.dims, v.dims + v.rank);
      const auto* p = static_cast<const uint8_t*>(v.data);
      w.bytes.assign(p, p + v.num_bytes());
      set.want.push_back(std::move(w));
    }
    std::printf("context_stress: set %d: %s (entry %d)\n", k, text.c_str(), ref->stats().last_entry);
    std::fflush(stdout);
  }
  const auto begin = std::chrono::steady_clock::now();
  std::atomic<int64_t> checked{0};
  std::latch start(o.threads);
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t)
    threads.emplace_back(Worker, std::cref(*model), std::cref(o), std::cref(sets), t, std::ref(start),
                         std::ref(checked));
  for (std::thread& th : threads) th.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const int f = failures.load();
  std::printf("context_stress: %d threads x %d runs (%d with cpu.threads %d), %d input sets: %" PRId64
              " outputs checked, %d failures, %.2f s\n",
              o.threads, o.runs, o.threads / 2, o.pool_threads, o.sets, checked.load(), f, seconds);
  return f == 0 ? 0 : 1;
}
