#pragma once
// Strong ids: distinct types for token, block, request ids so they can never be mixed up.

#include <compare>
#include <cstdint>
#include <functional>

namespace hearth {

template <class Tag, class Rep>
struct StrongId {
  using rep_type = Rep;
  Rep value{};

  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep v) : value(v) {}
  constexpr auto operator<=>(const StrongId&) const = default;
};

using TokenId = StrongId<struct TokenIdTag, int32_t>;
using BlockId = StrongId<struct BlockIdTag, int32_t>;
using RequestId = StrongId<struct RequestIdTag, uint64_t>;

}  // namespace hearth

template <class Tag, class Rep>
struct std::hash<hearth::StrongId<Tag, Rep>> {
  size_t operator()(const hearth::StrongId<Tag, Rep>& id) const noexcept { return std::hash<Rep>{}(id.value); }
};
