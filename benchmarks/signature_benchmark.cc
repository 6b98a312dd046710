// The cost of signed artifacts and encrypted weights (docs/security.md, "Signed artifacts";
// Google Benchmark). Targets: verifying a 100 MB artifact in at most 100 ms, SHA-256 at 1 GB/s
// or more, AES-256-GCM decryption at 1 GB/s or more on one core.
//
//   build/benchmarks/signature_benchmark [--benchmark_min_time=0.5]
//
// The artifacts are load_benchmark's y = Add(x, w) with one weight of W MB (W * 10^6 bytes),
// signed with `kiln sign`'s code (tools/io/artifact_signer.h) under an Ed25519 key made at start,
// written once per case to the temp directory (removed at exit) and loaded from the page cache
// (warm: no byte comes from disk). Everything runs on the calling thread.
//
// BM_LoadFile/weights_MB:W/signature:S/encrypted:E
//     Model::Load(path). S = 0, E = 0: no option, the file is mapped (as load_benchmark's
//     flushed:0 rows). S = 1: LoadOptions::trusted_public_keys holds the signer's key: the file
//     is read into private memory (pread into a fresh anonymous mapping), then the SHA-256 of its
//     sections and the Ed25519 check, then the usual checks (the XXH3 checksums among them).
//     E = 1: the weights are encrypted and LoadOptions::weights_key gives the key: add their
//     AES-256-GCM decryption in place. ms_per_100MB: load time per 100 MB of weights (target
//     for S = 1, E = 0: at most 100).
// BM_Sha256/MB:W
//     EVP_Digest(SHA-256) over W MB in memory (in the caches for W = 1, from DRAM for 100): what
//     DigestSections does per section. bytes_per_second (target: 1 GB/s or more). OpenSSL uses
//     the SHA extensions where the CPU has them (grep -o sha_ni /proc/cpuinfo).
// BM_DecryptWeights/MB:W
//     DecryptWeights (runtime/weights_cipher.h) of W MB in place: key callback, AES-256-GCM, tag
//     check. Not timed: copying the ciphertext back before each iteration. bytes_per_second
//     (target: 1 GB/s or more on one core).
#include <benchmark/benchmark.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "benchmarks/weights_artifact.h"
#include "kiln/runtime.h"
#include "runtime/signature_trailer.h"
#include "runtime/weights_cipher.h"
#include "tests/runtime/artifact_builder_test_util.h"
#include "tools/io/artifact_signer.h"

namespace kiln {
namespace {


std::array<uint8_t, 32> WeightsKey() {
  std::array<uint8_t, 32> key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i * 11 + 3);
  return key;
}

// An Ed25519 key pair made with libcrypto, as PEM.
struct KeyPair {
  std::string private_pem, public_pem;
  KeyPair() {
    EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
    BIO* a = BIO_new(BIO_s_mem());
    BIO* b = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(a, key, nullptr, nullptr, 0, nullptr, nullptr);
    PEM_write_bio_PUBKEY(b, key);
    char* p = nullptr;
    long n = BIO_get_mem_data(a, &p);
    private_pem.assign(p, static_cast<size_t>(n));
    n = BIO_get_mem_data(b, &p);
    public_pem.assign(p, static_cast<size_t>(n));
    BIO_free(a);
    BIO_free(b);
    EVP_PKEY_free(key);
  }
};

const KeyPair& Keys() {
  static const KeyPair keys;
  return keys;
}

// One signed (and, when asked, encrypted) artifact file per case, removed at exit.
class SignedFiles {
 public:
  ~SignedFiles() {
    std::error_code ignored;
    for (const auto& [k, path] : paths_) std::filesystem::remove(path, ignored);
  }
  std::string Path(int64_t mb, bool encrypted) {
    const int64_t k = mb * 2 + (encrypted ? 1 : 0);
    if (auto it = paths_.find(k); it != paths_.end()) return it->second;
    io::SignOptions options;
    options.private_key_pem = Keys().private_pem;
    options.encrypt_weights = encrypted;
    options.weights_key = WeightsKey();
    Result<std::vector<uint8_t>> bytes = io::SignArtifact(testing::BuildArtifact(WeightsSpec(mb)), options);
    if (!bytes.ok()) return "";
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("kiln_signature_benchmark_" + std::to_string(::getpid()) + "_" + std::to_string(k) +
                               ".kiln")).string();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
    paths_[k] = path;
    return path;
  }

 private:
  std::map<int64_t, std::string> paths_;
};

SignedFiles signed_files;

void BM_LoadFile(benchmark::State& state) {
  const int64_t mb = state.range(0);
  const bool signature = state.range(1) != 0, encrypted = state.range(2) != 0;
  const std::string path = signed_files.Path(mb, encrypted);
  if (path.empty()) {
    state.SkipWithError("cannot sign or write the artifact");
    return;
  }
  LoadOptions options;
  if (signature) options.trusted_public_keys = {Keys().public_pem};
  if (encrypted)
    options.weights_key = [](std::string_view, std::span<uint8_t, 32> out) {
      const std::array<uint8_t, 32> key = WeightsKey();
      std::memcpy(out.data(), key.data(), 32);
      return Status::Ok();
    };
  double seconds = 0;
  for (auto _ : state)
    if (!TimedLoad(state, path, options, &seconds)) break;
  state.SetBytesProcessed(state.iterations() * mb * kMB);
  state.counters["ms_per_100MB"] =
      benchmark::Counter(seconds * 1e3 * 100 / static_cast<double>(mb), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_LoadFile)
    ->ArgNames({"weights_MB", "signature", "encrypted"})
    ->Args({100, 0, 0})
    ->Args({100, 1, 0})
    ->Args({100, 1, 1})
    ->Args({10, 1, 0})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_Sha256(benchmark::State& state) {
  std::vector<uint8_t> data(static_cast<size_t>(state.range(0) * kMB), 0x5a);
  uint8_t digest[32];
  for (auto _ : state) {
    unsigned n = 0;
    EVP_Digest(data.data(), data.size(), digest, &n, EVP_sha256(), nullptr);
    benchmark::DoNotOptimize(digest);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * kMB);
}
BENCHMARK(BM_Sha256)->ArgName("MB")->Arg(1)->Arg(100)->Unit(benchmark::kMillisecond);

void BM_DecryptWeights(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0) * kMB);
  const std::array<uint8_t, 32> key = WeightsKey();
  std::vector<uint8_t> cipher(n, 0x33), work(n);
  SignatureTrailer t{};
  for (size_t i = 0; i < sizeof t.nonce; ++i) t.nonce[i] = static_cast<uint8_t>(i);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int out = 0;
  EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), t.nonce);
  EVP_EncryptUpdate(ctx, cipher.data(), &out, cipher.data(), static_cast<int>(n));
  EVP_EncryptFinal_ex(ctx, cipher.data() + n, &out);
  EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, t.tag);
  EVP_CIPHER_CTX_free(ctx);
  LoadOptions options;
  options.weights_key = [&](std::string_view, std::span<uint8_t, 32> k) {
    std::memcpy(k.data(), key.data(), 32);
    return Status::Ok();
  };
  for (auto _ : state) {
    std::memcpy(work.data(), cipher.data(), n);
    const auto start = std::chrono::steady_clock::now();
    Status st = DecryptWeights(work.data(), n, t, options, true);
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_DecryptWeights)->ArgName("MB")->Arg(1)->Arg(100)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln
