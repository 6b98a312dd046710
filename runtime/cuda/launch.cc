#include "runtime/cuda/launch.h"

#include <algorithm>
#include <span>
#include <string>

namespace kiln::cuda {
namespace {

int64_t DimValue(int64_t d, std::span<const int64_t> sizes) { return d >= 0 ? d : sizes[-(d + 1)]; }

}  // namespace

Status Launcher::Launch(const DeviceModel& dm, const DeviceMemory& memory, const DeviceInfo& dev,
                        const PreparedEntry& pe, const PreparedInstruction& pi, const EntryState& s, CUstream stream) {
  const Model::Impl& mi = dm.model.impl();
  const size_t k = static_cast<size_t>(pi.program - mi.programs.data());
  const PreparedKernel& pk = mi.launch[k];
  const fused::Program& p = *pi.program;
  if (!p.checks.empty() && std::find(checked_.begin(), checked_.end(), &p) == checked_.end()) checked_.push_back(&p);
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
  ptr_args_.clear();
  size_args_.clear();
  params_.clear();
  for (int32_t i = 0; i < pi.num_inputs + pi.num_outputs; ++i) ptr_args_.push_back(memory.Address(dm, pe, s, ops[i]));
  for (int64_t v : sizes) size_args_.push_back(static_cast<long long>(v));
  ptr_args_.push_back(memory.err.ptr);
  // Parameter order: inputs, outputs, sizes, err (compiler/codegen/cuda_source.h).
  for (int32_t i = 0; i < pi.num_inputs + pi.num_outputs; ++i) params_.push_back(&ptr_args_[i]);
  for (long long& v : size_args_) params_.push_back(&v);
  params_.push_back(&ptr_args_.back());
  const Driver& drv = *dm.drv;
  const CUresult r = drv.LaunchKernel(dm.functions[k], grid, 1, 1, static_cast<unsigned>(pk.block), 1, 1, 0, stream,
                                      params_.data(), nullptr);
  return r == CUDA_SUCCESS ? Status::Ok() : Check(drv, r, pi.label + ": cuLaunchKernel");
}

Status Launcher::ReportIndexError(const uint32_t words[4]) {
  const int64_t index = static_cast<int64_t>(static_cast<uint64_t>(words[1]) | static_cast<uint64_t>(words[2]) << 32);
  // The error words say which check of its program failed, not which kernel: name the check when
  // one program with checks ran, else list the candidates.
  std::string what;
  for (const fused::Program* p : checked_)
    if (words[0] - 1 < p->checks.size()) what += (what.empty() ? "" : " or ") + p->checks[words[0] - 1];
  checked_.clear();
  if (what.empty()) what = "an index check";
  return InvalidArgument(what + ": " + fused::IndexOutOfRange(index, words[3]) + " (found by a generated kernel)");
}

}  // namespace kiln::cuda
