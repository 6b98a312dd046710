#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel.h"
#include "runtime/op_table.h"

namespace kiln::cpu {
namespace {

// Built once on first use; a function-local static makes the build thread-safe and
// keeps the family files free of static-initialization-order concerns.
const std::vector<KernelDef>& Table() {
  static const std::vector<KernelDef> table = [] {
    const std::span<const KernelDef> families[] = {
#if KILN_SELECTIVE
    // Only the families that hold a kept op (runtime/kernels/selective.h); the others are not
    // compiled into a selective runtime.
#include "selective/selected_families.inc"
#else
        ElementwiseKernels(), UnaryKernels(),         CastKernels(),
        MatMulKernels(),      ConvKernels(),          NormalizationKernels(),
        PoolKernels(),        SoftmaxKernels(),       ReduceKernels(),
        DataMovementKernels(), ShapeKernels(),        ResizeKernels(),
        LstmKernels(),
        RnnKernels(),
        TransformerKernels(),
        CumulativeKernels(), BitCastKernels(), TensorScatterKernels(), CausalConvKernels(),
        QuantizeKernels(), GridSampleKernels(), SignalKernels(),
        MathKernels(), MatrixKernels(), ScatterKernels(), TopKKernels(), VisionKernels(),
        FeatureNormKernels(), EinsumKernels(), CenterCropPadKernels(),
        SelectionKernels(), ReverseSequenceKernels()
#endif
    };
    std::vector<KernelDef> all;
    for (auto family : families) all.insert(all.end(), family.begin(), family.end());
    for (KernelDef& k : all) {
      if (const OpInfo* info = FindOpInfo(k.op)) k.arity = info->arity;
    }
    // By op, stably: an insertion sort, as fast as any for the ~200 rows sorted once per process,
    // where std::stable_sort's merge code is about 2.5 KB of a selective runtime.
    for (size_t i = 1; i < all.size(); ++i)
      for (size_t j = i; j > 0 && all[j].op < all[j - 1].op; --j) std::swap(all[j], all[j - 1]);
    return all;
  }();
  return table;
}

}  // namespace

const KernelDef* FindKernel(std::string_view op) {
  const auto& table = Table();
  auto it = std::lower_bound(table.begin(), table.end(), op,
                             [](const KernelDef& k, std::string_view name) { return k.op < name; });
  if (it == table.end() || it->op != op) return nullptr;
  return &*it;
}

std::span<const KernelDef> AllKernels() { return Table(); }

}  // namespace kiln::cpu
