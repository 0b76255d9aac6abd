#include "model/model_memory.h"

#include "kernels/cpu_isa.h"
#include "kernels/packed.h"
#include "model/weights.h"

namespace hearth {

int64_t resident_weight_bytes(const GgufFile& file, const ModelWeights& weights,
                              const std::function<bool(const MatrixView&)>& packed) {
  auto bytes = static_cast<int64_t>(file.tensor_data_bytes()) - weights.unused_bytes;
  auto count = [&](const MatrixView& m) {
    if (m.data == nullptr || m.n_rows == 0 || !packed(m)) return;
    bytes += static_cast<int64_t>(packed_matrix_bytes(m.type, m.n_rows, m.n_cols));
    // The token embedding's pages stay mapped (looked up by row); every other original is handed back.
    if (m.data != weights.token_embd.data) bytes -= static_cast<int64_t>(m.row_stride * static_cast<size_t>(m.n_rows));
  };
  for (const LayerWeights& l : weights.layers) l.for_each_matrix(count);
  count(weights.output);
  return bytes;
}

namespace {

// Entries and text bytes of a string-array key; 0 when absent.
int64_t table_bytes(const GgufFile& file, std::string_view key) {
  constexpr int64_t kPerEntry = 96;
  const GgufValue* v = file.find(key);
  if (v == nullptr) return 0;
  const auto* array = std::get_if<std::shared_ptr<GgufArray>>(&v->data);
  if (array == nullptr || *array == nullptr) return 0;
  int64_t bytes = 0;
  for (const GgufValue& item : (*array)->items) {
    const auto* text = std::get_if<std::string>(&item.data);
    bytes += kPerEntry + (text != nullptr ? static_cast<int64_t>(text->size()) : 0);
  }
  return bytes;
}

}  // namespace

Result<ModelMemory> estimate_model_memory(const GgufFile& file, const ForwardShape& shape) {
  auto config = ModelConfig::from_gguf(file);
  if (!config) return config.error();
  auto weights = ModelWeights::from_gguf(file, *config);
  if (!weights) return weights.error();
  const bool packs = isa_at_least(IsaLevel::kAvx2);  // ModelWeights::pack_matrices packs only from AVX2 up
  ModelMemory m;
  m.weights_bytes = resident_weight_bytes(file, *weights,
                                          [&](const MatrixView& v) { return packs && packing_available(v.type); });
  m.scratch_bytes = estimate_scratch_bytes(*config, *weights, shape);
  m.tokenizer_bytes = table_bytes(file, "tokenizer.ggml.tokens") + table_bytes(file, "tokenizer.ggml.merges");
  return m;
}

}  // namespace hearth
