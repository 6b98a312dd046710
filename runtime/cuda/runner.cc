#include "runtime/cuda/runner.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "runtime/cpu/run_instruction.h"
#include "runtime/kernels/widen.h"
#include "runtime/op_table.h"
#include "runtime/loop_rules.h"
#include "runtime/cuda/blas.h"
#include "runtime/cuda/dnn.h"
#include "runtime/cuda/dynamic_symbols.h"

namespace kiln::cuda {
namespace {

using std::to_string;

// Weights and kernel modules of one Model on one device, shared by every runner there.
struct DeviceModel {
  const Driver* drv = nullptr;
  Model model;  // keeps the mapped artifact (and the cache key) alive
  CUdeviceptr weights = 0;
  std::vector<CUmodule> modules;
  std::vector<CUfunction> functions;  // one per kernel of the artifact

  explicit DeviceModel(Model m) : model(std::move(m)) {}
  ~DeviceModel() {
    for (CUmodule m : modules)
      if (m) drv->ModuleUnload(m);
    if (weights) drv->MemFree(weights);
  }
};

// The image of kernel `k` this device runs: its own arch's cubin, else the PTX of the
// newest arch not above the device's (the driver JIT-compiles it).
const PreparedImage* PickImage(const PreparedKernel& k, const DeviceInfo& dev) {
  const int cc = dev.cc_major * 10 + dev.cc_minor;
  const PreparedImage* ptx = nullptr;
  int ptx_cc = -1;
  for (const PreparedImage& im : k.images) {
    const auto us = im.arch.find('_');
    if (us == std::string::npos) continue;
    const int arch = std::atoi(im.arch.c_str() + us + 1);
    if (!im.ptx && arch == cc) return &im;
    if (im.ptx && arch <= cc && arch > ptx_cc) ptx = &im, ptx_cc = arch;
  }
  return ptx;
}

Result<std::shared_ptr<DeviceModel>> LoadDeviceModel(const Driver& drv, const Model& model, const DeviceInfo& dev) {
  const Model::Impl& mi = model.impl();
  auto dm = std::make_shared<DeviceModel>(model);
  dm->drv = &drv;
  if (mi.weights_size) {
    Status st = Check(drv, drv.MemAlloc(&dm->weights, mi.weights_size), "cuMemAlloc (weights)");
    if (!st.ok()) return ResourceExhausted("cannot allocate " + to_string(mi.weights_size) + " bytes of weights on " +
                                           dev.name + ": " + std::string(st.message()));
    KILN_RETURN_IF_ERROR(Check(drv, drv.MemcpyHtoD(dm->weights, mi.weights, mi.weights_size), "cuMemcpyHtoD (weights)"));
  }
  for (size_t k = 0; k < mi.launch.size(); ++k) {
    const PreparedKernel& pk = mi.launch[k];
    const PreparedImage* im = PickImage(pk, dev);
    if (im == nullptr) {
      std::string archs;
      for (const PreparedImage& i : pk.images) archs += (archs.empty() ? "" : ", ") + i.arch;
      return Incompatible("kernel " + to_string(k) + " '" + pk.name + "' has no cubin for " + dev.arch() + " (" +
                          dev.name + ") and no PTX it can JIT; the artifact has: " +
                          (archs.empty() ? "no images (compiled with --arch none)" : archs) +
                          ". Recompile with --arch " + dev.arch());
    }
    CUmodule module = nullptr;
    KILN_RETURN_IF_ERROR(Check(drv, drv.ModuleLoadData(&module, im->data),
                               "cuModuleLoadData (kernel '" + pk.name + "', " + im->arch + ")"));
    dm->modules.push_back(module);
    CUfunction fn = nullptr;
    KILN_RETURN_IF_ERROR(Check(drv, drv.ModuleGetFunction(&fn, module, pk.name.c_str()),
                               "cuModuleGetFunction ('" + pk.name + "')"));
    dm->functions.push_back(fn);
  }
  return dm;
}

// One upload per (artifact, device) while any runner uses it.
Result<std::shared_ptr<DeviceModel>> SharedDeviceModel(const Driver& drv, const Model& model, const DeviceInfo& dev) {
  static std::mutex mu;
  static std::map<std::pair<const Model::Impl*, int>, std::weak_ptr<DeviceModel>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(&model.impl(), dev.ordinal);
  if (auto it = cache.find(key); it != cache.end())
    if (auto dm = it->second.lock()) return dm;
  KILN_ASSIGN_OR_RETURN(auto dm, LoadDeviceModel(drv, model, dev));
  cache[key] = dm;
  return dm;
}

// A device buffer that only grows.
struct DeviceBuffer {
  const Driver* drv = nullptr;
  CUdeviceptr ptr = 0;
  uint64_t bytes = 0;
  Status Reserve(uint64_t want, const char* what) {
    if (want <= bytes) return Status::Ok();
    if (ptr) drv->MemFree(ptr), ptr = 0, bytes = 0;
    Status st = Check(*drv, drv->MemAlloc(&ptr, want), what);
    if (!st.ok()) return ResourceExhausted("cannot allocate " + to_string(want) + " bytes for the " + what + ": " +
                                           std::string(st.message()));
    bytes = want;
    return Status::Ok();
  }
  void Free() {
    if (ptr) drv->MemFree(ptr);
    ptr = 0;
    bytes = 0;
  }
  ~DeviceBuffer() { Free(); }
};

// Check(), with the message built only on failure (a steady-state run builds no string).
template <typename What>
Status CheckLazy(const Driver& drv, CUresult result, What what) {
  return result == CUDA_SUCCESS ? Status::Ok() : Check(drv, result, what());
}

uint64_t TensorBytes(const cpu::TensorRef& r) { return static_cast<uint64_t>(r.num_elements) * DTypeSize(r.dtype); }

int64_t DimValue(int64_t d, std::span<const int64_t> sizes) { return d >= 0 ? d : sizes[-(d + 1)]; }

}  // namespace

struct Runner::State {
  const Driver* drv = nullptr;
  DeviceInfo dev;
  CUcontext ctx = nullptr;
  std::shared_ptr<DeviceModel> dm;
  DeviceBuffer arena, staging, symbolic, err;
  CUevent start = nullptr, stop = nullptr;
  bool timing = false;  // events recorded by the last Execute
  std::vector<std::vector<uint8_t>> host_inputs;  // host copies of device inputs, for CPU fallbacks
  // Per entry and arena tensor: the instruction that writes it and the last that reads it (the
  // instruction count for an entry output), from its memory plan's liveness; -1 elsewhere.
  struct Lifetimes {
    std::vector<int32_t> written, last_read;
  };
  std::vector<Lifetimes> lifetimes;
  std::vector<int32_t> region_inputs;  // tensors a CPU fallback region copied to the host
  std::vector<CUdeviceptr> input_ptrs;            // device address of each model input this call
  std::vector<CUdeviceptr> ptr_args;              // kernel argument storage
  std::vector<long long> size_args;
  std::vector<void*> params;
  std::vector<const fused::Program*> checked;  // programs with index checks launched since the last sync
  // Library objects: null when the library is missing (its ops then run on the CPU).
  std::unique_ptr<BlasLibrary> blas;
  std::unique_ptr<DnnLibrary> dnn;
  DeviceBuffer library_ws;  // workspace of cuBLASLt / cuDNN calls, planned once (the caps)
  // Every device buffer above, so that each gets the driver and is freed.
  std::array<DeviceBuffer*, 5> Buffers() { return {&arena, &staging, &symbolic, &err, &library_ws}; }
  std::string library_note;
  std::vector<DeviceTensor> dts;  // operands of the current library call
  // Per-instruction events when profiling: event k is recorded after instruction k - 1.
  bool profile = false;
  std::vector<CUevent> marks;
  size_t marked = 0;  // events recorded by the last Execute
  // Profiling a run-time Loop: the instructions' times in the iterations before the last
  // (summed when the loop jumps back, since the next iteration records their events again),
  // and per kiln.LoopBegin whether its last run jumped back (then its own time is all in
  // loop_ns, its events having been recorded again for the body).
  std::vector<int64_t> loop_ns;
  std::vector<uint8_t> begin_jumped;
  // CUDA graphs, keyed by entry, arena and input addresses and the bound symbols.
  bool graphs = false;
  std::map<std::vector<int64_t>, CUgraphExec> graph_cache;
  std::map<std::vector<int64_t>, int> graph_seen;  // shapes run once, uncaptured
  std::vector<int64_t> graph_key;                  // this call's key (its storage)
  std::vector<uint64_t> staging_offsets;           // this call's input staging offsets
  bool capturing = false;                          // the stream is capturing this call's work
  CUstream own_stream = nullptr;                   // ContextOptions::own_stream
  // Per tensor of the running entry: a predicate's condition as read this call (0 or 1), or
  // -1 before it is read (again after each iteration of a run-time Loop).
  std::vector<int8_t> conditions;
  // The run-time Loops running (kiln.LoopBegin ... kiln.LoopEnd, innermost last), controlled
  // from the host (LoopControl): where each began, the iterations it ran, its trip count (M),
  // and whether its body was skipped; the host copies of the scalars it writes.
  struct LoopFrame {
    size_t begin = 0;
    int64_t ran = 0, trips = 0;
    bool skipped = false;
    int64_t iteration = 0;  // staged for the copy to the device
    uint8_t condition = 0;
  };
  std::vector<LoopFrame> loops;
  int64_t loop_iterations = 0;      // started this Run, by every loop
  int64_t max_loop_iterations = 0;  // ContextOptions::max_loop_iterations

