// oneDNN's convolution for the CPU backend (onednn.h). Primitives and memory descriptors are
// made with oneDNN's C++ API when planning (it throws dnnl::error, caught here); every Run
// calls the C API with arrays on the stack, so Kiln's side allocates nothing.
#include "runtime/cpu/onednn/onednn.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <new>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "runtime/kernels/conv_geometry.h"
#include "runtime/kernels/epilogue.h"
#include "runtime/kernels/half_convert.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/nhwc_conv.h"
#include "runtime/kernels/pool_geometry.h"
#include "runtime/kernels/thread_pool.h"
#include "runtime/kernels/transpose_bytes.h"
#include "runtime/kernels/widen.h"
#include "runtime/fault_injection.h"

namespace kiln::cpu {
namespace {

// The OpenMP API (OpenMP 5.2, sections 18.2.1 and 18.2.3), from libgomp, which Debian's
// oneDNN runs on. Declared here rather than through <omp.h>, which clang finds only with
// libomp's headers.
extern "C" {
void omp_set_num_threads(int num_threads);
int omp_get_max_threads(void);
// libgomp's entry point for `#pragma omp parallel num_threads(n)`, as GCC emits it (libgomp's
// ABI since GCC 4.9): runs fn(data) on a team of n threads, the caller's included.
void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);
}

void RunOnOpenMpTeam(void (*fn)(void*), void* data, int threads) {
  GOMP_parallel(fn, data, static_cast<unsigned>(threads), 0);
}

using dnnl::memory;
using Tag = memory::format_tag;

dnnl::engine& Engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);  // thread-safe once
  return engine;
}

// WeightPacks: each packed copy keyed by its source (the model weight's data) and its layout.
class Packs final : public WeightPacks {
 public:
  uint64_t bytes() const override {
    uint64_t n = 0;
    for (const Pack& p : packs_) n += p.buffer->size();
    return n;
  }
  // The copy of `src` in layout `layout` (`size` bytes), and false; or, the first time, a new
  // buffer for it and true: the caller fills it, or Drops it when that fails. nullptr when the
  // buffer cannot be allocated.
  std::pair<uint8_t*, bool> Acquire(const void* src, const memory::desc& layout, size_t size) {
    for (const Pack& p : packs_)
      if (p.src == src && p.layout == layout) return {p.buffer->data(), false};
    auto buffer = std::make_unique<AlignedBuffer>();
    if (!buffer->Reserve(size)) return {nullptr, true};
    packs_.push_back({src, layout, std::move(buffer)});
    return {packs_.back().buffer->data(), true};
  }
  // Forgets the buffer Acquire just made (its fill failed).
  void Drop() { packs_.pop_back(); }

 private:
  struct Pack {
    const void* src;
    memory::desc layout;
    std::unique_ptr<AlignedBuffer> buffer;
  };
  std::vector<Pack> packs_;
};

// An op whose model weights go into the context's Packs (set by PlanOneDnn).
struct UsesPacks {
  Packs* packs = nullptr;
};

// The calling thread's OpenMP team size set to `threads` for one scope (oneDNN reads it when
// it plans and when it runs), then put back: the caller's own OpenMP code keeps its setting.
class OmpThreads {
 public:
  explicit OmpThreads(int threads) : saved_(omp_get_max_threads()), threads_(threads) {
    if (threads_ != saved_) omp_set_num_threads(threads_);
  }
  ~OmpThreads() {
    if (threads_ != saved_) omp_set_num_threads(saved_);
  }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_;
  int threads_;
};

constexpr size_t kAlign = 64;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// X's and Y's plain tag for a rank (ncw, nchw, ncdhw), W's (oiw ... or goiw ... with groups).
Tag PlainTag(int rank) { return rank == 3 ? Tag::ncw : rank == 4 ? Tag::nchw : Tag::ncdhw; }
Tag WeightTag(int rank, bool grouped) {
  if (grouped) return rank == 3 ? Tag::goiw : rank == 4 ? Tag::goihw : Tag::goidhw;
  return rank == 3 ? Tag::oiw : rank == 4 ? Tag::oihw : Tag::oidhw;
}

dnnl::algorithm Algorithm(EpilogueActivation a) {
  switch (a) {
    case EpilogueActivation::kRelu: return dnnl::algorithm::eltwise_relu;
    case EpilogueActivation::kGelu: return dnnl::algorithm::eltwise_gelu_erf;
    case EpilogueActivation::kGeluTanh: return dnnl::algorithm::eltwise_gelu_tanh;
    case EpilogueActivation::kSigmoid: return dnnl::algorithm::eltwise_logistic;
    case EpilogueActivation::kHardSwish: return dnnl::algorithm::eltwise_hardswish;  // x * relu6(x + 3) / 6
    case EpilogueActivation::kSilu: return dnnl::algorithm::eltwise_swish;           // x * sigmoid(1 * x)
    case EpilogueActivation::kNone: break;
  }
  return dnnl::algorithm::undef;
}

// The epilogue as oneDNN post-ops, in the node's order: the activation (SiLU is swish with
// alpha 1) and the residual add (`sum`: Y holds the residual when the primitive starts).
dnnl::post_ops PostOps(const EpilogueSpec& spec) {
  dnnl::post_ops post;
  const auto activation = [&] {
    if (spec.activation != EpilogueActivation::kNone)
      post.append_eltwise(1.0f, Algorithm(spec.activation), spec.activation == EpilogueActivation::kSilu ? 1.0f : 0.0f,
                          0.0f);
  };
  if (spec.residual_first) {
    if (spec.residual) post.append_sum(1.0f);
    activation();
  } else {
    activation();
    if (spec.residual) post.append_sum(1.0f);
  }
  return post;
}

// dnnl_primitive_execute, which a fault-injection build can fail (runtime/fault_injection.h).
dnnl_status_t PrimitiveExecute(dnnl_primitive_t prim, dnnl_stream_t stream, int n, const dnnl_exec_arg_t* args) {
  return fault::Inject("oneDNN primitive execution") ? dnnl_out_of_memory : dnnl_primitive_execute(prim, stream, n, args);
}

// Before oneDNN makes primitives or memory objects (the C++ API: it throws dnnl::error when it
// cannot), a fault-injection build may refuse it as oneDNN would. Every caller catches it: the
// instruction falls back to Kiln's kernel, with the reason in Stats::last_fallbacks.
void RefuseCreation() {
  if (fault::Inject("oneDNN primitive creation"))
    throw dnnl::error(dnnl_out_of_memory, "could not create a primitive (out of memory)");
}

// An op's packed weights (Packs, or a buffer of its own) could not be allocated.
Status NoMemoryForWeights(std::string_view op, uint64_t bytes) {
  return ResourceExhausted(std::string(op) + " on oneDNN: cannot allocate " + std::to_string(bytes) +
                           " bytes for its weights");
}

Status Failed(dnnl_status_t st, std::string_view what) {
  return Internal("oneDNN " + std::string(what) + " failed (dnnl_status_t " + std::to_string(static_cast<int>(st)) +
                  ")");
}

// Runs `prim` with `args` on `stream` (the C API: no container is built).
Status Execute(const dnnl::primitive& prim, const dnnl::stream& stream, std::initializer_list<dnnl_exec_arg_t> args,
               std::string_view what) {
  const dnnl_status_t st = PrimitiveExecute(prim.get(), stream.get(), static_cast<int>(args.size()), args.begin());
  return st == dnnl_success ? Status::Ok() : Failed(st, what);
}

Status SetHandle(const memory& m, const void* p) {
  const dnnl_status_t st = dnnl_memory_set_data_handle_v2(m.get(), const_cast<void*>(p), nullptr);
  return st == dnnl_success ? Status::Ok() : Failed(st, "dnnl_memory_set_data_handle");
}

// The name of X's or Y's layout `md`, among the ones oneDNN's convolutions choose.
std::string LayoutName(const memory::desc& md) {
  const memory::dims dims = md.dims();
  const memory::data_type dt = md.data_type();
  struct Named {
    Tag tag;
    const char* name;
  };
  static constexpr Named k3[] = {{Tag::ncw, "ncw"}, {Tag::nwc, "nwc"}, {Tag::nCw8c, "nCw8c"}, {Tag::nCw16c, "nCw16c"}};
  static constexpr Named k4[] = {
      {Tag::nchw, "nchw"}, {Tag::nhwc, "nhwc"}, {Tag::nChw8c, "nChw8c"}, {Tag::nChw16c, "nChw16c"}};
  static constexpr Named k5[] = {
      {Tag::ncdhw, "ncdhw"}, {Tag::ndhwc, "ndhwc"}, {Tag::nCdhw8c, "nCdhw8c"}, {Tag::nCdhw16c, "nCdhw16c"}};
  const std::span<const Named> names = dims.size() == 3 ? std::span<const Named>(k3)
                                       : dims.size() == 4 ? std::span<const Named>(k4)
                                                          : std::span<const Named>(k5);
  for (const Named& n : names)
    if (memory::desc(dims, dt, n.tag) == md) return n.name;
  return "a blocked layout";
}

// The quantization of a QLinearConv or QLinearMatMul (ONNX opset 10 and 21: inputs x, x_scale,
// x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point), read from model weights when
// planning (oneDNN 2.6's convolution takes its scales and zero points only as values when the
// primitive is made). oneDNN computes y = saturate(round(scale[c] * (sum (x - x_zp) * w + bias))
// + y_zp) with scale[c] = x_scale * w_scale[c] / y_scale, in float32: within one step of ONNX's
// double-precision reference.
struct Int8Params {
  memory::data_type x_type = memory::data_type::u8, y_type = memory::data_type::u8;
  std::vector<float> scales;  // one, or one per output channel
  int32_t x_zero_point = 0, y_zero_point = 0;
};

// Whether oneDNN multiplies int8 with VNNI (vpdpbusd) here: the CPU's instructions, capped by
// ONEDNN_MAX_CPU_ISA.
bool OneDnnHasVnni() {
  using dnnl::cpu_isa;
  const cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == cpu_isa::avx512_core_vnni || isa == cpu_isa::avx512_core_bf16 || isa == cpu_isa::avx512_core_amx ||
         isa == cpu_isa::avx2_vnni;
}

// An int8 or uint8 zero point's one value; 0 for an absent one (ONNX's default).
int32_t ZeroPointOf(const TensorRef* t) {
  if (t == nullptr) return 0;
  return t->dtype == DType::kInt8 ? int32_t{t->as<const int8_t>()[0]} : int32_t{t->as<const uint8_t>()[0]};
}

memory::data_type Int8Type(DType t) { return t == DType::kInt8 ? memory::data_type::s8 : memory::data_type::u8; }

// Without VNNI, oneDNN multiplies u8 by s8 with vpmaddubsw, whose 16-bit sums of two products
// saturate once |w0| + |w1| passes 128 (oneDNN's "int8 computation nuances"): only int8 weights
// of 7 bits (onnxruntime's reduce_range) are safe there. kUnimplemented for others (the CPU
// kernel then runs them, exactly).
Status CheckNoSaturation(const TensorRef& w, const char* name) {
  if (OneDnnHasVnni()) return Status::Ok();
  for (int64_t i = 0; i < w.num_elements; ++i)
    if (std::abs(int{w.as<const int8_t>()[i]}) > 64)
      return Unimplemented(std::string(name) + " values beyond 7 bits (onnxruntime's reduce_range) without VNNI, where "
                           "oneDNN's 16-bit pair sums could saturate");
  return Status::Ok();
}

// Reads `call`'s quantization for `channels` output channels (W's dim 0 for a Conv, B's last
// for a MatMul). kUnimplemented for what oneDNN does not take: a uint8 W, a W zero point other
// than 0, scales that are not float32 or not positive and finite.
Status ReadInt8Params(std::string_view op, const KernelCall& call, int64_t channels, Int8Params* p) {
  const std::string name(op);
  if (call.inputs.size() < 8 || call.outputs.empty())
    return InvalidArgument(name + ": expects x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale and "
                                  "y_zero_point, and y");
  const TensorRef &x = call.inputs[0], &w = call.inputs[3], &y = call.outputs[0];
  for (const TensorRef* t : {&x, &y})
    if (t->dtype != DType::kInt8 && t->dtype != DType::kUInt8)
      return Unimplemented(name + " of " + DTypeStr(t->dtype) + " (oneDNN takes int8 and uint8)");
  if (w.dtype != DType::kInt8)
    return Unimplemented("a " + DTypeStr(w.dtype) + " W (oneDNN takes int8 weights)");
  KILN_RETURN_IF_ERROR(CheckNoSaturation(w, "W"));
  const auto scalar = [&](int i, DType dtype) {
    const TensorRef& t = call.inputs[static_cast<size_t>(i)];
    return t.present() && t.num_elements == 1 && t.dtype == dtype;
  };
  if (!scalar(1, DType::kFloat32) || !scalar(2, x.dtype) || !scalar(6, DType::kFloat32) || !scalar(7, y.dtype))
    return Unimplemented("X's or Y's quantization is not one float32 scale and one zero point of its dtype");
  const TensorRef &ws = call.inputs[4], &wzp = call.inputs[5];
  bool w_ok = ws.dtype == DType::kFloat32 && (ws.num_elements == 1 || ws.num_elements == channels) &&
              (!wzp.present() || (wzp.dtype == DType::kInt8 && wzp.num_elements == ws.num_elements));
  for (int64_t i = 0; w_ok && wzp.present() && i < wzp.num_elements; ++i) w_ok = wzp.as<const int8_t>()[i] == 0;
  if (!w_ok)
    return Unimplemented("W's quantization is not float32 scales (one, or one per output channel) with int8 zero "
                         "points 0");
  const float xs = call.inputs[1].as<const float>()[0], ys = call.inputs[6].as<const float>()[0];
  p->scales.resize(static_cast<size_t>(ws.num_elements));
  for (int64_t i = 0; i < ws.num_elements; ++i) {
    const double s = static_cast<double>(xs) * ws.as<const float>()[i] / ys;
    if (!(s > 0) || !std::isfinite(s)) return Unimplemented("x_scale * w_scale / y_scale not positive and finite");
    p->scales[static_cast<size_t>(i)] = static_cast<float>(s);
  }
  p->x_zero_point = ZeroPointOf(&call.inputs[2]);
  p->y_zero_point = ZeroPointOf(&call.inputs[7]);
  p->x_type = Int8Type(x.dtype);
  p->y_type = Int8Type(y.dtype);
  return Status::Ok();
}

