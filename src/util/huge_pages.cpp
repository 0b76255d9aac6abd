#include "util/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
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

}  // namespace hearth
