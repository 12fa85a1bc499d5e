// Distinct id types, so that a tensor id never passes for a count or another module's id.
#pragma once

#include <cstdint>
#include <functional>

namespace offtune {

template <typename Tag>
struct Id {
  int64_t value = -1;
  constexpr Id() = default;
  constexpr explicit Id(int64_t v) : value(v) {}
  constexpr bool valid() const { return value >= 0; }
  friend constexpr auto operator<=>(Id, Id) = default;
};

struct TensorIdTag {};
// A saved-tensor entry in one offloader (dense, increasing in pack order, unique per offloader).
using TensorId = Id<TensorIdTag>;

}  // namespace offtune

template <typename Tag>
struct std::hash<offtune::Id<Tag>> {
  size_t operator()(offtune::Id<Tag> id) const noexcept { return std::hash<int64_t>{}(id.value); }
};
