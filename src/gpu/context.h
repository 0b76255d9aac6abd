#pragma once
// The Vulkan device Hearth computes on: instance, the chosen physical device, a logical device with one compute
// queue, and the device buffers kernels read and write. Everything goes through the Vulkan C API; every expected
// failure (no loader, no device, out of device memory) comes back as a Result with a message, never an abort.
//
// Not thread-safe: one Context is used by one thread at a time (the engine step).

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/result.h"

namespace hearth::gpu {

enum class DeviceType { kOther, kIntegrated, kDiscrete, kVirtual, kCpu };
const char* device_type_name(DeviceType type);

struct DeviceInfo {
  int index = 0;  // the N of `--device vulkan:N`: the order vkEnumeratePhysicalDevices gives
  std::string name;
  DeviceType type = DeviceType::kOther;
  uint64_t vram_bytes = 0;  // the largest device-local heap
  uint32_t api_version = 0;
  bool has_compute_queue = false;
  bool has_float64 = false;  // shaderFloat64: rms_norm's double sum needs it
};

// The Vulkan devices of this machine in enumeration order. An error when the loader or an instance is missing;
// an empty list when Vulkan works but no device is there.
[[nodiscard]] Result<std::vector<DeviceInfo>> list_devices();

class Context;

// Where a buffer lives: device-local memory the shaders read fastest, or host-visible memory the CPU maps (staging,
// and the results a test reads back). On a unified-memory device (lavapipe, an iGPU) both are the same memory.
enum class MemoryKind { kDeviceLocal, kHostVisible };

// A device buffer and its memory; one owner (RAII), movable. Kernels bind it as a storage buffer. The byte size is
// rounded up to a multiple of 4, since shaders read it as 32-bit words. A Buffer must not outlive its Context.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  VkBuffer handle() const { return buffer_; }
  size_t size() const { return size_; }
  MemoryKind kind() const { return kind_; }

  // Copies bytes into the buffer at `offset`: a memcpy into a host-visible buffer, a staging copy otherwise.
  // Requires offset + data_bytes <= size(). Fails with Vulkan's message when the staging copy cannot be made.
  [[nodiscard]] Result<void> upload(const void* data, size_t data_bytes, size_t offset = 0);
  // Copies bytes out of the buffer from `offset`; the same rules as upload. Waits for the copy to finish.
  [[nodiscard]] Result<void> download(void* data, size_t data_bytes, size_t offset = 0) const;

 private:
  friend class Context;
  void release();

  Context* context_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;  // host-visible memory stays mapped for the buffer's life
  size_t size_ = 0;
  MemoryKind kind_ = MemoryKind::kDeviceLocal;
};

class Context {
 public:
  // Opens device `index` of list_devices(). Fails when there is no such device, it has no compute queue, or the
  // logical device cannot be created; the message names the devices there are.
  [[nodiscard]] static Result<std::unique_ptr<Context>> create(int index = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& info() const { return info_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  const VkPhysicalDeviceLimits& limits() const { return limits_; }

  // A buffer of `bytes` (> 0) in the given memory. Fails with "out of device memory" and the numbers when the
  // allocation is larger than the heap or the driver refuses it; the context stays usable.
  [[nodiscard]] Result<Buffer> create_buffer(size_t bytes, MemoryKind kind);

  // Records commands with `record` into a one-time command buffer, submits it and waits until it is done.
  template <class F>
  [[nodiscard]] Result<void> submit_and_wait(F&& record) {
    HEARTH_TRY(begin_one_shot());
    record(one_shot_);
    return end_one_shot_and_wait();
  }

 private:
  Context() = default;
  [[nodiscard]] Result<void> begin_one_shot();
  [[nodiscard]] Result<void> end_one_shot_and_wait();
  [[nodiscard]] Result<uint32_t> find_memory_type(uint32_t type_bits, VkMemoryPropertyFlags want) const;

  DeviceInfo info_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkPhysicalDeviceLimits limits_{};
  VkPhysicalDeviceMemoryProperties memory_{};
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer one_shot_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" and the like, for messages.
const char* vk_result_name(VkResult result);

}  // namespace hearth::gpu