  ~State() {
    if (drv == nullptr) return;
    // Device memory and library handles go before the context reference that keeps them valid.
    for (auto& [key, exec] : graph_cache) drv->GraphExecDestroy(exec);
    for (CUevent ev : marks) drv->EventDestroy(ev);
    blas.reset();
    dnn.reset();
    for (DeviceBuffer* b : Buffers()) b->Free();
    if (start) drv->EventDestroy(start);
    if (stop) drv->EventDestroy(stop);
    if (own_stream) drv->StreamDestroy(own_stream);
    dm.reset();
    if (ctx) drv->DevicePrimaryCtxRelease(dev.device);
  }

  // Device address of tensor `t` of entry `pe` at its binding `s`: an arena tensor at its plan
  // offset in the device arena.
  CUdeviceptr DevicePtr(const PreparedEntry& pe, const EntryState& s, int32_t t) const {
    const PreparedTensor& pt = pe.tensors[t];
    switch (pt.storage) {
      case StorageKind::kArena: return arena.ptr + static_cast<CUdeviceptr>(s.arena_offsets[t]);
      case StorageKind::kWeight:
        return dm->weights + dm->model.impl().weight_table[pt.index].offset;
      case StorageKind::kInput: return input_ptrs[pt.index];
      case StorageKind::kSymbolic: return symbolic.ptr + static_cast<CUdeviceptr>(pt.values_begin) * 8;
      case StorageKind::kAbsent: break;
    }
    return 0;
  }

  // Whether instruction `pi` runs: each predicate's condition (a run-time If's) is copied to
  // the host at its first use in a call, which waits for the stream: the cost of a run-time
  // branch on a GPU. Errors: kDeviceError from the copy, kDataLoss for a condition that is not
  // one element.
  Result<bool> Runs(const PreparedEntry& pe, const PreparedInstruction& pi, const EntryState& s, CUstream stream) {
    for (size_t k = 0; k < pi.when.size(); ++k) {
      const int32_t t = pi.when[k].tensor;
      const int64_t elements = s.refs[t].num_elements;
      if (conditions[t] < 0 && elements == 1) {
        uint8_t byte = 0;
        KILN_RETURN_IF_ERROR(CheckLazy(*drv, drv->MemcpyDtoHAsync(&byte, DevicePtr(pe, s, t), 1, stream),
                                       [&] { return pi.label + ": copy its condition to the host"; }));
        KILN_RETURN_IF_ERROR(CheckLazy(*drv, drv->StreamSynchronize(stream),
                                       [&] { return pi.label + ": wait for its condition"; }));
        conditions[t] = byte != 0 ? 1 : 0;
      }
      KILN_ASSIGN_OR_RETURN(bool holds, pi.Holds(k, elements, static_cast<uint8_t>(conditions[t] > 0)));
      if (!holds) return false;
    }
    return true;
  }

  // The value of one-element tensor `t` of `dtype` (8 bytes for int64, 1 for bool) on the host:
  // a symbolic value, a weight or a host input directly, anything else copied from the device
  // (one wait). Errors: kDataLoss when it is not one element of `dtype`, kDeviceError.
  Status ReadScalar(const PreparedEntry& pe, const EntryState& es, std::span<const TensorView> inputs, int32_t t,
                    DType dtype, CUstream stream, const std::string& label, void* out) const {
    const cpu::TensorRef& r = es.refs[t];
    if (r.dtype != dtype || r.num_elements != 1)
      return DataLoss(label + ": " + pe.TensorName(t) + " is " + std::string(DTypeName(r.dtype)) + " of " +
                      to_string(r.num_elements) + " elements, not one " + std::string(DTypeName(dtype)));
    const size_t bytes = DTypeSize(dtype);
    const PreparedTensor& pt = pe.tensors[t];
    const void* host = nullptr;
    if (pt.storage == StorageKind::kSymbolic && dtype == DType::kInt64) host = es.symbolic.data() + pt.values_begin;
    if (pt.storage == StorageKind::kWeight)
      host = dm->model.impl().weights + dm->model.impl().weight_table[pt.index].offset;
    if (pt.storage == StorageKind::kInput && inputs[pt.index].memory != MemoryKind::kDevice) host = inputs[pt.index].data;
    if (host != nullptr) {
      std::memcpy(out, host, bytes);
      return Status::Ok();
    }
    KILN_RETURN_IF_ERROR(CheckLazy(*drv, drv->MemcpyDtoHAsync(out, DevicePtr(pe, es, t), bytes, stream),
                                   [&] { return label + ": copy " + pe.TensorName(t) + " to the host"; }));
    return CheckLazy(*drv, drv->StreamSynchronize(stream), [&] { return label + ": wait for the device"; });
  }