// The attributes that apply `p`: output scales over dst dim `channel_dim` (or common), and the
// zero points of X and Y.
void SetInt8Attr(const Int8Params& p, int channel_dim, dnnl::primitive_attr* attr) {
  attr->set_output_scales(p.scales.size() > 1 ? 1 << channel_dim : 0, p.scales);
  if (p.x_zero_point != 0) attr->set_zero_points(DNNL_ARG_SRC, 0, {p.x_zero_point});
  if (p.y_zero_point != 0) attr->set_zero_points(DNNL_ARG_DST, 0, {p.y_zero_point});
}

// What the ops planned here share: one primitive whose X (source) and Y (destination) are in
// the layouts oneDNN chose (pd_), with reorders from and to Kiln's NCHW in the workspace where
// a tensor is not kept in that layout between two ops (Place).
class LayoutOp : public OneDnnOp {
 public:
  size_t workspace_bytes() const override { return workspace_; }
  const std::string& description() const override { return description_; }

  bool CanFeed(const OneDnnOp& consumer, int slot) const override {
    const auto* c = dynamic_cast<const LayoutOp*>(&consumer);
    if (c == nullptr || (slot != 0 && !(slot == static_cast<int>(kEpilogueResidualInput) && c->residual())))
      return false;
    const memory::desc layout = pd_.dst_desc();
    // float16 ops keep float16 values in the layout's order: widened and narrowed in place of
    // the reorders, element by element.
    return widen_ == c->widen_ && layout != y_plain_ && layout.get_size() == y_plain_.get_size() &&
           (slot == 0 ? c->pd_.src_desc() : c->pd_.dst_desc()) == layout;
  }

 protected:
  // Y's layout, for an op that takes its X in its producer's (PoolOp::Follow).
  static memory::desc YLayoutOf(const LayoutOp& op) { return op.pd_.dst_desc(); }

  // X's and Y's memories in oneDNN's layouts, and the reorders from and to NCHW of those not
  // kept in them (none where oneDNN chose NCHW), placed in the workspace from `*at`.
  void PlaceXY(bool x_in_layout, bool y_in_layout, size_t* at) {
    dnnl::engine& engine = Engine();
    x_reorder_.reset();
    y_reorder_.reset();
    x_mem_ = memory(pd_.src_desc(), engine, nullptr);
    y_mem_ = memory(pd_.dst_desc(), engine, nullptr);
    if (pd_.src_desc() != x_plain_ && !x_in_layout) {
      x_reorder_.emplace(x_user_, x_mem_);
      x_offset_ = *at;
      *at += AlignUp(pd_.src_desc().get_size());
    }
    if (pd_.dst_desc() != y_plain_ && !y_in_layout) {
      y_reorder_.emplace(y_mem_, y_user_);
      y_offset_ = *at;
      *at += AlignUp(pd_.dst_desc().get_size());
    }
  }

  // description_: oneDNN's implementation, the layout it runs in and what Place kept in it.
  void Describe(bool x_in_layout, bool y_in_layout, bool r_in_layout) {
    description_ = std::string(pd_.impl_info_str());
    const bool x_plain = pd_.src_desc() == x_plain_, y_plain = pd_.dst_desc() == y_plain_;
    if (!x_plain || !y_plain) {
      description_ += ", in " + LayoutName(y_plain ? pd_.src_desc() : pd_.dst_desc());
      std::string kept;
      for (const auto& [in_layout, name] :
           {std::pair{x_in_layout, "X"}, {y_in_layout, "Y"}, {r_in_layout, "the residual"}})
        if (in_layout) kept += (kept.empty() ? "" : " and ") + std::string(name);
      if (!kept.empty()) description_ += ", kept between oneDNN ops for " + kept;
    }
  }

  // X from `x_src` (NCHW, or already in the layout) into the primitive's X memory.
  Status ReorderX(void* x_src, uint8_t* ws) {
    KILN_RETURN_IF_ERROR(SetHandle(x_user_, x_src));
    KILN_RETURN_IF_ERROR(SetHandle(x_mem_, x_reorder_ ? ws + x_offset_ : x_src));
    if (!x_reorder_) return Status::Ok();
    if (x_bytes_.batch > 0) {  // [C, spatial] -> [spatial, C] per image
      Transpose(static_cast<const uint8_t*>(x_src), ws + x_offset_, x_bytes_.batch, x_bytes_.channels,
                x_bytes_.spatial);
      return Status::Ok();
    }
    return Execute(*x_reorder_, stream_, {{DNNL_ARG_FROM, x_user_.get()}, {DNNL_ARG_TO, x_mem_.get()}}, "X reorder");
  }
  // Points Y's memory at its place (`y_dst`, or the workspace when it is reordered after).
  Status PointY(void* y_dst, uint8_t* ws) {
    y_user_at_ = static_cast<uint8_t*>(y_dst);
    y_layout_at_ = y_reorder_ ? ws + y_offset_ : y_user_at_;
    KILN_RETURN_IF_ERROR(SetHandle(y_user_, y_dst));
    return SetHandle(y_mem_, y_layout_at_);
  }
  Status ReorderY() {
    if (!y_reorder_) return Status::Ok();
    if (y_bytes_.batch > 0) {  // [spatial, C] -> [C, spatial] per image
      Transpose(y_layout_at_, y_user_at_, y_bytes_.batch, y_bytes_.spatial, y_bytes_.channels);
      return Status::Ok();
    }
    return Execute(*y_reorder_, stream_, {{DNNL_ARG_FROM, y_mem_.get()}, {DNNL_ARG_TO, y_user_.get()}}, "Y reorder");
  }

  // An int8 X or Y that oneDNN holds channels-last (nhwc, nwc, ndhwc) where Kiln's is NCHW: its
  // reorders are byte transposes (transpose_bytes.h), ten times oneDNN 2.6's reorder here.
  // batch 0: oneDNN's reorder.
  struct ByteLayout {
    int64_t batch = 0, channels = 0, spatial = 0;
  };
  // The ByteLayout of a tensor of dims `d` and type `t` that oneDNN holds in `md`.
  static ByteLayout BytesChannelsLast(const memory::desc& md, const memory::dims& d, memory::data_type t) {
    if ((t != memory::data_type::u8 && t != memory::data_type::s8) || d.size() < 3 || d.size() > 5) return {};
    const Tag last = d.size() == 3 ? Tag::nwc : d.size() == 4 ? Tag::nhwc : Tag::ndhwc;
    if (md != memory::desc(d, t, last)) return {};
    int64_t spatial = 1;
    for (size_t i = 2; i < d.size(); ++i) spatial *= d[i];
    return {d[0], d[1], spatial};
  }
  ByteLayout x_bytes_, y_bytes_;
  uint8_t *y_user_at_ = nullptr, *y_layout_at_ = nullptr;
  ThreadPool* pool_ = nullptr;  // the running call's threads, for the byte transposes

  // TransposeBytes over `pool_`, in parts of whole 16-row blocks of each matrix.
  void Transpose(const uint8_t* src, uint8_t* dst, int64_t batch, int64_t rows, int64_t cols) const {
    const int64_t blocks = (rows + 15) / 16;
    ParallelFor(pool_, batch * blocks, MinItemsPerPart(16 * cols), [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        const int64_t m = u / blocks, r = u % blocks * 16;
        TransposeByteRows(src + m * rows * cols, dst + m * rows * cols, rows, cols, r, std::min(rows, r + 16));
      }
    });
  }

  int threads_ = 1;
  bool widen_ = false;  // float16 operands, computed in float32 (this oneDNN has no float16 kernels)
  dnnl::primitive_desc pd_;
  memory::desc x_plain_, y_plain_;
  dnnl::stream stream_;
  memory x_user_, y_user_, x_mem_, y_mem_;
  std::optional<memory> scratch_;
  std::optional<dnnl::reorder> x_reorder_, y_reorder_;
  size_t x_offset_ = 0, y_offset_ = 0, scratch_offset_ = 0, workspace_ = 0;
  std::string description_;
};

class ConvOp final : public LayoutOp, public UsesPacks {
 public:
  uint64_t held_bytes() const override { return 0; }  // its weights are in the Packs

  Status PackWeights(const KernelCall& call) override {
    if (!weights_constant_ || !(w_reorder_ || widen_)) return Status::Ok();
    OmpThreads omp(threads_);
    return HoldWeights(call.inputs[w_slot_]);
  }

  Status Run(const KernelCall& call) override {
    OmpThreads omp(threads_);
    pool_ = call.threads;
    const TensorRef &x = call.inputs[0], &w = call.inputs[w_slot_], &y = call.outputs[0];
    if (y.num_elements == 0) return Status::Ok();
    if (call.workspace_bytes < workspace_)
      return Internal("Conv on oneDNN: workspace of " + std::to_string(call.workspace_bytes) + " bytes, needs " +
                      std::to_string(workspace_));
    auto* ws = static_cast<uint8_t*>(call.workspace);
    // Weights in the primitive's layout (and type): once for a model weight (in the context's
    // Packs, shared with other bindings' ops), else on every call.
    const void* weights = w.data;
    if (w_reorder_ || widen_) {
      if (!weights_constant_) {
        KILN_RETURN_IF_ERROR(FillWeights(w, ws + w_offset_, ws));
        weights = ws + w_offset_;
      } else {
        KILN_RETURN_IF_ERROR(HoldWeights(w));
        weights = held_;
      }
    }
    KILN_RETURN_IF_ERROR(SetHandle(w_mem_, weights));
    // float16: X (and the residual and bias) widened into the workspace; Y computed there.
    void* x_src = x.data;
    void* y_dst = y.data;
    if (widen_) {
      x_src = ws + x_widened_offset_;
      y_dst = ws + y_widened_offset_;
      HalvesToFloat(x.dtype, x.as<const uint16_t>(), static_cast<float*>(x_src), x.num_elements);
    }
    // X and Y in oneDNN's layout: in the workspace with a reorder, or in place when the tensor
    // is kept in that layout between two oneDNN ops (Place).
    KILN_RETURN_IF_ERROR(ReorderX(x_src, ws));
    KILN_RETURN_IF_ERROR(PointY(y_dst, ws));
    // The residual add is oneDNN's `sum` post-op: Y holds the residual when the conv starts.
    if (residual_) {
      const TensorRef& r = call.inputs[kEpilogueResidualInput];
      if (r_in_layout_) {  // already in Y's layout: element for element (widened for float16)
        void* y_layout = y_reorder_ ? ws + y_offset_ : y_dst;  // where the primitive writes Y
        if (widen_)
          HalvesToFloat(r.dtype, r.as<const uint16_t>(), static_cast<float*>(y_layout), r.num_elements);
        else if (r.data != y_layout)
          std::memmove(y_layout, r.data, static_cast<size_t>(y.num_elements) * DTypeSize(y.dtype));
      } else {
        const void* r_src = r.data;
        if (widen_) {  // into Y's plain float32 place: Y itself, or the residual reorder's source
          HalvesToFloat(r.dtype, r.as<const uint16_t>(), static_cast<float*>(y_dst), r.num_elements);
          r_src = y_dst;
        }
        if (r_reorder_) {
          KILN_RETURN_IF_ERROR(SetHandle(r_user_, r_src));
          KILN_RETURN_IF_ERROR(Execute(*r_reorder_, stream_,
                                       {{DNNL_ARG_FROM, r_user_.get()}, {DNNL_ARG_TO, y_mem_.get()}},
                                       "residual reorder"));
        } else if (r_src != y_dst) {
          std::memmove(y_dst, r_src, static_cast<size_t>(y.num_elements) * DTypeSize(y.dtype));
        }
      }
    }
    if (scratch_) KILN_RETURN_IF_ERROR(SetHandle(*scratch_, ws + scratch_offset_));
    const TensorRef* bias = OptionalInput(call, b_slot_);
    if (bias) {
      const void* b = bias->data;
      if (widen_ && bias->dtype != DType::kFloat32) {
        float* widened = reinterpret_cast<float*>(ws + b_widened_offset_);
        HalvesToFloat(bias->dtype, bias->as<const uint16_t>(), widened, bias->num_elements);
        b = widened;
      }
      KILN_RETURN_IF_ERROR(SetHandle(b_mem_, b));
    }
    dnnl_exec_arg_t args[5] = {
        {DNNL_ARG_SRC, x_mem_.get()}, {DNNL_ARG_WEIGHTS, w_mem_.get()}, {DNNL_ARG_DST, y_mem_.get()}};
    int n = 3;
    if (bias) args[n++] = {DNNL_ARG_BIAS, b_mem_.get()};
    if (scratch_) args[n++] = {DNNL_ARG_SCRATCHPAD, scratch_->get()};
    const dnnl_status_t st = PrimitiveExecute(conv_.get(), stream_.get(), n, args);
    if (st != dnnl_success) return Failed(st, "convolution");
    KILN_RETURN_IF_ERROR(ReorderY());
    if (!x_zero_point_sums_.empty()) SubtractXZeroPoint(call, y);
    if (widen_) FloatToHalves(y.dtype, static_cast<const float*>(y_dst), y.as<uint16_t>(), y.num_elements);
    return Status::Ok();
  }

  bool pointwise() const override { return pointwise_; }

  bool residual() const override { return residual_; }

  Status Place(bool x_in_layout, bool y_in_layout, bool r_in_layout) override {
    // The reorders made here take their team size from the calling thread's OpenMP setting
    // when they are made, not when they run.
    OmpThreads omp(threads_);
    try {
      RefuseCreation();
      PlaceOrThrow(x_in_layout, y_in_layout, r_in_layout);
    } catch (const dnnl::error& e) {
      return Internal(std::string("oneDNN: placing a convolution's X and Y failed: ") + e.what());
    } catch (const std::bad_alloc&) {
      return ResourceExhausted("oneDNN: out of memory placing a convolution's X and Y");
    }
    return Status::Ok();
  }

