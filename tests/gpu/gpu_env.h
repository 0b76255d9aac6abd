#pragma once
// One Vulkan context for a whole test binary. Without a device the GPU tests skip with the reason, except under CI
// (the environment variable CI set), where a missing device is a failure: CI must run the shaders on lavapipe.

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "gpu/context.h"
#include "gpu/ops.h"
#include "gpu/pipeline.h"

namespace hearth::gpu::testing {

struct GpuEnv {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Kernels> kernels;
  std::unique_ptr<CommandRecorder> rec;
  std::string why_not;  // set when there is no usable device
};

inline GpuEnv& gpu_env() {
  static GpuEnv env = [] {
    GpuEnv e;
    auto ctx = Context::create(0);
    if (!ctx) {
      e.why_not = ctx.error().message;
      return e;
    }
    e.ctx = std::move(*ctx);
    auto kernels = Kernels::create(*e.ctx);
    if (!kernels) {
      e.why_not = kernels.error().message;
      return e;
    }
    e.kernels = std::move(*kernels);
    auto rec = CommandRecorder::create(*e.ctx);
    if (!rec) {
      e.why_not = rec.error().message;
      return e;
    }
    e.rec = std::move(*rec);
    return e;
  }();
  return env;
}

inline bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && *ci != '\0';
}

}  // namespace hearth::gpu::testing

// Skips the test without a Vulkan device (fails under CI).
#define HEARTH_REQUIRE_GPU()                                                                                \
  do {                                                                                                      \
    auto& env_ = ::hearth::gpu::testing::gpu_env();                                                         \
    if (!env_.rec) {                                                                                        \
      if (::hearth::gpu::testing::under_ci()) FAIL() << "CI is set but no Vulkan device: " << env_.why_not; \
      GTEST_SKIP() << "no Vulkan device: " << env_.why_not;                                                 \
    }                                                                                                       \
  } while (0)
