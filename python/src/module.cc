// kiln._kiln: the extension module under the `kiln` package (python/kiln/__init__.py), binding
// kiln/runtime.h and kiln/compile.h. Every kiln::Status error becomes kiln.Error (its .code the
// status code's name); nothing here throws a C++ exception past the module. The GIL is released
// while Kiln compiles or runs.
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kiln/compile.h"
#include "kiln/runtime.h"
#include "kiln/version.h"
#include "python/src/arrays.h"

namespace nb = nanobind;

namespace kiln::python {
namespace {

// A failed kiln::Status on its way to Python as kiln.Error.
struct StatusError {
  std::string code;
  std::string message;
};

[[noreturn]] void Raise(const Status& s) {
  throw StatusError{std::string(StatusCodeName(s.code())), std::string(s.message())};
}
void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}
template <typename T>
T Take(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(*r);
}

nb::object g_error;  // kiln.Error, made at import

// A string from Kiln as Python's str. Names and messages come from models and artifacts, which
// may hold bytes that are not UTF-8: those are shown as \xNN escapes, never an exception.
nb::str Str(const std::string& s) {
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "backslashreplace"));
}
nb::list Strs(const std::vector<std::string>& v) {
  nb::list out;
  for (const std::string& s : v) out.append(Str(s));
  return out;
}

nb::object DimObject(const DimInfo& d) { return d.value >= 0 ? nb::cast(d.value) : nb::object(Str(d.symbol)); }

nb::list TensorInfos(const std::vector<TensorInfo>& tensors) {
  nb::list out;
  for (const TensorInfo& t : tensors) {
    nb::list shape;
    for (const DimInfo& d : t.shape) shape.append(DimObject(d));
    out.append(nb::make_tuple(Str(t.name), Str(std::string(DTypeName(t.dtype))), shape));
  }
  return out;
}

nb::list EntryInfos(const Model& model) {
  nb::list out;
  for (const EntryInfo& e : model.entries()) {
    nb::dict d;
    d["name"] = Str(e.name);
    d["backend"] = Str(e.backend);
    d["prologue"] = Str(e.prologue_text);
    nb::list stages;
    for (size_t s = 0; s < e.stage_traces.size(); ++s)
      stages.append(nb::make_tuple(Str(s < e.compile.stage_names.size() ? e.compile.stage_names[s] : std::string()),
                                   Str(e.stage_traces[s]),
                                   s < e.compile.stage_ops.size() ? e.compile.stage_ops[s] : int32_t{-1}));
    d["stages"] = stages;
    d["runtime_dims"] = Strs(e.runtime_dims);
    d["arena_bytes"] = Str(e.arena_bytes);
    nb::list inputs;
    for (const std::vector<DimCheckInfo>& dims : e.input_dims) {
      nb::list checks;
      for (const DimCheckInfo& c : dims)
        checks.append(c.value >= 0 ? nb::cast(c.value) : nb::object(nb::make_tuple(Str(c.symbol), c.min, c.max, c.divisor)));
      inputs.append(checks);
    }
    d["input_dims"] = inputs;
    nb::list instructions;
    for (const InstructionInfo& i : e.instructions) {
      nb::list placements;  // (backend, library) per backend, as kiln::InstructionInfo::placements
      for (const InstructionPlacement& p : i.placements)
        placements.append(nb::make_tuple(Str(p.backend), Str(std::string(LibraryName(p.library)))));
      instructions.append(nb::make_tuple(Str(i.name), Str(i.op), nb::tuple(placements), Str(i.kernel)));
    }
    d["instructions"] = instructions;
    d["kernels"] = e.compile.kernels;
    out.append(d);
  }
  return out;
}

