// Embedding pooling (pooling.h).

#include "model/pooling.h"

#include <cmath>

#include "util/result.h"

namespace hearth {

std::string_view pooling_name(PoolingType type) {
  switch (type) {
    case PoolingType::kNone:
      return "none";
    case PoolingType::kMean:
      return "mean";
    case PoolingType::kCls:
      return "cls";
    case PoolingType::kLast:
      return "last";
    case PoolingType::kRank:
      return "rank";
  }
  return "unknown";
}

std::optional<PoolingType> pooling_from_name(std::string_view name) {
  for (PoolingType t :
       {PoolingType::kNone, PoolingType::kMean, PoolingType::kCls, PoolingType::kLast, PoolingType::kRank}) {
    if (pooling_name(t) == name) return t;
  }
  return std::nullopt;
}

bool pooling_embeds(PoolingType type) {
  return type == PoolingType::kMean || type == PoolingType::kCls || type == PoolingType::kLast;
}

void pool_rows(PoolingType type, std::span<const float> rows, int32_t dim, int32_t pos_begin, int32_t n_total,
               std::span<float> acc) {
  HEARTH_CHECK(pooling_embeds(type), "pool_rows: pooling {} makes no embedding", pooling_name(type));
  HEARTH_CHECK(acc.size() == static_cast<size_t>(dim) && rows.size() % dim == 0, "pool_rows: shapes disagree");
  const int32_t n_rows = static_cast<int32_t>(rows.size() / dim);
  auto copy_row = [&](int32_t pos) {
    if (pos < pos_begin || pos >= pos_begin + n_rows) return;
    const float* row = rows.data() + static_cast<size_t>(pos - pos_begin) * dim;
    for (int32_t i = 0; i < dim; ++i) acc[i] = row[i];
  };
  switch (type) {
    case PoolingType::kMean:
      for (int32_t r = 0; r < n_rows; ++r) {
        const float* row = rows.data() + static_cast<size_t>(r) * dim;
        for (int32_t i = 0; i < dim; ++i) acc[i] += row[i];
      }
      return;
    case PoolingType::kCls:
      copy_row(0);
      return;
    case PoolingType::kLast:
      copy_row(n_total - 1);
      return;
    case PoolingType::kNone:
    case PoolingType::kRank:
      return;
  }
}

void l2_normalize(std::span<float> v) {
  double sum = 0.0;
  for (float x : v) sum += static_cast<double>(x) * x;
  if (sum <= 0.0) return;
  const double scale = 1.0 / std::sqrt(sum);
  for (float& x : v) x = static_cast<float>(x * scale);
}

void finish_pooling(PoolingType type, int32_t n_total, std::span<float> acc) {
  if (type == PoolingType::kMean && n_total > 0) {
    const float inv = 1.0f / static_cast<float>(n_total);
    for (float& x : acc) x *= inv;
  }
  l2_normalize(acc);
}

}  // namespace hearth
