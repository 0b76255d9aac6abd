#include "gpu/context.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace hearth::gpu {
namespace {

// The instance lives as long as the Context (or list_devices' call); one RAII guard for both.
struct InstanceGuard {
  VkInstance instance = VK_NULL_HANDLE;
  ~InstanceGuard() {
    if (instance != VK_NULL_HANDLE) vkDestroyInstance(instance, nullptr);
  }
};

Result<VkInstance> create_instance() {
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "hearth";
  app.pEngineName = "hearth";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  create.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult r = vkCreateInstance(&create, nullptr, &instance);
  if (r != VK_SUCCESS) {
    return make_error("cannot create a Vulkan instance ({}): is a Vulkan driver installed (mesa-vulkan-drivers)?",
                      vk_result_name(r));
  }
  return instance;
}

Result<std::vector<VkPhysicalDevice>> physical_devices(VkInstance instance) {
  uint32_t count = 0;
  VkResult r = vkEnumeratePhysicalDevices(instance, &count, nullptr);
  if (r != VK_SUCCESS) return make_error("cannot enumerate Vulkan devices ({})", vk_result_name(r));
  std::vector<VkPhysicalDevice> devices(count);
  r = vkEnumeratePhysicalDevices(instance, &count, devices.data());
  if (r != VK_SUCCESS && r != VK_INCOMPLETE)
    return make_error("cannot enumerate Vulkan devices ({})", vk_result_name(r));
  devices.resize(count);
  return devices;
}

DeviceType to_device_type(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return DeviceType::kIntegrated;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return DeviceType::kDiscrete;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return DeviceType::kVirtual;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return DeviceType::kCpu;
    default:
      return DeviceType::kOther;
  }
}

// The first queue family with compute; -1 when none.
int compute_queue_family(VkPhysicalDevice device) {
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, families.data());
  for (uint32_t i = 0; i < count; ++i) {
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return static_cast<int>(i);
  }
  return -1;
}

DeviceInfo describe(VkPhysicalDevice device, int index) {
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(device, &props);
  VkPhysicalDeviceMemoryProperties memory{};
  vkGetPhysicalDeviceMemoryProperties(device, &memory);
  VkPhysicalDeviceFeatures features{};
  vkGetPhysicalDeviceFeatures(device, &features);
  DeviceInfo info;
  info.index = index;
  info.name = props.deviceName;
  info.type = to_device_type(props.deviceType);
  info.api_version = props.apiVersion;
  for (uint32_t h = 0; h < memory.memoryHeapCount; ++h) {
    if (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
      info.vram_bytes = std::max<uint64_t>(info.vram_bytes, memory.memoryHeaps[h].size);
    }
  }
  info.has_compute_queue = compute_queue_family(device) >= 0;
  info.has_float64 = features.shaderFloat64 == VK_TRUE;
  return info;
}

}  // namespace

const char* device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::kOther:
      return "other";
    case DeviceType::kIntegrated:
      return "integrated";
    case DeviceType::kDiscrete:
      return "discrete";
    case DeviceType::kVirtual:
      return "virtual";
    case DeviceType::kCpu:
      return "cpu";
  }
  return "other";
}

const char* vk_result_name(VkResult result) {
  switch (result) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_SHADER_NV:
      return "VK_ERROR_INVALID_SHADER_NV";
    default:
      return "VkResult error";
  }
}

Result<std::vector<DeviceInfo>> list_devices() {
  auto instance = create_instance();
  if (!instance) return instance.error();
  InstanceGuard guard{*instance};
  auto devices = physical_devices(guard.instance);
  if (!devices) return devices.error();
  std::vector<DeviceInfo> infos;
  for (size_t i = 0; i < devices->size(); ++i) infos.push_back(describe((*devices)[i], static_cast<int>(i)));
  return infos;
}