// kiln.load's options. `weights_key`: None, the 32-byte key as bytes, or a callable that takes
// the key id (str) and returns them; called with the GIL held (Load runs under it), and an
// exception it raises or a wrong value fails the load as INVALID_ARGUMENT.
LoadOptions Options(std::optional<uint64_t> max_artifact_bytes, std::optional<uint64_t> max_context_bytes,
                    std::vector<std::string> trusted_public_keys, nb::object weights_key) {
  LoadOptions o;
  if (max_artifact_bytes) o.max_artifact_bytes = *max_artifact_bytes;
  if (max_context_bytes) o.max_context_bytes = *max_context_bytes;
  o.trusted_public_keys = std::move(trusted_public_keys);
  if (!weights_key.is_none())
    o.weights_key = [weights_key](std::string_view id, std::span<uint8_t, 32> out) -> Status {
      nb::gil_scoped_acquire gil;
      try {
        nb::object key = PyCallable_Check(weights_key.ptr()) ? weights_key(Str(std::string(id))) : weights_key;
        if (!nb::isinstance<nb::bytes>(key) || nb::borrow<nb::bytes>(key).size() != out.size())
          return InvalidArgument("weights_key: expected 32 bytes (an AES-256 key), or a callable that returns them");
        std::memcpy(out.data(), nb::borrow<nb::bytes>(key).data(), out.size());
        return Status::Ok();
      } catch (nb::python_error& e) {
        return InvalidArgument(std::string("weights_key raised ") + e.what());
      }
    };
  return o;
}

Device DeviceOf(const std::string& name) {
  if (name == "auto") return Device::kAuto;
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  Raise(InvalidArgument("device '" + name + "': expected auto, cpu or cuda"));
}

// One execution context and its model, used by one thread at a time: a second thread's call
// while one runs fails instead of racing (Kiln's contexts are thread-compatible).
class Context {
 public:
  Context(const Model& model, const std::string& device, int device_ordinal, int cpu_threads, bool cuda_graphs,
          bool profile, int64_t max_loop_iterations, bool onednn, int32_t warm_runs)
      : model_(model) {
    ContextOptions o;
    o.device = DeviceOf(device);
    o.cuda.device_ordinal = device_ordinal;
    o.cpu.threads = cpu_threads;
    o.cuda.graphs = cuda_graphs;
    o.profile = profile;
    o.max_loop_iterations = max_loop_iterations;
    o.cpu.onednn = onednn;
    o.warm_runs = warm_runs;
    o.cuda.own_stream = true;  // a null stream is then the context's own: graphs capture, contexts overlap
    ctx_.emplace(Take(ExecutionContext::Create(model_, o)));
  }

  // Prepares the context for inputs like `inputs` (as Run takes them), running nothing
  // (ExecutionContext::Warm).
  void Warm(nb::handle inputs) {
    std::unique_lock<std::mutex> lock = Lock();
    ExecutionContext& ctx = Open();
    std::vector<AnyArray> arrays;
    Inputs(inputs, arrays);
    Status st;
    {
      nb::gil_scoped_release release;
      st = ctx.Warm(views_);
    }
    Check(st);
  }

  // Runs on `inputs` (a sequence in the model's input order, or a mapping by name) and returns
  // the outputs as new NumPy arrays, or, with `out` (one writable array per output, of its dtype
  // and shape, on the CPU or, for a CUDA context, a CUDA device), writes them there and returns
  // `out`'s arrays: no copy beyond Kiln's own into them.
  nb::list Run(nb::handle inputs, nb::handle out) {
    std::unique_lock<std::mutex> lock = Lock();
    ExecutionContext& ctx = Open();
    // Keeps every array alive until the run ends (a conversion may make a new object).
    std::vector<AnyArray> arrays;
    Inputs(inputs, arrays);
    outputs_.clear();
    nb::list given;
    std::vector<WritableArray> targets;
    if (!out.is_none()) {
      const std::vector<TensorInfo>& outs = model_.outputs();
      if (!nb::isinstance<nb::sequence>(out) || nb::len(out) != outs.size())
        Raise(InvalidArgument("out: expected a list of " + std::to_string(outs.size()) + " arrays, one per output"));
      for (size_t i = 0; i < outs.size(); ++i) {
        nb::object h = nb::borrow<nb::sequence>(out)[i];  // a reference of its own: `out` may change
        WritableArray a;
        if (!nb::try_cast(h, a))
          Raise(InvalidArgument("out " + std::to_string(i) + " ('" + outs[i].name + "'): " +
                                std::string(nb::type_name(h.type()).c_str()) + " is not a writable array"));
        targets.push_back(a);
        outputs_.push_back(Take(ToView(a, "out " + std::to_string(i) + " ('" + outs[i].name + "')",
                                       output_rows_.empty() ? 0 : output_rows_[i])));
        given.append(h);
      }
    }
    Status st;
    {
      nb::gil_scoped_release release;
      st = ctx.Run(views_, outputs_);
      if (st.ok() && !targets.empty()) st = ctx.Synchronize();  // CUDA: the copies into `out` are done
    }
    Check(st);
    if (!targets.empty()) return given;
    nb::list result;
    if (outputs_.empty() || outputs_[0].memory == MemoryKind::kHost) {
      for (const TensorView& y : outputs_) result.append(ToNumpy(y));
      return result;
    }
    host_.resize(outputs_.size());
    for (size_t i = 0; i < outputs_.size(); ++i) result.append(EmptyNumpy(outputs_[i], &host_[i]));
    {
      nb::gil_scoped_release release;
      st = ctx.CopyOutputs(host_);
      if (st.ok()) st = ctx.Synchronize();
    }
    Check(st);
    return result;
  }

