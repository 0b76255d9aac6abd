#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/packed.h"
#include "util/result.h"

namespace hearth {
namespace {

constexpr DecodePrefetch kPolicies[] = {DecodePrefetch::kAuto, DecodePrefetch::kTileAhead, DecodePrefetch::kWithinL1,
                                        DecodePrefetch::kNear, DecodePrefetch::kNone};

DecodePrefetch initial_policy() {
  const char* name = std::getenv("HEARTH_DECODE_PREFETCH");
  if (name == nullptr || name[0] == '\0') return DecodePrefetch::kAuto;
  for (DecodePrefetch p : kPolicies) {
    if (std::strcmp(name, decode_prefetch_name(p)) == 0) return p;
  }
  HEARTH_CHECK(false, "HEARTH_DECODE_PREFETCH={}: not one of auto, tile, l1, near, none", name);
  return DecodePrefetch::kAuto;
}

std::atomic<DecodePrefetch>& policy() {
  static std::atomic<DecodePrefetch> p{initial_policy()};
  return p;
}

size_t l1d_bytes() {
  static const size_t bytes = [] {
    const long n = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    return n > 0 ? static_cast<size_t>(n) : size_t{32 * 1024};
  }();
  return bytes;
}

}  // namespace

void set_decode_prefetch(DecodePrefetch p) {
  policy().store(p, std::memory_order_relaxed);
}

DecodePrefetch decode_prefetch() {
  return policy().load(std::memory_order_relaxed);
}

const char* decode_prefetch_name(DecodePrefetch p) {
  switch (p) {
    case DecodePrefetch::kAuto:
      return "auto";
    case DecodePrefetch::kTileAhead:
      return "tile";
    case DecodePrefetch::kWithinL1:
      return "l1";
    case DecodePrefetch::kNear:
      return "near";
    case DecodePrefetch::kNone:
      return "none";
  }
  return "unknown";
}

size_t decode_fetch_distance(size_t group_bytes) {
  const size_t tile = 2 * group_bytes;
  const bool fits = 4 * group_bytes <= l1d_bytes();
  const size_t near = fits ? tile : kDecodeNearFetchBytes;
  switch (decode_prefetch()) {
    case DecodePrefetch::kAuto:
    case DecodePrefetch::kNear:
      return near;
    case DecodePrefetch::kTileAhead:
      return tile;
    case DecodePrefetch::kWithinL1:
      return fits ? tile : 0;
    case DecodePrefetch::kNone:
      return 0;
  }
  return tile;
}

}  // namespace hearth
