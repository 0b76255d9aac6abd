#include "gpu/pipeline.h"

#include <array>
#include <utility>
#include <vector>

namespace hearth::gpu {

Result<std::unique_ptr<Pipeline>> Pipeline::create(Context& ctx, std::string name, std::span<const uint32_t> spirv,
                                                   uint32_t n_buffers, uint32_t push_bytes) {
  HEARTH_CHECK(push_bytes <= kMaxPushBytes && push_bytes % 4 == 0, "push constants of {} bytes", push_bytes);
  HEARTH_CHECK(n_buffers <= kMaxBuffers, "{} buffers, at most {}", n_buffers, kMaxBuffers);
  std::unique_ptr<Pipeline> p(new Pipeline());
  p->device_ = ctx.device();
  p->name_ = std::move(name);
  p->n_buffers_ = n_buffers;
  p->push_bytes_ = push_bytes;

  VkShaderModuleCreateInfo module{};
  module.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module.codeSize = spirv.size_bytes();
  module.pCode = spirv.data();
  VkResult r = vkCreateShaderModule(p->device_, &module, nullptr, &p->module_);
  if (r != VK_SUCCESS) return make_error("cannot load shader {}: {}", p->name_, vk_result_name(r));

  std::vector<VkDescriptorSetLayoutBinding> bindings(n_buffers);
  for (uint32_t i = 0; i < n_buffers; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set{};
  set.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set.bindingCount = n_buffers;
  set.pBindings = bindings.data();
  r = vkCreateDescriptorSetLayout(p->device_, &set, nullptr, &p->set_layout_);
  if (r != VK_SUCCESS) return make_error("cannot create the descriptor layout of {}: {}", p->name_, vk_result_name(r));

  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo layout{};
  layout.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout.setLayoutCount = 1;
  layout.pSetLayouts = &p->set_layout_;
  layout.pushConstantRangeCount = push_bytes > 0 ? 1 : 0;
  layout.pPushConstantRanges = &range;
  r = vkCreatePipelineLayout(p->device_, &layout, nullptr, &p->layout_);
  if (r != VK_SUCCESS) return make_error("cannot create the pipeline layout of {}: {}", p->name_, vk_result_name(r));

  VkComputePipelineCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  create.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  create.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  create.stage.module = p->module_;
  create.stage.pName = "main";
  create.layout = p->layout_;
  r = vkCreateComputePipelines(p->device_, VK_NULL_HANDLE, 1, &create, nullptr, &p->pipeline_);
  if (r != VK_SUCCESS) return make_error("cannot create the pipeline of {}: {}", p->name_, vk_result_name(r));
  return p;
}

Pipeline::~Pipeline() {
  if (pipeline_ != VK_NULL_HANDLE) vkDestroyPipeline(device_, pipeline_, nullptr);
  if (layout_ != VK_NULL_HANDLE) vkDestroyPipelineLayout(device_, layout_, nullptr);
  if (set_layout_ != VK_NULL_HANDLE) vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
  if (module_ != VK_NULL_HANDLE) vkDestroyShaderModule(device_, module_, nullptr);
}

Result<std::unique_ptr<CommandRecorder>> CommandRecorder::create(Context& ctx, uint32_t max_dispatches) {
  std::unique_ptr<CommandRecorder> rec(new CommandRecorder());
  rec->ctx_ = &ctx;
  rec->max_dispatches_ = max_dispatches;
  VkDevice device = ctx.device();

  VkCommandPoolCreateInfo pool{};
  pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = ctx.queue_family();
  VkResult r = vkCreateCommandPool(device, &pool, nullptr, &rec->command_pool_);
  if (r != VK_SUCCESS) return make_error("cannot create a Vulkan command pool: {}", vk_result_name(r));
  VkCommandBufferAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  alloc.commandPool = rec->command_pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  r = vkAllocateCommandBuffers(device, &alloc, &rec->cmd_);
  if (r != VK_SUCCESS) return make_error("cannot allocate a Vulkan command buffer: {}", vk_result_name(r));

  // Each dispatch takes one set of at most kMaxBuffers storage buffers.
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kMaxBuffers * max_dispatches};
  VkDescriptorPoolCreateInfo descriptors{};
  descriptors.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  descriptors.maxSets = max_dispatches;
  descriptors.poolSizeCount = 1;
  descriptors.pPoolSizes = &size;
  r = vkCreateDescriptorPool(device, &descriptors, nullptr, &rec->descriptor_pool_);
  if (r != VK_SUCCESS) return make_error("cannot create a Vulkan descriptor pool: {}", vk_result_name(r));

  VkFenceCreateInfo fence{};
  fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  r = vkCreateFence(device, &fence, nullptr, &rec->fence_);
  if (r != VK_SUCCESS) return make_error("cannot create a Vulkan fence: {}", vk_result_name(r));
  return rec;
}

CommandRecorder::~CommandRecorder() {
  VkDevice device = ctx_->device();
  vkDeviceWaitIdle(device);
  if (fence_ != VK_NULL_HANDLE) vkDestroyFence(device, fence_, nullptr);
  if (descriptor_pool_ != VK_NULL_HANDLE) vkDestroyDescriptorPool(device, descriptor_pool_, nullptr);
  if (command_pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device, command_pool_, nullptr);
}

Result<void> CommandRecorder::begin() {
  HEARTH_CHECK(!recording_, "CommandRecorder::begin while a batch is recorded");
  VkResult r = vkResetDescriptorPool(ctx_->device(), descriptor_pool_, 0);
  if (r != VK_SUCCESS) return make_error("cannot reset the descriptor pool: {}", vk_result_name(r));
  r = vkResetCommandBuffer(cmd_, 0);
  if (r != VK_SUCCESS) return make_error("cannot reset the command buffer: {}", vk_result_name(r));
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  r = vkBeginCommandBuffer(cmd_, &begin);
  if (r != VK_SUCCESS) return make_error("cannot begin the command buffer: {}", vk_result_name(r));
  n_dispatches_ = 0;
  recording_ = true;
  return {};
}

Result<void> CommandRecorder::dispatch(const Pipeline& pipeline, std::initializer_list<const Buffer*> buffers,
                                       const void* push, uint32_t groups_x, uint32_t groups_y, uint32_t groups_z) {
  HEARTH_CHECK(recording_, "CommandRecorder::dispatch before begin");
  HEARTH_CHECK(buffers.size() == pipeline.n_buffers(), "{} takes {} buffers, got {}", pipeline.name(),
               pipeline.n_buffers(), buffers.size());
  if (n_dispatches_ >= max_dispatches_) {
    return make_error("more than {} dispatches in one command batch", max_dispatches_);
  }
  const uint32_t* max_groups = ctx_->limits().maxComputeWorkGroupCount;
  if (groups_x > max_groups[0] || groups_y > max_groups[1] || groups_z > max_groups[2]) {
    return make_error("{}: {}x{}x{} workgroups exceed the device's {}x{}x{}", pipeline.name(), groups_x, groups_y,
                      groups_z, max_groups[0], max_groups[1], max_groups[2]);
  }
  for (const Buffer* b : buffers) {
    if (b->size() > ctx_->limits().maxStorageBufferRange) {
      return make_error("{}: a buffer of {} bytes exceeds the device's storage-buffer range of {} bytes",
                        pipeline.name(), b->size(), ctx_->limits().maxStorageBufferRange);
    }
  }
  if (groups_x == 0 || groups_y == 0 || groups_z == 0) return {};

  VkDescriptorSetLayout set_layout = pipeline.set_layout();
  VkDescriptorSetAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  alloc.descriptorPool = descriptor_pool_;
  alloc.descriptorSetCount = 1;
  alloc.pSetLayouts = &set_layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  VkResult r = vkAllocateDescriptorSets(ctx_->device(), &alloc, &set);
  if (r != VK_SUCCESS) return make_error("cannot allocate a descriptor set: {}", vk_result_name(r));
  // Fixed arrays: recording a dispatch allocates nothing on the host.
  std::array<VkDescriptorBufferInfo, kMaxBuffers> infos{};
  std::array<VkWriteDescriptorSet, kMaxBuffers> writes{};
  uint32_t n = 0;
  for (const Buffer* b : buffers) {
    infos[n] = {b->handle(), 0, VK_WHOLE_SIZE};
    VkWriteDescriptorSet& w = writes[n];
    w.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    w.dstSet = set;
    w.dstBinding = n;
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &infos[n];
    ++n;
  }
  vkUpdateDescriptorSets(ctx_->device(), n, writes.data(), 0, nullptr);

  vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle());
  vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout(), 0, 1, &set, 0, nullptr);
  if (pipeline.push_bytes() > 0) {
    vkCmdPushConstants(cmd_, pipeline.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, pipeline.push_bytes(), push);
  }
  vkCmdDispatch(cmd_, groups_x, groups_y, groups_z);
  // The next dispatch (or a copy, or the host) sees this one's writes.
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask =
      VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(
      cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
      &barrier, 0, nullptr, 0, nullptr);
  ++n_dispatches_;
  return {};
}

Result<void> CommandRecorder::run() {
  HEARTH_CHECK(recording_, "CommandRecorder::run before begin");
  recording_ = false;
  VkResult r = vkEndCommandBuffer(cmd_);
  if (r != VK_SUCCESS) return make_error("cannot end the command buffer: {}", vk_result_name(r));
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd_;
  r = vkQueueSubmit(ctx_->queue(), 1, &submit, fence_);
  if (r != VK_SUCCESS) return make_error("Vulkan queue submit failed: {}", vk_result_name(r));
  r = vkWaitForFences(ctx_->device(), 1, &fence_, VK_TRUE, UINT64_MAX);
  vkResetFences(ctx_->device(), 1, &fence_);
  if (r != VK_SUCCESS) return make_error("waiting for the Vulkan device failed: {}", vk_result_name(r));
  return {};
}

}  // namespace hearth::gpu