Result<std::unique_ptr<Context>> Context::create(int index) {
  auto instance = create_instance();
  if (!instance) return instance.error();
  std::unique_ptr<Context> ctx(new Context());
  ctx->instance_ = *instance;
  auto devices = physical_devices(ctx->instance_);
  if (!devices) return devices.error();
  if (devices->empty()) return make_error("no Vulkan device: vkEnumeratePhysicalDevices found none");
  if (index < 0 || static_cast<size_t>(index) >= devices->size()) {
    std::string names;
    for (size_t i = 0; i < devices->size(); ++i) {
      names += fmt::format("{}{}: {}", i ? ", " : "", i, describe((*devices)[i], static_cast<int>(i)).name);
    }
    return make_error("no Vulkan device {}: this machine has {} ({})", index, devices->size(), names);
  }
  ctx->physical_ = (*devices)[index];
  ctx->info_ = describe(ctx->physical_, index);
  const int family = compute_queue_family(ctx->physical_);
  if (family < 0) return make_error("Vulkan device {} ({}) has no compute queue", index, ctx->info_.name);
  ctx->queue_family_ = static_cast<uint32_t>(family);
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(ctx->physical_, &props);
  ctx->limits_ = props.limits;
  vkGetPhysicalDeviceMemoryProperties(ctx->physical_, &ctx->memory_);

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{};
  queue.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue.queueFamilyIndex = ctx->queue_family_;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkPhysicalDeviceFeatures features{};
  features.shaderFloat64 = ctx->info_.has_float64 ? VK_TRUE : VK_FALSE;
  features.shaderInt64 = VK_FALSE;
  VkDeviceCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  create.queueCreateInfoCount = 1;
  create.pQueueCreateInfos = &queue;
  create.pEnabledFeatures = &features;
  VkResult r = vkCreateDevice(ctx->physical_, &create, nullptr, &ctx->device_);
  if (r != VK_SUCCESS) {
    ctx->device_ = VK_NULL_HANDLE;  // the destructor must not touch what was never made
    return make_error("cannot open Vulkan device {} ({}): {}", index, ctx->info_.name, vk_result_name(r));
  }
  vkGetDeviceQueue(ctx->device_, ctx->queue_family_, 0, &ctx->queue_);

  VkCommandPoolCreateInfo pool{};
  pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = ctx->queue_family_;
  r = vkCreateCommandPool(ctx->device_, &pool, nullptr, &ctx->command_pool_);
  if (r != VK_SUCCESS) return make_error("cannot create a Vulkan command pool: {}", vk_result_name(r));
  VkCommandBufferAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  alloc.commandPool = ctx->command_pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  r = vkAllocateCommandBuffers(ctx->device_, &alloc, &ctx->one_shot_);
  if (r != VK_SUCCESS) return make_error("cannot allocate a Vulkan command buffer: {}", vk_result_name(r));
  VkFenceCreateInfo fence{};
  fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  r = vkCreateFence(ctx->device_, &fence, nullptr, &ctx->fence_);
  if (r != VK_SUCCESS) return make_error("cannot create a Vulkan fence: {}", vk_result_name(r));
  return ctx;
}

Context::~Context() {
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    if (fence_ != VK_NULL_HANDLE) vkDestroyFence(device_, fence_, nullptr);
    if (command_pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device_, command_pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

Result<uint32_t> Context::find_memory_type(uint32_t type_bits, VkMemoryPropertyFlags want) const {
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    if ((type_bits & (1u << i)) && (memory_.memoryTypes[i].propertyFlags & want) == want) return i;
  }
  return make_error("Vulkan device {} has no memory type with flags {:#x}", info_.name, want);
}

Result<Buffer> Context::create_buffer(size_t bytes, MemoryKind kind) {
  HEARTH_CHECK(bytes > 0, "create_buffer of 0 bytes");
  const size_t size = (bytes + 3) & ~size_t{3};
  const VkMemoryPropertyFlags want = kind == MemoryKind::kHostVisible
                                         ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                         : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  // Refuse what no heap of the kind can hold before asking the driver: some drivers abort or overcommit instead
  // of returning VK_ERROR_OUT_OF_DEVICE_MEMORY on absurd sizes.
  uint64_t largest_heap = 0;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    if ((memory_.memoryTypes[i].propertyFlags & want) == want) {
      largest_heap = std::max<uint64_t>(largest_heap, memory_.memoryHeaps[memory_.memoryTypes[i].heapIndex].size);
    }
  }
  const char* where = kind == MemoryKind::kHostVisible ? "host-visible" : "device-local";
  if (size > largest_heap) {
    return make_error("out of device memory: a {} buffer of {} bytes is larger than the {} heap of {} bytes on {}",
                      where, size, where, largest_heap, info_.name);
  }

  Buffer buffer;
  buffer.context_ = this;
  buffer.size_ = size;
  buffer.kind_ = kind;
  VkBufferCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  create.size = size;
  create.usage =
      VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  create.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = vkCreateBuffer(device_, &create, nullptr, &buffer.buffer_);
  if (r != VK_SUCCESS) return make_error("cannot create a {} buffer of {} bytes: {}", where, size, vk_result_name(r));
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(device_, buffer.buffer_, &req);
  auto type = find_memory_type(req.memoryTypeBits, want);
  if (!type) return type.error();
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = *type;
  r = vkAllocateMemory(device_, &alloc, nullptr, &buffer.memory_);
  if (r != VK_SUCCESS) {
    return make_error("out of device memory: cannot allocate a {} buffer of {} bytes on {} ({})", where, size,
                      info_.name, vk_result_name(r));
  }
  r = vkBindBufferMemory(device_, buffer.buffer_, buffer.memory_, 0);
  if (r != VK_SUCCESS) return make_error("cannot bind buffer memory: {}", vk_result_name(r));
  if (kind == MemoryKind::kHostVisible) {
    r = vkMapMemory(device_, buffer.memory_, 0, VK_WHOLE_SIZE, 0, &buffer.mapped_);
    if (r != VK_SUCCESS) return make_error("cannot map a host-visible buffer: {}", vk_result_name(r));
  }
  return buffer;
}

