#include "tools/io/replace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kiln::io {
namespace {

Status Fail(const std::string& path, int err) {
  return FailedPrecondition("cannot write '" + path + "': " + std::strerror(err));
}

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The mode fopen would create a file with: 0666 less the process's umask (read without
// changing it where /proc says it; otherwise the common 022).
mode_t CreationMode() {
  mode_t mask = 022;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f))
      if (std::strncmp(line, "Umask:", 6) == 0) mask = static_cast<mode_t>(std::strtoul(line + 6, nullptr, 8));
    std::fclose(f);
  }
  return 0666 & ~mask;
}

bool WriteAll(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Status ReplaceFile(const std::string& path, const void* data, size_t size) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return FailedPrecondition("cannot write '" + path + "': it exists and is " + KindOf(st.st_mode) +
                              "; the file is written by a rename, which would replace it: give a regular file path");
  std::string tmp = path + ".tmpXXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return Fail(path, errno);
  bool ok = ::fchmod(fd, CreationMode()) == 0 && WriteAll(fd, data, size);
  int err = errno;
  if (::close(fd) != 0 && ok) {  // a full disk on a network file system shows up here
    ok = false;
    err = errno;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return Fail(path, err);
  }
  return Status::Ok();
}

}  // namespace kiln::io
