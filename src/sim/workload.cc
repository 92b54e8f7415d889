#include "sim/workload.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace hf::sim {

Result<std::string> ReadWholeFile(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) {
    const int err = errno;
    const std::string why = path + ": cannot open: " + std::strerror(err);
    return err == ENOENT ? NotFound(why) : Unavailable(why);
  }
  // Trace files are a few hundred KiB: size once, read once.
  std::string data;
  if (std::fseek(f.get(), 0, SEEK_END) == 0) {
    const long size = std::ftell(f.get());
    if (size > 0) data.resize(size_t(size));
    std::rewind(f.get());
  }
  size_t got = data.empty() ? 0 : std::fread(data.data(), 1, data.size(), f.get());
  data.resize(got);
  // Files whose size cannot be known up front (pipes) are read in chunks.
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) data.append(buf, n);
  if (std::ferror(f.get())) return Unavailable(path + ": read error: " + std::strerror(errno));
  return data;
}

}  // namespace hf::sim
