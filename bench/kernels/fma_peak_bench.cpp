// hearth-bench-fma-peak: one thread's fp32 FMA rate on 256-bit and, where the CPU has AVX-512, 512-bit vectors, in
// thread CPU time: the peak the attention kernel's GFLOP/s are measured against. Ten independent accumulators, so
// the rate is the FMA ports' throughput, not one chain's latency.
//
//   hearth-bench-fma-peak [seconds=1]

#include <immintrin.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

#include "kernels/cpu_isa.h"

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

constexpr int kChains = 10;
constexpr long kRounds = 1 << 20;

// FMAs per second over at least `seconds` of CPU time.
template <class Body>
double fmas_per_second(double seconds, Body body) {
  long calls = 0;
  const double start = thread_cpu_seconds();
  double elapsed = 0;
  do {
    body();
    ++calls;
    elapsed = thread_cpu_seconds() - start;
  } while (elapsed < seconds);
  return static_cast<double>(calls) * kRounds * kChains / elapsed;
}

__attribute__((target("avx2,fma"), noinline)) float run256() {
  __m256 acc[kChains];
  for (__m256& a : acc) a = _mm256_set1_ps(0.0f);
  const __m256 x = _mm256_set1_ps(0.999f);
  const __m256 y = _mm256_set1_ps(1e-7f);
#pragma GCC unroll 8
  for (long r = 0; r < kRounds; ++r) {
    for (__m256& a : acc) {
      a = _mm256_fmadd_ps(a, x, y);
      asm volatile("" : "+x"(a));  // keeps every FMA: the compiler may not fold or drop the chain
    }
  }
  __m256 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, acc[i]);
  return _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f"), noinline)) float run512() {
  __m512 acc[kChains];
  for (__m512& a : acc) a = _mm512_set1_ps(0.0f);
  const __m512 x = _mm512_set1_ps(0.999f);
  const __m512 y = _mm512_set1_ps(1e-7f);
#pragma GCC unroll 8
  for (long r = 0; r < kRounds; ++r) {
    for (__m512& a : acc) {
      a = _mm512_fmadd_ps(a, x, y);
      asm volatile("" : "+v"(a));
    }
  }
  return _mm512_reduce_add_ps(acc[0]) + _mm512_reduce_add_ps(acc[kChains - 1]);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hearth;
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  volatile float sink = 0;
  if (!isa_supported(IsaLevel::kAvx2)) {
    std::printf("no AVX2 on this CPU\n");
    return 0;
  }
  const double f256 = fmas_per_second(seconds, [&] { sink = sink + run256(); });
  std::printf("256-bit: %.2f G FMA/s, %.1f GFLOP/s on one thread\n", f256 * 1e-9, f256 * 16e-9);
  if (isa_supported(IsaLevel::kAvx512Vnni)) {
    const double f512 = fmas_per_second(seconds, [&] { sink = sink + run512(); });
    std::printf("512-bit: %.2f G FMA/s, %.1f GFLOP/s on one thread\n", f512 * 1e-9, f512 * 32e-9);
  }
  return 0;
}
