// The CUDA driver loader (runtime/cuda/driver.cc). Built only with the CUDA toolkit's headers
// (KILN_HAVE_CUDA); every check here but the "[gpu]" case runs without a GPU or a driver.
#if KILN_HAVE_CUDA

#include "runtime/cuda/driver.h"

#include <dlfcn.h>
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu_test_util.h"
#include "tests/text_util.h"

namespace kiln::cuda {
namespace {

using kiln::testing::Contains;

// Whether the loader can open the driver at all, asked independently of driver.cc.
bool DriverLibraryOpens() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == nullptr) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  return h != nullptr;
}

TEST_CASE(
    "LoadDriver: without a driver, kFailedPrecondition 'no CUDA driver found' - with one, a CUDA 13+ table") {
  Result<const Driver*> drv = LoadDriver();
  if (!DriverLibraryOpens()) {
    REQUIRE_FALSE(drv.ok());
    CHECK(drv.status().code() == StatusCode::kFailedPrecondition);
    CHECK(Contains(drv.status().message(), "no CUDA driver found (libcuda.so.1: "));
    return;
  }
  if (!drv.ok()) {
    // A driver library without a usable device (or the toolkit's stub on the library path):
    // still a precise precondition failure, never a crash.
    CHECK(drv.status().code() == StatusCode::kFailedPrecondition);
    const std::string& m = drv.status().message();
    CHECK(
        (Contains(m, "no CUDA device") || Contains(m, "no CUDA driver found") || Contains(m, "CUDA driver")));
    return;
  }
  const Driver& d = **drv;
  CHECK(d.version / 1000 >= CUDA_VERSION / 1000);
  CHECK((d.Init != nullptr));
  CHECK((d.MemAlloc != nullptr));
  CHECK((d.GraphDestroy != nullptr));
  int version = 0;
  REQUIRE(Check(d, d.DriverGetVersion(&version), "cuDriverGetVersion").ok());
  CHECK(version == d.version);
}

TEST_CASE("LoadDriver keeps its first result and is safe to call from many threads") {
  Result<const Driver*> first = LoadDriver();
  std::vector<std::string> seen(8);
  std::vector<const Driver*> tables(8, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      Result<const Driver*> r = LoadDriver();
      seen[i] = r.status().ToString();
      if (r.ok()) tables[i] = *r;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 8; ++i) {
    CHECK(seen[i] == first.status().ToString());
    CHECK(tables[i] == (first.ok() ? *first : nullptr));
  }
}

TEST_CASE("Check: an empty table still gives kDeviceError with the number") {
  const Driver none;
  CHECK(Check(none, CUDA_SUCCESS, "cuMemAlloc (arena)").ok());
  Status s = Check(none, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc (arena)");
  CHECK(s.code() == StatusCode::kDeviceError);
  CHECK(s.message() == "cuMemAlloc (arena): CUDA error 2");
  CHECK(QueryDevice(none, 0).status().code() == StatusCode::kInternal);
}

// A fake driver: QueryDevice's logic and Check's naming, without a GPU.
struct Fake {
  static inline int count = 0;
  static inline int failing_attribute = -1;  // a CUdevice_attribute that fails, or -1
};

CUresult FakeGetErrorName(CUresult r, const char** name) {
  switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      *name = "CUDA_ERROR_OUT_OF_MEMORY";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_DEVICE:
      *name = "CUDA_ERROR_INVALID_DEVICE";
      return CUDA_SUCCESS;
    default:
      *name = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
  }
}
CUresult FakeGetErrorString(CUresult r, const char** text) {
  *text = r == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : "invalid device ordinal";
  return CUDA_SUCCESS;
}
CUresult FakeDeviceGetCount(int* n) {
  *n = Fake::count;
  return CUDA_SUCCESS;
}
CUresult FakeDeviceGet(CUdevice* dev, int ordinal) {
  *dev = 100 + ordinal;
  return CUDA_SUCCESS;
}
CUresult FakeDeviceGetName(char* name, int len, CUdevice dev) {
  std::string s = "Fake GPU " + std::to_string(dev);
  std::strncpy(name, s.c_str(), static_cast<size_t>(len));
  return CUDA_SUCCESS;
}
CUresult FakeDeviceGetAttribute(int* v, CUdevice_attribute attr, CUdevice dev) {
  if (static_cast<int>(attr) == Fake::failing_attribute) return CUDA_ERROR_INVALID_DEVICE;
  switch (attr) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *v = 8;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *v = 6;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *v = dev - 100 + 40;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}
