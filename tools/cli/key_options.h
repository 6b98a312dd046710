// --trusted-key and --weights-key of `kiln run` and `kiln inspect`: the files behind
// LoadOptions::trusted_public_keys and LoadOptions::weights_key (docs/security.md).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kiln/runtime.h"

namespace kiln::cli {

struct KeyFlags {
  std::vector<std::string> trusted_keys;  // PEM public key files
  std::string weights_key;                // a 32-byte AES-256 key file; empty: none
};

// Adds --trusted-key (repeatable) and --weights-key to `cmd`, storing into `flags`.
void AddKeyOptions(CLI::App* cmd, KeyFlags& flags);

// The 32 bytes of an AES-256 key file (`openssl rand -out FILE 32`). Errors: kInvalidArgument
// (another size), kNotFound (cannot read it).
Result<std::array<uint8_t, 32>> ReadKeyFile(const std::string& path);

// Reads the files `flags` names into options.trusted_public_keys (the PEM text; Load checks it)
// and options.weights_key (a callback that copies the key file's bytes, whatever the key id).
// Errors: ReadKeyFile's, kNotFound (a public key file cannot be read).
Status ApplyKeyFlags(const KeyFlags& flags, LoadOptions& options);

}  // namespace kiln::cli