  // Enqueues a copy of tensor `from` into tensor `to` at byte `offset` (a row of a scan output),
  // or into all of `to` (offset 0, `whole`): the same dtype, and the same element count when
  // whole. kDataLoss otherwise, naming both.
  Status CopyTensor(const PreparedEntry& pe, const EntryState& es, int32_t from, int32_t to, uint64_t offset,
                    bool whole, CUstream stream, const std::string& label) const {
    const cpu::TensorRef &a = es.refs[from], &b = es.refs[to];
    const uint64_t bytes = TensorBytes(a);
    if (a.dtype != b.dtype || (whole ? a.num_elements != b.num_elements : offset + bytes > TensorBytes(b)))
      return DataLoss(label + ": " + pe.TensorName(from) + " (" + std::string(DTypeName(a.dtype)) + ", " +
                      to_string(a.num_elements) + " elements) does not fit " + pe.TensorName(to) + " (" +
                      std::string(DTypeName(b.dtype)) + ", " + to_string(b.num_elements) + " elements) at byte " +
                      to_string(offset));
    if (bytes == 0 || from == to) return Status::Ok();
    return CheckLazy(*drv,
                     drv->MemcpyDtoDAsync(DevicePtr(pe, es, to) + static_cast<CUdeviceptr>(offset),
                                          DevicePtr(pe, es, from), bytes, stream),
                     [&] { return label + ": copy " + pe.TensorName(from) + " on the device"; });
  }

  // Runs instruction `k` of entry `pe`, a run-time Loop's kiln.LoopBegin or kiln.LoopEnd
  // (runtime/cpu/loop.cc says what each does), from the host: the trip count M and the
  // conditions are read on the host (the body's condition once per iteration: one copy to the
  // host and one wait), and the copies between the body's tensors, the iteration number and
  // the condition are enqueued on the device, so the body's instructions run where they would
  // outside a loop. *next: the instruction to run after it. A loop that ends sets its run-time
  // dim (the iterations, for its scan outputs), and *rebound says so.
  Status LoopControl(const PreparedEntry& pe, size_t k, EntryState& es, std::span<const TensorView> inputs,
                     CUstream stream, RuntimeDimSetter& runtime_dims, size_t* next, bool* rebound) {
    const PreparedInstruction& pi = pe.instructions[k];
    const int32_t* ops = pe.operands.data() + pi.operands_begin;
    const size_t pair = static_cast<size_t>(pe.loop_pair[k]);
    auto start_iteration = [&] { return loop::StartIteration(pi.label, &loop_iterations, max_loop_iterations); };
    auto write_scalars = [&](const LoopFrame& f, int32_t i, int32_t c) -> Status {
      KILN_RETURN_IF_ERROR(CheckLazy(*drv, drv->MemcpyHtoDAsync(DevicePtr(pe, es, i), &f.iteration, 8, stream),
                                     [&] { return pi.label + ": copy the iteration number to the device"; }));
      return CheckLazy(*drv, drv->MemcpyHtoDAsync(DevicePtr(pe, es, c), &f.condition, 1, stream),
                       [&] { return pi.label + ": copy the condition to the device"; });
    };
    *rebound = false;
    if (pair > k) {  // LoopBegin(M?, cond?, initial...) -> (iteration_num, cond_in, v...)
      LoopFrame f;
      f.begin = k;
      f.trips = INT64_MAX;
      uint8_t go = 1;
      if (ops[0] >= 0) KILN_RETURN_IF_ERROR(ReadScalar(pe, es, inputs, ops[0], DType::kInt64, stream, pi.label, &f.trips));
      if (ops[1] >= 0) KILN_RETURN_IF_ERROR(ReadScalar(pe, es, inputs, ops[1], DType::kBool, stream, pi.label, &go));
      const int32_t* outs = ops + pi.num_inputs;
      for (int32_t j = 2; j < pi.num_inputs; ++j)
        KILN_RETURN_IF_ERROR(CopyTensor(pe, es, ops[j], outs[j], 0, true, stream, pi.label));
      f.condition = go != 0 ? 1 : 0;
      KILN_RETURN_IF_ERROR(write_scalars(f, outs[0], outs[1]));
      f.skipped = !loop::Again(go != 0, 0, f.trips);
      if (!f.skipped) KILN_RETURN_IF_ERROR(start_iteration());
      loops.push_back(f);
      *next = f.skipped ? pair : k + 1;
      return Status::Ok();
    }
    // LoopEnd(M?, iteration_num, cond_in, v..., cond_out, v_next..., scan...) -> (v_final..., stacked...)
    if (loops.empty() || loops.back().begin != pair)
      return Internal(pi.label + ": reached without its kiln.LoopBegin");
    LoopFrame& f = loops.back();
    // Its stacked outputs have the room of the bound again when an outer loop runs it anew.
    if (const int32_t dim = pe.runtime_dim_of[k]; dim >= 0)
      KILN_RETURN_IF_ERROR(runtime_dims.Reset(dim, rebound).WithContext(pi.label));
    KILN_ASSIGN_OR_RETURN(const loop::EndOperands layout,
                          loop::EndLayout(pi.label, pi.attrs.GetInt("carried", -1), static_cast<size_t>(pi.num_inputs),
                                          static_cast<size_t>(pi.num_outputs)));
    const int64_t carried = layout.carried, scans = layout.scans;
    const int32_t* values = ops + layout.kValues;
    const int32_t cond_out = ops[layout.cond_out()];
    const int32_t* results = ops + layout.results();
    const int32_t* parts = ops + layout.parts();
    const int32_t* outs = ops + pi.num_inputs;
    if (!f.skipped) {
      uint8_t go = 0;
      KILN_RETURN_IF_ERROR(ReadScalar(pe, es, inputs, cond_out, DType::kBool, stream, pi.label, &go));
      for (int64_t j = 0; j < scans; ++j) {
        const int32_t stacked = outs[carried + j];
        const cpu::TensorRef& y = es.refs[stacked];
        if (const int64_t rows = y.rank < 1 ? 0 : y.dims[0]; f.ran >= rows) {
          Status full = loop::NoRow(pi.label, f.ran, j, rows, pi.attrs.GetInt("scan_bound", 0));
          const int32_t dim = pe.runtime_dim_of[k];
          return dim >= 0 ? runtime_dims.Grow(dim, std::move(full)) : full;
        }
        KILN_RETURN_IF_ERROR(CopyTensor(pe, es, parts[j], stacked, static_cast<uint64_t>(f.ran) * TensorBytes(es.refs[parts[j]]),
                                        false, stream, pi.label));
      }
      for (int64_t j = 0; j < carried; ++j)
        KILN_RETURN_IF_ERROR(CopyTensor(pe, es, results[j], values[j], 0, true, stream, pi.label));
      f.ran += 1;
      f.iteration = f.ran;
      f.condition = go != 0 ? 1 : 0;
      KILN_RETURN_IF_ERROR(write_scalars(f, ops[layout.kIteration], ops[layout.kCondition]));
      if (loop::Again(go != 0, f.ran, f.trips)) {
        KILN_RETURN_IF_ERROR(start_iteration());
        // The body's conditions are read again in the next iteration.
        std::fill(conditions.begin(), conditions.end(), int8_t{-1});
        *next = pair + 1;
        return Status::Ok();
      }
    }
    for (int64_t j = 0; j < carried; ++j)
      KILN_RETURN_IF_ERROR(CopyTensor(pe, es, values[j], outs[j], 0, true, stream, pi.label));
    const int64_t ran = f.ran;
    loops.pop_back();
    *next = k + 1;
    if (const int32_t dim = pe.runtime_dim_of[k]; dim >= 0) {
      KILN_RETURN_IF_ERROR(runtime_dims.Set(dim, ran).WithContext(pi.label));
      *rebound = true;
    } else {
      for (int64_t j = 0; j < scans; ++j)
        KILN_RETURN_IF_ERROR(loop::CheckIterations(pi.label, j, es.refs[outs[carried + j]].dims[0], ran));
    }
    return Status::Ok();
  }

