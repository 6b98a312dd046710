#include "runtime/cuda/device_memory.h"

#include <algorithm>
#include <string>

namespace kiln::cuda {

using std::to_string;

Status DeviceBuffer::Reserve(uint64_t want, const char* what) {
  if (want <= bytes) return Status::Ok();
  Free();
  Status st = Check(*drv, drv->MemAlloc(&ptr, want), what);
  if (!st.ok())
    return ResourceExhausted("cannot allocate " + to_string(want) + " bytes for the " + what + ": " +
                             std::string(st.message()));
  bytes = want;
  return Status::Ok();
}

void DeviceBuffer::Free() {
  if (ptr) drv->MemFree(ptr);
  ptr = 0;
  bytes = 0;
}

DeviceMemory::DeviceMemory(const Driver& drv, size_t num_inputs) : input_ptrs(num_inputs), drv_(&drv) {
  for (DeviceBuffer* b : Buffers()) b->drv = &drv;
}

CUdeviceptr DeviceMemory::Address(const DeviceModel& dm, const PreparedEntry& pe, const EntryState& s, int32_t t) const {
  const PreparedTensor& pt = pe.tensors[t];
  switch (pt.storage) {
    case StorageKind::kArena: return arena.ptr + static_cast<CUdeviceptr>(s.arena_offsets[t]);
    case StorageKind::kWeight: return dm.Weight(pt.index);
    case StorageKind::kInput: return input_ptrs[pt.index];
    case StorageKind::kSymbolic: return symbolic.ptr + static_cast<CUdeviceptr>(pt.values_begin) * 8;
    case StorageKind::kAbsent: break;
  }
  return 0;
}

Status DeviceMemory::Reserve(const EntryState& s, std::span<const TensorView> inputs) {
  KILN_RETURN_IF_ERROR(arena.Reserve(std::max<uint64_t>(s.arena_needed, 64), "device arena"));
  auto staged = [](const TensorView& v) { return v.memory == MemoryKind::kDevice ? 0 : (v.num_bytes() + 255) / 256 * 256; };
  uint64_t total = 0;
  for (const TensorView& v : inputs) total += staged(v);
  KILN_RETURN_IF_ERROR(staging.Reserve(std::max<uint64_t>(total, 256), "input staging"));
  total = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    input_ptrs[i] = inputs[i].memory == MemoryKind::kDevice ? reinterpret_cast<CUdeviceptr>(inputs[i].data)
                                                            : staging.ptr + total;
    total += staged(inputs[i]);
  }
  return symbolic.Reserve(std::max<uint64_t>(s.symbolic.size() * 8, 64), "symbolic values");
}

Status DeviceMemory::Stage(const EntryState& s, std::span<const TensorView> inputs, CUstream stream) {
  const Driver& drv = *drv_;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].memory != MemoryKind::kDevice && inputs[i].num_bytes()) {
      const CUresult r = drv.MemcpyHtoDAsync(input_ptrs[i], inputs[i].data, inputs[i].num_bytes(), stream);
      if (r != CUDA_SUCCESS) return Check(drv, r, "copy input " + to_string(i) + " to the device");
    }
  }
  return UploadSymbolic(s, stream);
}

Status DeviceMemory::UploadSymbolic(const EntryState& s, CUstream stream) {
  if (s.symbolic.empty()) return Status::Ok();
  return Check(*drv_, drv_->MemcpyHtoDAsync(symbolic.ptr, s.symbolic.data(), s.symbolic.size() * 8, stream),
               "copy symbolic values to the device");
}

uint64_t DeviceMemory::bytes() const {
  return arena.bytes + staging.bytes + symbolic.bytes + err.bytes + library_ws.bytes;
}

}  // namespace kiln::cuda
