// Einsum by a direct loop over the index space: for each output element, the sum over
// every label not in the output of the product of the operands' elements. A label that
// repeats within one operand (a diagonal) adds its strides; an ellipsis dim of size 1
// broadcasts with stride 0. Floats accumulate in double; integers wrap in 64 bits.
#include <cstdint>
#include <type_traits>

#include "runtime/kernels/einsum_equation.h"
#include "runtime/kernels/families.h"
#include "runtime/kernels/float_storage.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

constexpr std::string_view kName = "Einsum";

// Label sizes and per-operand label strides, checked against each other.
struct Layout {
  int64_t size[kEinsumMaxLabels] = {};
  int64_t stride[kEinsumMaxOperands][kEinsumMaxLabels] = {};
  int8_t sum_labels[kEinsumMaxLabels] = {};
  int num_sum = 0;
};

Status MakeLayout(const EinsumSpec& spec, std::span<const TensorRef> in, const TensorRef& y, Layout* l) {
  for (int id = 0; id < kEinsumMaxLabels; ++id) l->size[id] = spec.used[id] ? 1 : 0;
  bool fixed[kEinsumMaxLabels] = {};
  for (int k = 0; k < spec.num_operands; ++k)
    for (int d = 0; d < spec.ranks[k]; ++d) {
      const int id = spec.labels[k][d];
      const int64_t n = in[k].dims[d];
      const bool broadcast = id >= kEinsumLetters;  // only ellipsis dims broadcast
      if (broadcast && n == 1) continue;
      if (fixed[id] && l->size[id] != n)
        return OpError(kName, "input " + std::to_string(k) + " dim " + std::to_string(d) + " is " + std::to_string(n) +
                                  ", another dim with the same label is " + std::to_string(l->size[id]));
      l->size[id] = n;
      fixed[id] = true;
    }
  for (int k = 0; k < spec.num_operands; ++k) {
    int64_t s = 1;
    for (int d = spec.ranks[k] - 1; d >= 0; --d) {
      const int id = spec.labels[k][d];
      if (in[k].dims[d] != 1 || l->size[id] == 1) l->stride[k][id] += s;
      s *= in[k].dims[d];
    }
  }
  bool in_out[kEinsumMaxLabels] = {};
  int64_t out_count = 1;
  for (int j = 0; j < spec.out_rank; ++j) {
    const int id = spec.out_labels[j];
    in_out[id] = true;
    if (y.rank != spec.out_rank || y.dims[j] != l->size[id])
      return OpError(kName, "output " + ShapeStr(y) + " does not match the equation's output dim " + std::to_string(j) +
                                " of size " + std::to_string(l->size[id]));
    out_count *= l->size[id];
  }
  if (y.num_elements != out_count) return OpError(kName, "output " + ShapeStr(y) + " has the wrong element count");
  for (int id = 0; id < kEinsumMaxLabels; ++id)
    if (spec.used[id] && !in_out[id]) l->sum_labels[l->num_sum++] = static_cast<int8_t>(id);
  return Status::Ok();
}

// Loops over the output labels and, inside, the summed labels; `mul(k, offset)` multiplies
// the running product by operand k's element, `store(i, acc)` writes output element i.
template <typename Acc, typename Load, typename StoreFn>
void Contract(const EinsumSpec& spec, const Layout& l, int64_t out_count, Load load, StoreFn store) {
  int64_t out_dims[kMaxRank], sum_dims[kEinsumMaxLabels];
  for (int j = 0; j < spec.out_rank; ++j) out_dims[j] = l.size[spec.out_labels[j]];
  int64_t sum_count = 1;
  for (int j = 0; j < l.num_sum; ++j) sum_count *= (sum_dims[j] = l.size[l.sum_labels[j]]);
  int64_t out_idx[kMaxRank] = {}, sum_idx[kEinsumMaxLabels] = {};
  for (int64_t i = 0; i < out_count; ++i) {
    int64_t base[kEinsumMaxOperands] = {};
    for (int k = 0; k < spec.num_operands; ++k)
      for (int j = 0; j < spec.out_rank; ++j) base[k] += out_idx[j] * l.stride[k][spec.out_labels[j]];
    Acc acc = 0;
    for (int64_t s = 0; s < sum_count; ++s) {
      Acc prod = 1;
      for (int k = 0; k < spec.num_operands; ++k) {
        int64_t off = base[k];
        for (int j = 0; j < l.num_sum; ++j) off += sum_idx[j] * l.stride[k][l.sum_labels[j]];
        prod = prod * load(k, off);
      }
      acc = acc + prod;
      for (int j = l.num_sum - 1; j >= 0 && ++sum_idx[j] == sum_dims[j]; --j) sum_idx[j] = 0;
    }
    store(i, acc);
    for (int j = spec.out_rank - 1; j >= 0 && ++out_idx[j] == out_dims[j]; --j) out_idx[j] = 0;
  }
}

Status Einsum(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  const int n = static_cast<int>(call.inputs.size());
  if (n > kEinsumMaxOperands)
    return OpUnimplemented(kName, std::to_string(n) + " inputs, at most " + std::to_string(kEinsumMaxOperands));
  int ranks[kEinsumMaxOperands];
  const TensorRef& y = call.outputs[0];
  for (int k = 0; k < n; ++k) {
    if (!call.inputs[k].present() || call.inputs[k].dtype != y.dtype)
      return OpError(kName, "input " + std::to_string(k) + " must be present with the output's dtype " + DTypeStr(y.dtype));
    ranks[k] = call.inputs[k].rank;
  }
  EinsumSpec spec;
  Status parsed = ParseEinsum(call.attrs.GetString("equation", ""), ranks, n, &spec);
  if (!parsed.ok()) return OpError(kName, std::string(parsed.message()));
  Layout l;
  KILN_RETURN_IF_ERROR(MakeLayout(spec, call.inputs, y, &l));
  const int64_t count = y.num_elements;
  if (IsFloatStorage(y.dtype)) {
    Contract<double>(spec, l, count, [&](int k, int64_t off) { return LoadFloat(call.inputs[k], off); },
                     [&](int64_t i, double v) { StoreFloat(y, i, v); });
    return Status::Ok();
  }
  const bool ok = VisitNumeric(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    // Unsigned 64-bit arithmetic wraps where a signed product would be undefined.
    Contract<uint64_t>(spec, l, count,
                       [&](int k, int64_t off) { return static_cast<uint64_t>(call.inputs[k].as<const T>()[off]); },
                       [&](int64_t i, uint64_t v) { y.as<T>()[i] = static_cast<T>(v); });
  });
  if (!ok) return OpError(kName, "unsupported dtype " + DTypeStr(y.dtype));
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"Einsum", Einsum, nullptr, true},
};

}  // namespace

std::span<const KernelDef> EinsumKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