  // Profiling: the event after run-time Loop control instruction `i`, which goes on at `next`. A
  // jump back (a LoopEnd that runs its body again) waits for the stream, adds this iteration's
  // times of the body's instructions and of the LoopEnd to State::loop_ns (and the LoopBegin's
  // own time, at its first jump), and records the body's start again for the next iteration: so
  // each instruction's profile is its time summed over the iterations, as on the CPU backend.
  Status ProfileLoopControl(const PreparedEntry& pe, size_t i, size_t next, CUstream stream) {
    State& s = *this;
    const Driver& drv = *s.drv;
    KILN_RETURN_IF_ERROR(Check(drv, drv.EventRecord(s.marks[i + 1], stream), "cuEventRecord (profile)"));
    if (static_cast<size_t>(pe.loop_pair[i]) > i) s.begin_jumped[i] = 0;  // a LoopBegin starts its loop
    if (next > i) return Status::Ok();
    const size_t b = next - 1;  // the LoopBegin
    KILN_RETURN_IF_ERROR(Check(drv, drv.StreamSynchronize(stream), "cuStreamSynchronize (profile)"));
    auto add = [&](size_t k) {
      float ms = 0;
      if (drv.EventElapsedTime(&ms, s.marks[k], s.marks[k + 1]) == CUDA_SUCCESS) s.loop_ns[k] += static_cast<int64_t>(ms * 1e6);
    };
    if (!s.begin_jumped[b]) add(b);
    s.begin_jumped[b] = 1;
    for (size_t k = b + 1; k <= i; ++k)
      if (!s.begin_jumped[k]) add(k);  // an inner loop's LoopBegin that jumped has its time summed already
    return Check(drv, drv.EventRecord(s.marks[b + 1], stream), "cuEventRecord (profile)");
  }

  enum class Lib : uint8_t { kNone, kBlas, kDnn };
  static const char* LibName(Lib lib) { return lib == Lib::kBlas ? "cuBLASLt" : "cuDNN"; }
  // The library object of `lib`: null when that library is missing here.
  Library* Of(Lib lib) const {
    if (lib == Lib::kBlas) return blas.get();
    if (lib == Lib::kDnn) return dnn.get();
    return nullptr;
  }

  // The library each instruction of an entry goes to at one binding of its symbols, and, for
  // an instruction its artifact names a library for that will not run it, why (the CPU
  // backend then runs it: Stats::last_fallbacks). Decided at the first run of a binding and
  // kept, so a steady-state run asks no library and builds no string.
  struct Decisions {
    bool valid = false;
    std::vector<int64_t> binding;
    std::vector<Lib> lib;
    std::vector<std::string> why;  // "" where the instruction runs where its artifact says
    size_t workspace = 0;  // library workspace the instructions need (0: no library instruction)
  };
  std::vector<Decisions> decisions;  // per entry

  // The operands of instruction `pi` as device tensors, in `dts`.
  void DeviceOperands(const PreparedEntry& pe, const PreparedInstruction& pi, const EntryState& s) {
    const int32_t* ops = pe.operands.data() + pi.operands_begin;
    dts.assign(static_cast<size_t>(pi.num_inputs + pi.num_outputs), DeviceTensor{});
    for (int32_t i = 0; i < pi.num_inputs + pi.num_outputs; ++i) {
      if (ops[i] < 0) continue;
      const cpu::TensorRef& r = s.refs[ops[i]];
      dts[i] = {DevicePtr(pe, s, ops[i]), r.dtype, r.rank, r.dims, r.num_elements};
    }
  }

  // Which library the artifact names for `pi` (runtime/model_impl.h's executor); an artifact
  // that names none (written before executors were recorded per library) falls back on the
  // op table's library column (runtime/op_table.h), which the compiler's executors stage reads.
  static Lib Named(const PreparedInstruction& pi) {
    std::string_view library = pi.executor;
    if (library.empty() && pi.kernel != nullptr)
      if (const OpInfo* info = FindOpInfo(pi.kernel->op)) library = LibraryName(info->library);
    if (library == LibraryName(OpLibrary::kCublasLt)) return Lib::kBlas;
    if (library == LibraryName(OpLibrary::kCudnn)) return Lib::kDnn;
    return Lib::kNone;
  }

  // Decides every instruction of entry `e` for the current binding (once per binding).
  Decisions& Decide(int32_t e, const PreparedEntry& pe, const EntryState& s) {
    Decisions& d = decisions[static_cast<size_t>(e)];
    if (d.valid && d.binding == s.binding) return d;
    d.valid = true;
    d.binding = s.binding;
    d.lib.assign(pe.instructions.size(), Lib::kNone);
    d.why.assign(pe.instructions.size(), std::string());
    d.workspace = 0;
    for (size_t i = 0; i < pe.instructions.size(); ++i) {
      const PreparedInstruction& pi = pe.instructions[i];
      const Lib named = Named(pi);
      if (pi.program || named == Lib::kNone) continue;
      const char* library = LibName(named);
      const Library* lib = Of(named);
      if (lib == nullptr) {
        d.why[i] = std::string(library) + " is unavailable";
        continue;
      }
      DeviceOperands(pe, pi, s);
      const std::string_view op = pi.kernel->op;
      const Status accepted = lib->Accepts(op, pi.attrs, Ins(pi), Outs(pi));
      if (!accepted.ok()) {
        d.why[i] = std::string(library) + " refused it: " + std::string(accepted.message());
        continue;
      }
      d.lib[i] = named;
      const size_t ws = lib->Workspace(op, pi.attrs, Ins(pi), Outs(pi));
      d.workspace = std::max({d.workspace, ws, size_t{256}});
    }
    return d;
  }
  std::span<const DeviceTensor> Ins(const PreparedInstruction& pi) const {
    return {dts.data(), static_cast<size_t>(pi.num_inputs)};
  }
  std::span<const DeviceTensor> Outs(const PreparedInstruction& pi) const {
    return {dts.data() + pi.num_inputs, static_cast<size_t>(pi.num_outputs)};
  }

  // Runs instruction `i` on the library Decide chose for it; false in *ran when it has none,
  // or when the library finds no algorithm at run time: then the decision changes to the CPU
  // (with the library's reason) for this binding's later runs.
  Status RunOnLibrary(const PreparedEntry& pe, size_t i, Decisions& d, const EntryState& s, CUstream stream, bool* ran) {
    *ran = false;
    const Lib lib = d.lib[i];
    if (lib == Lib::kNone) return Status::Ok();
    const PreparedInstruction& pi = pe.instructions[i];
    DeviceOperands(pe, pi, s);
    const std::string_view op = pi.kernel->op;
    Library* library = Of(lib);
    const size_t ws = library->Workspace(op, pi.attrs, Ins(pi), Outs(pi));
    KILN_RETURN_IF_ERROR(library_ws.Reserve(std::max<size_t>(ws, 256), "cuBLASLt/cuDNN workspace"));
    const OpCall call{pi.attrs, Ins(pi), Outs(pi), stream, library_ws.ptr, static_cast<size_t>(library_ws.bytes)};
    Status st = library->Run(op, call, pi.label);
    if (st.code() == StatusCode::kUnimplemented) {  // no algorithm for it at run time: the CPU runs it
      d.lib[i] = Lib::kNone;
      d.why[i] = std::string(LibName(lib)) + " refused it when it ran: " +
                 std::string(st.message());
      return Status::Ok();
    }
    if (!st.ok()) return WithStreamError(std::move(st), stream);
    *ran = true;
    return Status::Ok();
  }

