#include "agent/accelerators/nvidia/nvml.h"

#include <dlfcn.h>

#include <cstring>

namespace hf::agent::accel {
namespace {

// NVML's C ABI, as nvml.h declares it.
using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
using nvmlDevice_t = struct NvmlDevice*;
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};
constexpr unsigned kNameLength = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidLength = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

}  // namespace

struct Nvml::Api {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*shutdown)();
  const char* (*error_string)(nvmlReturn_t);
  nvmlReturn_t (*count)(unsigned int*);
  nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t*);
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*);

  std::string Error(const char* call, nvmlReturn_t r) const {
    const char* text = error_string ? error_string(r) : nullptr;
    return std::string("NVML ") + call + ": " + (text ? text : "error " + std::to_string(r));
  }
};

namespace {

template <typename F>
bool Bind(void* handle, const char* symbol, F& out) {
  out = reinterpret_cast<F>(dlsym(handle, symbol));
  return out != nullptr;
}

}  // namespace

Result<std::unique_ptr<Nvml>> Nvml::Load(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return std::unique_ptr<Nvml>();  // not installed
  auto api = std::make_unique<Api>();
  const std::pair<const char*, bool> symbols[] = {
      {"nvmlInit_v2", Bind(handle, "nvmlInit_v2", api->init)},
      {"nvmlShutdown", Bind(handle, "nvmlShutdown", api->shutdown)},
      {"nvmlErrorString", Bind(handle, "nvmlErrorString", api->error_string)},
      {"nvmlDeviceGetCount_v2", Bind(handle, "nvmlDeviceGetCount_v2", api->count)},
      {"nvmlDeviceGetHandleByIndex_v2", Bind(handle, "nvmlDeviceGetHandleByIndex_v2", api->handle)},
      {"nvmlDeviceGetName", Bind(handle, "nvmlDeviceGetName", api->name)},
      {"nvmlDeviceGetUUID", Bind(handle, "nvmlDeviceGetUUID", api->uuid)},
      {"nvmlDeviceGetMemoryInfo", Bind(handle, "nvmlDeviceGetMemoryInfo", api->memory)},
      {"nvmlDeviceGetPciInfo_v3", Bind(handle, "nvmlDeviceGetPciInfo_v3", api->pci)},
      {"nvmlDeviceGetUtilizationRates", Bind(handle, "nvmlDeviceGetUtilizationRates", api->utilization)},
  };
  for (const auto& [symbol, found] : symbols) {
    if (!found) {
      dlclose(handle);
      return Unavailable(library + " has no " + symbol);
    }
  }
  if (const nvmlReturn_t r = api->init(); r != kNvmlSuccess) {
    const std::string why = api->Error("init", r);
    dlclose(handle);
    return Unavailable(why);
  }
  return std::unique_ptr<Nvml>(new Nvml(handle, std::move(api)));
}

Nvml::Nvml(void* handle, std::unique_ptr<Api> api) : handle_(handle), api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
  dlclose(handle_);
}

Result<std::vector<Found>> Nvml::Devices() const {
  unsigned int count = 0;
  if (const nvmlReturn_t r = api_->count(&count); r != kNvmlSuccess) {
    return Unavailable(api_->Error("device count", r));
  }
  std::vector<Found> out;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    char name[kNameLength] = {}, uuid[kUuidLength] = {};
    nvmlMemory_t memory{};
    nvmlPciInfo_t pci{};
    if (const nvmlReturn_t r = api_->handle(i, &device); r != kNvmlSuccess) {
      return Unavailable(api_->Error("device handle", r) + " (GPU " + std::to_string(i) + ")");
    }
    for (const auto& [call, r] : {std::pair<const char*, nvmlReturn_t>{"name", api_->name(device, name, kNameLength)},
                                  {"UUID", api_->uuid(device, uuid, kUuidLength)},
                                  {"memory", api_->memory(device, &memory)},
                                  {"PCI info", api_->pci(device, &pci)}}) {
      if (r != kNvmlSuccess) return Unavailable(api_->Error(call, r) + " (GPU " + std::to_string(i) + ")");
    }
    Found f;
    f.device.index = int32_t(i);
    f.device.vendor = kVendorNvidia;
    f.device.model = std::string(name, strnlen(name, sizeof name));
    if (f.device.model.rfind("NVIDIA ", 0) == 0) f.device.model.erase(0, 7);
    f.device.uuid = std::string(uuid, strnlen(uuid, sizeof uuid));
    f.device.memory_mib = int64_t(memory.total >> 20);
    f.bus_id = std::string(pci.busId, strnlen(pci.busId, sizeof pci.busId));
    f.bind_id = std::to_string(i);
    out.push_back(std::move(f));
  }
  return out;
}

Result<std::vector<GpuUsage>> Nvml::Usage() const {
  unsigned int count = 0;
  if (const nvmlReturn_t r = api_->count(&count); r != kNvmlSuccess) {
    return Unavailable(api_->Error("device count", r));
  }
  std::vector<GpuUsage> out;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    nvmlUtilization_t use{};
    nvmlMemory_t memory{};
    if (const nvmlReturn_t r = api_->handle(i, &device); r != kNvmlSuccess) {
      return Unavailable(api_->Error("device handle", r));
    }
    GpuUsage u;
    u.index = int32_t(i);
    // A GPU that does not report utilisation (some MIG modes) reads 0.
    if (api_->utilization(device, &use) == kNvmlSuccess) u.utilization = Clamp01(use.gpu / 100.0);
    if (api_->memory(device, &memory) == kNvmlSuccess) u.memory_used_mib = int64_t(memory.used >> 20);
    out.push_back(u);
  }
  return out;
}

}  // namespace hf::agent::accel
