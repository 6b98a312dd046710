#include "runtime/cpu/native/dispatch.h"

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/fused/tensor_checks.h"
#include "runtime/kernels/thread_pool.h"

namespace kiln::native {
namespace {

using std::to_string;
using cpu::kMinPartWork, cpu::MinItemsPerPart, cpu::ParallelFor, cpu::ParallelParts, cpu::TensorRef, cpu::ThreadPool;

// The value of encoded dim `d` (program.h), or false when it names a missing size argument.
bool DimValue(int64_t d, std::span<const int64_t> sizes, int64_t* v) {
  if (d >= 0) {
    *v = d;
    return true;
  }
  const uint64_t s = static_cast<uint64_t>(-(d + 1));
  if (s >= sizes.size()) return false;
  *v = sizes[s];
  return true;
}

}  // namespace

Status RunNative(KernelFn fn, const fused::Program& p, std::span<const cpu::TensorRef> inputs,
                 std::span<const cpu::TensorRef> outputs, std::span<const int64_t> sizes, cpu::ThreadPool* threads) {
  if (sizes.size() != static_cast<size_t>(p.num_sizes))
    return InvalidArgument("fused program: " + to_string(sizes.size()) + " size arguments given, expected " +
                           to_string(p.num_sizes));
  if (p.inputs.size() > kMaxOperands || p.outputs.size() > kMaxOperands)
    return Internal("fused program: more than " + to_string(kMaxOperands) + " inputs or outputs for native code");
  // Work items: rows (one per combination of kept coordinates; every element when no axis is
  // reduced), each of `cols` columns.
  int64_t rows = 1, cols = 1, v = 0;
  for (size_t a = 0; a < p.domain.size(); ++a) {
    if (!DimValue(p.domain[a], sizes, &v) || v < 0)
      return InvalidArgument("fused program: domain " + fused::DimsText(p.domain) + " dim " + to_string(a) + " is " +
                             to_string(v) + ", expected >= 0");
    int64_t& n = (p.reduce_axes >> a) & 1u ? cols : rows;
    if (__builtin_mul_overflow(n, v, &n))
      return InvalidArgument("fused program: domain " + fused::DimsText(p.domain) + " overflows int64");
  }
  int64_t total = 0;
  if (__builtin_mul_overflow(rows, cols, &total))
    return InvalidArgument("fused program: domain " + fused::DimsText(p.domain) + " overflows int64");
  KILN_RETURN_IF_ERROR(fused::CheckTensors(p.inputs, inputs, sizes, "input"));
  if (outputs.size() != p.outputs.size())
    return InvalidArgument("fused program: " + to_string(outputs.size()) + " outputs given, expected " +
                           to_string(p.outputs.size()));
  for (size_t k = 0; k < outputs.size(); ++k) {
    auto at = [&] { return "fused program: output " + to_string(k); };
    const fused::Output& o = p.outputs[k];
    if (outputs[k].dtype != o.tensor.dtype)
      return InvalidArgument(at() + " has dtype " + std::string(DTypeName(outputs[k].dtype)) + ", expected " + std::string(DTypeName(o.tensor.dtype)));
    const int64_t expected = o.per_row ? rows : total;
    int64_t count = -1;
    if (outputs[k].num_elements != expected || !fused::CountOf(o.tensor.dims, sizes, &count) || count != expected)
      return InvalidArgument(at() + " has " + to_string(outputs[k].num_elements) + " elements, expected " +
                             to_string(expected) + (o.per_row ? " (one per row)" : " (one per domain element)"));
    if (expected > 0 && outputs[k].data == nullptr) return InvalidArgument(at() + " has no data");
  }
  const int64_t items = p.reduce_axes != 0 ? rows : total;
  if (items == 0 || (p.reduce_axes == 0 && total == 0)) return Status::Ok();

  const void* in[kMaxOperands];
  void* out[kMaxOperands];
  for (size_t k = 0; k < inputs.size(); ++k) in[k] = inputs[k].data;
  for (size_t k = 0; k < outputs.size(); ++k) out[k] = outputs[k].data;
  struct Part {
    int32_t ret = 0;
    int64_t failed[3] = {};
  };
  Part parts[ThreadPool::kMaxThreads];
  // A work item's cost: its columns times the program's nodes, as the interpreter counts it.
  int64_t item_work = 0;
  if (__builtin_mul_overflow(std::max<int64_t>(cols, 1), static_cast<int64_t>(p.nodes.size()), &item_work))
    item_work = kMinPartWork;
  const int64_t min_items = MinItemsPerPart(item_work);
  const int nparts = ParallelParts(threads, items, min_items);
  ParallelFor(threads, items, min_items, [&](int64_t begin, int64_t end, int part) {
    KernelArgs args{in, out, sizes.data(), begin, end, parts[part].failed};
    parts[part].ret = fn(&args);
  });
  // Parts are in domain order: the first failing one holds the first failure.
  for (int k = 0; k < nparts; ++k) {
    const Part& r = parts[k];
    if (r.ret == 0) continue;
    if (r.ret != 1) return Internal("native code returned " + to_string(r.ret) + ", expected 0 or 1 (abi.h)");
    if (r.failed[0] < 0 || static_cast<uint64_t>(r.failed[0]) >= p.checks.size())
      return Internal("native code reported check " + to_string(r.failed[0]) + " out of range (checks: " +
                      to_string(p.checks.size()) + ")");
    return InvalidArgument(p.checks[r.failed[0]] + ": " + fused::IndexOutOfRange(r.failed[1], r.failed[2]));
  }
  return Status::Ok();
}

}  // namespace kiln::native