  // A library call on a context that an earlier kernel's fault poisoned fails with the
  // library's own status (CUDNN_STATUS_EXECUTION_FAILED, CUBLAS_STATUS_EXECUTION_FAILED), which
  // does not say what happened; the driver's sticky error, which a wait on the stream returns,
  // does: it is added to the message. Not while capturing (a wait would end the capture).
  Status WithStreamError(Status st, CUstream stream) const {
    if (st.code() != StatusCode::kDeviceError || capturing) return st;
    const CUresult r = drv->StreamSynchronize(stream);
    if (r == CUDA_SUCCESS) return st;
    return Status(st.code(), std::string(st.message()) + "; " +
                                 std::string(Check(*drv, r, "the stream's earlier work failed").message()));
  }

  // True when every instruction of the entry runs on the device (a generated kernel or a
  // library op the library accepts): only then can the entry be captured as a graph.
  static bool DeviceOnly(const PreparedEntry& pe, const Decisions& d) {
    for (size_t i = 0; i < pe.instructions.size(); ++i)
      if (!pe.instructions[i].program && d.lib[i] == Lib::kNone) return false;
    return true;
  }

  Status Launch(const PreparedEntry& pe, const PreparedInstruction& pi, const EntryState& s, CUstream stream) {
    const Model::Impl& mi = dm->model.impl();
    const size_t k = static_cast<size_t>(pi.program - mi.programs.data());
    const PreparedKernel& pk = mi.launch[k];
    const fused::Program& p = *pi.program;
    if (!p.checks.empty() && std::find(checked.begin(), checked.end(), &p) == checked.end()) checked.push_back(&p);
    std::span<const int64_t> sizes(s.sizes.data() + pi.sizes_begin, static_cast<size_t>(pi.num_sizes));
    int64_t rows = 1, total = 1;
    for (size_t a = 0; a < p.domain.size(); ++a) {
      const int64_t d = DimValue(p.domain[a], sizes);
      total *= d;
      if (!(p.reduce_axes >> a & 1)) rows *= d;
    }
    if (total == 0 && !(pk.launch_kind == 1 && rows > 0)) return Status::Ok();
    const int64_t cap = std::max<int64_t>(1, static_cast<int64_t>(dev.sm_count) * 32);
    const int64_t per_block = pk.launch_kind == 1 ? 1 : static_cast<int64_t>(pk.block) * pk.vector;
    const int64_t work = pk.launch_kind == 1 ? rows : total;
    const unsigned grid = static_cast<unsigned>(std::clamp<int64_t>((work + per_block - 1) / per_block, 1, cap));
    const int32_t* ops = pe.operands.data() + pi.operands_begin;
    ptr_args.clear();
    size_args.clear();
    params.clear();
    for (int32_t i = 0; i < pi.num_inputs + pi.num_outputs; ++i) ptr_args.push_back(DevicePtr(pe, s, ops[i]));
    for (int64_t v : sizes) size_args.push_back(static_cast<long long>(v));
    ptr_args.push_back(err.ptr);
    // Parameter order: inputs, outputs, sizes, err (compiler/codegen/cuda_source.h).
    for (int32_t i = 0; i < pi.num_inputs + pi.num_outputs; ++i) params.push_back(&ptr_args[i]);
    for (long long& v : size_args) params.push_back(&v);
    params.push_back(&ptr_args.back());
    return CheckLazy(*drv,
                     drv->LaunchKernel(dm->functions[k], grid, 1, 1, static_cast<unsigned>(pk.block), 1, 1, 0, stream,
                                       params.data(), nullptr),
                     [&] { return pi.label + ": cuLaunchKernel"; });
  }

  // Whether instruction `i` runs on the host under decisions `d`: not a launched generated
  // kernel, and no library takes it.
  bool OnHost(const PreparedEntry& pe, const Decisions& d, size_t i) const {
    return !(pe.instructions[i].program && !dm->functions.empty()) && d.lib[i] == Lib::kNone;
  }

