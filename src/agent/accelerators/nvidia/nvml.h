// NVIDIA's management library (NVML), loaded at run time with dlopen when
// libnvidia-ml.so.1 is installed (it comes with the driver), so that
// HeteroFlow has no build-time dependency on it. The agent then reads its
// GPUs and their usage through NVML, without starting nvidia-smi at every
// heartbeat; NVLink domains still come from `nvidia-smi topo -m`.
//
// Only the calls and structures used here are declared, as NVML's C ABI
// defines them (every one of them has been stable since NVML 10):
// nvmlInit_v2, nvmlShutdown, nvmlErrorString, nvmlDeviceGetCount_v2,
// nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetName, nvmlDeviceGetUUID,
// nvmlDeviceGetMemoryInfo, nvmlDeviceGetPciInfo_v3 and
// nvmlDeviceGetUtilizationRates.
//
// Threading: one Nvml per process is enough; its calls may come from any
// thread (NVML is thread-safe), and the object is immutable once loaded.
#ifndef HF_AGENT_ACCELERATORS_NVIDIA_NVML_H_
#define HF_AGENT_ACCELERATORS_NVIDIA_NVML_H_

#include <memory>
#include <string>
#include <vector>

#include "agent/accelerators/accelerator.h"

namespace hf::agent::accel {

class Nvml {
 public:
  // The library's default name; a path for tests.
  static constexpr char kLibrary[] = "libnvidia-ml.so.1";

  // NVML from `library`, initialised; nullptr when it is not installed.
  // Unavailable (with NVML's message) when it loads but does not start (no
  // driver) or lacks a call.
  static Result<std::unique_ptr<Nvml>> Load(const std::string& library = kLibrary);
  ~Nvml();  // nvmlShutdown, then dlclose
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // The GPUs by NVML index: name (without "NVIDIA "), UUID, total memory,
  // PCI bus id; bound by their index, as nvidia-smi numbers them.
  Result<std::vector<Found>> Devices() const;
  // Utilisation and memory in use, by index.
  Result<std::vector<GpuUsage>> Usage() const;

 private:
  struct Api;
  explicit Nvml(void* handle, std::unique_ptr<Api> api);
  void* handle_;
  std::unique_ptr<Api> api_;
};

}  // namespace hf::agent::accel

#endif  // HF_AGENT_ACCELERATORS_NVIDIA_NVML_H_
