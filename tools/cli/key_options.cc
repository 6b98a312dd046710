#include "tools/cli/key_options.h"

#include <fstream>
#include <iterator>
#include <memory>

namespace kiln::cli {
namespace {

Result<std::string> ReadSmallFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(std::string("cannot read ") + what + " '" + path + "'");
  std::string s(std::istreambuf_iterator<char>(in), {});
  if (s.size() > (1 << 20)) return InvalidArgument(std::string(what) + " '" + path + "' is over 1 MiB");
  return s;
}

}  // namespace

void AddKeyOptions(CLI::App* cmd, KeyFlags& flags) {
  cmd->add_option("--trusted-key", flags.trusted_keys,
                  "require a valid Ed25519 signature (kiln sign) by this public key (PEM, `openssl pkey -pubout`); "
                  "repeat for several keys, any one of which may have signed")
      ->check(CLI::ExistingFile);
  cmd->add_option("--weights-key", flags.weights_key,
                  "the 32-byte AES-256 key file of an artifact with encrypted weights (kiln sign --encrypt-weights)")
      ->check(CLI::ExistingFile);
}

Result<std::array<uint8_t, 32>> ReadKeyFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadSmallFile(path, "key file"));
  std::array<uint8_t, 32> key{};
  if (bytes.size() != key.size())
    return InvalidArgument("key file '" + path + "' holds " + std::to_string(bytes.size()) +
                           " bytes; an AES-256 key is 32 (`openssl rand -out FILE 32`)");
  std::copy(bytes.begin(), bytes.end(), key.begin());
  std::fill(bytes.begin(), bytes.end(), '\0');
  return key;
}

Status ApplyKeyFlags(const KeyFlags& flags, LoadOptions& options) {
  for (const std::string& path : flags.trusted_keys) {
    KILN_ASSIGN_OR_RETURN(std::string pem, ReadSmallFile(path, "public key file"));
    options.trusted_public_keys.push_back(std::move(pem));
  }
  if (flags.weights_key.empty()) return Status::Ok();
  using Key = std::array<uint8_t, 32>;
  KILN_ASSIGN_OR_RETURN(Key key, ReadKeyFile(flags.weights_key));
  options.weights_key = [key](std::string_view, std::span<uint8_t, 32> out) {
    std::copy(key.begin(), key.end(), out.begin());
    return Status::Ok();
  };
  return Status::Ok();
}

}  // namespace kiln::cli