  // Runs instructions [begin, end) of entry `e` on the CPU backend as one CPU fallback region:
  // the tensors the region reads from the device come to the host (arena tensors into the host
  // arena at their offsets, device model inputs into host copies), one wait, the CPU kernels in
  // order, then the region's outputs that are read after it (or are the entry's outputs) go back
  // to the device arena, and one wait before the host arena is used again. Tensors that live
  // and die inside the region never cross. The memory plan makes this safe: a tensor read
  // after the region is live to its end, so nothing the region writes shares its bytes.
  // The host arena and workspace are placed for the binding at its first region (a context
  // whose entries never fall back holds none).
  Status FallbackRegion(int32_t e, const PreparedEntry& pe, size_t begin, size_t end, EntryState& s,
                        cpu::HostMemory& host, uint64_t max_context_bytes, std::span<const TensorView> inputs,
                        CUstream stream, RuntimeDimSetter& runtime_dims) {
    const Lifetimes& life = lifetimes[static_cast<size_t>(e)];
    const std::string& where = pe.instructions[begin].label;  // errors only
    // CPU fallback instructions run on the calling thread: a workspace for one.
    if (!host.Holds(s)) KILN_RETURN_IF_ERROR(host.Place(pe, s, /*threads=*/1, max_context_bytes));
    void* const workspace = host.workspace();
    const size_t workspace_bytes = static_cast<size_t>(host.workspace_bytes());
    region_inputs.clear();
    auto copied = [&](int32_t t) { return std::find(region_inputs.begin(), region_inputs.end(), t) != region_inputs.end(); };
    for (size_t k = begin; k < end; ++k) {
      const PreparedInstruction& pi = pe.instructions[k];
      const int32_t* ops = pe.operands.data() + pi.operands_begin;
      cpu::TensorRef* refs = s.operands.data() + pi.operands_begin;
      for (int32_t i = 0; i < pi.num_inputs; ++i) {
        const int32_t t = ops[i];
        if (t < 0) continue;
        const PreparedTensor& pt = pe.tensors[t];
        if (pt.storage == StorageKind::kArena) {
          if (life.written[t] >= static_cast<int32_t>(begin) || TensorBytes(refs[i]) == 0 || copied(t)) continue;
          KILN_RETURN_IF_ERROR(CheckLazy(*drv,
                                         drv->MemcpyDtoHAsync(refs[i].data, DevicePtr(pe, s, t),
                                                              TensorBytes(refs[i]), stream),
                                         [&] { return pi.label + ": copy an input to the host"; }));
          region_inputs.push_back(t);
        } else if (pt.storage == StorageKind::kInput && inputs[pt.index].memory == MemoryKind::kDevice) {
          std::vector<uint8_t>& h = host_inputs[pt.index];
          if (!copied(t)) {
            h.resize(TensorBytes(refs[i]) + 1);
            KILN_RETURN_IF_ERROR(CheckLazy(
                *drv, drv->MemcpyDtoHAsync(h.data(), input_ptrs[pt.index], TensorBytes(refs[i]), stream),
                [&] { return pi.label + ": copy a device input to the host"; }));
            region_inputs.push_back(t);
          }
          refs[i].data = h.data();
        }
      }
    }
    KILN_RETURN_IF_ERROR(CheckLazy(*drv, drv->StreamSynchronize(stream), [&] { return where + ": wait for the device"; }));
    for (size_t k = begin; k < end; ++k) {
      const PreparedInstruction& pi = pe.instructions[k];
      cpu::TensorRef* refs = s.operands.data() + pi.operands_begin;
      const int32_t dim = pe.runtime_dim_of[k];
      int64_t size = 0;
      const cpu::KernelCall call{pi.attrs,
                                 {refs, static_cast<size_t>(pi.num_inputs)},
                                 {refs + pi.num_inputs, static_cast<size_t>(pi.num_outputs)},
                                 workspace,
                                 workspace_bytes,
                                 nullptr,
                                 dim >= 0 ? &size : nullptr};
      Status st = cpu::RunInstruction(pi, call, s.sizes);
      if (st.ok() && dim >= 0) {
        // The last instruction of its region: the outputs go to the device at the size found,
        // from the host arena placed again for the new binding (at the same offsets).
        st = runtime_dims.Set(dim, size);
        if (st.ok() && !host.Holds(s)) st = host.Place(pe, s, /*threads=*/1, max_context_bytes);
      }
      if (!st.ok()) return st.WithContext(pi.label + " (CPU fallback)");
    }
    for (size_t k = begin; k < end; ++k) {
      const PreparedInstruction& pi = pe.instructions[k];
      const int32_t* ops = pe.operands.data() + pi.operands_begin;
      const cpu::TensorRef* refs = s.operands.data() + pi.operands_begin;
      for (int32_t o = 0; o < pi.num_outputs; ++o) {
        const int32_t t = ops[pi.num_inputs + o];
        const cpu::TensorRef& r = refs[pi.num_inputs + o];
        if (t < 0 || TensorBytes(r) == 0 || life.last_read[t] < static_cast<int32_t>(end)) continue;
        KILN_RETURN_IF_ERROR(
            CheckLazy(*drv, drv->MemcpyHtoDAsync(DevicePtr(pe, s, t), r.data, TensorBytes(r), stream),
                      [&] { return pi.label + ": copy an output to the device"; }));
      }
    }
    // The host arena is reused by the next region: its data must reach the device first.
    return CheckLazy(*drv, drv->StreamSynchronize(stream), [&] { return where + ": wait for the device"; });
  }
};

Runner::Runner(std::unique_ptr<State> state) : s_(std::move(state)) {}
Runner::~Runner() = default;

const DeviceInfo& Runner::device() const { return s_->dev; }
const std::string& Runner::library_note() const { return s_->library_note; }
CUstream Runner::default_stream() const { return s_->own_stream; }
uint64_t Runner::device_bytes() const {
  const State& s = *s_;
  return s.arena.bytes + s.staging.bytes + s.symbolic.bytes + s.err.bytes + s.library_ws.bytes +
         s.dm->model.impl().weights_size;
}
uint64_t Runner::host_bytes() const {
  uint64_t n = 0;
  for (const std::vector<uint8_t>& h : s_->host_inputs) n += h.capacity();
  return n;
}

Result<std::unique_ptr<Runner>> Runner::Create(const Model& model, int ordinal, bool cuda_graphs, bool profile,
                                               int64_t max_loop_iterations, bool own_stream) {
  KILN_ASSIGN_OR_RETURN(const Driver* drv, LoadDriver());
  auto st = std::make_unique<State>();
  st->drv = drv;
  st->graphs = cuda_graphs;
  st->profile = profile;
  st->max_loop_iterations = max_loop_iterations;
  for (DeviceBuffer* b : st->Buffers()) b->drv = drv;
  KILN_ASSIGN_OR_RETURN(st->dev, QueryDevice(*drv, ordinal));
  KILN_RETURN_IF_ERROR(Check(*drv, drv->DevicePrimaryCtxRetain(&st->ctx, st->dev.device), "cuDevicePrimaryCtxRetain"));
  KILN_RETURN_IF_ERROR(Check(*drv, drv->CtxSetCurrent(st->ctx), "cuCtxSetCurrent"));
  KILN_ASSIGN_OR_RETURN(st->dm, SharedDeviceModel(*drv, model, st->dev));
  KILN_RETURN_IF_ERROR(st->err.Reserve(16, "kernel error words"));
  KILN_RETURN_IF_ERROR(Check(*drv, drv->MemsetD8Async(st->err.ptr, 0, 16, nullptr), "cuMemsetD8Async (error words)"));
  KILN_RETURN_IF_ERROR(Check(*drv, drv->EventCreate(&st->start, CU_EVENT_DEFAULT), "cuEventCreate"));
  KILN_RETURN_IF_ERROR(Check(*drv, drv->EventCreate(&st->stop, CU_EVENT_DEFAULT), "cuEventCreate"));
  if (own_stream)
    KILN_RETURN_IF_ERROR(
        Check(*drv, drv->StreamCreate(&st->own_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate (own_stream)"));
  // cuBLASLt and cuDNN are optional: without them their ops run on the CPU backend.
  auto note = [&](const char* what, const Status& why) {
    st->library_note += std::string(st->library_note.empty() ? "" : "; ") + what +
                        " unavailable, its ops run on the CPU: " + std::string(why.message());
  };
  if (auto blas = LoadBlas(); !blas.ok()) {
    note("cuBLASLt", blas.status());
  } else if (auto ex = BlasLibrary::Create(**blas); !ex.ok()) {
    note("cuBLASLt", ex.status());
  } else {
    st->blas = std::move(*ex);
  }
  DnnOptions dnn_options;  // bfloat16 convolutions need compute capability 8.0
  dnn_options.compute_capability = st->dev.cc_major * 10 + st->dev.cc_minor;
  if (auto dnn = LoadDnn(); !dnn.ok()) {
    note("cuDNN", dnn.status());
  } else if (auto ex = DnnLibrary::Create(**dnn, dnn_options); !ex.ok()) {
    note("cuDNN", ex.status());
  } else {
    st->dnn = std::move(*ex);
  }
  st->decisions.resize(model.impl().prepared.size());
  for (const PreparedEntry& pe : model.impl().prepared) {
    State::Lifetimes& life = st->lifetimes.emplace_back();
    life.written.assign(pe.tensors.size(), -1);
    life.last_read.assign(pe.tensors.size(), -1);
    const ArenaLiveness& l = pe.liveness;
    for (size_t p = 0; p < l.tensors.size(); ++p) {
      life.written[l.tensors[p]] = l.first[p];
      life.last_read[l.tensors[p]] = l.last[p];
    }
  }
  st->host_inputs.resize(model.inputs().size());
  st->loops.reserve(16);  // their staged scalars stay put for nesting up to 16 (CUDA stages pageable copies anyway)
  st->input_ptrs.resize(model.inputs().size());
  return std::unique_ptr<Runner>(new Runner(std::move(st)));
}

Status Runner::Execute(int32_t e, const PreparedEntry& pe, EntryState& es, cpu::HostMemory& host,
                         uint64_t max_context_bytes, std::span<const TensorView> inputs, CUstream stream,
                         std::vector<TensorView>& outputs, Stats& stats, RuntimeDimSetter& runtime_dims) {
  State& s = *s_;
  const Driver& drv = *s.drv;
  KILN_RETURN_IF_ERROR(Check(drv, drv.CtxSetCurrent(s.ctx), "cuCtxSetCurrent"));
  KILN_RETURN_IF_ERROR(s.arena.Reserve(std::max<uint64_t>(es.arena_needed, 64), "device arena"));
  // Host inputs go to device staging, 256-byte aligned one after another.
  uint64_t staging = 0;
  s.staging_offsets.assign(inputs.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].memory == MemoryKind::kDevice) continue;
    s.staging_offsets[i] = staging;
    staging += (inputs[i].num_bytes() + 255) / 256 * 256;
  }
  KILN_RETURN_IF_ERROR(s.staging.Reserve(std::max<uint64_t>(staging, 256), "input staging"));
  KILN_RETURN_IF_ERROR(s.symbolic.Reserve(std::max<uint64_t>(es.symbolic.size() * 8, 64), "symbolic values"));
  KILN_RETURN_IF_ERROR(Check(drv, drv.EventRecord(s.start, stream), "cuEventRecord"));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].memory == MemoryKind::kDevice) {
      s.input_ptrs[i] = reinterpret_cast<CUdeviceptr>(inputs[i].data);
      continue;
    }
    s.input_ptrs[i] = s.staging.ptr + s.staging_offsets[i];
    if (inputs[i].num_bytes())
      KILN_RETURN_IF_ERROR(CheckLazy(
          drv, drv.MemcpyHtoDAsync(s.input_ptrs[i], inputs[i].data, inputs[i].num_bytes(), stream),
          [&] { return "copy input " + to_string(i) + " to the device"; }));
  }
  if (!es.symbolic.empty())
    KILN_RETURN_IF_ERROR(Check(drv, drv.MemcpyHtoDAsync(s.symbolic.ptr, es.symbolic.data(), es.symbolic.size() * 8, stream),
                               "copy symbolic values to the device"));
  if (s.profile) {
    while (s.marks.size() < pe.instructions.size() + 1) {
      CUevent ev = nullptr;
      KILN_RETURN_IF_ERROR(Check(drv, drv.EventCreate(&ev, CU_EVENT_DEFAULT), "cuEventCreate (profile)"));
      s.marks.push_back(ev);
    }
    KILN_RETURN_IF_ERROR(Check(drv, drv.EventRecord(s.marks[0], stream), "cuEventRecord (profile)"));
  }
  s.marked = s.profile ? pe.instructions.size() + 1 : 0;
  if (pe.has_predicates) s.conditions.assign(pe.tensors.size(), -1);  // no allocation once this size was seen
  s.loops.clear();
  s.loop_iterations = 0;
  if (s.profile && !pe.loop_pair.empty()) {  // no allocation once this size was seen
    s.loop_ns.assign(pe.instructions.size(), 0);
    s.begin_jumped.assign(pe.instructions.size(), 0);
  } else {
    s.loop_ns.clear();
  }
  State::Decisions& d = s.Decide(e, pe, es);
  // The library workspace is reserved before the graph key is made, as the key holds its
  // address: a shape's second run then finds its first run's key (and is captured).
  if (d.workspace > 0) KILN_RETURN_IF_ERROR(s.library_ws.Reserve(d.workspace, "cuBLASLt/cuDNN workspace"));
  // Every instruction of the entry, in order: generated kernels on the device, library ops on
  // cuBLASLt / cuDNN when the artifact names them and they accept them, every other op on the
  // CPU backend (a fallback). While capturing, a library that refuses an op only when it runs
  // stops the enqueueing (*refused): a CPU fallback cannot be captured.
  size_t fallbacks = 0;
  // After a run-time dim changed the binding: the symbolic values and the library decisions
  // (and their workspace) follow it.
  auto rebind = [&]() -> Status {
    if (!es.symbolic.empty())
      KILN_RETURN_IF_ERROR(Check(drv, drv.MemcpyHtoDAsync(s.symbolic.ptr, es.symbolic.data(), es.symbolic.size() * 8, stream),
                                 "copy symbolic values to the device"));
    s.Decide(e, pe, es);
    if (d.workspace > 0) KILN_RETURN_IF_ERROR(s.library_ws.Reserve(d.workspace, "cuBLASLt/cuDNN workspace"));
    return Status::Ok();
  };
  auto is_loop_control = [&](size_t k) { return !pe.loop_pair.empty() && pe.loop_pair[k] >= 0; };
  auto enqueue_all = [&](bool capturing, bool* refused) -> Status {
    fallbacks = 0;
    for (size_t i = 0; i < pe.instructions.size(); ++i) {
      const PreparedInstruction& pi = pe.instructions[i];
      if (!pi.when.empty()) {
        KILN_ASSIGN_OR_RETURN(const bool runs, s.Runs(pe, pi, es, stream));
        if (!runs) {
          if (s.profile)
            KILN_RETURN_IF_ERROR(Check(drv, drv.EventRecord(s.marks[i + 1], stream), "cuEventRecord (profile)"));
          continue;
        }
      }
      if (is_loop_control(i)) {
        // A run-time Loop's control, on the host; its body's instructions run where they
        // would outside a loop. Such an entry is never captured (it is not DeviceOnly).
        size_t next = i + 1;
        bool rebound = false;
        KILN_RETURN_IF_ERROR(s.LoopControl(pe, i, es, inputs, stream, runtime_dims, &next, &rebound));
        if (rebound) KILN_RETURN_IF_ERROR(rebind());
        if (s.profile) KILN_RETURN_IF_ERROR(s.ProfileLoopControl(pe, i, next, stream));
        i = next - 1;
        continue;
      }
      if (pi.program && !s.dm->functions.empty()) {
        KILN_RETURN_IF_ERROR(s.Launch(pe, pi, es, stream));
      } else {
        bool ran = false;
        KILN_RETURN_IF_ERROR(s.RunOnLibrary(pe, i, d, es, stream, &ran));
        if (!ran && capturing) {
          *refused = true;
          return Status::Ok();
        }
        if (!ran) {
          // A CPU fallback region: this instruction and the ones after it that also run on the
          // host. Its time goes to its first instruction's profile entry.
          size_t end = i + 1;
          // A region runs under one condition: its first instruction's, checked above.
          while (end < pe.instructions.size() && pe.runtime_dim_of[end - 1] < 0 && s.OnHost(pe, d, end) &&
                 pe.instructions[end].when == pi.when && !is_loop_control(end))
            ++end;
          if (const int32_t dim = pe.runtime_dim_of[end - 1]; dim >= 0) {  // again in a loop's body
            bool reset = false;
            KILN_RETURN_IF_ERROR(runtime_dims.Reset(dim, &reset).WithContext(pe.instructions[end - 1].label));
            if (reset) KILN_RETURN_IF_ERROR(rebind());
          }
          KILN_RETURN_IF_ERROR(
              s.FallbackRegion(e, pe, i, end, es, host, max_context_bytes, inputs, stream, runtime_dims));
          // A run-time dim may have changed the binding.
          if (pe.runtime_dim_of[end - 1] >= 0) KILN_RETURN_IF_ERROR(rebind());
          for (size_t k = i; k < end; ++k) {
            if (d.why[k].empty()) continue;  // runs where the artifact says: nothing to report
            if (fallbacks == stats.last_fallbacks.size()) stats.last_fallbacks.emplace_back();
            Stats::Fallback& f = stats.last_fallbacks[fallbacks++];
            f.instruction = static_cast<int32_t>(k);
            f.reason.assign(d.why[k]);  // reuses the string's storage from the last run
          }
          if (s.profile)
            for (size_t k = i + 1; k < end; ++k)
              KILN_RETURN_IF_ERROR(Check(drv, drv.EventRecord(s.marks[k], stream), "cuEventRecord (profile)"));
          i = end - 1;
        }
      }
      if (s.profile)
        KILN_RETURN_IF_ERROR(Check(drv, drv.EventRecord(s.marks[i + 1], stream), "cuEventRecord (profile)"));
    }
    return Status::Ok();
  };
  bool refused = false;
  std::vector<int64_t>& key = s.graph_key;
  key.clear();
  // An entry with a run-time If reads its conditions on the host: never captured.
  if (s.graphs && stream != nullptr && !pe.has_predicates && State::DeviceOnly(pe, d)) {
    // Everything a captured launch bakes in: buffer addresses (the arena and the library
    // workspace may move when they grow) and, through the binding, the size arguments.
    key.insert(key.end(), {e, static_cast<int64_t>(s.arena.ptr), static_cast<int64_t>(s.symbolic.ptr),
                           static_cast<int64_t>(s.library_ws.ptr), static_cast<int64_t>(s.library_ws.bytes)});
    for (CUdeviceptr p : s.input_ptrs) key.push_back(static_cast<int64_t>(p));
    key.insert(key.end(), es.binding.begin(), es.binding.end());
  }
  auto seen = key.empty() ? s.graph_seen.end() : s.graph_seen.find(key);
  if (key.empty() || seen == s.graph_seen.end()) {
    if (!key.empty()) s.graph_seen.emplace(key, 1);  // the first run of a shape is not captured
    KILN_RETURN_IF_ERROR(enqueue_all(false, &refused));
  } else {
    auto it = s.graph_cache.find(key);
    if (it == s.graph_cache.end()) {
      ++stats.graph_misses;
      KILN_RETURN_IF_ERROR(Check(drv, drv.StreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                                 "cuStreamBeginCapture"));
      s.capturing = true;
      Status captured = enqueue_all(true, &refused);
      s.capturing = false;
      CUgraph graph = nullptr;
      Status ended = Check(drv, drv.StreamEndCapture(stream, &graph), "cuStreamEndCapture");
      KILN_RETURN_IF_ERROR(captured);
      KILN_RETURN_IF_ERROR(ended);
      if (refused) {
        // Nothing captured ran: run the entry uncaptured, the refused op on the CPU (the
        // decision now says so, and this shape is no longer DeviceOnly).
        drv.GraphDestroy(graph);
        refused = false;
        KILN_RETURN_IF_ERROR(enqueue_all(false, &refused));
      } else {
        CUgraphExec exec = nullptr;
        Status inst = Check(drv, drv.GraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
        drv.GraphDestroy(graph);
        KILN_RETURN_IF_ERROR(inst);
        it = s.graph_cache.emplace(key, exec).first;
      }
    } else {
      ++stats.graph_hits;
    }
    if (it != s.graph_cache.end())
      KILN_RETURN_IF_ERROR(Check(drv, drv.GraphLaunch(it->second, stream), "cuGraphLaunch"));
  }
  stats.last_fallbacks.resize(fallbacks);
  KILN_RETURN_IF_ERROR(Check(drv, drv.EventRecord(s.stop, stream), "cuEventRecord"));
  s.timing = true;
  stats.last_gpu_ns = -1;
  outputs.resize(pe.outputs.size());
  for (size_t o = 0; o < pe.outputs.size(); ++o) {
    const int32_t t = pe.outputs[o];
    const cpu::TensorRef& r = es.refs[t];
    outputs[o] = TensorView::Host(reinterpret_cast<void*>(s.DevicePtr(pe, es, t)), r.dtype, r.dims, r.rank);
    outputs[o].memory = MemoryKind::kDevice;
  }
  return Status::Ok();
}

