#include "kernels/matmul.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <new>
#include <span>
#include <vector>

#include "kernels/packed.h"
#include "kernels/vec_dot.h"
#include "kernels/weight_types.h"
#include "util/result.h"

namespace hearth {
namespace {

using kernels::TileArgs;
using kernels::TileKernel;

// Tokens whose activations stay cache-resident (L2) while a block of weight rows is swept over them: half the L2
// this CPU reports, 192 KiB where it reports none. At least kMinTokenChunk tokens, so that each pass over the
// weights does enough work per byte read from memory. A wide matrix's pass reads its weights from memory once per
// chunk (1B FFN down: 16 tokens per chunk at 192 KiB), so a larger L2 gives fewer passes and a faster prefill
// (docs/performance-log.md, "512-bit tiles"). The chunks never change a result (one tile call per output).
constexpr size_t kDefaultTokenChunkBytes = 192 * 1024;
constexpr int64_t kMinTokenChunk = 16;

constexpr size_t kScratchAlignment = 64;

void check_shape(const MatrixView& w, int64_t n_tokens) {
  HEARTH_CHECK(matmul_supported(w.type), "matmul: unsupported weight type {}", dtype_name(w.type));
  HEARTH_CHECK(w.n_rows >= 0 && w.n_cols >= 0 && n_tokens >= 0, "matmul: negative shape");
  HEARTH_CHECK(w.n_cols % dtype_info(w.type).block_size == 0, "matmul: {} columns is not a multiple of {} for {}",
               w.n_cols, dtype_info(w.type).block_size, dtype_name(w.type));
  HEARTH_CHECK(w.row_stride >= row_bytes(w.type, w.n_cols), "matmul: row stride {} < row size", w.row_stride);
}

// The activation rows the tiles read: x itself for fp32 activations, else x quantized into `scratch`; for packed
// weights also the int32s each row's packed tile reads beside it (offset corrections, Σx per sub-block: packed.h).
struct Activations {
  const uint8_t* data;
  size_t stride;
  const int32_t* sums = nullptr;
  size_t sums_stride = 0;
};

// Where the tiles find weight row r: `rows_per_unit` rows share one unit of `unit_stride` bytes (1 and the row
// stride for the GGUF layout, a group of kPackRows rows for a packed matrix).
struct WeightRows {
  const uint8_t* base;
  int64_t rows_per_unit;
  size_t unit_stride;
  const uint8_t* at(int64_t r) const { return base + static_cast<size_t>(r / rows_per_unit) * unit_stride; }
};

// The quantized activation rows of n_tokens tokens, rounded up to the scratch alignment (the sums follow them).
size_t activation_rows_bytes(DType weight_type, int64_t n_cols, int64_t n_tokens) {
  const size_t stride = row_bytes(matmul_activation_type(weight_type), n_cols);
  return (stride * static_cast<size_t>(n_tokens) + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment;
}

Activations prepare_activations(const kernels::WeightType& row, const MatrixView& w, bool packed, const float* x,
                                int64_t n_tokens, ThreadPool& pool, MatmulScratch& scratch) {
  const kernels::ActivationType& act = *row.activation;
  if (act.type == DType::F32) {
    return {reinterpret_cast<const uint8_t*>(x), static_cast<size_t>(w.n_cols) * sizeof(float)};
  }
  const size_t stride = row_bytes(act.type, w.n_cols);
  const size_t rows_bytes = activation_rows_bytes(w.type, w.n_cols, n_tokens);
  const size_t sums_stride = packed ? static_cast<size_t>(kernels::packed_correction_count(w.type, w.n_cols)) : 0;
  uint8_t* dst = scratch.reserve(matmul_scratch_bytes(w.type, w.n_cols, n_tokens, packed));
  int32_t* sums = packed ? reinterpret_cast<int32_t*>(dst + rows_bytes) : nullptr;
  const kernels::QuantizeRowFn quantize =
      isa_at_least(IsaLevel::kAvx2) && act.quantize_avx2 != nullptr ? act.quantize_avx2 : act.quantize;
  const kernels::CorrectionsFn corrections = packed ? row.packed->corrections : nullptr;
  auto quantize_range = [&](int ith, int nth) {
    const Range tokens = split_range(n_tokens, ith, nth);
    for (int64_t t = tokens.begin; t < tokens.end; ++t) {
      uint8_t* dst_row = dst + t * stride;
      quantize(x + t * w.n_cols, dst_row, w.n_cols);
      if (packed) corrections(dst_row, w.n_cols, sums + t * sums_stride);
    }
  };
  if (n_tokens >= 2 * pool.num_threads() && pool.num_threads() > 1) {
    pool.run(quantize_range);
  } else {
    quantize_range(0, 1);
  }
  return {dst, stride, sums, sums_stride};
}

// Computes y for rows [rows.begin, rows.end) × tokens [tokens.begin, tokens.end). Each output comes from exactly one
// tile call, so how the ranges are cut never changes a result.
void run_tiles(const WeightRows& w, int64_t n_rows_total, const TileKernel& kernel, const Activations& act,
               int64_t n_cols, float* y, Range rows, Range tokens) {
  const int64_t fit = static_cast<int64_t>(matmul_token_chunk_bytes() / std::max<size_t>(act.stride, 1));
  const int64_t chunk_tokens = std::max(kMinTokenChunk, fit) / kernel.max_tokens * kernel.max_tokens;
  TileArgs args;
  args.w_stride = w.unit_stride;
  args.x_stride = act.stride;
  args.x_sums_stride = act.sums_stride;
  args.y_stride = static_cast<size_t>(n_rows_total);
  args.n_cols = n_cols;
  const int tile_rows =
      tokens.end - tokens.begin > 1 && kernel.max_rows_many_tokens > 0 ? kernel.max_rows_many_tokens : kernel.max_rows;
  for (int64_t t0 = tokens.begin; t0 < tokens.end; t0 += chunk_tokens) {
    const int64_t t_end = std::min(t0 + chunk_tokens, tokens.end);
    for (int64_t r = rows.begin; r < rows.end; r += tile_rows) {
      args.n_rows = static_cast<int>(std::min<int64_t>(tile_rows, rows.end - r));
      args.w = w.at(r);
      for (int64_t t = t0; t < t_end; t += kernel.max_tokens) {
        args.n_tokens = static_cast<int>(std::min<int64_t>(kernel.max_tokens, t_end - t));
        args.x = act.data + t * act.stride;
        if (act.sums != nullptr) args.x_sums = act.sums + t * act.sums_stride;
        args.y = y + t * n_rows_total + r;
        kernel.fn(args);
      }
    }
  }
}

}  // namespace

uint8_t* MatmulScratch::reserve(size_t bytes) {
  if (bytes > capacity_) {
    buffer_.reset(static_cast<uint8_t*>(::operator new (bytes, std::align_val_t{kScratchAlignment})));
    capacity_ = bytes;
  }
  return buffer_.get();
}

size_t matmul_scratch_bytes(DType weight_type, int64_t n_cols, int64_t n_tokens, bool packed) {
  if (matmul_activation_type(weight_type) == DType::F32) return 0;
  const size_t sums_stride = packed ? static_cast<size_t>(kernels::packed_correction_count(weight_type, n_cols)) : 0;
  return activation_rows_bytes(weight_type, n_cols, n_tokens) + sums_stride * sizeof(int32_t) * static_cast<size_t>(n_tokens);
}

void MatmulScratch::AlignedFree::operator()(uint8_t* p) const {
  ::operator delete (p, std::align_val_t{kScratchAlignment});
}

DType matmul_activation_type(DType weight_type) {
  return kernels::weight_type(weight_type).activation->type;
}

size_t matmul_token_chunk_bytes() {
  static const size_t bytes = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 <= 0) return kDefaultTokenChunkBytes;
    return std::clamp<size_t>(static_cast<size_t>(l2) / 2, kDefaultTokenChunkBytes, size_t{4} << 20);
  }();
  return bytes;
}

