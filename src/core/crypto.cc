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

// OpenSSL 3 resolves EVP_sha256() through its provider on every EVP_Digest
// (an implicit fetch: a lock, a name lookup, reference counts) and makes and
// frees a context each time; for a bearer token, hashed on every request,
// that cost more than the hashing. The digest is fetched once for the
// process (never freed), and each thread keeps one context.
const EVP_MD* Sha256() {
  static const EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  // Fails only without the default provider: nothing that hashes can work.
  HF_CHECK(md != nullptr);
  return md;
}

struct DigestContext {
  DigestContext() : ctx(EVP_MD_CTX_new()) { HF_CHECK(ctx != nullptr); }
  ~DigestContext() { EVP_MD_CTX_free(ctx); }
  DigestContext(const DigestContext&) = delete;
  DigestContext& operator=(const DigestContext&) = delete;
  EVP_MD_CTX* const ctx;
};

}  // namespace

std::string Sha256Hex(std::string_view data) {
  thread_local DigestContext digest;
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  // These fail only on allocation failure. The final step wipes the input
  // block from the context (SHA256_Final), so no secret stays behind in it.
  HF_CHECK(EVP_DigestInit_ex2(digest.ctx, Sha256(), nullptr) == 1);
  HF_CHECK(EVP_DigestUpdate(digest.ctx, data.data(), data.size()) == 1);
  HF_CHECK(EVP_DigestFinal_ex(digest.ctx, md.data(), &len) == 1);
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
