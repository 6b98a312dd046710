#include "compiler/serialize/artifact_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kiln::serialize {
namespace {

Status Fail(const std::string& path, int err) {
  return FailedPrecondition("cannot write '" + path + "': " + std::strerror(err));
}

}  // namespace

Status WriteArtifactFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Fail(path, errno);
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const int write_err = errno;
  const bool closed = std::fclose(f) == 0;  // flushes: a full disk shows up here
  const int close_err = errno;
  if (!written || !closed) {
    std::remove(tmp.c_str());
    return Fail(path, !written ? write_err : close_err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return Fail(path, err);
  }
  return Status::Ok();
}

}  // namespace kiln::serialize
