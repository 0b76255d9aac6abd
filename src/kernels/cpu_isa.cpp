#include "kernels/cpu_isa.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "util/result.h"

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
  IsaLevel level = detected_isa_level();
  if (const char* cap = std::getenv("HEARTH_MAX_ISA"); cap != nullptr && cap[0] != '\0') {
    bool known = false;
    for (IsaLevel l : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvxVnni}) {
      if (std::strcmp(cap, isa_level_name(l)) == 0) {
        known = true;
        level = std::min(level, l);
      }
    }
    HEARTH_CHECK(known, "HEARTH_MAX_ISA={}: not one of scalar, avx2, avx2+avxvnni", cap);
  }
  return level;
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
