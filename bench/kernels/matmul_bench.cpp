// Microbenchmarks for matmul: GFLOP/s per weight type, decode (1 token) and prefill (64 tokens) shapes.
// Run: build/bench/kernels/matmul_bench [--benchmark_filter=Q8_0]; HEARTH_FORCE_SCALAR=1 for the fallback.
// The types Hearth only reads (no quantizer) get random blocks (tests/kernels/random_blocks.h). For the scalar twin
// and the AVX2 tile side by side in one run, see hearth-bench-matmul-cpu.

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "random_blocks.h"
#include "tensor/quant.h"

namespace hearth {
namespace {

struct Problem {
  std::vector<uint8_t> weights;
  std::vector<float> x;
  std::vector<float> y;
  MatrixView view;
};

Problem make_problem(DType type, int64_t n_rows, int64_t n_cols, int64_t n_tokens) {
  Problem p;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> row(static_cast<size_t>(n_cols));
  const size_t stride = row_bytes(type, n_cols);
  p.weights.resize(stride * static_cast<size_t>(n_rows));
  if (quant_row_supported(type)) {
    for (int64_t r = 0; r < n_rows; ++r) {
      for (float& v : row) v = dist(rng);
      quantize_row(type, row.data(), p.weights.data() + r * stride, n_cols);
    }
  } else {
    test_data::fill_random_blocks(type, p.weights.data(), p.weights.size(), 7);
  }
  p.x.resize(static_cast<size_t>(n_tokens * n_cols));
  for (float& v : p.x) v = dist(rng);
  p.y.resize(static_cast<size_t>(n_tokens * n_rows));
  p.view = {type, n_rows, n_cols, p.weights.data(), stride};
  return p;
}

void bm_matmul(benchmark::State& state, DType type) {
  const int64_t n = state.range(0);
  const int64_t n_tokens = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  Problem p = make_problem(type, n, n, n_tokens);
  ThreadPool pool(threads);
  MatmulScratch scratch;
  for (auto _ : state) {
    matmul(p.view, p.x.data(), n_tokens, p.y.data(), pool, scratch);
    benchmark::DoNotOptimize(p.y.data());
  }
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n_tokens);
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_GBps"] =
      benchmark::Counter(static_cast<double>(p.weights.size()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int64_t tokens : {1, 64}) {
    for (int64_t threads : {1, 2}) b->Args({2048, tokens, threads});
    b->Args({512, tokens, 1});
  }
  b->ArgNames({"n", "tokens", "threads"})->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK_CAPTURE(bm_matmul, F32, DType::F32)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, F16, DType::F16)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, BF16, DType::BF16)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, Q8_0, DType::Q8_0)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, Q4_0, DType::Q4_0)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, Q4_K, DType::Q4_K)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, Q6_K, DType::Q6_K)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, Q4_1, DType::Q4_1)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, Q5_0, DType::Q5_0)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, Q5_1, DType::Q5_1)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, IQ4_NL, DType::IQ4_NL)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, Q2_K, DType::Q2_K)->Apply(shapes);

}  // namespace
}  // namespace hearth

BENCHMARK_MAIN();
