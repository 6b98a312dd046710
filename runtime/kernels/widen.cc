#include "runtime/kernels/widen.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/kernels/half_convert.h"

namespace kiln::cpu {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kInlineOperands = 32;  // KernelWorkspaceBytes' float32 view on the stack

bool IsHalf(const TensorRef& t) {
  return t.present() && (t.dtype == DType::kFloat16 || t.dtype == DType::kBFloat16);
}

bool NeedsWidening(const KernelDef& kernel, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) {
  if (kernel.halves) return false;
  for (const TensorRef& t : inputs)
    if (IsHalf(t)) return true;
  for (const TensorRef& t : outputs)
    if (IsHalf(t)) return true;
  return false;
}

// a += RoundUp(b, kAlign); false on overflow.
bool AddAligned(size_t* a, size_t b) {
  size_t rounded;
  if (__builtin_add_overflow(b, kAlign - 1, &rounded)) return false;
  rounded &= ~(kAlign - 1);
  return !__builtin_add_overflow(*a, rounded, a);
}

// The widening scratch ahead of the kernel's own workspace: alignment slack, the float32
// view's TensorRefs, and one float32 buffer per half operand. False on overflow.
bool ScratchBytes(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs, size_t* bytes) {
  *bytes = kAlign - 1;
  if (!AddAligned(bytes, (inputs.size() + outputs.size()) * sizeof(TensorRef))) return false;
  for (std::span<const TensorRef> side : {inputs, outputs}) {
    for (const TensorRef& t : side) {
      if (!IsHalf(t)) continue;
      size_t f32_bytes;
      if (t.num_elements < 0 ||
          __builtin_mul_overflow(static_cast<uint64_t>(t.num_elements), sizeof(float), &f32_bytes) ||
          !AddAligned(bytes, f32_bytes))
        return false;
    }
  }
  return true;
}

// `t` as the kernel sees it: a half operand becomes float32 at `data`.
TensorRef Widened(const TensorRef& t, void* data) {
  if (!IsHalf(t)) return t;
  TensorRef f = t;
  f.dtype = DType::kFloat32;
  f.data = data;
  return f;
}

void Widen(const TensorRef& h, float* f) { HalvesToFloat(h.dtype, h.as<const uint16_t>(), f, h.num_elements); }

void Narrow(const float* f, const TensorRef& h) { FloatToHalves(h.dtype, f, h.as<uint16_t>(), h.num_elements); }

uint8_t* AlignUp(uint8_t* p) {
  const uintptr_t a = (reinterpret_cast<uintptr_t>(p) + kAlign - 1) & ~static_cast<uintptr_t>(kAlign - 1);
  return p + (a - reinterpret_cast<uintptr_t>(p));
}

size_t RoundUp(size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

Status TooSmall(const KernelDef& kernel, size_t need, size_t given) {
  const std::string needs = need == SIZE_MAX ? "more bytes of workspace than size_t holds"
                                             : std::to_string(need) + " bytes of workspace";
  return Internal(std::string(kernel.op) + ": widening float16/bfloat16 operands to float32 needs " + needs + ", " +
                  std::to_string(given) + " given");
}

}  // namespace

size_t KernelWorkspaceBytes(const KernelDef& kernel, const AttrMap& attrs, std::span<const TensorRef> inputs,
                            std::span<const TensorRef> outputs) {
  if (!NeedsWidening(kernel, inputs, outputs)) return kernel.workspace ? kernel.workspace(attrs, inputs, outputs) : 0;
  size_t scratch;
  if (!ScratchBytes(inputs, outputs, &scratch)) return SIZE_MAX;
  if (kernel.workspace == nullptr) return scratch;
  const size_t n = inputs.size() + outputs.size();
  TensorRef inline_view[kInlineOperands];
  std::vector<TensorRef> heap_view;  // only past kInlineOperands operands
  TensorRef* view = inline_view;
  if (n > kInlineOperands) {
    heap_view.resize(n);
    view = heap_view.data();
  }
  for (size_t i = 0; i < inputs.size(); ++i) view[i] = Widened(inputs[i], nullptr);
  for (size_t i = 0; i < outputs.size(); ++i) view[inputs.size() + i] = Widened(outputs[i], nullptr);
  const size_t own = kernel.workspace(attrs, {view, inputs.size()}, {view + inputs.size(), outputs.size()});
  size_t total;
  return __builtin_add_overflow(scratch, own, &total) ? SIZE_MAX : total;
}

Status RunKernel(const KernelDef& kernel, const KernelCall& call) {
  if (!NeedsWidening(kernel, call.inputs, call.outputs)) return kernel.run(call);
  size_t scratch;
  if (!ScratchBytes(call.inputs, call.outputs, &scratch)) return TooSmall(kernel, SIZE_MAX, call.workspace_bytes);
  if (call.workspace == nullptr || call.workspace_bytes < scratch) return TooSmall(kernel, scratch, call.workspace_bytes);
  // Layout from the first 64-byte boundary: the float32 view's TensorRefs, each half
  // operand's float32 buffer, then the kernel's own workspace (the rest).
  uint8_t* base = static_cast<uint8_t*>(call.workspace);
  uint8_t* p = AlignUp(base);
  const size_t n_in = call.inputs.size(), n_out = call.outputs.size();
  TensorRef* view = reinterpret_cast<TensorRef*>(p);
  p += RoundUp((n_in + n_out) * sizeof(TensorRef));
  auto place = [&](TensorRef* slot, const TensorRef& t) {
    std::construct_at(slot, Widened(t, p));
    if (IsHalf(t)) p += RoundUp(static_cast<size_t>(t.num_elements) * sizeof(float));
  };
  for (size_t i = 0; i < n_in; ++i) place(view + i, call.inputs[i]);
  for (size_t i = 0; i < n_out; ++i) place(view + n_in + i, call.outputs[i]);
  const std::span<const TensorRef> inputs(view, n_in), outputs(view + n_in, n_out);
  const size_t used = static_cast<size_t>(p - base);  // <= scratch
  const size_t own = kernel.workspace ? kernel.workspace(call.attrs, inputs, outputs) : 0;
  if (own > call.workspace_bytes - scratch) {  // scratch, not used: the same bound at any alignment
    size_t need;
    if (__builtin_add_overflow(scratch, own, &need)) need = SIZE_MAX;
    return TooSmall(kernel, need, call.workspace_bytes);
  }
  for (size_t i = 0; i < n_in; ++i)
    if (IsHalf(call.inputs[i])) Widen(call.inputs[i], view[i].as<float>());
  const KernelCall widened{call.attrs, inputs, outputs, p, call.workspace_bytes - used, call.threads, call.runtime_size,
                          call.cache_rows};
  Status st = kernel.run(widened);
  if (!st.ok()) return Status(st.code(), st.message() + " (its float16/bfloat16 operands widened to float32)");
  for (size_t i = 0; i < n_out; ++i)
    if (IsHalf(call.outputs[i])) Narrow(view[n_in + i].as<const float>(), call.outputs[i]);
  return Status::Ok();
}

}  // namespace kiln::cpu