CUresult FakeDeviceTotalMem(size_t* bytes, CUdevice dev) {
  *bytes = (size_t{24} << 30) + static_cast<size_t>(dev);
  return CUDA_SUCCESS;
}

Driver FakeDriver() {
  Driver d;
  d.GetErrorName = &FakeGetErrorName;
  d.GetErrorString = &FakeGetErrorString;
  d.DeviceGetCount = &FakeDeviceGetCount;
  d.DeviceGet = &FakeDeviceGet;
  d.DeviceGetName = &FakeDeviceGetName;
  d.DeviceGetAttribute = &FakeDeviceGetAttribute;
  d.DeviceTotalMem = &FakeDeviceTotalMem;
  d.version = 13000;
  return d;
}

TEST_CASE("Check names the error through the table") {
  const Driver d = FakeDriver();
  Status s = Check(d, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc (arena)");
  CHECK(s.code() == StatusCode::kDeviceError);
  CHECK(s.message() == "cuMemAlloc (arena): CUDA_ERROR_OUT_OF_MEMORY: out of memory");
  // A code the driver cannot name falls back to the number; a sticky one (the Driver API
  // reference: the process "is left in an inconsistent state") says what follows.
  CHECK(Check(d, CUDA_ERROR_LAUNCH_FAILED, "cuLaunchKernel").message() ==
        "cuLaunchKernel: CUDA error 719 (a sticky error: this process's CUDA context refuses all further work; "
        "restart the process)");
  CHECK(IsSticky(CUDA_ERROR_ILLEGAL_ADDRESS));
  CHECK_FALSE(IsSticky(CUDA_ERROR_OUT_OF_MEMORY));
  CHECK_FALSE(IsSticky(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES));
}

TEST_CASE("QueryDevice: no device, ordinals out of range, attributes, driver errors") {
  const Driver d = FakeDriver();
  Fake::failing_attribute = -1;

  Fake::count = 0;
  Result<DeviceInfo> none = QueryDevice(d, 0);
  CHECK(none.status().code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(none.status().message(), "no CUDA device"));

  Fake::count = 2;
  Result<DeviceInfo> info = QueryDevice(d, 1);
  REQUIRE(info.ok());
  CHECK(info->ordinal == 1);
  CHECK(info->device == 101);
  CHECK(info->name == "Fake GPU 101");
  CHECK(info->cc_major == 8);
  CHECK(info->cc_minor == 6);
  CHECK(info->arch() == "sm_86");
  CHECK(info->sm_count == 41);
  CHECK(info->total_bytes == (uint64_t{24} << 30) + 101);

  Result<DeviceInfo> past = QueryDevice(d, 2);
  CHECK(past.status().code() == StatusCode::kOutOfRange);
  CHECK(Contains(past.status().message(), "CUDA device 2 does not exist: the driver sees 2 devices (0..1)"));
  CHECK(QueryDevice(d, -1).status().code() == StatusCode::kOutOfRange);

  Fake::failing_attribute = CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT;
  Result<DeviceInfo> bad = QueryDevice(d, 0);
  CHECK(bad.status().code() == StatusCode::kDeviceError);
  CHECK(bad.status().message() ==
        "cuDeviceGetAttribute(multiprocessor count) (device 0): CUDA_ERROR_INVALID_DEVICE: invalid device "
        "ordinal");
  Fake::failing_attribute = -1;
}

TEST_CASE("LoadDriverFrom: a missing file, a library that is no driver, the toolkit's stub") {
  // Pin LoadDriver's cached answer first: the stub has the driver's soname, so once it is
  // loaded a later dlopen("libcuda.so.1") in this process would find it.
  const bool have_driver = LoadDriver().ok();
  Driver d;

  Status missing = LoadDriverFrom("/nonexistent/libcuda.so.1", d);
  CHECK(missing.code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(missing.message(), "no CUDA driver found (/nonexistent/libcuda.so.1: "));
  CHECK((d.Init == nullptr));  // untouched on failure

  Status not_driver = LoadDriverFrom("libm.so.6", d);
  CHECK(not_driver.code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(not_driver.message(), "lacks cuGetProcAddress_v2"));
  CHECK((d.Init == nullptr));

  if (have_driver) return;  // never load the stub into a process that uses a real driver
  std::string stub;
  for (const char* p : {"/usr/local/cuda/lib64/stubs/libcuda.so",
                        "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so"}) {
    if (std::filesystem::exists(p)) {
      stub = p;
      break;
    }
  }
  if (stub.empty()) {
    MESSAGE("no CUDA toolkit stub libcuda.so under /usr/local/cuda: stub check not run");
    return;
  }
  Status s = LoadDriverFrom(stub, d);
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(s.message(), "no CUDA driver found (" + stub + " is the CUDA toolkit's stub library"));
  CHECK(Contains(s.message(), "CUDA_ERROR_STUB_LIBRARY"));
}

