// Hashing, random secrets and constant-time comparison, on OpenSSL's libcrypto.
//
// Threading: every function may be called from any thread.
#ifndef HF_CORE_CRYPTO_H_
#define HF_CORE_CRYPTO_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace hf {

// SHA-256 of `data`, 64 lower-case hex digits.
std::string Sha256Hex(std::string_view data);

// `bytes` bytes from OpenSSL's CSPRNG in lower-case hex (2 * bytes digits).
// Stops the process if the CSPRNG fails: a predictable secret would be worse
// than not running.
std::string RandomHex(size_t bytes);

// Compares in time that depends only on the lengths, never on where the
// contents differ (CRYPTO_memcmp). Different lengths compare unequal at once;
// lengths are not secret where callers compare fixed-length hashes.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace hf

#endif  // HF_CORE_CRYPTO_H_
