// What the timeline's index, painter and widget share (private to offtune_gui; the public API is
// offtune/gui/timeline.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace offtune::gui::detail {

// A double to ns without the undefined behaviour of converting an out-of-range value.
inline int64_t to_ns(double v) {
  constexpr double kLimit = 9.0e18;
  if (std::isnan(v)) return 0;
  return std::llround(std::clamp(v, -kLimit, kLimit));
}

}  // namespace offtune::gui::detail