  // `inputs` (a sequence in the model's input order, or a mapping by name) as views_, of
  // `arrays`, which the caller keeps alive while they are used.
  void Inputs(nb::handle inputs, std::vector<AnyArray>& arrays) {
    const std::vector<TensorInfo>& names = model_.inputs();
    arrays.reserve(names.size());
    if (nb::isinstance<nb::dict>(inputs)) {
      nb::dict d = nb::borrow<nb::dict>(inputs);
      for (auto [key, value] : d) {  // every key a name of the model's, before any is looked up
        std::string k;
        if (!nb::isinstance<nb::str>(key) || !nb::try_cast(key, k)) {
          PyErr_Clear();
          Raise(InvalidArgument("input key " + std::string(nb::repr(key).c_str()) + " is not an input name (str)"));
        }
        bool known = false;
        for (const TensorInfo& t : names) known = known || t.name == k;
        if (!known) Raise(InvalidArgument("input '" + k + "': the model has no such input"));
      }
      for (const TensorInfo& t : names) {
        const nb::str key = Str(t.name);
        if (!d.contains(key)) Raise(InvalidArgument("input '" + t.name + "' is missing"));
        arrays.push_back(Array(d[key], t.name));
      }
    } else {
      if (!nb::isinstance<nb::sequence>(inputs) || nb::isinstance<nb::str>(inputs))
        Raise(InvalidArgument("inputs: expected a list of arrays in the model's input order or a dict by name"));
      nb::sequence seq = nb::borrow<nb::sequence>(inputs);
      const size_t n = nb::len(seq);
      if (n != names.size())
        Raise(InvalidArgument(std::to_string(n) + " inputs, the model has " + std::to_string(names.size())));
      for (size_t i = 0; i < n; ++i) arrays.push_back(Array(seq[i], names[i].name));
    }
    views_.resize(arrays.size());
    for (size_t i = 0; i < arrays.size(); ++i)
      views_[i] = Take(ToView(arrays[i], "input '" + names[i].name + "'", input_rows_.empty() ? 0 : input_rows_[i]));
  }

  // Binds KV caches (ExecutionContext::BindCache): `caches` maps each past input's name to its
  // present output's name, every buffer `capacity` rows per head; empty unbinds.
  void BindCache(const std::map<std::string, std::string>& caches, int64_t capacity) {
    std::unique_lock<std::mutex> lock = Lock();
    ExecutionContext& ctx = Open();
    auto index = [](const std::vector<TensorInfo>& list, const std::string& name, const char* what) {
      for (size_t i = 0; i < list.size(); ++i)
        if (list[i].name == name) return static_cast<int32_t>(i);
      Raise(InvalidArgument(std::string("bind_cache: the model has no ") + what + " '" + name + "'"));
      return int32_t{-1};
    };
    std::vector<ExecutionContext::CacheBinding> bindings;
    for (const auto& [past, present] : caches)
      bindings.push_back({index(model_.inputs(), past, "input"), index(model_.outputs(), present, "output"), capacity});
    Check(ctx.BindCache(bindings));
    input_rows_.assign(caches.empty() ? 0 : model_.inputs().size(), 0);
    output_rows_.assign(caches.empty() ? 0 : model_.outputs().size(), 0);
    for (const ExecutionContext::CacheBinding& b : bindings) {
      input_rows_[static_cast<size_t>(b.past_input)] = capacity;
      output_rows_[static_cast<size_t>(b.present_output)] = capacity;
    }
  }