  // Conv, or kiln.NhwcConv (`nhwc`: X, Y and the residual NHWC, runtime/kernels/nhwc_conv.h).
  static Result<std::unique_ptr<OneDnnOp>> Plan(const KernelCall& call, int threads, bool weights_constant,
                                                bool nhwc, const Int8Params* int8 = nullptr);
  // QLinearConv: oneDNN's int8 convolution (u8 or s8 X, s8 W, s32 bias, u8 or s8 Y), its scales
  // and zero points read from `call`'s model weights (`params_constant`, else refused).
  static Result<std::unique_ptr<OneDnnOp>> PlanInt8(const KernelCall& call, int threads, bool params_constant);
  // ConvInteger (ONNX opset 10): the int8 convolution into an s32 Y, W a model weight with zero
  // point 0 (`w_constant`: W and its zero point). X's zero point comes per call (from a
  // DynamicQuantizeLinear), where oneDNN 2.6 takes it only when the primitive is made: the
  // convolution runs on X as it is, and x_zero_point times the sum of W over the taps inside X
  // at each output (SumsOverValidTaps) is subtracted after.
  static Result<std::unique_ptr<OneDnnOp>> PlanInteger(const KernelCall& call, int threads, bool w_constant);

 private:
  // W in the primitive's layout (and type) at `into`: widened from float16 (a model weight's
  // float32 copy made here, another's in the workspace `ws`), then reordered.
  Status FillWeights(const TensorRef& w, void* into, uint8_t* ws) {
    const void* plain = w.data;
    AlignedBuffer widened;  // a model weight's float32 copy, at its first call only
    if (widen_) {
      void* to = into;
      if (w_reorder_ && weights_constant_) {
        if (!widened.Reserve(static_cast<size_t>(w.num_elements) * sizeof(float)))
          return NoMemoryForWeights("Conv", static_cast<uint64_t>(w.num_elements) * sizeof(float));
        to = widened.data();
      } else if (w_reorder_) {
        to = ws + w_widened_offset_;
      }
      HalvesToFloat(w.dtype, w.as<const uint16_t>(), static_cast<float*>(to), w.num_elements);
      plain = to;
    }
    if (!w_reorder_) return Status::Ok();
    KILN_RETURN_IF_ERROR(SetHandle(w_user_, plain));
    KILN_RETURN_IF_ERROR(SetHandle(w_mem_, into));
    return Execute(*w_reorder_, stream_, {{DNNL_ARG_FROM, w_user_.get()}, {DNNL_ARG_TO, w_mem_.get()}},
                   "weights reorder");
  }

  // A model weight W in held_, in the context's Packs (filled there by the first op that needs
  // this layout).
  Status HoldWeights(const TensorRef& w) {
    if (held_ != nullptr && held_from_ == w.data) return Status::Ok();
    const auto [into, fresh] = packs->Acquire(w.data, pd_.weights_desc(), w_bytes_);
    if (into == nullptr) return NoMemoryForWeights("Conv", w_bytes_);
    if (fresh)
      if (Status st = FillWeights(w, into, nullptr); !st.ok()) {
        packs->Drop();
        return st;
      }
    held_ = into;
    held_from_ = w.data;
    return Status::Ok();
  }

  // Place's work: oneDNN's C++ API throws dnnl::error.
  void PlaceOrThrow(bool x_in_layout, bool y_in_layout, bool r_in_layout) {
    r_in_layout_ = residual_ && r_in_layout;
    r_reorder_.reset();
    dnnl::engine& engine = Engine();
    size_t at = 0;
    const auto place = [&](const memory::desc& md, size_t* offset) {
      *offset = at;
      at += AlignUp(md.get_size());
    };
    PlaceXY(x_in_layout, y_in_layout, &at);
    if (residual_ && pd_.dst_desc() != y_plain_ && !r_in_layout_) {
      r_user_ = memory(y_plain_, engine, nullptr);
      r_reorder_.emplace(r_user_, y_mem_);
    }
    if ((w_reorder_ || widen_) && !weights_constant_) place(pd_.weights_desc(), &w_offset_);
    if (scratch_) place(pd_.scratchpad_desc(), &scratch_offset_);
    if (widen_) {  // float32 copies of the float16 operands, in Kiln's NCHW
      place(x_plain_, &x_widened_offset_);
      place(y_plain_, &y_widened_offset_);
      if (w_reorder_ && !weights_constant_) place(w_plain_, &w_widened_offset_);
      if (b_mem_) place(b_mem_.get_desc(), &b_widened_offset_);
    }
    workspace_ = at;
    Describe(x_in_layout, y_in_layout, r_in_layout_);
    if (widen_) description_ += ", on float32 copies of its float16 operands";
  }

  bool weights_constant_ = false;
  bool residual_ = false;
  bool pointwise_ = false;
  int w_slot_ = 1, b_slot_ = 2;  // W's and the bias's inputs: QLinearConv's are 3 and 8
  // ConvInteger: per output channel and position ([M, out...]), the sum of W over the taps that
  // fall inside X; empty for the other forms.
  std::vector<int32_t> x_zero_point_sums_;

  // y -= x_zero_point * x_zero_point_sums_, for ConvInteger (Y NCHW, s32).
  void SubtractXZeroPoint(const KernelCall& call, const TensorRef& y) const {
    const TensorRef* zp = OptionalInput(call, 2);
    const int32_t z = ZeroPointOf(zp);
    if (z == 0) return;
    const int64_t per_image = static_cast<int64_t>(x_zero_point_sums_.size());
    int32_t* out = y.as<int32_t>();
    for (int64_t i = 0; i < y.num_elements; ++i)
      out[i] = static_cast<int32_t>(static_cast<uint32_t>(out[i]) - static_cast<uint32_t>(z) *
                                                                        static_cast<uint32_t>(x_zero_point_sums_[i % per_image]));
  }
  bool r_in_layout_ = false;  // the residual arrives in Y's layout (Place)
  memory::desc w_plain_;
  dnnl::convolution_forward conv_;
  memory w_user_, r_user_, w_mem_, b_mem_;
  std::optional<dnnl::reorder> w_reorder_, r_reorder_;
  size_t w_offset_ = 0, w_bytes_ = 0;
  size_t x_widened_offset_ = 0, y_widened_offset_ = 0, w_widened_offset_ = 0, b_widened_offset_ = 0;
  const uint8_t* held_ = nullptr;  // the model weight in oneDNN's layout, in the Packs
  const void* held_from_ = nullptr;
};

// The multiply-adds per output (input channels times the window) up to which a 1-D Conv runs
// with plain X and Y (ConvOp::Plan).
constexpr int64_t kPlainConvMaxMacs = 16;

Result<std::unique_ptr<OneDnnOp>> ConvOp::PlanInt8(const KernelCall& q_call, int threads, bool params_constant) {
  if (!params_constant)
    return Unimplemented("W, the bias, scales and zero points that are not all model weights (oneDNN takes them "
                         "when the primitive is made)");
  if (q_call.inputs.size() < 8 || q_call.outputs.empty())
    return InvalidArgument("QLinearConv: expects 8 or 9 inputs and Y");
  const TensorRef& w = q_call.inputs[3];
  if (w.rank < 3) return InvalidArgument("QLinearConv: W " + ShapeStr(w) + " must have rank 3 to 5");
  Int8Params q;
  KILN_RETURN_IF_ERROR(ReadInt8Params("QLinearConv", q_call, w.dims[0], &q));
  const TensorRef* bias = OptionalInput(q_call, 8);
  if (bias && (bias->dtype != DType::kInt32 || bias->rank != 1 || bias->dims[0] != w.dims[0]))
    return InvalidArgument("QLinearConv: B " + ShapeStr(*bias) + " " + DTypeStr(bias->dtype) + " must be int32 with " +
                           std::to_string(w.dims[0]) + " elements");
  // Conv's view: X, W and B in Conv's slots.
  const TensorRef conv_inputs[3] = {q_call.inputs[0], w, bias ? *bias : TensorRef{}};
  const KernelCall conv_call{q_call.attrs, {conv_inputs, bias ? 3u : 2u}, q_call.outputs};
  return Plan(conv_call, threads, true, false, &q);
}

// For ConvInteger's zero point: per output channel m and output position, the sum of W[m] over
// the taps whose input position is inside X (the others read the zero padding). [M, out...].
std::vector<int32_t> SumsOverValidTaps(const TensorRef& w, const ConvGeometry& g) {
  const int64_t m_count = w.dims[0], per_m = w.num_elements / std::max<int64_t>(m_count, 1);
  const int64_t taps = g.kernel_size, channels = per_m / std::max<int64_t>(taps, 1);
  std::vector<int64_t> tap_sums(static_cast<size_t>(m_count * taps), 0);  // over W's input channels
  for (int64_t m = 0; m < m_count; ++m)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t t = 0; t < taps; ++t)
        tap_sums[static_cast<size_t>(m * taps + t)] += w.as<const int8_t>()[(m * channels + c) * taps + t];
  std::vector<int32_t> sums(static_cast<size_t>(m_count * g.out_size));
  int64_t o[kMaxSpatial] = {}, k[kMaxSpatial] = {};
  for (int64_t p = 0; p < g.out_size; ++p) {
    for (int64_t r = p, d = g.sr - 1; d >= 0; --d) o[d] = r % g.out[d], r /= g.out[d];
    for (int64_t m = 0; m < m_count; ++m) {
      int64_t sum = 0;
      for (int64_t t = 0; t < taps; ++t) {
        bool inside = true;
        for (int64_t r = t, d = g.sr - 1; d >= 0; --d) {
          k[d] = r % g.kernel[d], r /= g.kernel[d];
          const int64_t at = o[d] * g.stride[d] - g.pad_begin[d] + k[d] * g.dilation[d];
          inside = inside && at >= 0 && at < g.in[d];
        }
        if (inside) sum += tap_sums[static_cast<size_t>(m * taps + t)];
      }
      sums[static_cast<size_t>(m * g.out_size + p)] = static_cast<int32_t>(sum);
    }
  }
  return sums;
}

Result<std::unique_ptr<OneDnnOp>> ConvOp::PlanInteger(const KernelCall& call, int threads, bool w_constant) {
  if (!w_constant) return Unimplemented("a W or W zero point that is not a model weight");
  if (call.inputs.size() < 2 || call.outputs.empty()) return InvalidArgument("ConvInteger: expects x and w, and y");
  const TensorRef &x = call.inputs[0], &w = call.inputs[1], &y = call.outputs[0];
  const TensorRef *xzp = OptionalInput(call, 2), *wzp = OptionalInput(call, 3);
  if ((x.dtype != DType::kUInt8 && x.dtype != DType::kInt8) || w.dtype != DType::kInt8 || y.dtype != DType::kInt32)
    return Unimplemented("x " + DTypeStr(x.dtype) + ", w " + DTypeStr(w.dtype) +
                         " (oneDNN takes a uint8 or int8 x and an int8 w)");
  if (xzp && (xzp->num_elements != 1 || xzp->dtype != x.dtype)) return Unimplemented("an x zero point of other than one");
  for (int64_t i = 0; wzp && i < wzp->num_elements; ++i)
    if (wzp->dtype != DType::kInt8 || wzp->as<const int8_t>()[i] != 0) return Unimplemented("a w zero point other than 0");
  KILN_RETURN_IF_ERROR(CheckNoSaturation(w, "W"));
  // The geometry, on the float32 view the Conv checks read.
  TensorRef views[3] = {x, w, y};
  for (TensorRef& v : views) v.dtype = DType::kFloat32;
  ConvGeometry g;
  KILN_RETURN_IF_ERROR(ConvGeometryFor(KernelCall{call.attrs, {views, 2}, {views + 2, 1}}, &g));
  Int8Params q;
  q.x_type = Int8Type(x.dtype);
  q.y_type = memory::data_type::s32;
  q.scales = {1.0f};
  const KernelCall conv_call{call.attrs, {&call.inputs[0], 2}, call.outputs};
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<OneDnnOp> op, Plan(conv_call, threads, true, false, &q));
  auto* conv = static_cast<ConvOp*>(op.get());
  conv->w_slot_ = 1;
  conv->b_slot_ = 4;  // none: ConvInteger has no bias
  conv->x_zero_point_sums_ = SumsOverValidTaps(w, g);
  return op;
}

