// hearth-bench-matmul-cpu: single-thread matmul GFLOP/s measured in thread CPU time, not wall time, so figures stay
// comparable on a shared, loaded machine (CPU time excludes the time other processes hold the core).
//
//   hearth-bench-matmul-cpu [rows=2048] [cols=2048] [tokens=64] [min_seconds=0.5]

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "tensor/quant.h"

namespace hearth {
namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

double gflops(DType type, int64_t n_rows, int64_t n_cols, int64_t n_tokens, double min_seconds) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> row(static_cast<size_t>(n_cols));
  const size_t stride = row_bytes(type, n_cols);
  std::vector<uint8_t> weights(stride * static_cast<size_t>(n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    for (float& v : row) v = dist(rng);
    quantize_row(type, row.data(), weights.data() + r * stride, n_cols);
  }
  std::vector<float> x(static_cast<size_t>(n_tokens * n_cols));
  for (float& v : x) v = dist(rng);
  std::vector<float> y(static_cast<size_t>(n_tokens * n_rows));
  const MatrixView view{type, n_rows, n_cols, weights.data(), stride};
  ThreadPool pool(1);
  MatmulScratch scratch;
  matmul(view, x.data(), n_tokens, y.data(), pool, scratch);  // warm-up
  int iters = 0;
  const double start = thread_cpu_seconds();
  double elapsed = 0;
  do {
    matmul(view, x.data(), n_tokens, y.data(), pool, scratch);
    ++iters;
    elapsed = thread_cpu_seconds() - start;
  } while (elapsed < min_seconds);
  return 2.0 * n_rows * n_cols * n_tokens * iters / elapsed * 1e-9;
}

}  // namespace
}  // namespace hearth

int main(int argc, char** argv) {
  using namespace hearth;
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 2048;
  const int64_t cols = argc > 2 ? std::atoll(argv[2]) : 2048;
  const int64_t tokens = argc > 3 ? std::atoll(argv[3]) : 64;
  const double min_seconds = argc > 4 ? std::atof(argv[4]) : 0.5;
  std::printf("%lld x %lld weights, %lld tokens, 1 thread, CPU-time GFLOP/s\n", static_cast<long long>(rows),
              static_cast<long long>(cols), static_cast<long long>(tokens));
  for (DType type : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    std::printf("%-5s %8.2f\n", dtype_name(type).data(), gflops(type, rows, cols, tokens, min_seconds));
    std::fflush(stdout);
  }
  return 0;
}
