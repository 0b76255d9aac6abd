#pragma once
// Compute pipelines made from the SPIR-V embedded in the binary (shaders.h), and the recorder that binds buffers,
// pushes constants, dispatches and waits.
//
// Every shader of Hearth has the same interface shape: bindings 0..n_buffers-1 are storage buffers in set 0, and
// one push-constant block of at most kMaxPushBytes. A dispatch allocates its descriptor set from the recorder's
// pool, so buffers can change between dispatches without rebuilding anything.

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>

#include "gpu/context.h"
#include "util/result.h"

namespace hearth::gpu {

inline constexpr uint32_t kMaxPushBytes = 128;  // the minimum maxPushConstantsSize Vulkan guarantees
inline constexpr uint32_t kMaxBuffers = 8;      // storage buffers per shader (and per dispatch)

class Pipeline {
 public:
  // A pipeline for `spirv` (its entry point `main`) with n_buffers storage-buffer bindings and push_bytes of push
  // constants. Fails with the driver's code when the module or the pipeline cannot be made.
  [[nodiscard]] static Result<std::unique_ptr<Pipeline>> create(Context& ctx, std::string name,
                                                                std::span<const uint32_t> spirv, uint32_t n_buffers,
                                                                uint32_t push_bytes);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  const std::string& name() const { return name_; }
  uint32_t n_buffers() const { return n_buffers_; }
  uint32_t push_bytes() const { return push_bytes_; }
  VkPipeline handle() const { return pipeline_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }

 private:
  Pipeline() = default;
  VkDevice device_ = VK_NULL_HANDLE;
  std::string name_;
  uint32_t n_buffers_ = 0;
  uint32_t push_bytes_ = 0;
  VkShaderModule module_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

// Records dispatches into one command buffer; run() submits them and waits. Dispatches run in recording order:
// each is followed by a barrier that makes its writes visible to the next one and to the host.
// Usage: begin(); dispatch(...); dispatch(...); run();  then begin() again for the next batch.
class CommandRecorder {
 public:
  // Up to max_dispatches dispatches between begin() and run() (the descriptor pool's size).
  [[nodiscard]] static Result<std::unique_ptr<CommandRecorder>> create(Context& ctx, uint32_t max_dispatches = 256);
  ~CommandRecorder();
  CommandRecorder(const CommandRecorder&) = delete;
  CommandRecorder& operator=(const CommandRecorder&) = delete;

  // Starts a new batch; the descriptor sets of the previous one are freed. Requires the previous batch run.
  [[nodiscard]] Result<void> begin();
  // Records `pipeline` over groups_x × groups_y × groups_z workgroups with `buffers` bound in order and `push`
  // (pipeline.push_bytes() bytes) as push constants. Requires buffers.size() == pipeline.n_buffers(); fails
  // when more than max_dispatches dispatches were recorded since begin(), a group count exceeds the device's
  // limit, or a buffer is larger than its maxStorageBufferRange (a shader sees one binding of at most that).
  [[nodiscard]] Result<void> dispatch(const Pipeline& pipeline, std::initializer_list<const Buffer*> buffers,
                                      const void* push, uint32_t groups_x, uint32_t groups_y = 1,
                                      uint32_t groups_z = 1);
  // Submits what was recorded and waits until the device is done.
  [[nodiscard]] Result<void> run();

 private:
  CommandRecorder() = default;
  Context* ctx_ = nullptr;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkDescriptorPool descriptor_pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  uint32_t max_dispatches_ = 0;
  uint32_t n_dispatches_ = 0;
  bool recording_ = false;
};

// Workgroups of `group_size` that cover n items.
inline uint32_t groups_for(int64_t n, uint32_t group_size) {
  return static_cast<uint32_t>((n + group_size - 1) / group_size);
}

}  // namespace hearth::gpu
