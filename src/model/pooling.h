#pragma once
// Embedding pooling: how a sequence's final hidden states (after the output norm, before the LM head) become one
// vector, as GGUF's `<arch>.pooling_type` names it (llama.cpp's LLAMA_POOLING_TYPE numbers: 0 none, 1 mean, 2 cls,
// 3 last, 4 rank). Embedding models carry the key (Qwen3-Embedding: last; BERT-style: cls or mean); chat models
// do not, and serve no embeddings unless the operator names a pooling (hearth serve --pooling).
//
// A sequence may reach the pooler in several forwards (chunks): pool_rows adds each chunk's rows in position order
// into one accumulator, so a sequence pooled in chunks has the bits of one pooled at once; finish_pooling divides
// (mean) and L2-normalises, as OpenAI's and Ollama's embeddings are unit vectors.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace hearth {

enum class PoolingType : int32_t {
  kNone = 0,  // per-token states: no sequence embedding (Hearth serves none)
  kMean = 1,
  kCls = 2,   // the first token's state
  kLast = 3,  // the last token's state (decoder embedding models: Qwen3-Embedding)
  kRank = 4,  // a reranker's classification head: not an embedding (Hearth serves none)
};

// "none", "mean", "cls", "last", "rank".
std::string_view pooling_name(PoolingType type);
// The inverse of pooling_name; nullopt for another word.
std::optional<PoolingType> pooling_from_name(std::string_view name);
// Whether Hearth can turn hidden states into an embedding with this pooling (mean, cls, last).
bool pooling_embeds(PoolingType type);

// Adds a chunk of one sequence's hidden states into `acc` [dim]: rows [n_rows, dim] are the sequence's tokens at
// positions [pos_begin, pos_begin + n_rows) of `n_total`. Mean adds every row (in position order), cls copies the
// row at position 0, last the row at n_total - 1. Requires pooling_embeds(type), acc zeroed before the first chunk,
// chunks in position order.
void pool_rows(PoolingType type, std::span<const float> rows, int32_t dim, int32_t pos_begin, int32_t n_total,
               std::span<float> acc);

// After the last chunk: mean divides by n_total; then acc is scaled to unit L2 norm (left as is when its norm is 0).
void finish_pooling(PoolingType type, int32_t n_total, std::span<float> acc);

// Scales `v` to unit L2 norm (a zero vector stays zero). The sum of squares is taken in double.
void l2_normalize(std::span<float> v);

}  // namespace hearth
