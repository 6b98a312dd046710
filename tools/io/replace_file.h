// tools/io/replace_file.h: writing a file (a .kiln artifact, a tensor, a kernel cache entry)
// so that programs which have the previous file at that path mapped keep working: the bytes go to a sibling temporary file, which is then renamed over
// the path. Rewriting a mapped file in place would make its readers fault (SIGBUS), and a
// failed write would leave half an artifact behind.
//
// The temporary is created with mkstemp (O_EXCL, a random name in the path's folder), so a
// file or symlink planted at a predictable name is never opened or overwritten. A path that
// exists and is not a regular file (a device such as /dev/null, a FIFO, a socket, a folder)
// is refused: renaming over it would replace the special file with a regular one. A symlink
// to a regular file is replaced by the new file; its target is left alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::io {

// Writes `size` bytes at `data` to `path` by temporary file and rename, as above. The new
// file gets mode 0666 less the umask, as fopen would give it.
// Errors: kFailedPrecondition naming the path and the system's reason (no such folder,
// permission denied, disk full, the path is a folder or another non-regular file).
Status ReplaceFile(const std::string& path, const void* data, size_t size);

// ReplaceFile for an artifact's bytes.
inline Status WriteArtifactFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  return ReplaceFile(path, bytes.data(), bytes.size());
}

}  // namespace kiln::io
