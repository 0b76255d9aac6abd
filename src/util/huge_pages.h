#pragma once
// Large buffers on transparent huge pages: one allocation that starts on a 2 MiB boundary, with its whole 2 MiB
// pages offered to the kernel for huge pages (MADV_HUGEPAGE, which "madvise"-mode distributions grant on request).
// The advice is advice only: where the kernel declines, the buffer is ordinary 4 KiB pages. Pages are committed as
// they are first written, as with malloc, in 2 MiB steps where the advice is taken; a buffer under 2 MiB is a plain
// aligned allocation.

#include <cstddef>
#include <cstdint>
#include <memory>

namespace hearth {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

struct HugePagesFree {
  void operator()(uint8_t* p) const;
};
using HugePagesBuffer = std::unique_ptr<uint8_t[], HugePagesFree>;

// `bytes` uninitialized bytes aligned to 2 MiB (to `small_alignment`, a power of two >= sizeof(void*), when
// bytes < 2 MiB), or nullptr when the allocation fails.
[[nodiscard]] HugePagesBuffer allocate_on_huge_pages(size_t bytes, size_t small_alignment = 64);

// Commits every page under [p, p + bytes) as a write would, without changing a byte: an atomic add of zero to one
// byte of each 4 KiB page (a read would only map the shared zero page). A later write into them takes no page
// fault. Another thread may write into the range meanwhile: every byte ends as its writes left it. In a buffer
// offered for huge pages, the first touch of a 2 MiB page commits all of it. (madvise(MADV_POPULATE_WRITE) does the
// same in the kernel, but holds the process's mmap lock while it zeroes a page, and a server's other threads waited
// on it: docs/performance-log.md "Latest: the KV pool committed ahead of use".)
void commit_by_touching(uint8_t* p, size_t bytes);

}  // namespace hearth
