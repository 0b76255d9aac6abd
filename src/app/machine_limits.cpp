#include "app/machine_limits.h"

#include <cblas.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "util/huge_pages.h"

namespace hearth::app {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Sum of n 64-bit words with eight independent accumulators (one cache line per iteration), so the loop is
// limited by memory, not by the add latency.
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t acc[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  }
  uint64_t total = 0;
  for (uint64_t a : acc) total += a;
  return total;
}

// The buffer starts on a 2 MiB boundary and its whole 2 MiB pages are offered for transparent huge pages, as the
// packed weights are (kernels/packed.cpp): the limit a decode step is quoted against must stream the way the
// weights do: on 4 KiB pages the loop reads about 10% less, which would overstate every decode fraction quoted
// against it (docs/performance-log.md has the runs).
HugePagesBuffer allocate_read_buffer(size_t bytes) {
  HugePagesBuffer buffer = allocate_on_huge_pages(bytes);
  if (buffer == nullptr) throw std::bad_alloc();
  return buffer;
}

}  // namespace

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
  const size_t n_words = bytes / sizeof(uint64_t) / 8 * 8;
  const HugePagesBuffer buffer = allocate_read_buffer(n_words * sizeof(uint64_t));
  auto* words = reinterpret_cast<uint64_t*>(buffer.get());
  const int64_t n_lines = static_cast<int64_t>(n_words / 8);
  // Each thread first touches the pages it will read (first-touch placement), then every pass re-reads them.
  pool.run([&](int ith, int nth) {
    const Range lines = split_range(n_lines, ith, nth);
    for (int64_t i = lines.begin * 8; i < lines.end * 8; ++i) words[i] = static_cast<uint64_t>(i);
  });
  std::vector<uint64_t> sums(static_cast<size_t>(pool.num_threads()));
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = Clock::now();
    pool.run([&](int ith, int nth) {
      const Range lines = split_range(n_lines, ith, nth);
      sums[ith] = sum_words(words + lines.begin * 8, static_cast<size_t>(lines.end - lines.begin) * 8);
    });
    best = std::max(best, static_cast<double>(n_words * sizeof(uint64_t)) / seconds_since(start));
  }
  uint64_t check = 0;
  for (uint64_t s : sums) check += s;
  // The sum of 0..n-1 proves every word was read (and keeps the compiler from dropping the loop).
  const uint64_t expected = static_cast<uint64_t>(n_words) * (n_words - 1) / 2;
  if (check != expected)
    std::fprintf(stderr, "warning: bandwidth buffer sum %llu != %llu\n", static_cast<unsigned long long>(check),
                 static_cast<unsigned long long>(expected));
  return best;
}

double measure_sgemm_flops(int n, int threads, int reps) {
  openblas_set_num_threads(threads);
  const size_t count = static_cast<size_t>(n) * n;
  std::vector<float> a(count), b(count), c(count);
  for (size_t i = 0; i < count; ++i) {
    a[i] = static_cast<float>(i % 17) * 0.01f;
    b[i] = static_cast<float>(i % 13) * 0.02f;
  }
  auto gemm = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  };
  gemm();  // warm-up: thread start-up, page faults
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = Clock::now();
    gemm();
    best = std::max(best, 2.0 * n * static_cast<double>(n) * n / seconds_since(start));
  }
  return best;
}

size_t peak_rss_bytes() {
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    size_t kib = 0;
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      if (std::strncmp(line, "VmHWM:", 6) == 0) std::sscanf(line + 6, "%zu", &kib);
    }
    std::fclose(f);
    if (kib > 0) return kib * 1024;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

bool reset_peak_rss() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace hearth::app