bool matmul_supported(DType weight_type) {
  // One list of computable types: the dtype table.
  return dtype_info(weight_type).compute_supported;
}

namespace {

// One matrix of a matmul call, resolved: its weight type's row, its tile kernel, where its rows are, and where its
// outputs go.
struct Part {
  const MatrixView* w;
  const kernels::WeightType* row;
  float* y;
  TileKernel kernel;
  WeightRows rows;
  int64_t n_row_blocks;
};

bool reads_packed(const MatrixView& w) {
  if (w.packed == nullptr || !isa_at_least(IsaLevel::kAvx2)) return false;
  HEARTH_CHECK(w.packed->type == w.type && w.packed->n_rows == w.n_rows && w.packed->n_cols == w.n_cols,
               "matmul: the packed matrix is not this view's");
  return true;
}

// The tile is the row's for the active level: on the packed copy where there is one (the same layout serves every
// level from kAvx2 up), on the GGUF layout otherwise.
Part resolve(const MatrixView& w, float* y) {
  const kernels::WeightType& row = kernels::weight_type(w.type);
  const bool packed = reads_packed(w);
  const IsaLevel level = active_isa_level();
  Part p{&w,
         &row,
         y,
         packed ? kernels::packed_tile(*row.packed, level) : kernels::gguf_tile(row, level),
         packed ? WeightRows{w.packed->data, kPackRows, w.packed->group_bytes} : WeightRows{w.data, 1, w.row_stride},
         0};
  p.n_row_blocks = (w.n_rows + p.kernel.max_rows - 1) / p.kernel.max_rows;
  return p;
}

// Which part of a pool call runs which rows. Each part owns a contiguous share of the row blocks and takes them
// front to back, so a thread's weight stream, and the tiles' prefetch past a claim's end, runs on into its next
// claim. A part whose share is done takes row blocks from the backs of the other shares. Every claim takes a
// fraction of what is left of its share (at least kMinClaim blocks), so the claims shrink as a share empties:
// long runs while there is much left, and short ones at the end, where a thread that finished first would
// otherwise wait at the call's barrier for the other's last claim. Decode runs faster this way than with 8 equal
// chunks per thread (docs/performance-log.md, "decode's near fetches on every CPU"). Where rows go never changes a bit.
class RowShares {
 public:
  // Parts beyond kMaxShares own no share and only take others' rows.
  static constexpr int kMaxShares = 64;
  static constexpr int64_t kMinClaim = 2;
  static constexpr int64_t kOwnDivisor = 4;
  static constexpr int64_t kOtherDivisor = 8;