Status Runner::Synchronize(CUstream stream, Stats& stats) {
  State& s = *s_;
  const Driver& drv = *s.drv;
  KILN_RETURN_IF_ERROR(Check(drv, drv.CtxSetCurrent(s.ctx), "cuCtxSetCurrent"));
  KILN_RETURN_IF_ERROR(Check(drv, drv.StreamSynchronize(stream), "cuStreamSynchronize"));
  if (s.timing) {
    float ms = 0;
    if (drv.EventElapsedTime(&ms, s.start, s.stop) == CUDA_SUCCESS) stats.last_gpu_ns = static_cast<int64_t>(ms * 1e6);
    s.timing = false;
  }
  if (s.marked > 1) {
    stats.last_instruction_ns.assign(s.marked - 1, 0);
    for (size_t k = 1; k < s.marked; ++k) {
      float ms = 0;
      if (drv.EventElapsedTime(&ms, s.marks[k - 1], s.marks[k]) == CUDA_SUCCESS)
        stats.last_instruction_ns[k - 1] = static_cast<int64_t>(ms * 1e6);
    }
    // A run-time Loop's earlier iterations (ProfileLoopControl).
    for (size_t k = 0; k < s.loop_ns.size() && k + 1 < s.marked; ++k)
      stats.last_instruction_ns[k] = s.begin_jumped[k] ? s.loop_ns[k] : stats.last_instruction_ns[k] + s.loop_ns[k];
    s.marked = 0;
  }
  uint32_t words[4] = {};
  KILN_RETURN_IF_ERROR(Check(drv, drv.MemcpyDtoHAsync(words, s.err.ptr, 16, stream), "read the kernels' error words"));
  KILN_RETURN_IF_ERROR(Check(drv, drv.StreamSynchronize(stream), "cuStreamSynchronize"));
  if (words[0] == 0) return Status::Ok();
  KILN_RETURN_IF_ERROR(Check(drv, drv.MemsetD8Async(s.err.ptr, 0, 16, stream), "reset the kernels' error words"));
  const int64_t index = static_cast<int64_t>(static_cast<uint64_t>(words[1]) | static_cast<uint64_t>(words[2]) << 32);
  // The error words say which check of its program failed, not which kernel: name the
  // check when one program with checks ran, else list the candidates.
  std::string what;
  for (const fused::Program* p : s.checked)
    if (words[0] - 1 < p->checks.size()) what += (what.empty() ? "" : " or ") + p->checks[words[0] - 1];
  s.checked.clear();
  if (what.empty()) what = "an index check";
  return InvalidArgument(what + ": " + fused::IndexOutOfRange(index, words[3]) + " (found by a generated kernel)");
}

Status Runner::Copy(void* dst, MemoryKind dst_memory, const void* src, uint64_t bytes, CUstream stream) {
  const Driver& drv = *s_->drv;
  const CUdeviceptr from = reinterpret_cast<CUdeviceptr>(src);
  if (dst_memory == MemoryKind::kDevice)
    return Check(drv, drv.MemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst), from, bytes, stream),
                 "copy an output into a device buffer");
  return Check(drv, drv.MemcpyDtoHAsync(dst, from, bytes, stream), "copy an output to the host");
}

}  // namespace kiln::cuda
