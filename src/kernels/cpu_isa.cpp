#include "kernels/cpu_isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace hearth {
namespace {

IsaLevel detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    return __builtin_cpu_supports("avxvnni") ? IsaLevel::kAvxVnni : IsaLevel::kAvx2;
  }
#endif
  return IsaLevel::kScalar;
}

IsaLevel initial_level() {
  const char* force = std::getenv("HEARTH_FORCE_SCALAR");
  if (force != nullptr && force[0] != '\0' && std::strcmp(force, "0") != 0) return IsaLevel::kScalar;
  return detected_isa_level();
}

std::atomic<IsaLevel>& active_level() {
  static std::atomic<IsaLevel> level{initial_level()};
  return level;
}

}  // namespace

const char* isa_level_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar:
      return "scalar";
    case IsaLevel::kAvx2:
      return "avx2";
    case IsaLevel::kAvxVnni:
      return "avx2+avxvnni";
  }
  return "unknown";
}

IsaLevel detected_isa_level() {
  static const IsaLevel level = detect();
  return level;
}

IsaLevel active_isa_level() {
  return active_level().load(std::memory_order_relaxed);
}

void set_isa_level(IsaLevel level) {
  if (static_cast<int>(level) > static_cast<int>(detected_isa_level())) level = detected_isa_level();
  active_level().store(level, std::memory_order_relaxed);
}

}  // namespace hearth
