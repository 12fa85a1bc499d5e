// What the timeline's index, painter and widget share, and the palette the run charts share with
// it (private to offtune_gui; the public API is offtune/gui/timeline.hpp).
#pragma once

#include <QColor>
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace offtune::gui::detail {

// The run view's palette: the timeline and the run charts under it (run_charts.cpp) share their
// background, gutter, grid and text, so that they read as one picture.
inline const QColor kBackground(0xff, 0xff, 0xff);
inline const QColor kGutterBackground(0xf3, 0xf3, 0xf3);
inline const QColor kGrid(0xeb, 0xeb, 0xeb);
inline const QColor kText(0x33, 0x33, 0x33);

// A double to ns without the undefined behaviour of converting an out-of-range value.
inline int64_t to_ns(double v) {
  constexpr double kLimit = 9.0e18;
  if (std::isnan(v)) return 0;
  return std::llround(std::clamp(v, -kLimit, kLimit));
}

}  // namespace offtune::gui::detail
