#include "tests/compiler/codegen/host_shim_harness.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <fmt/format.h>

#include "compiler/codegen/host_shim.h"

namespace kiln::testing {
namespace {

using HostFn = void (*)(void* const* inputs, void* const* outputs, const long long* sizes, unsigned* err,
                        unsigned grid, unsigned block);

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Element count of an encoded shape with the size arguments substituted.
Result<int64_t> Count(const std::vector<int64_t>& dims, std::span<const int64_t> sizes) {
  int64_t n = 1;
  for (int64_t d : dims) {
    const int64_t v = d >= 0 ? d : sizes[-(d + 1)];
    if (v < 0) return InvalidArgument(fmt::format("size argument {} is negative ({})", -(d + 1), v));
    n *= v;
  }
  return n;
}

}  // namespace

Result<std::unique_ptr<HostKernels>> HostKernels::Build(const std::vector<codegen::EmittedKernel>& kernels,
                                                        const std::string& dir) {
  std::string text;
  std::set<std::string> names;
  for (const codegen::EmittedKernel& k : kernels) {
    if (!names.insert(k.name).second) continue;
    text += codegen::HostSource(k);
    text += codegen::HostLauncher(k);
  }
  const std::string src = (std::filesystem::path(dir) / "host_kernels.cc").string();
  const std::string lib = (std::filesystem::path(dir) / "host_kernels.so").string();
  const std::string log = (std::filesystem::path(dir) / "host_kernels.log").string();
  {
    std::ofstream out(src, std::ios::binary);
    out << text;
    if (!out) return Internal("cannot write " + src);
  }
  const char* cxx = std::getenv("CXX");
  const std::string compiler = cxx && cxx[0] ? cxx : "c++";
  const std::string cmd = fmt::format("{} {} -o {} {} > {} 2>&1", compiler, codegen::kHostShimFlags,
                                      ShellQuote(lib), ShellQuote(src), ShellQuote(log));
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream in(log);
    std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (output.size() > 4000) output = output.substr(0, 4000) + "\n...";
    return Internal(fmt::format("host compile failed (exit {}): {}\n{}", rc, cmd, output));
  }
  void* handle = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return Internal(fmt::format("dlopen {}: {}", lib, ::dlerror()));
  std::unique_ptr<HostKernels> h(new HostKernels());
  h->handle_ = handle;
  return h;
}

HostKernels::~HostKernels() {
  if (handle_) ::dlclose(handle_);
}

Status HostKernels::Launch(const codegen::EmittedKernel& kernel, std::span<const void* const> inputs,
                           std::span<void* const> outputs, std::span<const int64_t> sizes, HostLaunch launch,
                           uint32_t* err) const {
  if (static_cast<int>(inputs.size()) != kernel.num_inputs || static_cast<int>(outputs.size()) != kernel.num_outputs ||
      static_cast<int>(sizes.size()) != kernel.num_sizes) {
    return InvalidArgument(fmt::format("kernel {} takes {} inputs, {} outputs, {} sizes; got {}, {}, {}", kernel.name,
                                       kernel.num_inputs, kernel.num_outputs, kernel.num_sizes, inputs.size(),
                                       outputs.size(), sizes.size()));
  }
  if (kernel.kind == codegen::LaunchKind::kRowReduction && launch.block != 1 && launch.block % 32 != 0) {
    return InvalidArgument(fmt::format("a RowReduction kernel needs 1 or a multiple of 32 threads, not {}",
                                       launch.block));
  }
  if (launch.grid == 0 || launch.block == 0 || launch.block > 1024) {
    return InvalidArgument(fmt::format("launch {} x {}: expected 1..1024 threads and at least one block",
                                       launch.grid, launch.block));
  }
  auto fn = reinterpret_cast<HostFn>(::dlsym(handle_, (kernel.name + "_host").c_str()));
  if (!fn) return NotFound("no host launcher for kernel " + kernel.name);
  std::fill(err, err + codegen::kErrorWords, 0u);
  std::vector<long long> sz(sizes.begin(), sizes.end());
  fn(const_cast<void* const*>(inputs.data()), outputs.data(), sz.data(), err, launch.grid, launch.block);
  return Status::Ok();
}

HostLaunch SmallLaunch(const codegen::EmittedKernel& kernel, const fused::Program& program,
                       std::span<const int64_t> sizes) {
  uint64_t rows = 1, n = 1;
  for (size_t k = 0; k < program.domain.size(); ++k) {
    const int64_t d = program.domain[k];
    const uint64_t v = static_cast<uint64_t>(d >= 0 ? d : std::max<int64_t>(0, sizes[-(d + 1)]));
    n *= v;
    if (!((program.reduce_axes >> k) & 1u)) rows *= v;
  }
  if (kernel.kind == codegen::LaunchKind::kRowReduction) {
    return {static_cast<unsigned>(std::clamp<uint64_t>(rows, 1, 3)), 64};
  }
  const uint64_t per_block = 4ull * static_cast<uint64_t>(kernel.vector);
  return {static_cast<unsigned>(std::clamp<uint64_t>((n + per_block - 1) / per_block, 1, 5)), 4};
}

Status RunHostKernel(const HostKernels& lib, const codegen::EmittedKernel& kernel, const fused::Program& program,
                     std::span<const cpu::TensorRef> inputs, std::span<const cpu::TensorRef> outputs,
                     std::span<const int64_t> sizes, std::optional<HostLaunch> launch) {
  if (inputs.size() != program.inputs.size() || outputs.size() != program.outputs.size() ||
      static_cast<int>(sizes.size()) != program.num_sizes) {
    return InvalidArgument("tensor or size counts do not match the program");
  }
  auto check = [&](const cpu::TensorRef& t, const fused::TensorSpec& spec, const std::string& what) -> Status {
    Result<int64_t> n = Count(spec.dims, sizes);
    if (!n.ok()) return n.status();
    if (t.dtype != spec.dtype || t.num_elements != *n) {
      return InvalidArgument(fmt::format("{}: expected {} x {}, got {} x {}", what, *n, DTypeName(spec.dtype),
                                         t.num_elements, DTypeName(t.dtype)));
    }
    return Status::Ok();
  };
  std::vector<const void*> in;
  std::vector<void*> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_RETURN_IF_ERROR(check(inputs[i], program.inputs[i], fmt::format("input {}", i)));
    in.push_back(inputs[i].data);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    KILN_RETURN_IF_ERROR(check(outputs[i], program.outputs[i].tensor, fmt::format("output {}", i)));
    out.push_back(outputs[i].data);
  }
  uint32_t err[codegen::kErrorWords] = {};
  KILN_RETURN_IF_ERROR(lib.Launch(kernel, in, out, sizes, launch ? *launch : SmallLaunch(kernel, program, sizes), err));
  if (err[0] != 0) {
    const uint32_t check_index = err[0] - 1;
    const int64_t index = static_cast<int64_t>((static_cast<uint64_t>(err[2]) << 32) | err[1]);
    const std::string what =
        check_index < program.checks.size() ? program.checks[check_index] : fmt::format("check {}", check_index);
    return InvalidArgument(fmt::format("{}: index {} is out of range", what, index));
  }
  return Status::Ok();
}

}  // namespace kiln::testing
