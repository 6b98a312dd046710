// What the emulated libraries' self-tests (cublaslt_check.cc, cudnn_check.cc) need from the
// program they are linked into, besides emulator.h and the libraries' APIs: a CUDA context,
// device buffers, a way to wait for enqueued work, and fault injection. check_hooks.cc
// implements them with the emulated driver (cuInit, cuMemAlloc, cuStreamSynchronize, control.h).
#pragma once

#include <cstddef>

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
