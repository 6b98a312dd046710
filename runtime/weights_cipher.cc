// Load's AES-256-GCM decryption of the weights (runtime/weights_cipher.h) on OpenSSL's EVP API.
#include "runtime/weights_cipher.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <string>

namespace kiln {

Status DecryptWeights(uint8_t* weights, uint64_t size, const SignatureTrailer& t, const LoadOptions& options,
                      bool signature_verified) {
  const std::string key_id(t.key_id, strnlen(t.key_id, sizeof t.key_id));
  // One snprintf per message: far less code than string concatenation (the runtime's size budget).
  char which[128], m[384];
  std::snprintf(which, sizeof which, "the weights (AES-256-GCM, key id '%s', %llu bytes)", key_id.c_str(),
                static_cast<unsigned long long>(size));
  if (!options.weights_key) {
    std::snprintf(m, sizeof m, "%s are encrypted, and LoadOptions::weights_key is not set", which);
    return FailedPrecondition(m);
  }
  std::array<uint8_t, kAes256KeyBytes> key{};
  Status given = options.weights_key(key_id, std::span<uint8_t, kAes256KeyBytes>(key));
  EVP_CIPHER_CTX* ctx = given.ok() ? EVP_CIPHER_CTX_new() : nullptr;
  bool ok = ctx && EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), t.nonce) == 1;
  OPENSSL_cleanse(key.data(), key.size());
  if (!given.ok()) {
    std::snprintf(m, sizeof m, "LoadOptions::weights_key for key id '%s'", key_id.c_str());
    return given.WithContext(m);
  }
  // EVP takes int lengths: 1 GiB at a time.
  for (uint64_t done = 0; ok && done < size;) {
    const int n = static_cast<int>(std::min<uint64_t>(size - done, uint64_t{1} << 30));
    int out = 0;
    ok = EVP_DecryptUpdate(ctx, weights + done, &out, weights + done, n) == 1 && out == n;
    done += static_cast<uint64_t>(n);
  }
  int last = 0;
  const bool tag_ok = ok &&
                      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, sizeof t.tag, const_cast<uint8_t*>(t.tag)) == 1 &&
                      EVP_DecryptFinal_ex(ctx, weights + size, &last) == 1;
  EVP_CIPHER_CTX_free(ctx);
  if (tag_ok) return Status::Ok();
  if (!ok) {
    std::snprintf(m, sizeof m, "AES-256-GCM decryption of %s failed in libcrypto", which);
    return Internal(m);
  }
  std::snprintf(m, sizeof m,
                "%s do not decrypt under the key LoadOptions::weights_key gave: the AES-256-GCM tag does not match%s",
                which,
                signature_verified ? ", and the signature verified, so the key is wrong"
                                   : " (a wrong key, or the weights changed; no signature was checked)");
  return signature_verified ? InvalidArgument(m) : DataLoss(m);
}

}  // namespace kiln
