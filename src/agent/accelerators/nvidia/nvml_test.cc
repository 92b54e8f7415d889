#include "agent/accelerators/nvidia/nvml.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "agent/accelerators/nvidia/nvidia.h"

namespace hf::agent::accel {
namespace {

// HF_FAKE_NVML: tests/fake_nvml, a libnvidia-ml.so.1 answering for two H100s.
TEST(NvmlTest, DevicesAndUsageThroughTheLoadedLibrary) {
  Result<std::unique_ptr<Nvml>> nvml = Nvml::Load(HF_FAKE_NVML);
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  ASSERT_NE(*nvml, nullptr);
  Result<std::vector<Found>> devices = (*nvml)->Devices();
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[1].device.index, 1);
  EXPECT_EQ((*devices)[1].device.model, "H100 80GB HBM3");
  EXPECT_EQ((*devices)[1].device.vendor, "nvidia");
  EXPECT_EQ((*devices)[1].device.uuid, "GPU-66666666-7777-8888-9999-000000000000");
  EXPECT_EQ((*devices)[1].device.memory_mib, 81559);
  EXPECT_EQ((*devices)[1].bus_id, "00000000:0F:00.0");
  EXPECT_EQ((*devices)[1].bind_id, "1");
  Result<std::vector<GpuUsage>> usage = (*nvml)->Usage();
  ASSERT_TRUE(usage.ok());
  EXPECT_DOUBLE_EQ((*usage)[0].utilization, 0.37);
  EXPECT_EQ((*usage)[0].memory_used_mib, 1024);
}

TEST(NvmlTest, AbsentBrokenAndStoppedLibraries) {
  // Not installed: no NVML, no error.
  Result<std::unique_ptr<Nvml>> none = Nvml::Load("/nonexistent/libnvidia-ml.so.1");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  // A library without NVML's calls.
  Result<std::unique_ptr<Nvml>> wrong = Nvml::Load("libc.so.6");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("nvmlInit_v2"), std::string::npos) << wrong.status().message();
  // Installed, but the driver is not loaded.
  setenv("FAKE_NVML_INIT_ERROR", "9", 1);
  Result<std::unique_ptr<Nvml>> stopped = Nvml::Load(HF_FAKE_NVML);
  unsetenv("FAKE_NVML_INIT_ERROR");
  ASSERT_FALSE(stopped.ok());
  EXPECT_NE(stopped.status().message().find("Driver Not Loaded"), std::string::npos)
      << stopped.status().message();
}

TEST(NvmlTest, TheVendorPrefersNvmlAndKeepsNvidiaSmiForTopology) {
  const NvidiaVendor v(HF_FAKE_NVML);
  // NVML alone: the vendor is present without nvidia-smi, and runs nothing.
  EXPECT_TRUE(v.Present([](const std::string&) { return false; }));
  std::vector<std::string> ran;
  const Runner run = [&](const std::string& cmd) -> std::optional<std::string> {
    ran.push_back(cmd);
    if (cmd == "nvidia-smi topo -m") {
      return std::string("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
                         "GPU0\t X \tNV18\t0-55\t0\n"
                         "GPU1\tNV18\t X \t0-55\t0\n");
    }
    return std::nullopt;
  };
  Result<std::vector<Found>> alone = v.Discover("", run);
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(alone->size(), 2u);
  EXPECT_TRUE(ran.empty());
  // With nvidia-smi on PATH: devices from NVML, NVLink from topo -m.
  Result<std::vector<Found>> both = v.Discover("nvidia-smi", run);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(ran, (std::vector<std::string>{"nvidia-smi topo -m"}));
  EXPECT_EQ((*both)[0].device.fabric_domain, 0);
  EXPECT_EQ((*both)[1].device.fabric_domain, 0);
  Result<std::vector<GpuUsage>> usage = v.Measure("nvidia-smi", run);
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->size(), 2u);
  EXPECT_EQ(ran.size(), 1u);  // usage came from NVML, not nvidia-smi
  // Without NVML: nvidia-smi.
  const NvidiaVendor smi("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(smi.Present([](const std::string&) { return false; }));
  EXPECT_TRUE(smi.Present([](const std::string& t) { return t == "nvidia-smi"; }));
}

}  // namespace
}  // namespace hf::agent::accel