Result<std::unique_ptr<OneDnnOp>> ConvOp::Plan(const KernelCall& op_call, int threads, bool weights_constant,
                                                bool nhwc, const Int8Params* int8) {
  constexpr std::string_view kName = "Conv";
  // kiln.NhwcConv: its NHWC operands seen with Conv's NCHW dims, their memories `nhwc`.
  const NchwViews views(op_call.attrs, op_call.inputs, op_call.outputs);
  const KernelCall call = nhwc ? KernelCall{op_call.attrs, views.inputs(), views.outputs()} : op_call;
  if (nhwc && (call.inputs.empty() || call.inputs[0].rank != 4 || call.outputs.empty() || call.outputs[0].rank != 4))
    return InvalidArgument("kiln.NhwcConv: expects X and Y of rank 4");
  const bool x_nhwc = nhwc && XIsNhwc(op_call.attrs), y_nhwc = nhwc && YIsNhwc(op_call.attrs);
  if (call.inputs.size() < 2 || call.outputs.empty()) return InvalidArgument("Conv: expects X and W, and Y");
  const DType dt = call.inputs[0].dtype;
  if (!int8) {
    if (dt != DType::kFloat32 && dt != DType::kFloat16 && dt != DType::kBFloat16)
      return Unimplemented(DTypeStr(dt) + " (oneDNN runs float32, float16 and bfloat16 Convs in Kiln)");
    for (const TensorRef* t : {&call.inputs[1], &call.outputs[0]})
      if (t->present() && t->dtype != dt)
        return Unimplemented("X " + DTypeStr(dt) + " with " + (t == &call.outputs[0] ? "Y " : "W ") +
                             DTypeStr(t->dtype) + " (oneDNN's Conv in Kiln takes one type)");
  }
  const TensorRef &x = call.inputs[0], &w = call.inputs[1], &y = call.outputs[0];
  const TensorRef* bias = OptionalInput(call, 2);
  if (!int8 && bias && bias->dtype != dt && bias->dtype != DType::kFloat32)
    return Unimplemented("bias " + DTypeStr(bias->dtype) + " with X " + DTypeStr(dt));
  // The kernel's checks, on the float32 view it runs half (and, for QLinearConv, integer)
  // operands on (widen.h).
  std::vector<TensorRef> view(call.inputs.begin(), call.inputs.end());
  view.push_back(y);
  for (TensorRef& t : view)
    if (t.present() && (t.dtype == dt || int8)) t.dtype = DType::kFloat32;
  const KernelCall f32_call{call.attrs, {view.data(), view.size() - 1}, {&view.back(), 1}};
  ConvGeometry g;
  KILN_RETURN_IF_ERROR(ConvGeometryFor(f32_call, &g));
  KILN_RETURN_IF_ERROR(CheckBias(OptionalInput(f32_call, 2), w.dims[0], kName));
  EpilogueSpec spec;
  KILN_RETURN_IF_ERROR(ParseEpilogue(call.attrs, &spec));
  if (x.rank > 5) return Unimplemented("oneDNN convolves 1 to 3 spatial dims, not " + std::to_string(g.sr));
  if (x.num_elements == 0 || w.num_elements == 0 || y.num_elements == 0)
    return Unimplemented("an empty tensor (the CPU kernel writes what it needs)");
  const bool residual = spec.residual;
  if (residual) {
    const TensorRef& r = call.inputs[kEpilogueResidualInput];
    if (!r.present() || r.dtype != dt || r.num_elements != y.num_elements)
      return InvalidArgument("Conv: the epilogue residual must be of Y's type and shape");
  }

  bool pointwise = true;
  for (int i = 0; i < g.sr; ++i)
    pointwise = pointwise && g.kernel[i] == 1 && g.stride[i] == 1 && g.pad_begin[i] == 0 && g.pad_end[i] == 0;
  auto op = std::make_unique<ConvOp>();
  op->threads_ = threads;
  op->weights_constant_ = weights_constant;
  if (int8) {
    op->w_slot_ = 3;
    op->b_slot_ = 8;
  }
  op->residual_ = residual;
  // Kiln's kernel transposes NHWC images, and runs integer Convs as plain loops: oneDNN is faster.
  op->pointwise_ = pointwise && !nhwc && !int8;
  // 1 x 1 images (a squeeze-and-excitation's Convs, a classifier head's): oneDNN's gemm-based
  // convolution, which it picks below AVX-512, gave other bits at 3 threads than at 1.
  const bool one_pixel = x.rank == 4 && x.dims[2] * x.dims[3] == 1 && y.dims[2] * y.dims[3] == 1;
  // float16 in float32: oneDNN 2.6 has float16 convolutions only for AVX512-FP16 CPUs, and
  // its float16 reorders are reference loops (16 ms for 590 K values here); F16C converts.
  op->widen_ = dt == DType::kFloat16;
  try {
    RefuseCreation();
    OmpThreads omp(threads);
    dnnl::engine& engine = Engine();
    op->stream_ = dnnl::stream(engine);
    const memory::dims xd(x.dims, x.dims + x.rank), yd(y.dims, y.dims + y.rank);
    memory::dims wd;
    const bool grouped = g.group > 1;
    if (grouped) {
      wd.push_back(g.group);
      wd.push_back(w.dims[0] / g.group);
      wd.insert(wd.end(), w.dims + 1, w.dims + w.rank);
    } else {
      wd.assign(w.dims, w.dims + w.rank);
    }
    memory::dims strides, dilations, pad_l, pad_r;
    for (int i = 0; i < g.sr; ++i) {
      strides.push_back(g.stride[i]);
      dilations.push_back(g.dilation[i] - 1);  // oneDNN counts the gaps: 0 is a dense window
      pad_l.push_back(g.pad_begin[i]);
      pad_r.push_back(g.pad_end[i]);
    }
    // The primitive's type: bfloat16 natively (AVX512-BF16, or emulated on AVX-512), else float32.
    // QLinearConv: u8 or s8 X and Y, s8 W, s32 bias.
    const auto type = dt == DType::kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
    const auto x_type = int8 ? int8->x_type : type, y_type = int8 ? int8->y_type : type,
               w_type = int8 ? memory::data_type::s8 : type;
    const auto b_type = int8 ? memory::data_type::s32
                        : bias && bias->dtype == DType::kBFloat16 ? memory::data_type::bf16
                                                                  : memory::data_type::f32;
    const Tag plain = PlainTag(x.rank);
    const memory::desc x_any(xd, x_type, Tag::any), y_any(yd, y_type, Tag::any), w_any(wd, w_type, Tag::any);
    const memory::desc b_md = bias ? memory::desc({w.dims[0]}, b_type, Tag::x) : memory::desc();

    dnnl::primitive_attr attr;
    if (int8) SetInt8Attr(*int8, 1, &attr);
    attr.set_post_ops(PostOps(spec));
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const auto make = [&](const memory::desc& x_md, const memory::desc& y_md) {
      const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                                 dnnl::algorithm::convolution_direct, x_md, w_any, b_md, y_md, strides,
                                                 dilations, pad_l, pad_r);
      return dnnl::convolution_forward::primitive_desc(desc, attr, engine, /*allow_empty=*/true);
    };
    dnnl::convolution_forward::primitive_desc pd = make(x_any, y_any);
    // A few multiply-adds per output (a first layer over raw audio or one channel): the
    // convolution costs less than reordering its Y out of oneDNN's NWC / NHWC, so X and Y are
    // asked for plain, which oneDNN's gemm-based convolution writes directly. wav2vec2-base's
    // first Conv (1 -> 512 channels, kernel 10, stride 5, 16000 samples) at 1 thread: 0.17 ms
    // plain, against 0.33 ms on brgconv and 0.46 ms to reorder its Y to NCW
    // (benchmarks/results/2026-12-05-attention-3.md). It runs on the calling thread alone: on
    // more, oneDNN's gemm-based convolution split its sums differently once in CI (2 threads,
    // the fp-paths tier), so its bits could depend on the thread count (tests/runtime/cpu/onednn).
    if (const int64_t macs = w.num_elements / std::max<int64_t>(w.dims[0], 1);
        !nhwc && !grouped && macs <= kPlainConvMaxMacs && x.rank == 3 && dt == DType::kFloat32) {
      OmpThreads one(1);  // the primitive's team is fixed when it is made
      const auto plain_pd = make(memory::desc(xd, type, PlainTag(x.rank)), memory::desc(yd, type, PlainTag(x.rank)));
      if (plain_pd && !std::string_view(plain_pd.impl_info_str()).starts_with("ref")) {
        pd = plain_pd;
        op->threads_ = 1;
      }
    }
    if (!pd)
      return Unimplemented(dt == DType::kBFloat16 ? "oneDNN has no bfloat16 convolution for this form on this CPU"
                           : int8                 ? "oneDNN has no int8 convolution for this form on this CPU"
                                                  : "oneDNN has no convolution for this form");
    // oneDNN falls back to its reference loops where no JIT kernel takes the form (on AVX2
    // CPUs, an activation before the residual add): Kiln's kernel is much faster than those.
    if (const std::string impl = pd.impl_info_str(); impl.starts_with("ref"))
      return Unimplemented("oneDNN has only its reference implementation (" + impl + ") for this form on this CPU");
    else if (one_pixel && impl.find("gemm") != std::string::npos)
      return Unimplemented("oneDNN's gemm-based convolution (" + impl +
                           ") of 1x1 images, whose sums depend on the thread count");
    op->conv_ = dnnl::convolution_forward(pd);

    const memory::desc x_plain(xd, x_type, x_nhwc ? Tag::nhwc : plain),
        y_plain(yd, y_type, y_nhwc ? Tag::nhwc : plain), w_plain(wd, w_type, WeightTag(x.rank, grouped));
    if (int8 && !x_nhwc) op->x_bytes_ = BytesChannelsLast(pd.src_desc(), xd, x_type);
    if (int8 && !y_nhwc) op->y_bytes_ = BytesChannelsLast(pd.dst_desc(), yd, y_type);
    op->pd_ = pd;
    op->x_plain_ = x_plain;
    op->y_plain_ = y_plain;
    op->w_plain_ = w_plain;
    op->x_user_ = memory(x_plain, engine, nullptr);
    op->y_user_ = memory(y_plain, engine, nullptr);
    op->w_user_ = memory(w_plain, engine, nullptr);
    if (bias) op->b_mem_ = memory(b_md, engine, nullptr);
    op->w_mem_ = memory(pd.weights_desc(), engine, nullptr);
    if (pd.weights_desc() != w_plain) op->w_reorder_.emplace(op->w_user_, op->w_mem_);
    op->w_bytes_ = pd.weights_desc().get_size();
    if (pd.scratchpad_desc().get_size() > 0) op->scratch_.emplace(pd.scratchpad_desc(), engine, nullptr);
    op->PlaceOrThrow(false, false, false);
  } catch (const dnnl::error& e) {
    return Unimplemented(std::string("oneDNN refused the convolution: ") + e.what());
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("oneDNN: out of memory planning the convolution");
  }
  return std::unique_ptr<OneDnnOp>(std::move(op));
}

// Whether any of the n values at `data` is a NaN: float32, or bfloat16 (`half`), in any order.
// |v| > the infinity's bits is a NaN; adding (the largest |v| - infinity) carries that into the
// sign bit, so an OR of the sums says it for a whole block of values, which the compiler
// vectorizes (the blocks have a fixed length).
bool AnyNaN(const void* data, int64_t n, bool half, ThreadPool* threads) {
  std::atomic<bool> found{false};
  ParallelFor(threads, n, MinItemsPerPart(1), [&](int64_t begin, int64_t end) {
    constexpr int64_t kBlock = 64;
    uint32_t any = 0;
    int64_t i = begin;
    if (half) {
      const uint16_t* v = static_cast<const uint16_t*>(data);
      for (; i + kBlock <= end; i += kBlock)
        for (int64_t j = 0; j < kBlock; ++j) any |= (v[i + j] & 0x7fffu) + 0x7fu;
      for (; i < end; ++i) any |= (v[i] & 0x7fffu) + 0x7fu;
      any &= 0x8000u;
    } else {
      const uint32_t* v = static_cast<const uint32_t*>(data);
      for (; i + kBlock <= end; i += kBlock)
        for (int64_t j = 0; j < kBlock; ++j) any |= (v[i + j] & 0x7fffffffu) + 0x007fffffu;
      for (; i < end; ++i) any |= (v[i] & 0x7fffffffu) + 0x007fffffu;
      any &= 0x80000000u;
    }
    if (any != 0) found.store(true, std::memory_order_relaxed);
  });
  return found.load(std::memory_order_relaxed);
}

// MaxPool and AveragePool on oneDNN's pooling, float32 and bfloat16. Planned with X in NCHW;
// Follow re-plans it to take X in its producer's layout, so that a Conv's Y stays in oneDNN's
// layout through the pooling (a ResNet's stem). oneDNN's max pooling drops NaNs, where ONNX's
// and Kiln's propagate them (docs/semantics.md): a MaxPool whose X holds a NaN runs Kiln's
// kernel instead, on NCHW copies where X or Y is kept in oneDNN's layout.
class PoolOp final : public LayoutOp {
 public:
  uint64_t held_bytes() const override { return 0; }
  bool pointwise() const override { return false; }
  bool residual() const override { return false; }

  bool Follow(const OneDnnOp& producer) override {
    const auto* p = dynamic_cast<const LayoutOp*>(&producer);
    if (p == nullptr) return false;
    const memory::desc layout = YLayoutOf(*p);
    if (layout == x_plain_ || layout.get_size() != x_plain_.get_size() || layout.data_type() != x_plain_.data_type() ||
        layout.dims() != x_plain_.dims())
      return false;
    try {
      OmpThreads omp(threads_);
      auto pd = Make(layout);
      if (!pd || std::string_view(pd->impl_info_str()).starts_with("ref")) return false;
      Use(*pd);
    } catch (const dnnl::error&) {
      return false;
    } catch (const std::bad_alloc&) {
      return false;
    }
    return true;
  }

  Status Place(bool x_in_layout, bool y_in_layout, bool) override {
    OmpThreads omp(threads_);
    try {
      RefuseCreation();
      PlaceOrThrow(x_in_layout, y_in_layout);
    } catch (const dnnl::error& e) {
      return Internal(std::string("oneDNN: placing a pooling's X and Y failed: ") + e.what());
    } catch (const std::bad_alloc&) {
      return ResourceExhausted("oneDNN: out of memory placing a pooling's X and Y");
    }
    return Status::Ok();
  }

