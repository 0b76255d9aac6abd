// hearth-bench-fma-peak: one thread's fp32 FMA rate on 256-bit and, where the CPU has AVX-512, 512-bit vectors, in
// thread CPU time: the peak the attention kernel's GFLOP/s are measured against. Ten independent accumulators, so
// the rate is the FMA ports' throughput, not one chain's latency. Then, the same way, the AVX2 integer multiplies
// the quantized tiles are built from (kernels/vec_dot_avx2_packed.cpp): vpmaddubsw alone (32 u8·s8 products per
// 256-bit op) and vpmaddubsw followed by vpmaddwd (the emulated vpdpbusd of Q8_0's tiles), as products per second:
// the ceiling of a tile whose multiplies are its busiest port.
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

constexpr int kChains = 10;  // HEARTH_TEN below
constexpr long kRounds = 1 << 20;

// Operations per second (kRounds rounds of the ten chains per call) over at least `seconds` of CPU time.
template <class Body>
double ops_per_second(double seconds, Body body) {
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

// Ten named accumulators (an array of them stayed in memory, one load and one store per FMA, which on Zen 1, one
// 128-bit store per cycle, halved the measured rate); the empty asm after each round keeps every FMA (the compiler
// may not fold or drop the chains) and them in registers.
#define HEARTH_TEN(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9)

__attribute__((target("avx2,fma"), noinline)) float run256() {
#define HEARTH_DECLARE(i) __m256 a##i = _mm256_set1_ps(0.0f);
  HEARTH_TEN(HEARTH_DECLARE)
  const __m256 x = _mm256_set1_ps(0.999f);
  const __m256 y = _mm256_set1_ps(1e-7f);
  for (long r = 0; r < kRounds; ++r) {
#define HEARTH_FMA(i) a##i = _mm256_fmadd_ps(a##i, x, y);
    HEARTH_TEN(HEARTH_FMA)
    asm volatile(""
                 : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9));
  }
#define HEARTH_SUM(i) s = _mm256_add_ps(s, a##i);
  __m256 s = _mm256_setzero_ps();
  HEARTH_TEN(HEARTH_SUM)
  return _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f"), noinline)) float run512() {
#define HEARTH_DECLARE512(i) __m512 a##i = _mm512_set1_ps(0.0f);
  HEARTH_TEN(HEARTH_DECLARE512)
  const __m512 x = _mm512_set1_ps(0.999f);
  const __m512 y = _mm512_set1_ps(1e-7f);
  for (long r = 0; r < kRounds; ++r) {
#define HEARTH_FMA512(i) a##i = _mm512_fmadd_ps(a##i, x, y);
    HEARTH_TEN(HEARTH_FMA512)
    asm volatile(""
                 : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9));
  }
  return _mm512_reduce_add_ps(a0) + _mm512_reduce_add_ps(a9);
}

// The integer multiplies, ten chains as above: each step's output is the next step's signed operand.
__attribute__((target("avx2"), noinline)) int run_maddubs() {
#define HEARTH_DECLARE_I(i) __m256i a##i = _mm256_set1_epi8(static_cast<char>(i + 1));
  HEARTH_TEN(HEARTH_DECLARE_I)
  const __m256i u = _mm256_set1_epi8(3);
  for (long r = 0; r < kRounds; ++r) {
#define HEARTH_MADDUBS(i) a##i = _mm256_maddubs_epi16(u, a##i);
    HEARTH_TEN(HEARTH_MADDUBS)
    asm volatile(""
                 : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9));
  }
  return _mm256_extract_epi32(_mm256_add_epi32(a0, a9), 0);
}

__attribute__((target("avx2"), noinline)) int run_maddubs_madd() {
  HEARTH_TEN(HEARTH_DECLARE_I)
  const __m256i u = _mm256_set1_epi8(3);
  const __m256i ones = _mm256_set1_epi16(1);
  for (long r = 0; r < kRounds; ++r) {
#define HEARTH_DPBUSD(i) a##i = _mm256_madd_epi16(_mm256_maddubs_epi16(u, a##i), ones);
    HEARTH_TEN(HEARTH_DPBUSD)
    asm volatile(""
                 : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9));
  }
  return _mm256_extract_epi32(_mm256_add_epi32(a0, a9), 0);
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
  const double f256 = ops_per_second(seconds, [&] { sink = sink + run256(); });
  std::printf("256-bit: %.2f G FMA/s, %.1f GFLOP/s on one thread\n", f256 * 1e-9, f256 * 16e-9);
  if (isa_supported(IsaLevel::kAvx512Vnni)) {
    const double f512 = ops_per_second(seconds, [&] { sink = sink + run512(); });
    std::printf("512-bit: %.2f G FMA/s, %.1f GFLOP/s on one thread\n", f512 * 1e-9, f512 * 32e-9);
  }
  volatile int isink = 0;
  const double ub = ops_per_second(seconds, [&] { isink = isink + run_maddubs(); });
  std::printf("256-bit vpmaddubsw: %.2f G ops/s, %.1f G int8 products/s on one thread\n", ub * 1e-9, ub * 32e-9);
  const double dp = ops_per_second(seconds, [&] { isink = isink + run_maddubs_madd(); });
  std::printf("256-bit vpmaddubsw + vpmaddwd: %.2f G pairs/s, %.1f G int8 products/s on one thread\n", dp * 1e-9,
              dp * 32e-9);
  return 0;
}
