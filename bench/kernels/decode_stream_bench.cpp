// hearth-bench-decode-stream: how close a decode step's matmuls come to the machine's read bandwidth, measured
// side by side in one process. It builds `count` weight matrices of one type (packed when the type has a packed
// layout), together larger than the last-level cache, and alternates two passes over the same number of bytes on
// the same thread pool: one token through every matrix (what decode does, one matmul per matrix), and a plain read
// of a buffer of that size (eight independent 64-bit sums per cache line, the bound `hearth bench model` quotes).
// Each round (five passes of each) prints both rates and their ratio; the last line gives the median ratio. Alternating
// within one process keeps the ratio steady on a shared machine whose bandwidth moves by a third between runs.
//
//   hearth-bench-decode-stream [type=Q4_K] [rows=5632] [cols=2048] [count=96] [rounds=9] [threads=2]

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/packed.h"
#include "random_blocks.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "util/thread_pool.h"

namespace hearth {
namespace {

using Clock = std::chrono::steady_clock;

// Passes over all the bytes per measurement: one pass (~20 ms at 1B sizes) moved by a third between rounds.
inline constexpr int kPassesPerRound = 5;

struct FreeDelete {
  void operator()(uint64_t* p) const { std::free(p); }
};

uint64_t* allocate_huge(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  void* p = nullptr;
  if (posix_memalign(&p, kHugePage, std::max<size_t>(bytes, 1)) != 0) std::abort();
  if (bytes >= kHugePage) ::madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only
  return static_cast<uint64_t*>(p);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Matrix {
  std::vector<uint8_t> weights;
  MatrixView view;
  std::unique_ptr<PackedMatrix> packed;
};

Matrix make_matrix(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m;
  const size_t stride = row_bytes(type, cols);
  m.weights.resize(stride * static_cast<size_t>(rows));
  test_data::fill_random_blocks(type, m.weights.data(), m.weights.size(), seed);
  m.view = {type, rows, cols, m.weights.data(), stride};
  if (packing_available(type)) {
    m.packed = pack_matrix(m.view);
    m.view.packed = m.packed.get();
    std::vector<uint8_t>().swap(m.weights);  // the packed tiles read only the packed copy
    m.view.data = nullptr;
  }
  return m;
}

uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t acc[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  }
  uint64_t total = 0;
  for (uint64_t a : acc) total += a;
  return total;
}

std::optional<DType> parse_type(const std::string& name) {
  for (DType t :
       {DType::Q8_0, DType::Q4_0, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS, DType::F16}) {
    if (name == dtype_name(t)) return t;
  }
  return std::nullopt;
}

}  // namespace
}  // namespace hearth

int main(int argc, char** argv) {
  using namespace hearth;
  const std::string type_name = argc > 1 ? argv[1] : "Q4_K";
  const int64_t rows = argc > 2 ? std::atoll(argv[2]) : 5632;
  const int64_t cols = argc > 3 ? std::atoll(argv[3]) : 2048;
  const int count = argc > 4 ? std::atoi(argv[4]) : 96;
  const int rounds = argc > 5 ? std::atoi(argv[5]) : 9;
  const int threads = argc > 6 ? std::atoi(argv[6]) : 2;
  const std::optional<DType> type = parse_type(type_name);
  if (!type || rows < 1 || cols < 256 || cols % 256 != 0 || count < 1 || rounds < 1 || threads < 1) {
    std::fprintf(stderr,
                 "usage: hearth-bench-decode-stream [type=Q4_K (Q8_0 Q4_0 Q3_K Q4_K Q5_K Q6_K IQ4_XS F16)] "
                 "[rows=5632] [cols=2048, a multiple of 256] [count=96] [rounds=9] [threads=2]\n");
    return 2;
  }
  std::vector<Matrix> matrices;
  size_t bytes = 0;
  for (int i = 0; i < count; ++i) {
    matrices.push_back(make_matrix(*type, rows, cols, static_cast<uint32_t>(i + 1)));
    bytes += matrices.back().packed ? matrices.back().packed->bytes()
                                    : matrices.back().view.row_stride * static_cast<size_t>(rows);
  }
  const size_t n_words = bytes / sizeof(uint64_t) / 8 * 8;
  // On 2 MiB pages, as the packed weights are (a 4 KiB-paged read streams slower on the project's Intel VM, so
  // ratios against it came out above 1); left untouched here: see the first touch below.
  std::unique_ptr<uint64_t, FreeDelete> buffer(allocate_huge(n_words * sizeof(uint64_t)));
  ThreadPool pool(threads);
  pool.run([&](int ith, int nth) {  // first touch by the thread that reads each part
    const Range lines = split_range(static_cast<int64_t>(n_words / 8), ith, nth);
    for (int64_t i = lines.begin * 8; i < lines.end * 8; ++i) buffer.get()[static_cast<size_t>(i)] = 1;
  });
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(cols));
  for (float& v : x) v = dist(rng);
  std::vector<float> y(static_cast<size_t>(rows));
  MatmulScratch scratch;
  std::vector<uint64_t> sums(static_cast<size_t>(threads));

  auto decode_pass = [&] {
    const auto start = Clock::now();
    for (int i = 0; i < kPassesPerRound; ++i) {
      for (const Matrix& m : matrices) matmul(m.view, x.data(), 1, y.data(), pool, scratch);
    }
    return static_cast<double>(bytes) * kPassesPerRound / seconds_since(start);
  };
  auto read_pass = [&] {
    const auto start = Clock::now();
    for (int i = 0; i < kPassesPerRound; ++i) {
      pool.run([&](int ith, int nth) {
        const Range lines = split_range(static_cast<int64_t>(n_words / 8), ith, nth);
        sums[static_cast<size_t>(ith)] =
            sum_words(buffer.get() + lines.begin * 8, static_cast<size_t>(lines.end - lines.begin) * 8);
      });
      uint64_t total = 0;
      for (uint64_t s : sums) total += s;
      if (total != n_words) {
        std::fprintf(stderr, "warning: read sum %llu != %zu\n", static_cast<unsigned long long>(total), n_words);
      }
    }
    return static_cast<double>(n_words * sizeof(uint64_t)) * kPassesPerRound / seconds_since(start);
  };
  decode_pass();  // warm-up: page in, threads hot
  read_pass();
  std::printf("%s %lld x %lld, %d matrices, %.1f MiB %s, %d threads\n", type_name.c_str(), static_cast<long long>(rows),
              static_cast<long long>(cols), count, bytes / 1048576.0, matrices.front().packed ? "packed" : "as stored",
              threads);
  std::printf("| round | decode GB/s | read GB/s | decode / read |\n| --- | --- | --- | --- |\n");
  std::vector<double> ratios;
  for (int r = 0; r < rounds; ++r) {
    // Alternate which pass goes first, so a drift in the machine's load does not favour one of them.
    double decode = 0, read = 0;
    if (r % 2 == 0) {
      decode = decode_pass();
      read = read_pass();
    } else {
      read = read_pass();
      decode = decode_pass();
    }
    ratios.push_back(decode / read);
    std::printf("| %d | %.1f | %.1f | %.3f |\n", r + 1, decode / 1e9, read / 1e9, decode / read);
  }
  std::sort(ratios.begin(), ratios.end());
  std::printf("median decode / read: %.3f (min %.3f, max %.3f)\n", ratios[ratios.size() / 2], ratios.front(),
              ratios.back());
  return 0;
}