Result<void> Context::begin_one_shot() {
  VkResult r = vkResetCommandBuffer(one_shot_, 0);
  if (r != VK_SUCCESS) return make_error("cannot reset the Vulkan command buffer: {}", vk_result_name(r));
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  r = vkBeginCommandBuffer(one_shot_, &begin);
  if (r != VK_SUCCESS) return make_error("cannot begin the Vulkan command buffer: {}", vk_result_name(r));
  return {};
}

Result<void> Context::end_one_shot_and_wait() {
  VkResult r = vkEndCommandBuffer(one_shot_);
  if (r != VK_SUCCESS) return make_error("cannot end the Vulkan command buffer: {}", vk_result_name(r));
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &one_shot_;
  r = vkQueueSubmit(queue_, 1, &submit, fence_);
  if (r != VK_SUCCESS) return make_error("Vulkan queue submit failed: {}", vk_result_name(r));
  r = vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX);
  vkResetFences(device_, 1, &fence_);
  if (r != VK_SUCCESS) return make_error("waiting for the Vulkan device failed: {}", vk_result_name(r));
  return {};
}

Buffer::Buffer(Buffer&& other) noexcept {
  *this = std::move(other);
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    context_ = std::exchange(other.context_, nullptr);
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    mapped_ = std::exchange(other.mapped_, nullptr);
    size_ = std::exchange(other.size_, 0);
    kind_ = other.kind_;
  }
  return *this;
}

Buffer::~Buffer() {
  release();
}

void Buffer::release() {
  if (context_ == nullptr) return;
  VkDevice device = context_->device();
  if (mapped_ != nullptr) vkUnmapMemory(device, memory_);
  if (buffer_ != VK_NULL_HANDLE) vkDestroyBuffer(device, buffer_, nullptr);
  if (memory_ != VK_NULL_HANDLE) vkFreeMemory(device, memory_, nullptr);
  context_ = nullptr;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
}

Result<void> Buffer::upload(const void* data, size_t data_bytes, size_t offset) {
  HEARTH_CHECK(offset + data_bytes <= size_, "upload of {} bytes at {} into a buffer of {}", data_bytes, offset, size_);
  if (data_bytes == 0) return {};
  if (mapped_ != nullptr) {
    std::memcpy(static_cast<uint8_t*>(mapped_) + offset, data, data_bytes);
    return {};
  }
  auto staging = context_->create_buffer(data_bytes, MemoryKind::kHostVisible);
  if (!staging) return staging.error();
  std::memcpy(staging->mapped_, data, data_bytes);
  const VkBuffer src = staging->handle();
  const VkBuffer dst = buffer_;
  return context_->submit_and_wait([&](VkCommandBuffer cmd) {
    VkBufferCopy region{0, offset, data_bytes};
    vkCmdCopyBuffer(cmd, src, dst, 1, &region);
  });
}

Result<void> Buffer::download(void* data, size_t data_bytes, size_t offset) const {
  HEARTH_CHECK(offset + data_bytes <= size_, "download of {} bytes at {} from a buffer of {}", data_bytes, offset,
               size_);
  if (data_bytes == 0) return {};
  if (mapped_ != nullptr) {
    std::memcpy(data, static_cast<const uint8_t*>(mapped_) + offset, data_bytes);
    return {};
  }
  auto staging = context_->create_buffer(data_bytes, MemoryKind::kHostVisible);
  if (!staging) return staging.error();
  const VkBuffer src = buffer_;
  const VkBuffer dst = staging->handle();
  HEARTH_TRY(context_->submit_and_wait([&](VkCommandBuffer cmd) {
    VkBufferCopy region{offset, 0, data_bytes};
    vkCmdCopyBuffer(cmd, src, dst, 1, &region);
  }));
  std::memcpy(data, staging->mapped_, data_bytes);
  return {};
}

}  // namespace hearth::gpu
