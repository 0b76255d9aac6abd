#include "util/process_memory.h"

#include <unistd.h>

#include <cstdio>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace hearth {

void bound_malloc_arenas(int max_arenas) {
#if defined(__GLIBC__)
  mallopt(M_ARENA_MAX, max_arenas);
#else
  (void)max_arenas;
#endif
}

void return_freed_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const bool ok = std::fscanf(f, "%lu %lu", &size, &resident) == 2;
  std::fclose(f);
  return ok ? resident * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace hearth
