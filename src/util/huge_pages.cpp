#include "util/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

namespace hearth {

void HugePagesFree::operator()(uint8_t* p) const {
  std::free(p);
}

HugePagesBuffer allocate_on_huge_pages(size_t bytes, size_t small_alignment) {
  void* p = nullptr;
  const size_t alignment = bytes >= kHugePageBytes ? kHugePageBytes : small_alignment;
  if (posix_memalign(&p, alignment, std::max<size_t>(bytes, 1)) != 0) return nullptr;
#if defined(MADV_HUGEPAGE)
  if (bytes >= kHugePageBytes) ::madvise(p, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
#endif
  return HugePagesBuffer(static_cast<uint8_t*>(p));
}

void commit_by_touching(uint8_t* p, size_t bytes) {
  constexpr uintptr_t kPage = 4096;
  if (bytes == 0) return;
  const auto begin = reinterpret_cast<uintptr_t>(p);
  std::atomic_ref<uint8_t>(*p).fetch_add(0, std::memory_order_relaxed);
  for (uintptr_t page = (begin / kPage + 1) * kPage; page < begin + bytes; page += kPage) {
    std::atomic_ref<uint8_t>(*reinterpret_cast<uint8_t*>(page)).fetch_add(0, std::memory_order_relaxed);
  }
}

}  // namespace hearth