  RowShares(int64_t n_blocks, int n_parts) : n_shares_(std::min(n_parts, kMaxShares)) {
    HEARTH_CHECK(n_blocks < (int64_t{1} << 31), "matmul: too many row blocks");
    for (int i = 0; i < n_shares_; ++i) {
      const Range r = split_range(n_blocks, i, n_shares_);
      shares_[i].store(pack(r.begin, r.end), std::memory_order_relaxed);
    }
  }
  // The next row blocks from the front of part i's own share; empty when it has none left.
  Range take_own(int i) { return i < n_shares_ ? take(i, /*from_back=*/false) : Range{0, 0}; }
  // Row blocks from the back of another share; empty when every share is empty.
  Range take_other(int i) {
    for (int k = 0; k < n_shares_; ++k) {
      const int j = (i + 1 + k) % n_shares_;
      if (j == i) continue;
      if (const Range r = take(j, /*from_back=*/true); r.begin < r.end) return r;
    }
    return {0, 0};
  }

 private:
  Range take(int j, bool from_back) {
    uint64_t v = shares_[j].load(std::memory_order_relaxed);
    while (begin_of(v) < end_of(v)) {
      const int64_t left = end_of(v) - begin_of(v);
      const int64_t n = std::min(left, std::max(kMinClaim, left / (from_back ? kOtherDivisor : kOwnDivisor)));
      const Range r = from_back ? Range{end_of(v) - n, end_of(v)} : Range{begin_of(v), begin_of(v) + n};
      const uint64_t rest = from_back ? pack(begin_of(v), r.begin) : pack(r.end, end_of(v));
      if (shares_[j].compare_exchange_weak(v, rest, std::memory_order_relaxed)) return r;
    }
    return {0, 0};
  }
  static uint64_t pack(int64_t begin, int64_t end) {
    return static_cast<uint64_t>(begin) | (static_cast<uint64_t>(end) << 32);
  }
  static int64_t begin_of(uint64_t v) { return static_cast<int64_t>(v & 0xffffffffu); }
  static int64_t end_of(uint64_t v) { return static_cast<int64_t>(v >> 32); }