  Status Run(const KernelCall& call) override {
    OmpThreads omp(threads_);
    const TensorRef &x = call.inputs[0], &y = call.outputs[0];
    if (call.workspace_bytes < workspace_)
      return Internal(std::string(name_) + " on oneDNN: workspace of " + std::to_string(call.workspace_bytes) +
                      " bytes, needs " + std::to_string(workspace_));
    auto* ws = static_cast<uint8_t*>(call.workspace);
    if (max_ && AnyNaN(x.data, x.num_elements, x.dtype == DType::kBFloat16, call.threads)) return RunKernel(call, ws);
    KILN_RETURN_IF_ERROR(ReorderX(x.data, ws));
    KILN_RETURN_IF_ERROR(PointY(y.data, ws));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, x_mem_.get()}, {DNNL_ARG_DST, y_mem_.get()}};
    int n = 2;
    if (scratch_) {
      KILN_RETURN_IF_ERROR(SetHandle(*scratch_, ws + scratch_offset_));
      args[n++] = {DNNL_ARG_SCRATCHPAD, scratch_->get()};
    }
    const dnnl_status_t st = PrimitiveExecute(pool_.get(), stream_.get(), n, args);
    if (st != dnnl_success) return Failed(st, "pooling");
    return ReorderY();
  }

  static Result<std::unique_ptr<OneDnnOp>> Plan(std::string_view op, const KernelCall& call, int threads);

 private:
  // The primitive for X in `x_layout` (Y in the layout oneDNN chooses for it); empty when
  // oneDNN has none.
  std::optional<dnnl::pooling_v2_forward::primitive_desc> Make(const memory::desc& x_layout) const {
    const memory::desc y_any(y_plain_.dims(), y_plain_.data_type(), Tag::any);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm_, x_layout, y_any,
                                              strides_, kernel_, dilations_, pad_l_, pad_r_);
    dnnl::pooling_v2_forward::primitive_desc pd(desc, attr, Engine(), /*allow_empty=*/true);
    if (!pd) return std::nullopt;
    return pd;
  }

  // Makes `pd` the op's primitive, its scratchpad, and X and Y with reorders (Place(false, false)).
  void Use(const dnnl::primitive_desc& pd) {
    pd_ = pd;
    pool_ = dnnl::primitive(pd_);
    scratch_.reset();
    if (pd_.scratchpad_desc().get_size() > 0) scratch_.emplace(pd_.scratchpad_desc(), Engine(), nullptr);
    PlaceOrThrow(false, false);
  }

  void PlaceOrThrow(bool x_in_layout, bool y_in_layout) {
    size_t at = 0;
    PlaceXY(x_in_layout, y_in_layout, &at);
    if (scratch_) {
      scratch_offset_ = at;
      at += AlignUp(pd_.scratchpad_desc().get_size());
    }
    // Kiln's kernel, for an X with a NaN: on NCHW copies of X and Y where they are kept.
    x_back_.reset();
    y_forth_.reset();
    if (max_) {
      if (x_in_layout) {
        x_back_.emplace(x_mem_, x_user_);
        x_plain_offset_ = at;
        at += AlignUp(x_plain_.get_size());
      }
      if (y_in_layout) {
        y_forth_.emplace(y_user_, y_mem_);
        y_plain_offset_ = at;
        at += AlignUp(y_plain_.get_size());
      }
      kernel_offset_ = at;
      at += kernel_bytes_;
    }
    workspace_ = at;
    Describe(x_in_layout, y_in_layout, false);
  }

  // Kiln's kernel on `call` (an X with a NaN), X and Y in NCHW around it.
  Status RunKernel(const KernelCall& call, uint8_t* ws) {
    const TensorRef &x = call.inputs[0], &y = call.outputs[0];
    TensorRef x_plain = x, y_plain = y;
    if (x_back_) {
      x_plain.data = ws + x_plain_offset_;
      KILN_RETURN_IF_ERROR(SetHandle(x_mem_, x.data));
      KILN_RETURN_IF_ERROR(SetHandle(x_user_, x_plain.data));
      KILN_RETURN_IF_ERROR(
          Execute(*x_back_, stream_, {{DNNL_ARG_FROM, x_mem_.get()}, {DNNL_ARG_TO, x_user_.get()}}, "X reorder"));
    }
    if (y_forth_) y_plain.data = ws + y_plain_offset_;
    const KernelCall kernel_call{call.attrs, {&x_plain, 1}, {&y_plain, 1}, ws + kernel_offset_, kernel_bytes_,
                                 call.threads};
    KILN_RETURN_IF_ERROR(cpu::RunKernel(*nan_kernel_, kernel_call));
    if (!y_forth_) return Status::Ok();
    KILN_RETURN_IF_ERROR(SetHandle(y_user_, y_plain.data));
    KILN_RETURN_IF_ERROR(SetHandle(y_mem_, y.data));
    return Execute(*y_forth_, stream_, {{DNNL_ARG_FROM, y_user_.get()}, {DNNL_ARG_TO, y_mem_.get()}}, "Y reorder");
  }

  const char* name_ = "MaxPool";
  bool max_ = true;
  dnnl::algorithm algorithm_ = dnnl::algorithm::pooling_max;
  memory::dims strides_, kernel_, dilations_, pad_l_, pad_r_;
  dnnl::primitive pool_;
  const KernelDef* nan_kernel_ = nullptr;  // Kiln's MaxPool, for an X with a NaN
  size_t kernel_bytes_ = 0;                // its workspace
  std::optional<dnnl::reorder> x_back_, y_forth_;
  size_t x_plain_offset_ = 0, y_plain_offset_ = 0, kernel_offset_ = 0;
};

Result<std::unique_ptr<OneDnnOp>> PoolOp::Plan(std::string_view op, const KernelCall& call, int threads) {
  const bool max = op == "MaxPool";
  if (call.inputs.empty() || call.outputs.empty()) return InvalidArgument(std::string(op) + ": expects X, and Y");
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (OptionalOutput(call, 1) != nullptr)
    return Unimplemented("the Indices output (oneDNN's pooling gives none)");
  const DType dt = x.dtype;
  if (dt != DType::kFloat32 && dt != DType::kBFloat16)
    return Unimplemented(DTypeStr(dt) + " (oneDNN runs float32 and bfloat16 " + std::string(op) + " in Kiln)");
  if (y.dtype != dt) return InvalidArgument(std::string(op) + ": output dtype differs from input dtype");
  PoolGeometry g;
  KILN_RETURN_IF_ERROR(PoolGeometryFor(call, op, &g));
  if (x.rank > 5) return Unimplemented("oneDNN pools 1 to 3 spatial dims, not " + std::to_string(g.sr));
  if (x.num_elements == 0 || y.num_elements == 0)
    return Unimplemented("an empty tensor (the CPU kernel writes what it needs)");
  const bool include_pad = !max && call.attrs.GetInt("count_include_pad", 0) != 0;
  auto p = std::make_unique<PoolOp>();
  p->threads_ = threads;
  p->name_ = max ? "MaxPool" : "AveragePool";
  p->max_ = max;
  p->algorithm_ = max           ? dnnl::algorithm::pooling_max
                  : include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                : dnnl::algorithm::pooling_avg_exclude_padding;
  for (int i = 0; i < g.sr; ++i) {
    const int64_t extent = (g.kernel[i] - 1) * g.dilation[i] + 1;
    // oneDNN's output size is the floor count: ceil_mode's extra window needs a larger end pad.
    const int64_t span = g.in[i] + g.pad_begin[i] + g.pad_end[i] - extent;
    const int64_t pad_r = span >= 0 && span / g.stride[i] + 1 == g.out[i]
                              ? g.pad_end[i]
                              : (g.out[i] - 1) * g.stride[i] + extent - g.in[i] - g.pad_begin[i];
    if (g.pad_begin[i] < 0 || g.pad_end[i] < 0 || pad_r < 0)
      return Unimplemented("a negative pad on spatial axis " + std::to_string(i));
    if (g.pad_begin[i] >= extent || pad_r >= extent)
      return Unimplemented("a window entirely in the padding on spatial axis " + std::to_string(i));
    if (include_pad && pad_r > g.pad_end[i])
      return Unimplemented("ceil_mode's last window with count_include_pad (oneDNN would count past the pads)");
    p->strides_.push_back(g.stride[i]);
    p->kernel_.push_back(g.kernel[i]);
    p->dilations_.push_back(g.dilation[i] - 1);  // oneDNN counts the gaps
    p->pad_l_.push_back(g.pad_begin[i]);
    p->pad_r_.push_back(pad_r);
  }
  if (max) {
    p->nan_kernel_ = FindKernel(op);
    if (p->nan_kernel_ == nullptr) return Internal("no CPU kernel for " + std::string(op));
    p->kernel_bytes_ = AlignUp(KernelWorkspaceBytes(*p->nan_kernel_, call.attrs, call.inputs.first(1), call.outputs));
  }
  try {
    RefuseCreation();
    OmpThreads omp(threads);
    p->stream_ = dnnl::stream(Engine());
    const auto type = dt == DType::kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
    const Tag plain = PlainTag(x.rank);
    p->x_plain_ = memory::desc(memory::dims(x.dims, x.dims + x.rank), type, plain);
    p->y_plain_ = memory::desc(memory::dims(y.dims, y.dims + y.rank), type, plain);
    auto pd = p->Make(p->x_plain_);
    if (!pd) return Unimplemented("oneDNN has no pooling for this form");
    // Its reference loops (dilated windows in this oneDNN) are slower than Kiln's kernel.
    if (const std::string impl = pd->impl_info_str(); impl.starts_with("ref"))
      return Unimplemented("oneDNN has only its reference implementation (" + impl + ") for this form on this CPU");
    p->x_user_ = memory(p->x_plain_, Engine(), nullptr);
    p->y_user_ = memory(p->y_plain_, Engine(), nullptr);
    p->Use(*pd);
  } catch (const dnnl::error& e) {
    return Unimplemented(std::string("oneDNN refused the pooling: ") + e.what());
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("oneDNN: out of memory planning the pooling");
  }
  return std::unique_ptr<OneDnnOp>(std::move(p));
}

// MatMul (B 2-D, A's batch dims those of Y, so one product of A's rows) and Gemm (alpha 1;
// C absent or N values added to every row) on oneDNN's matmul, float32, with the epilogue as
// post-ops as for Conv. X and Y stay in Kiln's row-major layout; B, a model weight, is
// reordered once into the layout oneDNN chooses, any other B read where it is. Small
// products stay on OpenBLAS, faster below about 2^18 multiply-adds (oneDNN's call costs about
// 0.5 us more); above, oneDNN 2.6's brgemm kernels were 1.2-11x faster than OpenBLAS's sgemm
// here (a 1x2048 by 2048x1000 product: 89 against 999 us with the weights in cache).
class MatMulOp final : public OneDnnOp, public UsesPacks {
 public:
  size_t workspace_bytes() const override { return workspace_; }
  uint64_t held_bytes() const override { return 0; }  // its weights are in the Packs
  const std::string& description() const override { return description_; }
  bool pointwise() const override { return false; }
  bool residual() const override { return residual_; }
  bool CanFeed(const OneDnnOp&, int) const override { return false; }  // Y stays row-major
  Status Place(bool, bool, bool) override { return Status::Ok(); }

  Status PackWeights(const KernelCall& call) override {
    if (!w_reorder_) return Status::Ok();
    OmpThreads omp(threads_);
    return HoldWeights(call.inputs[b_slot_]);
  }

  Status Run(const KernelCall& call) override {
    OmpThreads omp(threads_);
    const TensorRef &a = call.inputs[0], &b = call.inputs[b_slot_], &y = call.outputs[0];
    if (call.workspace_bytes < workspace_)
      return Internal(std::string(name_) + " on oneDNN: workspace of " + std::to_string(call.workspace_bytes) +
                      " bytes, needs " + std::to_string(workspace_));
    const void* weights = b.data;
    if (w_reorder_) {  // a model weight, in oneDNN's layout once (in the context's Packs)
      KILN_RETURN_IF_ERROR(HoldWeights(b));
      weights = held_;
    }
    if (residual_) {  // oneDNN's `sum` post-op: Y holds the residual when the product starts
      const TensorRef& r = call.inputs[kEpilogueResidualInput];
      if (r.data != y.data) std::memmove(y.data, r.data, static_cast<size_t>(y.num_elements) * sizeof(float));
    }
    KILN_RETURN_IF_ERROR(SetHandle(x_mem_, a.data));
    KILN_RETURN_IF_ERROR(SetHandle(w_mem_, weights));
    KILN_RETURN_IF_ERROR(SetHandle(y_mem_, y.data));
    dnnl_exec_arg_t args[6] = {
        {DNNL_ARG_SRC, x_mem_.get()}, {DNNL_ARG_WEIGHTS, w_mem_.get()}, {DNNL_ARG_DST, y_mem_.get()}};
    int n = 3;
    if (bias_) {
      KILN_RETURN_IF_ERROR(SetHandle(b_mem_, call.inputs[bias_slot_].data));
      args[n++] = {DNNL_ARG_BIAS, b_mem_.get()};
    }
    if (scratch_) {
      KILN_RETURN_IF_ERROR(SetHandle(*scratch_, call.workspace));
      args[n++] = {DNNL_ARG_SCRATCHPAD, scratch_->get()};
    }
    if (a_zero_point_) {  // MatMulInteger's A zero point, read at each call
      const TensorRef* zp = OptionalInput(call, 2);
      a_zero_point_value_ = ZeroPointOf(zp);
      KILN_RETURN_IF_ERROR(SetHandle(zp_mem_, &a_zero_point_value_));
      args[n++] = {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp_mem_.get()};
    }
    const dnnl_status_t st = PrimitiveExecute(prim_.get(), stream_.get(), n, args);
    return st == dnnl_success ? Status::Ok() : Failed(st, "matmul");
  }

  static Result<std::unique_ptr<OneDnnOp>> Plan(std::string_view op, const KernelCall& call, int threads,
                                                bool weights_constant);
  // QLinearMatMul: oneDNN's int8 matmul (u8 or s8 A, s8 B, u8 or s8 Y) of an A of any rank by a
  // 2-D B, B, the scales and zero points model weights (`params_constant`, else refused).
  static Result<std::unique_ptr<OneDnnOp>> PlanInt8(const KernelCall& call, int threads, bool params_constant);
  // MatMulInteger (ONNX opset 10): u8 or s8 A by a 2-D s8 B, a model weight with zero point 0
  // (`b_constant`: B and its zero point), int32 Y; A's zero point (one) is read at each call.
  static Result<std::unique_ptr<OneDnnOp>> PlanInteger(const KernelCall& call, int threads, bool b_constant);
  // onnxruntime's QGemm: u8 or s8 A [M, K] by an s8 B ([K, N], or [N, K] with transB) with zero
  // point 0, an int32 C of N values or none, u8 or s8 Y (or float32 without y_scale); alpha
  // and the scales fold into per-column output scales. Every input but A a model weight.
  static Result<std::unique_ptr<OneDnnOp>> PlanQGemm(const KernelCall& call, int threads, bool params_constant);

 private:
  // A model weight B in held_, in oneDNN's layout in the context's Packs (reordered there by the
  // first op that needs this layout).
  Status HoldWeights(const TensorRef& b) {
    if (held_ != nullptr && held_from_ == b.data) return Status::Ok();
    const memory::desc layout = pd_.weights_desc();
    const auto [into, fresh] = packs->Acquire(b.data, layout, layout.get_size());
    if (into == nullptr) return NoMemoryForWeights(name_, layout.get_size());
    if (fresh) {
      Status st = SetHandle(w_user_, b.data);
      if (st.ok()) st = SetHandle(w_mem_, into);
      if (st.ok())
        st = Execute(*w_reorder_, stream_, {{DNNL_ARG_FROM, w_user_.get()}, {DNNL_ARG_TO, w_mem_.get()}},
                     "weights reorder");
      if (!st.ok()) {
        packs->Drop();  // never left half written for the next binding
        return st;
      }
    }
    held_ = into;
    held_from_ = b.data;
    return Status::Ok();
  }

  // The int8 forms' primitive for A [m, k] by B [k, n] (s8; stored [n, k] with `tb`) into Y
  // [m, n] of `y_type`, with an s32 bias of n values (`bias_`).
  Status MakeInt8(int64_t m, int64_t k, int64_t n, memory::data_type a_type, memory::data_type y_type,
                  const dnnl::primitive_attr& attr, bool tb = false);

  const char* name_ = "MatMul";
  bool a_zero_point_ = false;  // MatMulInteger: A's zero point, a run-time value
  int32_t a_zero_point_value_ = 0;
  memory zp_mem_;
  int threads_ = 1;
  int b_slot_ = 1;     // B's input: QLinearMatMul's and QGemm's are 3
  int bias_slot_ = 2;  // the bias's: QGemm's C is 6
  bool residual_ = false, bias_ = false;
  dnnl::primitive_desc pd_;
  dnnl::primitive prim_;
  dnnl::stream stream_;
  memory x_mem_, w_mem_, w_user_, y_mem_, b_mem_;
  std::optional<memory> scratch_;
  std::optional<dnnl::reorder> w_reorder_;
  size_t workspace_ = 0;
  const uint8_t* held_ = nullptr;  // the model weight in oneDNN's layout, in the Packs
  const void* held_from_ = nullptr;
  std::string description_;
};