  nb::dict StatsDict() {
    std::unique_lock<std::mutex> lock = Lock();
    const Stats& s = Open().stats();
    nb::dict d;
    d["calls"] = s.calls;
    d["cache_hits"] = s.cache_hits;
    d["cache_misses"] = s.cache_misses;
    d["last_entry"] = s.last_entry;
    std::vector<uint64_t> hits;
    for (const EntryStats& e : s.entries) hits.push_back(e.hits);
    d["entry_hits"] = hits;
    d["last_miss_reasons"] = Strs(s.last_miss_reasons);
    d["last_host_start"] = s.last_host_start;
    d["last_host_stop"] = s.last_host_stop;
    d["last_cache_lookup_start"] = s.last_cache_lookup_start;
    d["last_cache_lookup_stop"] = s.last_cache_lookup_stop;
    d["last_prologue_start"] = s.last_prologue_start;
    d["last_prologue_stop"] = s.last_prologue_stop;
    d["last_computation_start"] = s.last_computation_start;
    d["last_computation_stop"] = s.last_computation_stop;
    d["total_computation_ns"] = s.total_computation_ns;
    d["last_gpu_ns"] = s.last_gpu_ns;
    d["graph_hits"] = s.graph_hits;
    d["graph_misses"] = s.graph_misses;
    d["runtime_dim_binds"] = s.runtime_dim_binds;
    d["room_growths"] = s.room_growths;
    d["last_host_to_device_bytes"] = s.last_host_to_device_bytes;
    d["last_device_to_host_bytes"] = s.last_device_to_host_bytes;
    d["last_control_transfers"] = s.last_control_transfers;
    d["last_cpu_region_ns"] = s.last_cpu_region_ns;
    nb::list fallbacks;
    for (const Stats::Fallback& f : s.last_fallbacks) fallbacks.append(nb::make_tuple(f.instruction, Str(f.reason)));
    d["last_fallbacks"] = fallbacks;
    d["last_instruction_ns"] = s.last_instruction_ns;
    d["last_instruction_bytes"] = s.last_instruction_bytes;
    return d;
  }

  std::string DeviceName() {
    std::unique_lock<std::mutex> lock = Lock();
    return Open().device() == Device::kCuda ? "cuda" : "cpu";
  }
  nb::str DeviceNote() {
    std::unique_lock<std::mutex> lock = Lock();
    return Str(Open().device_note());
  }
  std::pair<uint64_t, uint64_t> MemoryUsage() {
    std::unique_lock<std::mutex> lock = Lock();
    const ExecutionContext::MemoryUsage m = Open().memory_usage();
    return {m.host_bytes, m.device_bytes};
  }
  void Close() {
    std::unique_lock<std::mutex> lock = Lock();
    ctx_.reset();
    closed_ = true;
  }
  bool closed() const { return closed_; }
  const Model& model() const { return model_; }

 private:
  // Every use of the context holds its mutex: a second thread's use while a call runs (with the
  // GIL released) fails instead of racing.
  std::unique_lock<std::mutex> Lock() {
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock())
      Raise(FailedPrecondition("this Context is running a call on another thread; create one Context per thread"));
    return lock;
  }
  ExecutionContext& Open() {
    if (!ctx_) Raise(FailedPrecondition("this Context is closed"));
    return *ctx_;
  }
  static AnyArray Array(nb::handle h, const std::string& name) {
    AnyArray a;
    if (!nb::try_cast(h, a))
      Raise(InvalidArgument("input '" + name + "': " + std::string(nb::type_name(h.type()).c_str()) +
                            " is not an array (NumPy, or any object with __dlpack__)"));
    return a;
  }

  Model model_;
  std::optional<ExecutionContext> ctx_;
  std::mutex mu_;
  std::atomic<bool> closed_{false};
  std::vector<TensorView> views_, outputs_, host_;
  // Per input and output (empty when none is bound): the rows per head of its bound cache, or 0.
  std::vector<int64_t> input_rows_, output_rows_;
};

