#include "runtime/cuda/device_model.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace kiln::cuda {
namespace {

using std::to_string;

Result<std::shared_ptr<DeviceModel>> LoadDeviceModel(const Driver& drv, const Model& model, const DeviceInfo& dev) {
  const Model::Impl& mi = model.impl();
  auto dm = std::make_shared<DeviceModel>(model);
  dm->drv = &drv;
  if (mi.weights_size) {
    Status st = Check(drv, drv.MemAlloc(&dm->weights, mi.weights_size), "cuMemAlloc (weights)");
    if (!st.ok())
      return ResourceExhausted("cannot allocate " + to_string(mi.weights_size) + " bytes of weights on " + dev.name +
                               ": " + std::string(st.message()));
    KILN_RETURN_IF_ERROR(Check(drv, drv.MemcpyHtoD(dm->weights, mi.weights, mi.weights_size), "cuMemcpyHtoD (weights)"));
  }
  // Kernels that only the CPU backend's plans launch (EntryInfo::backend) have no images.
  std::vector<bool> launched(mi.launch.size(), false);
  for (const PreparedEntry& pe : mi.prepared) {
    if (!pe.backend.empty() && pe.backend != "cuda") continue;
    for (const PreparedInstruction& pi : pe.instructions)
      if (pi.program != nullptr) launched[static_cast<size_t>(pi.program - mi.programs.data())] = true;
  }
  for (size_t k = 0; k < mi.launch.size(); ++k) {
    const PreparedKernel& pk = mi.launch[k];
    if (!launched[k]) {
      dm->modules.push_back(nullptr);
      dm->functions.push_back(nullptr);
      continue;
    }
    const PreparedImage* im = PickImage(pk, dev);
    if (im == nullptr) {
      std::string archs;
      for (const PreparedImage& i : pk.images) archs += (archs.empty() ? "" : ", ") + i.arch;
      return Incompatible("kernel " + to_string(k) + " '" + pk.name + "' has no cubin for " + dev.arch() + " (" +
                          dev.name + ") and no PTX it can JIT; the artifact has: " +
                          (archs.empty() ? "no images (compiled with --arch none)" : archs) +
                          ". Recompile with --arch " + dev.arch());
    }
    CUmodule module = nullptr;
    KILN_RETURN_IF_ERROR(Check(drv, drv.ModuleLoadData(&module, im->data),
                               "cuModuleLoadData (kernel '" + pk.name + "', " + im->arch + ")"));
    dm->modules.push_back(module);
    CUfunction fn = nullptr;
    KILN_RETURN_IF_ERROR(
        Check(drv, drv.ModuleGetFunction(&fn, module, pk.name.c_str()), "cuModuleGetFunction ('" + pk.name + "')"));
    dm->functions.push_back(fn);
  }
  return dm;
}

}  // namespace

DeviceModel::~DeviceModel() {
  for (CUmodule m : modules)
    if (m) drv->ModuleUnload(m);
  if (weights) drv->MemFree(weights);
}

const PreparedImage* PickImage(const PreparedKernel& k, const DeviceInfo& dev) {
  const int cc = dev.cc_major * 10 + dev.cc_minor;
  const PreparedImage* ptx = nullptr;
  int ptx_cc = -1;
  for (const PreparedImage& im : k.images) {
    const auto us = im.arch.find('_');
    if (us == std::string::npos) continue;
    const int arch = std::atoi(im.arch.c_str() + us + 1);
    if (!im.ptx && arch == cc) return &im;
    if (im.ptx && arch <= cc && arch > ptx_cc) ptx = &im, ptx_cc = arch;
  }
  return ptx;
}

Result<std::shared_ptr<DeviceModel>> SharedDeviceModel(const Driver& drv, const Model& model, const DeviceInfo& dev) {
  static std::mutex mu;
  static std::map<std::pair<const Model::Impl*, int>, std::weak_ptr<DeviceModel>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(&model.impl(), dev.ordinal);
  if (auto it = cache.find(key); it != cache.end())
    if (auto dm = it->second.lock()) return dm;
  KILN_ASSIGN_OR_RETURN(auto dm, LoadDeviceModel(drv, model, dev));
  cache[key] = dm;
  return dm;
}

}  // namespace kiln::cuda