// The multiply-adds below which OpenBLAS's sgemm beats oneDNN's matmul here (see MatMulOp).
constexpr int64_t kMatMulMinWork = int64_t{1} << 18;

Result<std::unique_ptr<OneDnnOp>> MatMulOp::Plan(std::string_view op, const KernelCall& call, int threads,
                                                 bool weights_constant) {
  const bool gemm = op == "Gemm";
  if (call.inputs.size() < 2 || call.outputs.empty())
    return InvalidArgument(std::string(op) + ": expects A and B, and Y");
  const TensorRef &a = call.inputs[0], &b = call.inputs[1], &y = call.outputs[0];
  for (const TensorRef* t : {&a, &b, &y})
    if (t->dtype != DType::kFloat32)
      return Unimplemented(DTypeStr(t->dtype) + " (oneDNN runs float32 " + std::string(op) + " in Kiln)");
  if (b.rank != 2) return Unimplemented("B of rank " + std::to_string(b.rank) + " (oneDNN runs a 2-D B in Kiln)");
  if (a.rank < 1) return InvalidArgument(std::string(op) + ": A must have rank >= 1");
  const bool ta = gemm && call.attrs.GetInt("transA", 0) != 0, tb = gemm && call.attrs.GetInt("transB", 0) != 0;
  if (gemm && a.rank != 2) return InvalidArgument("Gemm: A must be 2-D, got " + ShapeStr(a));
  const int64_t k = ta ? a.dims[0] : a.dims[a.rank - 1];
  const int64_t n = tb ? b.dims[0] : b.dims[1];
  if ((tb ? b.dims[1] : b.dims[0]) != k || y.num_elements % std::max<int64_t>(n, 1) != 0 ||
      y.dims[y.rank - 1] != n)
    return InvalidArgument(std::string(op) + ": A " + ShapeStr(a) + ", B " + ShapeStr(b) + " and Y " + ShapeStr(y) +
                           " do not agree");
  const int64_t m = ta ? a.dims[1] : a.num_elements / std::max<int64_t>(k, 1);  // A's rows, batch dims included
  if (m * n != y.num_elements)
    return Unimplemented("A " + ShapeStr(a) + " broadcast over Y " + ShapeStr(y) + " (oneDNN runs A's own rows)");
  if (m == 0 || n == 0 || k == 0) return Unimplemented("an empty tensor (the CPU kernel writes what it needs)");
  if (m * n * k < kMatMulMinWork)
    return Unimplemented(std::to_string(m) + "x" + std::to_string(k) + " by " + std::to_string(k) + "x" +
                         std::to_string(n) + ": below 2^18 multiply-adds, OpenBLAS is faster");
  const TensorRef* bias = OptionalInput(call, 2);
  if (gemm) {
    if (call.attrs.GetFloat("alpha", 1.0f) != 1.0f) return Unimplemented("Gemm's alpha other than 1");
    if (bias && (call.attrs.GetFloat("beta", 1.0f) != 1.0f || bias->num_elements != n || bias->rank > 2 ||
                 (bias->rank == 2 && bias->dims[0] != 1)))
      return Unimplemented("Gemm's C " + ShapeStr(*bias) + " with beta " +
                           std::to_string(call.attrs.GetFloat("beta", 1.0f)) +
                           " (oneDNN adds a C of N values, with beta 1)");
  } else if (bias && (bias->rank != 1 || bias->num_elements != n)) {
    return InvalidArgument("MatMul: bias " + ShapeStr(*bias) + " must have the " + std::to_string(n) +
                           " output columns");
  }
  if (bias && bias->dtype != DType::kFloat32) return Unimplemented("a " + DTypeStr(bias->dtype) + " bias");
  Epilogue epilogue;
  KILN_RETURN_IF_ERROR(ReadEpilogue(call, op, &epilogue));
  const EpilogueSpec& spec = epilogue.spec;
  auto p = std::make_unique<MatMulOp>();
  p->name_ = gemm ? "Gemm" : "MatMul";
  p->threads_ = threads;
  p->residual_ = spec.residual;
  p->bias_ = bias != nullptr;
  try {
    RefuseCreation();
    OmpThreads omp(threads);
    dnnl::engine& engine = Engine();
    p->stream_ = dnnl::stream(engine);
    const auto f32 = memory::data_type::f32;
    const memory::desc x_md({m, k}, f32, ta ? memory::dims{1, m} : memory::dims{k, 1});
    const memory::desc w_plain({k, n}, f32, tb ? memory::dims{1, k} : memory::dims{n, 1});
    const memory::desc w_md = weights_constant ? memory::desc({k, n}, f32, Tag::any) : w_plain;
    const memory::desc y_md({m, n}, f32, Tag::ab);
    const memory::desc b_md = bias ? memory::desc({1, n}, f32, Tag::ab) : memory::desc();
    dnnl::primitive_attr attr;
    attr.set_post_ops(PostOps(spec));
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::desc desc =
        bias ? dnnl::matmul::desc(x_md, w_md, b_md, y_md) : dnnl::matmul::desc(x_md, w_md, y_md);
    const dnnl::matmul::primitive_desc pd(desc, attr, engine, /*allow_empty=*/true);
    if (!pd) return Unimplemented("oneDNN has no matmul for this form");
    if (const std::string impl = pd.impl_info_str(); impl.starts_with("ref"))
      return Unimplemented("oneDNN has only its reference implementation (" + impl + ") for this form on this CPU");
    p->pd_ = pd;
    p->prim_ = dnnl::primitive(pd);
    p->x_mem_ = memory(x_md, engine, nullptr);
    p->y_mem_ = memory(y_md, engine, nullptr);
    p->w_mem_ = memory(pd.weights_desc(), engine, nullptr);
    if (bias) p->b_mem_ = memory(b_md, engine, nullptr);
    if (pd.weights_desc() != w_plain) {
      p->w_user_ = memory(w_plain, engine, nullptr);
      p->w_reorder_.emplace(p->w_user_, p->w_mem_);
    }
    if (pd.scratchpad_desc().get_size() > 0) {
      p->scratch_.emplace(pd.scratchpad_desc(), engine, nullptr);
      p->workspace_ = AlignUp(pd.scratchpad_desc().get_size());
    }
    p->description_ = std::string(pd.impl_info_str());
  } catch (const dnnl::error& e) {
    return Unimplemented(std::string("oneDNN refused the matmul: ") + e.what());
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("oneDNN: out of memory planning the matmul");
  }
  return std::unique_ptr<OneDnnOp>(std::move(p));
}

Result<std::unique_ptr<OneDnnOp>> MatMulOp::PlanInt8(const KernelCall& call, int threads, bool params_constant) {
  if (!params_constant)
    return Unimplemented("B, scales and zero points that are not all model weights (oneDNN takes them when the "
                         "primitive is made)");
  if (call.inputs.size() < 8 || call.outputs.empty()) return InvalidArgument("QLinearMatMul: expects 8 inputs and Y");
  const TensorRef &a = call.inputs[0], &b = call.inputs[3], &y = call.outputs[0];
  if (b.rank != 2) return Unimplemented("B of rank " + std::to_string(b.rank) + " (oneDNN runs a 2-D B in Kiln)");
  if (a.rank < 1) return InvalidArgument("QLinearMatMul: A must have rank >= 1");
  const int64_t k = b.dims[0], n = b.dims[1];
  if (a.dims[a.rank - 1] != k || y.rank < 1 || y.dims[y.rank - 1] != n)
    return InvalidArgument("QLinearMatMul: A " + ShapeStr(a) + ", B " + ShapeStr(b) + " and Y " + ShapeStr(y) +
                           " do not agree");
  const int64_t m = a.num_elements / std::max<int64_t>(k, 1);
  if (m * n != y.num_elements)
    return Unimplemented("A " + ShapeStr(a) + " broadcast over Y " + ShapeStr(y) + " (oneDNN runs A's own rows)");
  if (m == 0 || n == 0 || k == 0) return Unimplemented("an empty tensor (the CPU kernel writes what it needs)");
  Int8Params q;
  KILN_RETURN_IF_ERROR(ReadInt8Params("QLinearMatMul", call, n, &q));
  auto p = std::make_unique<MatMulOp>();
  p->name_ = "QLinearMatMul";
  p->threads_ = threads;
  p->b_slot_ = 3;
  try {
    dnnl::primitive_attr attr;
    SetInt8Attr(q, 1, &attr);
    KILN_RETURN_IF_ERROR(p->MakeInt8(m, k, n, q.x_type, q.y_type, attr));
  } catch (const dnnl::error& e) {
    return Unimplemented(std::string("oneDNN refused the int8 matmul: ") + e.what());
  }
  return std::unique_ptr<OneDnnOp>(std::move(p));
}

Status MatMulOp::MakeInt8(int64_t m, int64_t k, int64_t n, memory::data_type a_type, memory::data_type y_type,
                          const dnnl::primitive_attr& int8_attr, bool tb) {
  try {
    RefuseCreation();
    OmpThreads omp(threads_);
    dnnl::engine& engine = Engine();
    stream_ = dnnl::stream(engine);
    const memory::desc x_md({m, k}, a_type, Tag::ab), y_md({m, n}, y_type, Tag::ab);
    const memory::desc w_plain({k, n}, memory::data_type::s8, tb ? memory::dims{1, k} : memory::dims{n, 1});
    const memory::desc w_md({k, n}, memory::data_type::s8, Tag::any);
    const memory::desc b_md = bias_ ? memory::desc({1, n}, memory::data_type::s32, Tag::ab) : memory::desc();
    dnnl::primitive_attr attr = int8_attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::desc desc =
        bias_ ? dnnl::matmul::desc(x_md, w_md, b_md, y_md) : dnnl::matmul::desc(x_md, w_md, y_md);
    const dnnl::matmul::primitive_desc pd(desc, attr, engine, /*allow_empty=*/true);
    if (!pd) return Unimplemented("oneDNN has no int8 matmul for this form on this CPU");
    if (const std::string impl = pd.impl_info_str(); impl.starts_with("ref"))
      return Unimplemented("oneDNN has only its reference implementation (" + impl + ") for this form on this CPU");
    pd_ = pd;
    prim_ = dnnl::primitive(pd);
    x_mem_ = memory(x_md, engine, nullptr);
    y_mem_ = memory(y_md, engine, nullptr);
    w_mem_ = memory(pd.weights_desc(), engine, nullptr);
    if (bias_) b_mem_ = memory(b_md, engine, nullptr);
    if (pd.weights_desc() != w_plain) {
      w_user_ = memory(w_plain, engine, nullptr);
      w_reorder_.emplace(w_user_, w_mem_);
    }
    if (pd.scratchpad_desc().get_size() > 0) {
      scratch_.emplace(pd.scratchpad_desc(), engine, nullptr);
      workspace_ = AlignUp(pd.scratchpad_desc().get_size());
    }
    if (a_zero_point_) zp_mem_ = memory({{1}, memory::data_type::s32, Tag::x}, engine, nullptr);
    description_ = std::string(pd.impl_info_str());
  } catch (const dnnl::error& e) {
    return Unimplemented(std::string("oneDNN refused the int8 matmul: ") + e.what());
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("oneDNN: out of memory planning the int8 matmul");
  }
  return Status::Ok();
}

Result<std::unique_ptr<OneDnnOp>> MatMulOp::PlanQGemm(const KernelCall& call, int threads, bool params_constant) {
  if (!params_constant) return Unimplemented("B, C, scales and zero points that are not all model weights");
  if (call.inputs.size() < 6 || call.outputs.empty()) return InvalidArgument("QGemm: expects 6 to 9 inputs and Y");
  const TensorRef &a = call.inputs[0], &as = call.inputs[1], &b = call.inputs[3], &bs = call.inputs[4];
  const TensorRef *azp = OptionalInput(call, 2), *bzp = OptionalInput(call, 5), *c = OptionalInput(call, 6);
  const TensorRef *ys = OptionalInput(call, 7), *yzp = OptionalInput(call, 8);
  const TensorRef& y = call.outputs[0];
  const bool tb = call.attrs.GetInt("transB", 0) != 0;
  if (call.attrs.GetInt("transA", 0) != 0) return Unimplemented("transA (oneDNN reads A's own rows in Kiln)");
  if (a.rank != 2 || b.rank != 2 || y.rank != 2 || b.dims[tb ? 1 : 0] != a.dims[1])
    return InvalidArgument("QGemm: A " + ShapeStr(a) + " and B " + ShapeStr(b) + " do not agree");
  const int64_t m = a.dims[0], k = a.dims[1], n = b.dims[tb ? 0 : 1];
  if (m * n * k == 0) return Unimplemented("an empty tensor (the CPU kernel writes what it needs)");
  if ((a.dtype != DType::kInt8 && a.dtype != DType::kUInt8) || b.dtype != DType::kInt8 ||
      (ys && y.dtype != DType::kInt8 && y.dtype != DType::kUInt8) || (!ys && y.dtype != DType::kFloat32))
    return Unimplemented("A " + DTypeStr(a.dtype) + ", B " + DTypeStr(b.dtype) + ", Y " + DTypeStr(y.dtype));
  const auto one = [](const TensorRef* t, DType dtype) { return !t || (t->num_elements == 1 && t->dtype == dtype); };
  if (!one(&as, DType::kFloat32) || !one(azp, a.dtype) || !one(ys, DType::kFloat32) || !one(yzp, y.dtype) ||
      bs.dtype != DType::kFloat32 || (bs.num_elements != 1 && bs.num_elements != n))
    return Unimplemented("scales and zero points other than one each (b_scale: one or N), float32 scales");
  for (int64_t i = 0; bzp && i < bzp->num_elements; ++i)
    if (bzp->dtype != DType::kInt8 || bzp->as<const int8_t>()[i] != 0) return Unimplemented("a B zero point other than 0");
  if (c && (c->dtype != DType::kInt32 || c->num_elements != n || (c->rank == 2 && c->dims[0] != 1)))
    return Unimplemented("a C of other than N int32 values");
  KILN_RETURN_IF_ERROR(CheckNoSaturation(b, "B"));
  const double alpha = call.attrs.GetFloat("alpha", 1.0f), y_scale = ys ? ys->as<const float>()[0] : 1.0;
  std::vector<float> scales(static_cast<size_t>(bs.num_elements));
  for (size_t i = 0; i < scales.size(); ++i) {
    const double sc = alpha * as.as<const float>()[0] * bs.as<const float>()[i] / y_scale;
    if (!(sc > 0) || !std::isfinite(sc)) return Unimplemented("alpha * a_scale * b_scale / y_scale not positive and finite");
    scales[i] = static_cast<float>(sc);
  }
  auto p = std::make_unique<MatMulOp>();
  p->name_ = "QGemm";
  p->threads_ = threads;
  p->b_slot_ = 3;
  p->bias_slot_ = 6;
  p->bias_ = c != nullptr;
  try {
    dnnl::primitive_attr attr;
    attr.set_output_scales(scales.size() > 1 ? 2 : 0, scales);
    if (ZeroPointOf(azp) != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {ZeroPointOf(azp)});
    if (ZeroPointOf(yzp) != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {ZeroPointOf(yzp)});
    KILN_RETURN_IF_ERROR(p->MakeInt8(m, k, n, Int8Type(a.dtype), ys ? Int8Type(y.dtype) : memory::data_type::f32, attr,
                                     tb));
  } catch (const dnnl::error& e) {
    return Unimplemented(std::string("oneDNN refused the int8 matmul: ") + e.what());
  }
  return std::unique_ptr<OneDnnOp>(std::move(p));
}