// kiln.compile's work: the artifact bytes and the report as a dict.
nb::tuple CompileOnnxFile(const std::string& path, const std::map<std::string, std::vector<int64_t>>& shapes,
                          const std::vector<std::string>& profiles, nb::dict constant_inputs,
                          const std::string& precision, const std::vector<std::string>& keep_fp32,
                          const std::string& io_precision, std::optional<std::vector<std::string>> archs, bool fuse,
                          int64_t loop_scan_bound, const std::string& cpu_targets, const std::string& cpu_layout,
                          std::optional<nb::callable> log,
                          std::optional<nb::callable> kernel_progress) {
  OnnxCompileOptions o;
  o.shapes = shapes;
  o.profiles = profiles;
  std::vector<AnyArray> constants;  // alive until the compile ends
  for (auto [key, value] : constant_inputs) {
    std::string name;
    if (!nb::try_cast(key, name)) Raise(InvalidArgument("constant_inputs: a key is not an input name (str)"));
    AnyArray a;
    if (!nb::try_cast(value, a)) Raise(InvalidArgument("constant input '" + name + "' is not an array"));
    constants.push_back(a);
    o.constant_inputs.emplace(name, Take(ToView(a, "constant input '" + name + "'")));
  }
  o.precision = precision;
  o.keep_fp32 = keep_fp32;
  o.io_precision = io_precision;
  o.archs = std::move(archs);
  o.fuse = fuse;
  o.loop_scan_bound = loop_scan_bound;
  o.cpu_targets = cpu_targets;
  o.cpu_layout = cpu_layout;
  // The callbacks run on this thread, which holds no GIL during the compile: each call takes it,
  // and the first Python exception is kept for after the compile.
  std::string callback_error;
  auto call_python = [&](const nb::callable& fn, auto&&... args) {
    nb::gil_scoped_acquire gil;
    try {
      fn(std::forward<decltype(args)>(args)...);
    } catch (const nb::python_error& e) {
      if (callback_error.empty()) callback_error = e.what();
    }
  };
  if (log) o.log = [&](const std::string& line) { call_python(*log, Str(line)); };
  if (kernel_progress)
    o.kernel_progress = [&](int done, int total, int cached) { call_python(*kernel_progress, done, total, cached); };
  CompileReport report;
  Result<std::vector<uint8_t>> bytes = InvalidArgument("not run");
  {
    nb::gil_scoped_release release;
    bytes = CompileOnnx(path, o, &report);
  }
  if (!callback_error.empty()) Raise(InvalidArgument("a compile callback raised: " + callback_error));
  std::vector<uint8_t> artifact = Take(std::move(bytes));
  nb::dict r;
  nb::list entries;
  for (const CompileReport::Entry& e : report.entries)
    entries.append(nb::make_tuple(Str(e.name), e.instructions, Str(e.arena_bytes), e.lower_bound_bytes));
  r["entries"] = entries;
  r["total_ns"] = report.total_ns;
  r["ops_before_fusion"] = report.ops_before_fusion;
  r["ops_after_fusion"] = report.ops_after_fusion;
  r["kernels"] = report.kernels;
  r["compile_jobs"] = report.compile_jobs;
  r["cached_jobs"] = report.cached_jobs;
  r["nvrtc_ns"] = report.nvrtc_ns;
  r["log"] = Strs(report.log);
  return nb::make_tuple(nb::bytes(artifact.data(), artifact.size()), r);
}

}  // namespace
}  // namespace kiln::python

