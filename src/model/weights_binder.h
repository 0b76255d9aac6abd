#pragma once
// Binder (internal to the model library): binds a GGUF's tensors by name as MatrixViews and owned f32 vectors,
// checks shapes, dtypes and finiteness, and remembers what it bound so that tensors nothing bound are refused.

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "model/config.h"
#include "model/weights.h"
#include "tensor/quant.h"
#include "util/result.h"

namespace hearth::detail {

// Tensors with at most this many elements are scanned for NaN and infinities at load: the norm vectors, and
// every matrix of a small model. Larger matrices are left to the run time (scanning them would read every page
// of a multi-gigabyte mapping before the first request).
constexpr int64_t kMaxScannedElements = int64_t{1} << 20;

// The first non-finite value of `m` as (row, col, value), or nullopt.
struct NonFinite {
  int64_t row = 0;
  int64_t col = 0;
  float value = 0.0f;
};
inline std::optional<NonFinite> find_non_finite(const MatrixView& m) {
  std::vector<float> row(static_cast<size_t>(m.n_cols));
  for (int64_t r = 0; r < m.n_rows; ++r) {
    dequantize_row(m.type, m.data + static_cast<size_t>(r) * m.row_stride, row.data(), m.n_cols);
    for (int64_t c = 0; c < m.n_cols; ++c) {
      if (!std::isfinite(row[c])) return NonFinite{r, c, row[c]};
    }
  }
  return std::nullopt;
}

// Binds tensors by name and remembers which ones it bound, so that what is left over can be refused.
class Binder {
 public:
  Binder(const GgufFile& file) : file_(file) {}

  // Binds a 2-D matrix whose GGML shape is [n_cols, n_rows].
  Result<MatrixView> matrix(const std::string& name, int64_t n_cols, int64_t n_rows) {
    return stack(name, n_cols, n_rows, 0);
  }

  // Binds a 3-D tensor [n_cols, n_rows, n_stack] as n_stack matrices of n_rows × n_cols (a MoE layer's experts).
  Result<std::vector<MatrixView>> experts(const std::string& name, int64_t n_cols, int64_t n_rows, int64_t n_stack) {
    auto all = stack(name, n_cols, n_rows, n_stack);
    if (!all) return all.error();
    std::vector<MatrixView> out;
    for (int64_t e = 0; e < n_stack; ++e) {
      out.push_back(MatrixView{all->type, n_rows, n_cols, all->data + static_cast<size_t>(e * n_rows) * all->row_stride,
                               all->row_stride});
    }
    return out;
  }

  // Reads a 1-D vector of `n` elements into owned f32.
  Result<std::vector<float>> vector(const std::string& name, int64_t n) {
    auto m = matrix(name, n, 1);
    if (!m) return m.error();
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(m->type, m->data, out.data(), n);
    return out;
  }

  // Reads a 2-D tensor [n, n_rows] into owned f32, row after row (gpt-oss's per-expert biases).
  Result<std::vector<float>> rows(const std::string& name, int64_t n, int64_t n_rows) {
    auto m = matrix(name, n, n_rows);
    if (!m) return m.error();
    std::vector<float> out(static_cast<size_t>(n * n_rows));
    for (int64_t r = 0; r < n_rows; ++r) {
      dequantize_row(m->type, m->data + static_cast<size_t>(r) * m->row_stride, out.data() + r * n, n);
    }
    return out;
  }

  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }
  const std::string& file_name() const { return file_.name(); }

  // Marks every tensor of blocks [first, last) (blk.N.*) as handled without binding it: the multi-token-prediction
  // blocks after the trunk (ModelConfig::n_nextn_layers), which the forward never runs, as llama.cpp's loader skips
  // them (TENSOR_SKIP) unless it builds the MTP draft. Changes only what check_all_bound accepts; returns the
  // skipped tensors' bytes.
  int64_t skip_blocks(int32_t first, int32_t last) {
    int64_t bytes = 0;
    for (const GgufTensor& t : file_.tensors()) {
      for (int32_t il = first; il < last; ++il) {
        if (!t.name.starts_with(fmt::format("blk.{}.", il)) || !bound_.insert(t.name).second) continue;
        bytes += static_cast<int64_t>(t.nbytes);
      }
    }
    return bytes;
  }

  // Fails naming the first tensor of the file that nothing bound.
  Result<void> check_all_bound(const std::string& architecture) const {
    for (const GgufTensor& t : file_.tensors()) {
      if (!bound_.contains(t.name)) {
        return make_error(
            "{}: unknown tensor '{}' for architecture '{}' (Hearth would ignore it and compute a "
            "different model)",
            file_.name(), t.name, architecture);
      }
    }
    return {};
  }

 private:
  // The tensor [n_cols, n_rows, n_stack] as one view of n_rows × max(n_stack, 1) rows; n_stack 0: a 2-D matrix.
  Result<MatrixView> stack(const std::string& name, int64_t n_cols, int64_t n_rows, int64_t n_stack) {
    const GgufTensor* t = file_.find_tensor(name);
    if (t == nullptr) return make_error("{}: missing tensor '{}'", file_.name(), name);
    bound_.insert(name);
    const int64_t ne2 = std::max<int64_t>(n_stack, 1);
    if (t->ne[0] != n_cols || t->ne[1] != n_rows || t->ne[2] != ne2 || t->ne[3] != 1) {
      const std::string expected =
          n_stack > 0 ? fmt::format("[{}, {}, {}]", n_cols, n_rows, n_stack) : fmt::format("[{}, {}]", n_cols, n_rows);
      return make_error("{}: tensor '{}' has shape [{}, {}, {}, {}], expected {}", file_.name(), name, t->ne[0],
                        t->ne[1], t->ne[2], t->ne[3], expected);
    }
    if (!dtype_info(t->type).compute_supported) {
      return make_error("{}: tensor '{}' has type {}, which Hearth cannot compute with (supported: {})", file_.name(),
                        name, dtype_name(t->type), compute_supported_names());
    }
    const MatrixView m{t->type, n_rows * ne2, n_cols, t->data, row_bytes(t->type, n_cols)};
    if (m.n_rows * n_cols <= kMaxScannedElements) {
      if (auto bad = find_non_finite(m)) {
        return make_error("{}: tensor '{}' holds a non-finite value ({} at row {}, column {})", file_.name(), name,
                          bad->value, bad->row, bad->col);
      }
    }
    return m;
  }

  const GgufFile& file_;
  std::set<std::string, std::less<>> bound_;
};

// Rows [first, first + n_rows) of `m`: each row is stored whole, so a row range is a view of any dtype.
inline MatrixView rows_of(const MatrixView& m, int64_t first, int64_t n_rows) {
  return MatrixView{m.type, n_rows, m.n_cols, m.data + static_cast<size_t>(first) * m.row_stride, m.row_stride};
}

// bert, nomic-bert (encoder_weights.cpp): every tensor but token_embd.weight, which from_gguf has bound.
[[nodiscard]] Result<void> bind_encoder(Binder& b, const ModelConfig& c, ModelWeights& w);

}  // namespace hearth::detail
