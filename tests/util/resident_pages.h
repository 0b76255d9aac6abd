#pragma once
// Test helper: how many of the 4 KiB pages under a range are resident (mincore), to see what was committed.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hearth::testing {

// Of the pages under [p, p + bytes), how many are resident; 0 when mincore fails.
inline size_t resident_pages(const uint8_t* p, size_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) / page * page;
  std::vector<unsigned char> in_core((end - begin) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, in_core.data()) != 0) return 0;
  size_t n = 0;
  for (const unsigned char c : in_core) n += c & 1;
  return n;
}

}  // namespace hearth::testing
