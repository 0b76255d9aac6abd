#include "kernels/cpu_isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "util/result.h"

namespace hearth {
namespace {

bool supports(IsaLevel level) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  switch (level) {
    case IsaLevel::kScalar:
      return true;
    case IsaLevel::kAvx2:
      return avx2;
    case IsaLevel::kAvxVnni:
      return avx2 && __builtin_cpu_supports("avxvnni");
    case IsaLevel::kAvx512Vnni:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  }
  return false;
#else
  return level == IsaLevel::kScalar;
#endif
}

constexpr IsaLevel kLevels[] = {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvxVnni, IsaLevel::kAvx512Vnni};

// The best supported level at or below `level`.
IsaLevel supported_at_most(IsaLevel level) {
  IsaLevel best = IsaLevel::kScalar;
  for (IsaLevel l : kLevels) {
    if (static_cast<int>(l) <= static_cast<int>(level) && supports(l)) best = l;
  }
  return best;
}

IsaLevel initial_level() {
  const char* force = std::getenv("HEARTH_FORCE_SCALAR");
  if (force != nullptr && force[0] != '\0' && std::strcmp(force, "0") != 0) return IsaLevel::kScalar;
  IsaLevel level = detected_isa_level();
  if (const char* cap = std::getenv("HEARTH_MAX_ISA"); cap != nullptr && cap[0] != '\0') {
    bool known = false;
    for (IsaLevel l : kLevels) {
      if (std::strcmp(cap, isa_level_name(l)) == 0) {
        known = true;
        level = supported_at_most(l);
      }
    }
    HEARTH_CHECK(known, "HEARTH_MAX_ISA={}: not one of scalar, avx2, avx2+avxvnni, avx512vnni", cap);
  }
  return level;
}

std::atomic<IsaLevel>& active_level() {
  static std::atomic<IsaLevel> level{initial_level()};
  return level;
}

}  // namespace

bool cpu_is_zen1() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_is("znver1");
#else
  return false;
#endif
}

const char* isa_level_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar:
      return "scalar";
    case IsaLevel::kAvx2:
      return "avx2";
    case IsaLevel::kAvxVnni:
      return "avx2+avxvnni";
    case IsaLevel::kAvx512Vnni:
      return "avx512vnni";
  }
  return "unknown";
}

IsaLevel detected_isa_level() {
  static const IsaLevel level = supported_at_most(IsaLevel::kAvx512Vnni);
  return level;
}

bool isa_supported(IsaLevel level) {
  return supports(level);
}

IsaLevel active_isa_level() {
  return active_level().load(std::memory_order_relaxed);
}

void set_isa_level(IsaLevel level) {
  active_level().store(supported_at_most(level), std::memory_order_relaxed);
}

}  // namespace hearth