TEST_CASE("[gpu] QueryDevice reports device 0 of the real driver") {
  KILN_REQUIRE_GPU();
  const Driver& d = **LoadDriver();
  int count = 0;
  REQUIRE(Check(d, d.DeviceGetCount(&count), "cuDeviceGetCount").ok());
  REQUIRE(count >= 1);
  Result<DeviceInfo> info = QueryDevice(d, 0);
  REQUIRE(info.ok());
  MESSAGE(info->name << " " << info->arch() << ", " << info->sm_count << " SMs, " << (info->total_bytes >> 20)
                     << " MiB, driver " << d.version);
  CHECK(!info->name.empty());
  CHECK(info->cc_major >= 5);
  CHECK(info->sm_count > 0);
  CHECK(info->total_bytes > (uint64_t{1} << 30));
  CHECK(QueryDevice(d, count).status().code() == StatusCode::kOutOfRange);

  // The resolved entry points work together: a primary context, an allocation, a round trip.
  CUcontext ctx = nullptr;
  REQUIRE(Check(d, d.DevicePrimaryCtxRetain(&ctx, info->device), "cuDevicePrimaryCtxRetain").ok());
  REQUIRE(Check(d, d.CtxSetCurrent(ctx), "cuCtxSetCurrent").ok());
  CUdeviceptr p = 0;
  REQUIRE(Check(d, d.MemAlloc(&p, 256), "cuMemAlloc").ok());
  CUstream stream = nullptr;
  REQUIRE(Check(d, d.StreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate").ok());
  std::vector<unsigned char> back(256, 0);
  CHECK(Check(d, d.MemsetD8Async(p, 0x5a, 256, stream), "cuMemsetD8Async").ok());
  CHECK(Check(d, d.MemcpyDtoHAsync(back.data(), p, 256, stream), "cuMemcpyDtoHAsync").ok());
  CHECK(Check(d, d.StreamSynchronize(stream), "cuStreamSynchronize").ok());
  CHECK(back == std::vector<unsigned char>(256, 0x5a));
  CHECK(Check(d, d.StreamDestroy(stream), "cuStreamDestroy").ok());
  CHECK(Check(d, d.MemFree(p), "cuMemFree").ok());
  CHECK(Check(d, d.DevicePrimaryCtxRelease(info->device), "cuDevicePrimaryCtxRelease").ok());
}

}  // namespace
}  // namespace kiln::cuda

#endif  // KILN_HAVE_CUDA
