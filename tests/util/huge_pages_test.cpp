// allocate_on_huge_pages: a large buffer starts on a 2 MiB boundary and its mapping carries the kernel's huge-page
// advice (VmFlags "hg" in /proc/self/smaps); a small one is a plain allocation with the alignment asked for.
#include "util/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace hearth {
namespace {

// The VmFlags line of the mapping that holds `p`, or "" when /proc/self/smaps does not list one.
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  std::string line;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-' && line.find(':') > line.find(' ')) {
      inside = begin <= addr && addr < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool kernel_has_transparent_huge_pages() {
  return std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled");
}

TEST(HugePages, ALargeBufferStartsOn2MiBAndIsOfferedForHugePages) {
  const size_t bytes = 3 * kHugePageBytes + 4096;  // a tail past the last whole 2 MiB page
  HugePagesBuffer buffer = allocate_on_huge_pages(bytes);
  ASSERT_NE(buffer, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.get()) % kHugePageBytes, 0u);
  std::memset(buffer.get(), 0x5a, bytes);  // every byte is writable
  EXPECT_EQ(buffer[bytes - 1], 0x5a);
  if (!kernel_has_transparent_huge_pages()) GTEST_SKIP() << "this kernel has no transparent huge pages";
  const std::string flags = vm_flags_of(buffer.get());
  if (flags.empty()) GTEST_SKIP() << "no /proc/self/smaps entry for the buffer";
  EXPECT_NE((flags + " ").find(" hg "), std::string::npos) << flags;
}

TEST(HugePages, ASmallBufferTakesTheAlignmentAskedFor) {
  for (size_t alignment : {size_t{8}, size_t{64}, size_t{4096}}) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, kHugePageBytes - 1}) {
      HugePagesBuffer buffer = allocate_on_huge_pages(bytes, alignment);
      ASSERT_NE(buffer, nullptr) << bytes;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.get()) % alignment, 0u) << bytes << " bytes at " << alignment;
      if (bytes > 0) buffer[bytes - 1] = 1;
    }
  }
}

TEST(HugePages, AnImpossibleSizeIsNullNotACrash) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reports an allocation this large instead of failing it";
#endif
  EXPECT_EQ(allocate_on_huge_pages(SIZE_MAX - kHugePageBytes), nullptr);
}

}  // namespace
}  // namespace hearth
