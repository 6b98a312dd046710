#include "npy_body.h"

#include <cstdio>
#include <cstring>
#include <random>

#include "kiln/tensor_files.h"

kiln::Status ParseNpyInput(std::string_view name, std::string_view npy, RequestInputs& inputs) {
  const std::string where = "input '" + std::string(name) + "'";
  // Whatever the reader finds wrong is the request's fault: kInvalidArgument (HTTP 400).
  kiln::Result<kiln::io::HostTensor> t = kiln::io::ParseNpy(npy.data(), npy.size(), ".npy");
  if (!t.ok()) return kiln::InvalidArgument(std::string(t.status().message())).WithContext(where);
  KILN_ASSIGN_OR_RETURN(HostTensor * dst, inputs.Add(name, t->dtype, t->dims, t->num_elements()));
  std::memcpy(dst->data(), t->bytes.data(), t->bytes.size());
  return kiln::Status();
}

kiln::Result<MultipartBody> NpyMultipartOutputs(const std::vector<kiln::TensorInfo>& infos,
                                                const std::vector<kiln::TensorView>& outputs) {
  std::vector<std::string> files;
  for (size_t i = 0; i < outputs.size() && i < infos.size(); ++i) {
    kiln::Result<std::string> npy = kiln::io::SerializeNpy(kiln::io::HostTensor::FromView(infos[i].name, outputs[i]));
    if (!npy.ok()) return npy.status().WithContext("output '" + infos[i].name + "'");
    files.push_back(std::move(*npy));
  }
  // A boundary must not occur inside a part: draw until none contains it (one draw, in practice).
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string boundary;
  auto occurs = [&] {
    for (const std::string& f : files) {
      if (f.find(boundary) != std::string::npos) return true;
    }
    return false;
  };
  do {
    char hex[40];
    std::snprintf(hex, sizeof hex, "kiln-%016llx%016llx", static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng()));
    boundary = hex;
  } while (occurs());
  MultipartBody out{"multipart/form-data; boundary=" + boundary, ""};
  for (size_t i = 0; i < files.size(); ++i) {
    out.body += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + infos[i].name + "\"; filename=\"" +
                infos[i].name + ".npy\"\r\nContent-Type: application/x-npy\r\n\r\n" + files[i] + "\r\n";
  }
  out.body += "--" + boundary + "--\r\n";
  return out;
}
