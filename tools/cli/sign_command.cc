// `kiln sign`: an artifact's Ed25519 signature, and optionally its weights encrypted
// (tools/io/artifact_signer.h; docs/cli.md, docs/security.md).
#include <fmt/format.h>
#include <openssl/crypto.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>

#include "runtime/signature.h"
#include "runtime/signature_trailer.h"
#include "tools/cli/commands.h"
#include "tools/cli/key_options.h"
#include "tools/io/artifact_signer.h"
#include "tools/io/replace_file.h"

namespace kiln::cli {
namespace {

struct SignFlags {
  std::string artifact, output, key, encrypt_weights, key_id;
};

int Sign(const SignFlags& f) {
  auto fail = [](const std::string& what) {
    std::cerr << "kiln sign: " << what << "\n";
    return 1;
  };
  std::ifstream key_in(f.key, std::ios::binary), in(f.artifact, std::ios::binary);
  if (!key_in) return fail("cannot read the private key '" + f.key + "'");
  if (!in) return fail("cannot read '" + f.artifact + "'");
  io::SignOptions options;
  options.private_key_pem.assign(std::istreambuf_iterator<char>(key_in), {});
  const std::vector<uint8_t> artifact((std::istreambuf_iterator<char>(in)), {});
  if (!f.encrypt_weights.empty()) {
    Result<std::array<uint8_t, 32>> key = ReadKeyFile(f.encrypt_weights);
    if (!key.ok()) return fail(key.status().ToString());
    options.encrypt_weights = true;
    options.weights_key = *key;
    options.key_id = f.key_id;
  }
  Result<std::vector<uint8_t>> signed_bytes = io::SignArtifact(artifact, options);
  OPENSSL_cleanse(options.private_key_pem.data(), options.private_key_pem.size());
  OPENSSL_cleanse(options.weights_key.data(), options.weights_key.size());
  if (!signed_bytes.ok()) return fail(f.artifact + ": " + signed_bytes.status().ToString());
  const std::string out = f.output.empty() ? f.artifact : f.output;
  if (Status st = io::WriteArtifactFile(out, *signed_bytes); !st.ok()) return fail(st.ToString());
  SignatureTrailer t;
  FindTrailer(signed_bytes->data(), signed_bytes->size(), &t);
  std::cout << fmt::format("{}: signed by Ed25519 public key {}{}\n", out, HexBytes(t.public_key, 32),
                           (t.flags & kTrailerWeightsEncrypted)
                               ? fmt::format("; weights encrypted with AES-256-GCM (key id '{}')",
                                             std::string(t.key_id, strnlen(t.key_id, sizeof t.key_id)))
                               : "");
  return 0;
}

}  // namespace

void AddSignCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "sign", "Sign a .kiln artifact with an Ed25519 key (Model::Load can then require the signature), optionally "
              "encrypting its weights with AES-256-GCM");
  auto f = std::make_shared<SignFlags>();
  cmd->add_option("artifact", f->artifact, "compiled model (.kiln), unsigned or signed (signed again)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", f->output, "the signed artifact (default: replace the input)");
  cmd->add_option("--key", f->key, "Ed25519 private key, PEM (`openssl genpkey -algorithm ED25519 -out KEY.pem`)")
      ->required()
      ->check(CLI::ExistingFile);
  auto* encrypt = cmd->add_option("--encrypt-weights", f->encrypt_weights,
                                  "encrypt the weights with AES-256-GCM under this 32-byte key file (`openssl rand "
                                  "-out FILE 32`); the artifact becomes format version 10")
                      ->check(CLI::ExistingFile);
  cmd->add_option("--key-id", f->key_id,
                  "with --encrypt-weights: the key's name (at most 32 bytes) stored in the artifact, which "
                  "LoadOptions::weights_key receives")
      ->needs(encrypt);
  cmd->callback([f] { SetExitCode(Sign(*f)); });
}

}  // namespace kiln::cli
