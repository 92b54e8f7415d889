// A stand-in for NVIDIA's libnvidia-ml.so.1 in the agent's tests: the calls
// the agent makes (src/agent/accelerators/nvidia/nvml.h), with NVML's C
// signatures, answering for two H100 GPUs. FAKE_NVML_INIT_ERROR=N makes
// nvmlInit_v2 return N (9: the driver is not loaded).
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {

struct FakeDevice {
  const char* name;
  const char* uuid;
  const char* bus_id;
  unsigned long long total, used;
  unsigned int util;
};

static FakeDevice devices[] = {
    {"NVIDIA H100 80GB HBM3", "GPU-11111111-2222-3333-4444-555555555555", "00000000:07:00.0",
     85520809984ULL, 1073741824ULL, 37},
    {"NVIDIA H100 80GB HBM3", "GPU-66666666-7777-8888-9999-000000000000", "00000000:0F:00.0",
     85520809984ULL, 0ULL, 0},
};

struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

int nvmlInit_v2() {
  const char* e = std::getenv("FAKE_NVML_INIT_ERROR");
  return e ? std::atoi(e) : 0;
}
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int r) { return r == 9 ? "Driver Not Loaded" : "Unknown Error"; }
int nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** device) {
  if (i >= 2) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &devices[i];
  return 0;
}
int nvmlDeviceGetName(void* d, char* name, unsigned int length) {
  std::snprintf(name, length, "%s", static_cast<FakeDevice*>(d)->name);
  return 0;
}
int nvmlDeviceGetUUID(void* d, char* uuid, unsigned int length) {
  std::snprintf(uuid, length, "%s", static_cast<FakeDevice*>(d)->uuid);
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* d, nvmlMemory_t* m) {
  const FakeDevice* f = static_cast<FakeDevice*>(d);
  *m = {f->total, f->total - f->used, f->used};
  return 0;
}
int nvmlDeviceGetPciInfo_v3(void* d, nvmlPciInfo_t* p) {
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->busId, sizeof p->busId, "%s", static_cast<FakeDevice*>(d)->bus_id);
  return 0;
}
int nvmlDeviceGetUtilizationRates(void* d, nvmlUtilization_t* u) {
  *u = {static_cast<FakeDevice*>(d)->util, 0};
  return 0;
}

}  // extern "C"