Result<std::unique_ptr<OneDnnOp>> MatMulOp::PlanInteger(const KernelCall& call, int threads, bool b_constant) {
  if (!b_constant) return Unimplemented("a B or B zero point that is not a model weight");
  if (call.inputs.size() < 2 || call.outputs.empty()) return InvalidArgument("MatMulInteger: expects A and B, and Y");
  const TensorRef &a = call.inputs[0], &b = call.inputs[1], &y = call.outputs[0];
  const TensorRef *azp = OptionalInput(call, 2), *bzp = OptionalInput(call, 3);
  if ((a.dtype != DType::kUInt8 && a.dtype != DType::kInt8) || b.dtype != DType::kInt8 || y.dtype != DType::kInt32)
    return Unimplemented("A " + DTypeStr(a.dtype) + ", B " + DTypeStr(b.dtype) +
                         " (oneDNN takes a uint8 or int8 A and an int8 B)");
  if (b.rank != 2 || a.rank < 1 || a.dims[a.rank - 1] != b.dims[0] || y.dims[y.rank - 1] != b.dims[1])
    return Unimplemented("A " + ShapeStr(a) + " by B " + ShapeStr(b) + " (oneDNN runs a 2-D B in Kiln)");
  const int64_t k = b.dims[0], n = b.dims[1], m = a.num_elements / std::max<int64_t>(k, 1);
  if (m * n != y.num_elements || m == 0 || n == 0 || k == 0)
    return Unimplemented("A " + ShapeStr(a) + " broadcast over Y " + ShapeStr(y) + ", or an empty tensor");
  if ((azp && (azp->num_elements != 1 || azp->dtype != a.dtype)) || (bzp && bzp->dtype != DType::kInt8))
    return Unimplemented("zero points other than one for A and int8 for B");
  for (int64_t i = 0; bzp && i < bzp->num_elements; ++i)
    if (bzp->as<const int8_t>()[i] != 0) return Unimplemented("a B zero point other than 0");
  KILN_RETURN_IF_ERROR(CheckNoSaturation(b, "B"));
  auto p = std::make_unique<MatMulOp>();
  p->name_ = "MatMulInteger";
  p->threads_ = threads;
  p->a_zero_point_ = true;
  try {
    dnnl::primitive_attr attr;
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    KILN_RETURN_IF_ERROR(p->MakeInt8(m, k, n, Int8Type(a.dtype), memory::data_type::s32, attr));
  } catch (const dnnl::error& e) {
    return Unimplemented(std::string("oneDNN refused the integer matmul: ") + e.what());
  }
  return std::unique_ptr<OneDnnOp>(std::move(p));
}

// LSTM, GRU and RNN (ONNX opset 14/22) on oneDNN's RNN primitives: lstm_forward, gru_forward
// (linear_before_reset 0), lbr_gru_forward (linear_before_reset 1) and vanilla_rnn_forward (RNN's
// Tanh, Relu or Sigmoid, the same in both directions), forward inference,
// float32, one layer, forward, reverse or bidirectional (bidirectional_concat). W, R and B must be
// model weights: at the first Run they are put in oneDNN's gate order (LSTM: ONNX's i, o, f, c
// becomes oneDNN's i, f, c~, o; GRU's z, r, h is oneDNN's u, r, o), W's and R's biases summed
// (lbr_gru keeps R's candidate bias apart, its fourth bias gate), and reordered into the layouts
// the primitive chose, once. X, the initial states and Y_h / Y_c are read and written where they
// are (ONNX's layout 0: [seq, batch, input] and [dirs, batch, hidden] are oneDNN's tnc and ldnc
// with one layer); Y [seq, dirs, batch, hidden] is written directly for one direction, and from
// oneDNN's [seq, batch, 2 * hidden] in the workspace for two. Refused (the CPU kernel runs):
// sequence_lens (oneDNN has no per-batch lengths), clip, input_forget, peepholes, activations
// other than the defaults (RNN: other than one of Tanh, Relu and Sigmoid for every direction), layout 1, weights that are not model weights, and batches below 16,
// where Kiln's kernel is faster (on two threads it runs the two directions side by side).
// oneDNN 2.6 names its GRU implementation `ref`: its generic RNN driver on its packed GEMMs, not
// reference loops, so it is not refused for that.
class RnnOp final : public OneDnnOp {
 public:
  size_t workspace_bytes() const override { return workspace_; }
  uint64_t held_bytes() const override { return held_.size(); }
  const std::string& description() const override { return description_; }
  bool pointwise() const override { return false; }
  bool residual() const override { return false; }
  bool CanFeed(const OneDnnOp&, int) const override { return false; }
  Status Place(bool, bool, bool) override { return Status::Ok(); }

  Status PackWeights(const KernelCall& call) override {
    if (held_.size() != 0 && held_from_ == call.inputs[1].data) return Status::Ok();
    OmpThreads omp(threads_);
    return PrepareWeights(call);
  }

  Status Run(const KernelCall& call) override {
    OmpThreads omp(threads_);
    KILN_RETURN_IF_ERROR(CheckWorkspace(call, workspace_, std::string(name_) + " on oneDNN"));
    KILN_RETURN_IF_ERROR(PackWeights(call));
    auto* ws = static_cast<uint8_t*>(call.workspace);
    const TensorRef* y = OptionalOutput(call, 0);
    void* dst_layer = dirs_ == 1 && y ? y->data : ws + dst_offset_;
    KILN_RETURN_IF_ERROR(SetHandle(src_layer_, call.inputs[0].data));
    KILN_RETURN_IF_ERROR(SetHandle(wl_mem_, held_.data()));
    KILN_RETURN_IF_ERROR(SetHandle(wi_mem_, held_.data() + wi_offset_));
    KILN_RETURN_IF_ERROR(SetHandle(b_mem_, held_.data() + b_offset_));
    KILN_RETURN_IF_ERROR(SetHandle(dst_layer_, dst_layer));
    dnnl_exec_arg_t args[10] = {{DNNL_ARG_SRC_LAYER, src_layer_.get()},
                                {DNNL_ARG_WEIGHTS_LAYER, wl_mem_.get()},
                                {DNNL_ARG_WEIGHTS_ITER, wi_mem_.get()},
                                {DNNL_ARG_BIAS, b_mem_.get()},
                                {DNNL_ARG_DST_LAYER, dst_layer_.get()}};
    int n = 5;
    auto bind = [&](const std::optional<memory>& m, const TensorRef* t, int arg) -> Status {
      if (!m) return Status::Ok();
      KILN_RETURN_IF_ERROR(SetHandle(*m, t->data));
      args[n++] = {arg, m->get()};
      return Status::Ok();
    };
    KILN_RETURN_IF_ERROR(bind(src_iter_, OptionalInput(call, 5), DNNL_ARG_SRC_ITER));
    KILN_RETURN_IF_ERROR(bind(src_iter_c_, OptionalInput(call, 6), DNNL_ARG_SRC_ITER_C));
    KILN_RETURN_IF_ERROR(bind(dst_iter_, OptionalOutput(call, 1), DNNL_ARG_DST_ITER));
    KILN_RETURN_IF_ERROR(bind(dst_iter_c_, OptionalOutput(call, 2), DNNL_ARG_DST_ITER_C));
    if (scratch_) {
      KILN_RETURN_IF_ERROR(SetHandle(*scratch_, ws));
      args[n++] = {DNNL_ARG_SCRATCHPAD, scratch_->get()};
    }
    const dnnl_status_t st = PrimitiveExecute(prim_.get(), stream_.get(), n, args);
    if (st != dnnl_success) return Failed(st, name_);
    if (dirs_ == 2 && y) {  // [seq, batch, 2 * hidden] -> Y [seq, 2, batch, hidden]
      const float* from = reinterpret_cast<const float*>(ws + dst_offset_);
      float* to = y->as<float>();
      for (int64_t t = 0; t < seq_; ++t)
        for (int64_t d = 0; d < 2; ++d)
          for (int64_t b = 0; b < batch_; ++b)
            std::memcpy(to + ((t * 2 + d) * batch_ + b) * hidden_, from + (t * batch_ + b) * 2 * hidden_ + d * hidden_,
                        static_cast<size_t>(hidden_) * sizeof(float));
    }
    return Status::Ok();
  }

  static Result<std::unique_ptr<OneDnnOp>> Plan(std::string_view op, const KernelCall& call, int threads,
                                                bool weights_constant);

 private:
  // W, R and B in oneDNN's gate order and layouts, into held_ (once per model weights).
  Status PrepareWeights(const KernelCall& call) {
    const int64_t G = gates_, H = hidden_, I = input_, D = dirs_;
    // ONNX gate g of oneDNN gate k.
    const int lstm_order[] = {0, 2, 3, 1};  // oneDNN i, f, c~, o from ONNX i, o, f, c
    auto onnx_gate = [&](int64_t k) { return G == 4 ? lstm_order[k] : static_cast<int>(k); };
    std::vector<float> w(static_cast<size_t>(D * G * H * I)), r(static_cast<size_t>(D * G * H * H));
    const float* W = call.inputs[1].as<const float>();
    const float* R = call.inputs[2].as<const float>();
    for (int64_t d = 0; d < D; ++d)
      for (int64_t k = 0; k < G; ++k) {
        const int64_t g = onnx_gate(k);
        std::memcpy(w.data() + (d * G + k) * H * I, W + (d * G + g) * H * I, static_cast<size_t>(H * I) * sizeof(float));
        std::memcpy(r.data() + (d * G + k) * H * H, R + (d * G + g) * H * H, static_cast<size_t>(H * H) * sizeof(float));
      }
    const int64_t bias_gates = lbr_ ? G + 1 : G;
    std::vector<float> bias(static_cast<size_t>(D * bias_gates * H), 0.0f);
    if (const TensorRef* B = OptionalInput(call, 3)) {
      const float* b = B->as<const float>();
      for (int64_t d = 0; d < D; ++d)
        for (int64_t k = 0; k < G; ++k) {
          const int64_t g = onnx_gate(k);
          const float* wb = b + d * 2 * G * H + g * H;
          const float* rb = wb + G * H;
          float* out = bias.data() + (d * bias_gates + k) * H;
          for (int64_t j = 0; j < H; ++j) out[j] = lbr_ && k == G - 1 ? wb[j] : wb[j] + rb[j];
          if (lbr_ && k == G - 1)
            for (int64_t j = 0; j < H; ++j) bias[(d * bias_gates + G) * H + j] = rb[j];
        }
    }
    if (!held_.Reserve(b_offset_ + bias.size() * sizeof(float)))
      return NoMemoryForWeights(name_, b_offset_ + bias.size() * sizeof(float));
    held_from_ = call.inputs[1].data;
    KILN_RETURN_IF_ERROR(SetHandle(wl_user_, w.data()));
    KILN_RETURN_IF_ERROR(SetHandle(wl_mem_, held_.data()));
    KILN_RETURN_IF_ERROR(Execute(wl_reorder_, stream_, {{DNNL_ARG_FROM, wl_user_.get()}, {DNNL_ARG_TO, wl_mem_.get()}},
                                 "weights reorder"));
    KILN_RETURN_IF_ERROR(SetHandle(wi_user_, r.data()));
    KILN_RETURN_IF_ERROR(SetHandle(wi_mem_, held_.data() + wi_offset_));
    KILN_RETURN_IF_ERROR(Execute(wi_reorder_, stream_, {{DNNL_ARG_FROM, wi_user_.get()}, {DNNL_ARG_TO, wi_mem_.get()}},
                                 "weights reorder"));
    std::memcpy(held_.data() + b_offset_, bias.data(), bias.size() * sizeof(float));
    return Status::Ok();
  }

  const char* name_ = "LSTM";
  int threads_ = 1;
  int64_t gates_ = 4, hidden_ = 0, input_ = 0, seq_ = 0, batch_ = 0, dirs_ = 1;
  bool lbr_ = false;
  dnnl::primitive prim_;
  dnnl::stream stream_;
  memory src_layer_, dst_layer_, wl_mem_, wi_mem_, wl_user_, wi_user_, b_mem_;
  std::optional<memory> src_iter_, src_iter_c_, dst_iter_, dst_iter_c_, scratch_;
  dnnl::reorder wl_reorder_, wi_reorder_;
  size_t wi_offset_ = 0, b_offset_ = 0, dst_offset_ = 0, workspace_ = 0;
  AlignedBuffer held_;
  const void* held_from_ = nullptr;
  std::string description_;
};

