// What the emulated libraries' self-tests (cublaslt_check.cc, cudnn_check.cc) need from the
// program they are linked into, besides emulator.h and the libraries' APIs: a CUDA context,
// device buffers, a way to wait for enqueued work, and fault injection. check_hooks.cc
// implements them with the emulated driver (cuInit, cuMemAlloc, cuStreamSynchronize, control.h);
// CheckUpload and CheckDownload copy with the host, which may read and write device memory.
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

// Makes a CUDA context current on the calling thread. False (after printing why) on failure.
bool CheckInit();

// `bytes` of device memory (at least 256-byte aligned) that host code may also read and write
// directly, as the emulated device's memory can be (emulator.h). Never null: aborts on failure.
void* CheckAlloc(size_t bytes);
void CheckFree(void* p);

// Waits until all work enqueued on the current context's legacy default stream has run.
void CheckSync();

// Arms the fault `name` (e.g. "blas-not-supported") to fire at its next due check.
void CheckSetFault(const char* name);

// Makes the check's context current (true) or leaves no context current (false) on this thread.
void CheckContextCurrent(bool current);

// A device copy of `host`, followed by `extra_bytes` of device memory it leaves as they are.
template <typename T>
T* CheckUpload(const std::vector<T>& host, size_t extra_bytes = 0) {
  T* p = static_cast<T*>(CheckAlloc(host.size() * sizeof(T) + extra_bytes));
  std::memcpy(p, host.data(), host.size() * sizeof(T));
  return p;
}

// Waits for the enqueued work (CheckSync), then copies `count` elements at `dev` to the host.
template <typename T>
std::vector<T> CheckDownload(const T* dev, size_t count) {
  CheckSync();
  return std::vector<T>(dev, dev + count);
}
