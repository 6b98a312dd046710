// Encrypted weights (format version kEncryptedWeightsFormatVersion): Load's AES-256-GCM
// decryption of the weights section, in place, under the key LoadOptions::weights_key gives.
// OpenSSL's libcrypto does the cipher. Not in a selective runtime (cmake/selective.cmake).
#pragma once

#include <cstdint>

#include "kiln/runtime.h"
#include "runtime/signature_trailer.h"

namespace kiln {

// Asks options.weights_key for the key the trailer `t` names (its key_id), then decrypts the
// `size` bytes at `weights` in place with the trailer's nonce and tag, and wipes the key. The
// bytes must be the model's private copy (never a mapping of the file): they are the memory the
// weights run from. At least 1 GB/s on one core with AES-NI (benchmarks/signature_benchmark.cc).
// Errors: kFailedPrecondition (no weights_key), the callback's own error, kInvalidArgument
// (`signature_verified` and the tag does not match: a wrong key) or kDataLoss (not verified and
// the tag does not match: a wrong key or changed weights), kInternal (libcrypto failed). On an
// error the bytes are garbage and the caller must not use them.
Status DecryptWeights(uint8_t* weights, uint64_t size, const SignatureTrailer& t, const LoadOptions& options,
                      bool signature_verified);

}  // namespace kiln