Result<std::unique_ptr<OneDnnOp>> RnnOp::Plan(std::string_view op, const KernelCall& call, int threads,
                                              bool weights_constant) {
  const bool lstm = op == "LSTM", rnn = op == "RNN";
  if (call.inputs.size() < 3 || !call.inputs[0].present() || !call.inputs[1].present() || !call.inputs[2].present())
    return InvalidArgument(std::string(op) + ": X, W and R are required");
  const TensorRef &x = call.inputs[0], &w = call.inputs[1], &r = call.inputs[2];
  for (const TensorRef* t : {&x, &w, &r})
    if (t->dtype != DType::kFloat32)
      return Unimplemented(DTypeStr(t->dtype) + " (oneDNN runs float32 " + std::string(op) + " in Kiln)");
  if (!weights_constant) return Unimplemented("W, R or B is not a model weight (oneDNN's weights are reordered once)");
  if (OptionalInput(call, 4)) return Unimplemented("sequence_lens (oneDNN's RNN has no per-batch sequence lengths)");
  if (lstm && OptionalInput(call, 7)) return Unimplemented("peepholes (Kiln's kernel runs them)");
  const AttrMap& a = call.attrs;
  if (a.GetInt("layout", 0) != 0) return Unimplemented("layout 1 (batch first; Kiln's kernel runs it)");
  if (a.Has("clip")) return Unimplemented("clip (oneDNN's RNN has none)");
  if (lstm && a.GetInt("input_forget", 0) != 0) return Unimplemented("input_forget (oneDNN's LSTM has none)");
  if (a.Has("activation_alpha") || a.Has("activation_beta")) return Unimplemented("activation_alpha/beta");
  dnnl::algorithm rnn_activation = dnnl::algorithm::eltwise_tanh;  // RNN's default, Tanh
  if (std::string_view acts = a.GetString("activations", ""); !acts.empty()) {
    std::string lower(acts);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const bool two = a.GetString("direction", "forward") == "bidirectional";
    if (rnn) {  // one activation per direction, the same for both
      const std::string one = lower.substr(0, lower.find(','));
      const bool same = !two || lower == one + "," + one;
      if (one == "relu") rnn_activation = dnnl::algorithm::eltwise_relu;
      else if (one == "sigmoid") rnn_activation = dnnl::algorithm::eltwise_logistic;
      if (!same || (one != "tanh" && one != "relu" && one != "sigmoid"))
        return Unimplemented("activations " + std::string(acts) +
                             " (oneDNN's vanilla RNN takes one of Tanh, Relu and Sigmoid for every direction)");
    } else {
      std::string want = lstm ? "sigmoid,tanh,tanh" : "sigmoid,tanh";
      if (two) want += "," + want;
      if (lower != want) return Unimplemented("activations " + std::string(acts) + " (oneDNN's are the defaults)");
    }
  }
  const std::string_view direction = a.GetString("direction", "forward");
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  const int64_t gates = lstm ? 4 : rnn ? 1 : 3;
  if (x.rank != 3 || w.rank != 3 || r.rank != 3 || w.dims[0] != dirs || r.dims[0] != dirs || w.dims[1] % gates != 0)
    return InvalidArgument(std::string(op) + ": X " + ShapeStr(x) + ", W " + ShapeStr(w) + " and R " + ShapeStr(r) +
                           " do not agree with direction " + std::string(direction));
  const int64_t seq = x.dims[0], batch = x.dims[1], input = x.dims[2], hidden = w.dims[1] / gates;
  if (w.dims[2] != input || r.dims[1] != gates * hidden || r.dims[2] != hidden ||
      a.GetInt("hidden_size", hidden) != hidden)
    return InvalidArgument(std::string(op) + ": W " + ShapeStr(w) + " and R " + ShapeStr(r) + " do not agree with X " +
                           ShapeStr(x) + " and hidden_size");
  if (seq == 0 || batch == 0 || input == 0 || hidden == 0)
    return Unimplemented("an empty tensor (the CPU kernel writes what it needs)");
  // Where Kiln's kernel is faster (bidirectional, sequence 50, hidden 256, `kiln bench` p50 with
  // and without --no-onednn; benchmarks/results/2026-12-05-attention.md): below batch 16 on two
  // threads, where it runs the two directions side by side (LSTM batch 8: 2.88 against 2.87 ms;
  // GRU batch 4: 1.17 against 2.02), and LSTM below batch 4 on one (batch 1: 2.53 against 4.28).
  // From batch 16 oneDNN wins LSTM on one and two threads (7.57 against 11.08, 5.20 against 5.69)
  // and GRU on one (5.51 against 7.94; 4.36 against 4.12 on two). The choice depends on the batch
  // alone, never on the thread count, so that a context's bits do not change with its threads.
  // RNN runs on oneDNN at every batch: its vanilla_rnn_forward was the faster at each one measured
  // (bidirectional, sequence 100, hidden 256: batch 1 0.91 against 1.27 ms on one thread and 0.61
  // against 0.69 on two; batch 4 1.15 against 4.3 and 0.77 against 2.18; batch 16 4.66 against 16.8).
  constexpr int64_t kMinBatch = 16;
  if (!rnn && batch < kMinBatch)
    return Unimplemented(std::string(op) + " of batch " + std::to_string(batch) +
                         ": Kiln's kernel is faster below batch " + std::to_string(kMinBatch));
  const int64_t state[] = {dirs, batch, hidden};
  for (int i : {5, 6}) {
    const TensorRef* t = OptionalInput(call, i);
    if (i == 6 && !lstm) break;
    if (t && (t->dtype != DType::kFloat32 || t->rank != 3 || !std::equal(state, state + 3, t->dims)))
      return InvalidArgument(std::string(op) + ": initial state " + ShapeStr(*t) + " must be [" +
                             std::to_string(dirs) + ", " + std::to_string(batch) + ", " + std::to_string(hidden) + "]");
  }
  const bool lbr = !lstm && a.GetInt("linear_before_reset", 0) != 0;
  auto p = std::make_unique<RnnOp>();
  p->name_ = lstm ? "LSTM" : rnn ? "RNN" : "GRU";
  p->threads_ = threads;
  p->gates_ = gates, p->hidden_ = hidden, p->input_ = input, p->seq_ = seq, p->batch_ = batch, p->dirs_ = dirs;
  p->lbr_ = lbr;
  try {
    RefuseCreation();
    OmpThreads omp(threads);
    dnnl::engine& engine = Engine();
    p->stream_ = dnnl::stream(engine);
    const auto f32 = memory::data_type::f32;
    const auto dir = dirs == 2                   ? dnnl::rnn_direction::bidirectional_concat
                     : direction == "reverse"    ? dnnl::rnn_direction::unidirectional_right2left
                                                 : dnnl::rnn_direction::unidirectional_left2right;
    const memory::desc src_layer({seq, batch, input}, f32, Tag::tnc);
    const memory::desc dst_layer({seq, batch, dirs * hidden}, f32, Tag::tnc);
    const memory::desc iter({1, dirs, batch, hidden}, f32, Tag::ldnc);
    const memory::desc wl_any({1, dirs, input, gates, hidden}, f32, Tag::any);
    const memory::desc wi_any({1, dirs, hidden, gates, hidden}, f32, Tag::any);
    const memory::desc bias({1, dirs, lbr ? gates + 1 : gates, hidden}, f32, Tag::ldgo);
    const memory::desc none;
    const memory::desc src_iter = OptionalInput(call, 5) ? iter : none;
    const memory::desc src_iter_c = lstm && OptionalInput(call, 6) ? iter : none;
    const memory::desc dst_iter = OptionalOutput(call, 1) ? iter : none;
    const memory::desc dst_iter_c = lstm && OptionalOutput(call, 2) ? iter : none;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const auto inference = dnnl::prop_kind::forward_inference;
    dnnl::primitive_desc_base pd;
    memory::desc wl_md, wi_md, scratch_md;
    if (lstm) {
      const dnnl::lstm_forward::desc desc(inference, dir, src_layer, src_iter, src_iter_c, wl_any, wi_any, bias,
                                          dst_layer, dst_iter, dst_iter_c);
      const dnnl::lstm_forward::primitive_desc lpd(desc, attr, engine);
      p->prim_ = dnnl::lstm_forward(lpd);
      wl_md = lpd.weights_layer_desc(), wi_md = lpd.weights_iter_desc(), scratch_md = lpd.scratchpad_desc();
      p->description_ = lpd.impl_info_str();
    } else if (rnn) {
      const dnnl::vanilla_rnn_forward::desc desc(inference, rnn_activation, dir, src_layer, src_iter, wl_any, wi_any,
                                                 bias, dst_layer, dst_iter);
      const dnnl::vanilla_rnn_forward::primitive_desc rpd(desc, attr, engine);
      p->prim_ = dnnl::vanilla_rnn_forward(rpd);
      wl_md = rpd.weights_layer_desc(), wi_md = rpd.weights_iter_desc(), scratch_md = rpd.scratchpad_desc();
      p->description_ = rpd.impl_info_str();
    } else if (lbr) {
      const dnnl::lbr_gru_forward::desc desc(inference, dir, src_layer, src_iter, wl_any, wi_any, bias, dst_layer,
                                             dst_iter);
      const dnnl::lbr_gru_forward::primitive_desc gpd(desc, attr, engine);
      p->prim_ = dnnl::lbr_gru_forward(gpd);
      wl_md = gpd.weights_layer_desc(), wi_md = gpd.weights_iter_desc(), scratch_md = gpd.scratchpad_desc();
      p->description_ = gpd.impl_info_str();
    } else {
      const dnnl::gru_forward::desc desc(inference, dir, src_layer, src_iter, wl_any, wi_any, bias, dst_layer,
                                         dst_iter);
      const dnnl::gru_forward::primitive_desc gpd(desc, attr, engine);
      p->prim_ = dnnl::gru_forward(gpd);
      wl_md = gpd.weights_layer_desc(), wi_md = gpd.weights_iter_desc(), scratch_md = gpd.scratchpad_desc();
      p->description_ = gpd.impl_info_str();
    }
    // ONNX's W [dirs, gates * hidden, input] is ldgoi with one layer; R likewise.
    p->wl_user_ = memory({{1, dirs, input, gates, hidden}, f32, Tag::ldgoi}, engine, nullptr);
    p->wi_user_ = memory({{1, dirs, hidden, gates, hidden}, f32, Tag::ldgoi}, engine, nullptr);
    p->wl_mem_ = memory(wl_md, engine, nullptr);
    p->wi_mem_ = memory(wi_md, engine, nullptr);
    p->wl_reorder_ = dnnl::reorder(p->wl_user_, p->wl_mem_);
    p->wi_reorder_ = dnnl::reorder(p->wi_user_, p->wi_mem_);
    p->wi_offset_ = AlignUp(wl_md.get_size());
    p->b_offset_ = p->wi_offset_ + AlignUp(wi_md.get_size());
    p->b_mem_ = memory(bias, engine, nullptr);
    p->src_layer_ = memory(src_layer, engine, nullptr);
    p->dst_layer_ = memory(dst_layer, engine, nullptr);
    if (OptionalInput(call, 5)) p->src_iter_.emplace(iter, engine, nullptr);
    if (lstm && OptionalInput(call, 6)) p->src_iter_c_.emplace(iter, engine, nullptr);
    if (OptionalOutput(call, 1)) p->dst_iter_.emplace(iter, engine, nullptr);
    if (lstm && OptionalOutput(call, 2)) p->dst_iter_c_.emplace(iter, engine, nullptr);
    size_t ws = 0;
    if (scratch_md.get_size() > 0) {
      p->scratch_.emplace(scratch_md, engine, nullptr);
      ws = AlignUp(scratch_md.get_size());
    }
    p->dst_offset_ = ws;
    if (dirs == 2 || !OptionalOutput(call, 0)) ws += AlignUp(dst_layer.get_size());
    p->workspace_ = ws;
    p->description_ += std::string(", ") + (dirs == 2 ? "bidirectional" : std::string(direction));
  } catch (const dnnl::error& e) {
    return Unimplemented(std::string("oneDNN refused the ") + std::string(op) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("oneDNN: out of memory planning the " + std::string(op));
  }
  return std::unique_ptr<OneDnnOp>(std::move(p));
}

}  // namespace

ThreadPool::TeamFn OpenMpTeam() {
#if defined(__SANITIZE_THREAD__)
  return nullptr;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return nullptr;
#else
  return RunOnOpenMpTeam;
#endif
#else
  return RunOnOpenMpTeam;
#endif
}

bool OneDnnBuilt() { return true; }

bool OneDnnSgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  OmpThreads one(1);
  return dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == dnnl_success;
}

bool OneDnnRunsBFloat16() {
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const unsigned need = static_cast<unsigned>(dnnl_cpu_isa_avx512_core);
  return (isa & need) == need;
}

const std::string& OneDnnVersion() {
  static const std::string version = [] {
    const dnnl_version_t* v = dnnl_version();
    return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  }();
  return version;
}

std::unique_ptr<WeightPacks> NewWeightPacks() { return std::make_unique<Packs>(); }

namespace {

Result<std::unique_ptr<OneDnnOp>> PlanOp(std::string_view op, const KernelCall& call, int threads,
                                         bool weights_are_constant) {
  if (op == "Conv") return ConvOp::Plan(call, threads, weights_are_constant, false);
  if (op == "QLinearConv") return ConvOp::PlanInt8(call, threads, weights_are_constant);
  if (op == "ConvInteger") return ConvOp::PlanInteger(call, threads, weights_are_constant);
  if (op == kNhwcConvOp) return ConvOp::Plan(call, threads, weights_are_constant, true);
  if (op == "MaxPool" || op == "AveragePool") return PoolOp::Plan(op, call, threads);
  if (op == "MatMul" || op == "Gemm") return MatMulOp::Plan(op, call, threads, weights_are_constant);
  if (op == "QLinearMatMul") return MatMulOp::PlanInt8(call, threads, weights_are_constant);
  if (op == "MatMulInteger") return MatMulOp::PlanInteger(call, threads, weights_are_constant);
  if (op == "QGemm") return MatMulOp::PlanQGemm(call, threads, weights_are_constant);
  if (op == "LSTM" || op == "GRU" || op == "RNN") return RnnOp::Plan(op, call, threads, weights_are_constant);
  return Unimplemented("oneDNN does not run " + std::string(op) + " in Kiln");
}

}  // namespace

Result<std::unique_ptr<OneDnnOp>> PlanOneDnn(std::string_view op, const KernelCall& call, int threads,
                                             bool weights_are_constant, WeightPacks& packs) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<OneDnnOp> planned, PlanOp(op, call, threads, weights_are_constant));
  if (auto* user = dynamic_cast<UsesPacks*>(planned.get())) user->packs = &static_cast<Packs&>(packs);
  return planned;
}

}  // namespace kiln::cpu
