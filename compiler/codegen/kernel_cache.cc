#include "compiler/codegen/kernel_cache.h"

#include <xxhash.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tools/io/replace_file.h"

namespace kiln::codegen {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'K', 'C', '0', '1'};
constexpr size_t kHeader = 32;  // magic, payload size, payload XXH64, key

void PutU64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetU64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

}  // namespace

std::string DefaultKernelCacheDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return (fs::path(xdg) / "kiln" / "kernels").string();
  const char* home = std::getenv("HOME");
  if (home && home[0] != '\0') return (fs::path(home) / ".cache" / "kiln" / "kernels").string();
  return "";
}

KernelCache::KernelCache(const std::string& dir, bool enabled) {
  if (!enabled) return;
  dir_ = dir.empty() ? DefaultKernelCacheDir() : dir;
  std::error_code ec;
  if (!dir_.empty()) fs::create_directories(dir_, ec);
  if (ec) dir_.clear();
}

uint64_t KernelCache::Key(std::string_view text) { return XXH64(text.data(), text.size(), 0); }

std::string KernelCache::Path(uint64_t key, std::string_view suffix) const {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016" PRIx64, key);
  return (fs::path(dir_) / (std::string(hex) + std::string(suffix))).string();
}

bool KernelCache::Read(uint64_t key, std::string_view suffix, std::vector<uint8_t>* payload) const {
  if (dir_.empty()) return false;
  std::ifstream in(Path(key, suffix), std::ios::binary);
  if (!in) return false;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad() || bytes.size() < kHeader) return false;
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) return false;
  const uint64_t size = GetU64(bytes, 8), sum = GetU64(bytes, 16), stored_key = GetU64(bytes, 24);
  if (stored_key != key || size != bytes.size() - kHeader) return false;
  const char* data = bytes.data() + kHeader;
  if (XXH64(data, size, 0) != sum) return false;
  payload->assign(data, data + size);
  return true;
}

void KernelCache::Write(uint64_t key, std::string_view suffix, const std::vector<uint8_t>& payload) const {
  if (dir_.empty()) return;
  std::string bytes(kMagic, sizeof(kMagic));
  PutU64(&bytes, payload.size());
  PutU64(&bytes, XXH64(payload.data(), payload.size(), 0));
  PutU64(&bytes, key);
  bytes.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  (void)io::ReplaceFile(Path(key, suffix), bytes.data(), bytes.size());
}

}  // namespace kiln::codegen
