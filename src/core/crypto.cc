#include "core/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <vector>

#include "core/status.h"

namespace hf {
namespace {

std::string Hex(const unsigned char* data, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  // EVP_Digest fails only on allocation failure or a missing default
  // provider: nothing that hashes can work in either case.
  HF_CHECK(EVP_Digest(data.data(), data.size(), md.data(), &len, EVP_sha256(), nullptr) == 1);
  return Hex(md.data(), len);
}

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  HF_CHECK(RAND_bytes(buf.data(), static_cast<int>(buf.size())) == 1);
  return Hex(buf.data(), buf.size());
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace hf