  int n_shares_;
  std::atomic<uint64_t> shares_[kMaxShares];
};

// The matrices of `parts` share x and the activation format (same weight type, packed or not), so x is quantized
// once and all their rows are handed out in one pool call: one barrier instead of one per matrix.
void run_parts(const Part* parts, size_t n_parts, const float* x, int64_t n_tokens, ThreadPool& pool,
               MatmulScratch& scratch) {
  const MatrixView& w0 = *parts[0].w;
  const Activations act = prepare_activations(*parts[0].row, w0, reads_packed(w0), x, n_tokens, pool, scratch);
  int64_t n_row_blocks = 0;
  int64_t max_tokens = 1;
  for (size_t i = 0; i < n_parts; ++i) {
    n_row_blocks += parts[i].n_row_blocks;
    max_tokens = std::max<int64_t>(max_tokens, parts[i].kernel.max_tokens);
  }
  const int64_t n_token_tiles = (n_tokens + max_tokens - 1) / max_tokens;
  const int nth = pool.num_threads();
  // Rows when there are enough of them (each thread streams its own weights); token tiles otherwise.
  if (nth == 1 || n_row_blocks >= nth || n_token_tiles < nth) {
    // Runs of row blocks of the matrices laid end to end, cut where one matrix ends; every output still comes
    // from exactly one tile call. RowShares says which part runs which rows.
    auto run_blocks = [&](Range blocks) {
      int64_t first = 0;  // the first row block of parts[i]
      for (size_t i = 0; i < n_parts && first < blocks.end; first += parts[i].n_row_blocks, ++i) {
        const Part& p = parts[i];
        const int64_t b0 = std::max(blocks.begin, first) - first;
        const int64_t b1 = std::min(blocks.end, first + p.n_row_blocks) - first;
        if (b0 >= b1) continue;
        const int64_t rows_per_block = p.kernel.max_rows;
        const Range rows{b0 * rows_per_block, std::min(p.w->n_rows, b1 * rows_per_block)};
        run_tiles(p.rows, p.w->n_rows, p.kernel, act, p.w->n_cols, p.y, rows, Range{0, n_tokens});
      }
    };
    if (nth == 1) {
      run_blocks(Range{0, n_row_blocks});
      return;
    }
    RowShares shares(n_row_blocks, nth);
    pool.run([&](int ith, int) {
      for (Range r = shares.take_own(ith); r.begin < r.end; r = shares.take_own(ith)) run_blocks(r);
      for (Range r = shares.take_other(ith); r.begin < r.end; r = shares.take_other(ith)) run_blocks(r);
    });
    return;
  }
  pool.run([&](int ith, int nth_run) {
    const Range tiles = split_range(n_token_tiles, ith, nth_run);
    const Range tokens{tiles.begin * max_tokens, std::min(n_tokens, tiles.end * max_tokens)};
    for (size_t i = 0; i < n_parts; ++i) {
      const Part& p = parts[i];
      run_tiles(p.rows, p.w->n_rows, p.kernel, act, p.w->n_cols, p.y, Range{0, p.w->n_rows}, tokens);
    }
  });
}

}  // namespace

void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, MatmulScratch& scratch) {
  check_shape(w, n_tokens);
  if (n_tokens == 0 || w.n_rows == 0) return;
  const Part part = resolve(w, y);
  run_parts(&part, 1, x, n_tokens, pool, scratch);
}

void matmul_group(std::span<const MatmulOutput> outputs, const float* x, int64_t n_tokens, ThreadPool& pool,
                  MatmulScratch& scratch) {
  HEARTH_CHECK(outputs.size() <= kMaxMatmulGroup, "matmul_group: at most {} matrices", kMaxMatmulGroup);
  if (outputs.empty() || n_tokens == 0) return;
  Part parts[kMaxMatmulGroup];
  size_t n_parts = 0;
  for (const MatmulOutput& o : outputs) {
    check_shape(*o.w, n_tokens);
    HEARTH_CHECK(o.w->n_cols == outputs[0].w->n_cols, "matmul_group: the matrices differ in columns");
    if (o.w->n_rows > 0) parts[n_parts++] = resolve(*o.w, o.y);
  }
  // Runs of matrices that can share one quantized x (same type, both packed or both not) go together.
  size_t begin = 0;
  while (begin < n_parts) {
    size_t end = begin + 1;
    while (end < n_parts && parts[end].w->type == parts[begin].w->type &&
           reads_packed(*parts[end].w) == reads_packed(*parts[begin].w)) {
      ++end;
    }
    run_parts(parts + begin, end - begin, x, n_tokens, pool, scratch);
    begin = end;
  }
}

void matmul_reference(const MatrixView& w, const float* x, int64_t n_tokens, float* y) {
  check_shape(w, n_tokens);
  const kernels::WeightType& row = kernels::weight_type(w.type);
  std::vector<uint8_t> act(row_bytes(row.activation->type, w.n_cols));
  for (int64_t t = 0; t < n_tokens; ++t) {
    row.activation->quantize(x + t * w.n_cols, act.data(), w.n_cols);
    for (int64_t r = 0; r < w.n_rows; ++r) {
      y[t * w.n_rows + r] = row.scalar.dot(w.data + r * w.row_stride, act.data(), w.n_cols);
    }
  }
}

}  // namespace hearth
