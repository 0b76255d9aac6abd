// hearth-bench-matmul-cpu: single-thread matmul speed per weight type, the scalar twin, the AVX2 tile and, where
// the type has a packed layout (kernels/packed.h), the packed tiles at each level the CPU has, side by side, measured
// in thread CPU time, not wall time, so figures stay comparable on a shared, loaded machine (CPU time excludes the time
// other processes hold the core). Each repeat measures every type at both levels one after the other; the table gives
// the best repeat of each (the run least disturbed by the neighbours).
//
//   hearth-bench-matmul-cpu [rows=2048] [cols=2048] [tokens=64] [min_seconds=0.5] [repeats=3]
//
// Columns, for each level and layout: GFLOP/s (2·rows·cols·tokens per matmul), weight GB/s
// (stored weight bytes per matmul; the figure for decode, tokens = 1) and ns per row-dot (one weight row times one
// activation row, activation quantization included); then the ratio of the scalar time to the fastest. Types Hearth
// only reads (no quantizer) get random blocks (tests/kernels/random_blocks.h); speed does not depend on the values.

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_isa.h"
#include "kernels/matmul.h"
#include "kernels/packed.h"
#include "kernels/weight_types.h"
#include "random_blocks.h"
#include "tensor/quant.h"

namespace hearth {
namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

struct Problem {
  std::vector<uint8_t> weights;
  std::vector<float> x;
  std::vector<float> y;
  MatrixView view;
  int64_t n_tokens;
  std::unique_ptr<PackedMatrix> packed;  // when packing_available(type)
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
  p.n_tokens = n_tokens;
  if (packing_available(type)) p.packed = pack_matrix(p.view);
  return p;
}

// CPU seconds per matmul at `level`, over at least min_seconds of repeated calls.
// With `packed`, the view carries the packed copy (read at kAvx2 and above).
double seconds_per_matmul(Problem& p, IsaLevel level, bool packed, double min_seconds) {
  set_isa_level(level);
  ThreadPool pool(1);
  MatmulScratch scratch;
  MatrixView view = p.view;
  if (packed) view.packed = p.packed.get();
  matmul(view, p.x.data(), p.n_tokens, p.y.data(), pool, scratch);  // warm-up
  int iters = 0;
  const double start = thread_cpu_seconds();
  double elapsed = 0;
  do {
    matmul(view, p.x.data(), p.n_tokens, p.y.data(), pool, scratch);
    ++iters;
    elapsed = thread_cpu_seconds() - start;
  } while (elapsed < min_seconds);
  return elapsed / iters;
}

}  // namespace
}  // namespace hearth

int main(int argc, char** argv) {
  using namespace hearth;
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 2048;
  const int64_t cols = argc > 2 ? std::atoll(argv[2]) : 2048;
  const int64_t tokens = argc > 3 ? std::atoll(argv[3]) : 64;
  const double min_seconds = argc > 4 ? std::atof(argv[4]) : 0.5;
  const int repeats = argc > 5 ? std::max(1, std::atoi(argv[5])) : 3;
  std::vector<DType> types;  // every row of the weight-type table but F32, so a new type is measured unasked
  for (const kernels::WeightType& row : kernels::weight_types()) {
    if (row.type != DType::F32) types.push_back(row.type);
  }
  const int kNumTypes = static_cast<int>(types.size());
  std::printf("%lld x %lld weights, %lld tokens, 1 thread, CPU time, best of %d repeats\n",
              static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(tokens), repeats);
  std::vector<Problem> problems;
  for (DType type : types) problems.push_back(make_problem(type, rows, cols, tokens));
  // Columns: the scalar twin and the AVX2 tile on the GGUF layout, then the packed tiles at each level this CPU has.
  struct Column {
    const char* name;
    IsaLevel level;
    bool packed;
  };
  std::vector<Column> columns = {{"scalar", IsaLevel::kScalar, false}};
  if (isa_supported(IsaLevel::kAvx2)) {
    columns.push_back({"avx2", IsaLevel::kAvx2, false});
    columns.push_back({"packed, avx2", IsaLevel::kAvx2, true});
  }
  if (isa_supported(IsaLevel::kAvxVnni)) columns.push_back({"packed, avx2+avxvnni", IsaLevel::kAvxVnni, true});
  if (isa_supported(IsaLevel::kAvx512Vnni)) columns.push_back({"packed, avx512vnni", IsaLevel::kAvx512Vnni, true});
  std::vector<std::vector<double>> best(columns.size(), std::vector<double>(kNumTypes, 1e30));
  for (int rep = 0; rep < repeats; ++rep) {
    for (int i = 0; i < kNumTypes; ++i) {
      Problem& p = problems[i];
      for (size_t c = 0; c < columns.size(); ++c) {
        if (columns[c].packed && !p.packed) continue;
        best[c][i] = std::min(best[c][i], seconds_per_matmul(p, columns[c].level, columns[c].packed, min_seconds));
      }
    }
  }
  const double flops = 2.0 * static_cast<double>(rows * cols * tokens);
  const double dots = static_cast<double>(rows * tokens);
  std::printf("%-6s", "");
  for (const Column& c : columns) std::printf(" | %-26s", c.name);
  std::printf(" | %7s\n", "");
  std::printf("%-6s", "type");
  for (size_t c = 0; c < columns.size(); ++c) std::printf(" | %8s %8s %8s", "GFLOP/s", "GB/s", "ns/dot");
  std::printf(" | %7s\n", "speedup");
  for (int i = 0; i < kNumTypes; ++i) {
    const double bytes = static_cast<double>(problems[i].weights.size());
    std::printf("%-6s", dtype_name(types[i]).data());
    double fastest = best[0][i];
    for (size_t c = 0; c < columns.size(); ++c) {
      const double seconds = best[c][i];
      if (seconds >= 1e30) {
        std::printf(" | %8s %8s %8s", "-", "-", "-");
        continue;
      }
      fastest = std::min(fastest, seconds);
      std::printf(" | %8.2f %8.2f %8.1f", flops / seconds * 1e-9, bytes / seconds * 1e-9, seconds / dots * 1e9);
    }
    std::printf(" | %6.1fx\n", best[0][i] / fastest);
    std::fflush(stdout);
  }
  return 0;
}
