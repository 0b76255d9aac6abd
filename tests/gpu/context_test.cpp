// The Vulkan context: device listing, buffers, clean errors.

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "gpu/context.h"
#include "gpu_env.h"

namespace hearth::gpu {
namespace {

using testing::gpu_env;

TEST(GpuContext, ListsDevicesWithNameTypeAndMemory) {
  HEARTH_REQUIRE_GPU();
  auto devices = list_devices();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_FALSE(devices->empty());
  for (size_t i = 0; i < devices->size(); ++i) {
    const DeviceInfo& d = (*devices)[i];
    EXPECT_EQ(d.index, static_cast<int>(i));
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.vram_bytes, 0u) << d.name;
    EXPECT_STRNE(device_type_name(d.type), "");
  }
  EXPECT_EQ(gpu_env().ctx->info().name, (*devices)[0].name);
}

TEST(GpuContext, DeviceIndexOutOfRangeIsAnError) {
  HEARTH_REQUIRE_GPU();
  auto ctx = Context::create(1000);
  ASSERT_FALSE(ctx.ok());
  EXPECT_NE(ctx.error().message.find("no Vulkan device 1000"), std::string::npos) << ctx.error().message;
}

TEST(GpuContext, TooLargeAllocationIsACleanError) {
  HEARTH_REQUIRE_GPU();
  Context& ctx = *gpu_env().ctx;
  for (MemoryKind kind : {MemoryKind::kDeviceLocal, MemoryKind::kHostVisible}) {
    auto buffer = ctx.create_buffer(size_t{1} << 52, kind);  // 4 PiB
    ASSERT_FALSE(buffer.ok());
    EXPECT_NE(buffer.error().message.find("out of device memory"), std::string::npos) << buffer.error().message;
  }
  // The context stays usable.
  auto small = ctx.create_buffer(64, MemoryKind::kDeviceLocal);
  EXPECT_TRUE(small.ok());
}

TEST(GpuContext, UploadDownloadRoundTripsBothKinds) {
  HEARTH_REQUIRE_GPU();
  Context& ctx = *gpu_env().ctx;
  std::vector<uint8_t> data(1001);  // not a multiple of 4: the buffer rounds up
  std::iota(data.begin(), data.end(), uint8_t{7});
  for (MemoryKind kind : {MemoryKind::kDeviceLocal, MemoryKind::kHostVisible}) {
    auto buffer = ctx.create_buffer(data.size(), kind);
    ASSERT_TRUE(buffer.ok()) << buffer.error().message;
    EXPECT_EQ(buffer->size(), 1004u);
    ASSERT_TRUE(buffer->upload(data.data(), data.size()).ok());
    std::vector<uint8_t> back(data.size() - 10);
    ASSERT_TRUE(buffer->download(back.data(), back.size(), 10).ok());
    EXPECT_EQ(std::memcmp(back.data(), data.data() + 10, back.size()), 0);
  }
}

}  // namespace
}  // namespace hearth::gpu