NB_MODULE(_kiln, m) {
  using namespace kiln;
  using namespace kiln::python;
  m.doc() = "Kiln's C++ runtime and compiler; use the kiln package, which wraps this module.";

  g_error = nb::steal(PyErr_NewExceptionWithDoc(
      "kiln.Error",
      "A Kiln error: .code is the kiln::Status code's name (INVALID_ARGUMENT, DATA_LOSS, ...), "
      ".message the message.",
      PyExc_RuntimeError, nullptr));
  m.attr("Error") = g_error;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      nb::object error = g_error(Str(e.code + ": " + e.message));
      error.attr("code") = Str(e.code);
      error.attr("message") = Str(e.message);
      PyErr_SetObject(g_error.ptr(), error.ptr());
    }
  });

  nb::class_<Model>(m, "Model")
      .def_static(
          "load_file",
          [](const std::string& path, std::optional<uint64_t> max_artifact_bytes, std::optional<uint64_t> max_context_bytes,
             std::vector<std::string> trusted_public_keys, nb::object weights_key) {
            return Take(Model::Load(
                path, Options(max_artifact_bytes, max_context_bytes, std::move(trusted_public_keys), weights_key)));
          },
          nb::arg("path"), nb::arg("max_artifact_bytes") = nb::none(), nb::arg("max_context_bytes") = nb::none(),
          nb::arg("trusted_public_keys") = std::vector<std::string>(), nb::arg("weights_key") = nb::none())
      .def_static(
          "load_bytes",
          [](nb::bytes data, std::optional<uint64_t> max_artifact_bytes, std::optional<uint64_t> max_context_bytes,
             std::vector<std::string> trusted_public_keys, nb::object weights_key) {
            const std::span<const uint8_t> span(static_cast<const uint8_t*>(data.data()), data.size());
            return Take(Model::Load(
                span, Options(max_artifact_bytes, max_context_bytes, std::move(trusted_public_keys), weights_key)));
          },
          nb::arg("data"), nb::arg("max_artifact_bytes") = nb::none(), nb::arg("max_context_bytes") = nb::none(),
          nb::arg("trusted_public_keys") = std::vector<std::string>(), nb::arg("weights_key") = nb::none())
      .def_prop_ro("inputs", [](const Model& mo) { return TensorInfos(mo.inputs()); })
      .def_prop_ro("outputs", [](const Model& mo) { return TensorInfos(mo.outputs()); })
      .def_prop_ro("entries", [](const Model& mo) { return EntryInfos(mo); })
      .def_prop_ro("precision", [](const Model& mo) { return Str(std::string(mo.precision())); })
      .def_prop_ro("format_version", &Model::format_version)
      .def_prop_ro("producer", [](const Model& mo) { return Str(std::string(mo.producer())); })
      .def_prop_ro("provenance",
                   [](const Model& mo) {
                     const ProvenanceInfo& p = mo.provenance();
                     nb::dict libraries;
                     for (const auto& [name, version] : p.libraries) libraries[Str(name)] = Str(version);
                     nb::dict d;
                     d["kiln_version"] = Str(p.kiln_version);
                     d["flags"] = Strs(p.flags);
                     d["model_sha256"] = Str(p.model_sha256);
                     d["libraries"] = libraries;
                     return d;
                   })
      .def_prop_ro("weights_bytes", &Model::weights_bytes);

  nb::class_<Context>(m, "Context")
      .def(nb::init<const Model&, const std::string&, int, int, bool, bool, int64_t, bool, int32_t>(), nb::arg("model"),
           nb::arg("device") = "auto", nb::arg("device_ordinal") = 0, nb::arg("cpu_threads") = 0,
           nb::arg("cuda_graphs") = false, nb::arg("profile") = false, nb::arg("max_loop_iterations") = 10'000'000,
           nb::arg("onednn") = true, nb::arg("warm_runs") = 5)
      .def("run", &Context::Run, nb::arg("inputs"), nb::arg("out") = nb::none())
      .def("warm", &Context::Warm, nb::arg("inputs"))
      .def("bind_cache", &Context::BindCache, nb::arg("caches"), nb::arg("capacity"))
      .def("stats", &Context::StatsDict)
      .def("close", &Context::Close)
      .def_prop_ro("closed", &Context::closed)
      .def_prop_ro("device", &Context::DeviceName)
      .def_prop_ro("device_note", &Context::DeviceNote)
      .def("memory_usage", &Context::MemoryUsage);

  m.def("compile_onnx_file", &CompileOnnxFile, nb::arg("path"), nb::arg("shapes"), nb::arg("profiles"),
        nb::arg("constant_inputs"), nb::arg("precision"), nb::arg("keep_fp32"), nb::arg("io_precision"),
        nb::arg("archs").none(), nb::arg("fuse"), nb::arg("loop_scan_bound"), nb::arg("cpu_targets"),
        nb::arg("cpu_layout"), nb::arg("log").none(),
        nb::arg("kernel_progress").none());
  m.attr("version") = KILN_VERSION_STRING;  // the headers' (kiln/version.h)
}
