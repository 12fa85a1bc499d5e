// Text helpers every view and model of the dashboard uses (private to offtune_gui).
#pragma once

#include <QString>
#include <string>

namespace offtune::gui::detail {

// The store and profiler speak UTF-8 std::string; Qt speaks QString.
inline QString qs(const std::string& s) { return QString::fromStdString(s); }

}  // namespace offtune::gui::detail
