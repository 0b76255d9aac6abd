// hearth-bench-attention-cpu: single-thread speed of one attention tile, in thread CPU time (not wall time, so the
// figure stays comparable on a shared machine), by default in the shape of a household's later turn: 16 query rows
// at positions 2,400 onwards, each reading every earlier key, one query head per KV head, head size 64, f16 KV in
// 16-token blocks. Prints the best repeat's ns per tile and GFLOP/s (4 · head_dim FLOP per query and key: the score
// and the value sum).
//
// With kv_heads > 1 the K/V blocks hold that many heads, as a layer of the pool does, and successive
// tiles take successive heads, so a head's keys come from memory (a layer of 12 heads at depth 2,400 is 7 MiB of
// f16 K and V), not from the L2 the previous tile left them in.
//
// f16_reads pins how the AVX2 path reads the f16 K/V (kernels/attention.h, F16KvReads): auto, inplace or
// dequantized.
//
//   hearth-bench-attention-cpu [rows=16] [depth=2400] [group=1] [head_dim=64] [min_seconds=0.5] [repeats=3]
//                              [kv_heads=1] [f16_reads=auto]

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu_isa.h"
#include "tensor/kv_dtype.h"

namespace hearth {
namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

int run(int argc, char** argv) {
  auto arg = [&](int i, double fallback) { return argc > i ? std::atof(argv[i]) : fallback; };
  const auto rows = static_cast<int32_t>(arg(1, 16));
  const auto depth = static_cast<int32_t>(arg(2, 2400));
  const auto group = static_cast<int32_t>(arg(3, 1));
  const auto hd = static_cast<int32_t>(arg(4, 64));
  const double min_seconds = arg(5, 0.5);
  const auto repeats = static_cast<int>(arg(6, 3));
  const auto kv_heads = static_cast<int32_t>(arg(7, 1));
  const std::string reads = argc > 8 ? argv[8] : "auto";
  if (reads == "inplace") {
    set_f16_kv_reads(F16KvReads::kInPlace);
  } else if (reads == "dequantized") {
    set_f16_kv_reads(F16KvReads::kDequantized);
  } else if (reads != "auto") {
    std::fprintf(stderr, "f16_reads must be auto, inplace or dequantized, not %s\n", reads.c_str());
    return 2;
  }
  constexpr int32_t kBlock = 16;
  const int32_t n_pos = depth + rows;
  const int32_t n_blocks = (n_pos + kBlock - 1) / kBlock;
  const size_t head_bytes = kv_head_bytes(KvDtype::kF16, hd);
  std::vector<BlockId> table;
  for (int32_t b = 0; b < n_blocks; ++b) table.push_back(BlockId{(b * 7 + 3) % n_blocks});  // scattered, 7 ⟂ n
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(hd);
  const size_t row_bytes = head_bytes * kv_heads;
  std::vector<uint8_t> k_bytes(static_cast<size_t>(n_blocks) * kBlock * row_bytes);
  std::vector<uint8_t> v_bytes(k_bytes.size());
  // The pool's layout: a block holds each head's slots together.
  const PagedKvView k{k_bytes.data(), row_bytes * kBlock, head_bytes, kBlock,
                      table,          KvDtype::kF16,      head_bytes, head_bytes * kBlock};
  const PagedKvView v{v_bytes.data(), row_bytes * kBlock, head_bytes, kBlock,
                      table,          KvDtype::kF16,      head_bytes, head_bytes * kBlock};
  for (int32_t p = 0; p < n_pos; ++p) {
    for (int32_t h = 0; h < kv_heads; ++h) {
      for (auto* view : {&k, &v}) {
        for (float& x : row) x = normal(rng);
        kv_quantize_head(KvDtype::kF16, row.data(), const_cast<uint8_t*>(view->head(p, h)), hd);
      }
    }
  }
  const size_t stride = static_cast<size_t>(group) * hd;
  std::vector<float> q(rows * stride), out(rows * stride);
  for (float& x : q) x = normal(rng);
  std::vector<float> scratch(attention_scratch_floats(hd, rows, group));
  AttentionTile t{q.data(), stride, out.data(), stride, rows, depth, group, 0, hd, 0.125f, 0, 0.0f};
  double flop = 0;
  for (int32_t r = 0; r < rows; ++r) flop += 4.0 * hd * (depth + r + 1) * group;
  double best = 1e30;
  for (int rep = 0; rep < repeats; ++rep) {
    int64_t n = 0;
    const double start = thread_cpu_seconds();
    double elapsed = 0;
    do {
      t.kv_head = static_cast<int32_t>(n % kv_heads);
      attention_tile(t, k, v, scratch.data());
      ++n;
      elapsed = thread_cpu_seconds() - start;
    } while (elapsed < min_seconds);
    best = std::min(best, elapsed / static_cast<double>(n));
  }
  std::printf(
      "attention tile (%s, f16 reads %s): %d rows x %d heads at depth %d, head size %d, f16 KV of %d heads: %.1f us, "
      "%.1f GFLOP/s\n",
      isa_level_name(active_isa_level()), reads.c_str(), rows, group, depth, hd, kv_heads, best * 1e6,
      flop / best * 1e-9);
  return 0;
}

}  // namespace
}  // namespace hearth

int main(int argc, char** argv) {
  return hearth::run(argc, argv);
}
