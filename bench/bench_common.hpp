// What the sections of offtune-bench share: the clock, JSON, aligned text tables and number
// formatting.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace offtune::bench {

using Clock = std::chrono::steady_clock;
using json = nlohmann::ordered_json;  // keys in the order written

inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kMB = 1e6;
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

inline double median(std::vector<double> values) {
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One section of offtune-bench: measured when `on`, else nullopt; printed as soon as it is done
// (and flushed, so that a long run shows each section as it ends) unless the output is JSON.
template <class Measure, class Print>
std::optional<std::invoke_result_t<Measure>> run_section(bool on, bool json_output, Measure measure,
                                                         Print print) {
  if (!on) return std::nullopt;
  auto result = measure();
  if (!json_output) {
    print(result);
    std::fflush(stdout);
  }
  return result;
}

// JSON has no NaN: "not applicable" values become null.
inline json number_or_null(double value) {
  return std::isfinite(value) ? json(value) : json(nullptr);
}

inline std::string fixed(double value, int digits) {
  return std::isfinite(value) ? fmt::format("{:.{}f}", value, digits) : std::string("-");
}

// An integer with thousands separators: 1234567 -> "1,234,567".
inline std::string grouped(int64_t value) {
  const std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

// A rate or count rounded to an integer, with thousands separators; "-" when not finite.
inline std::string grouped(double value) {
  return std::isfinite(value) ? grouped(static_cast<int64_t>(std::llround(value)))
                              : std::string("-");
}

// A text table: the first `text_columns` columns left-aligned, the others (numbers) right-aligned,
// widths from the contents.
class Table {
 public:
  Table(std::vector<std::string> header, size_t text_columns)
      : header_(std::move(header)), text_columns_(text_columns) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print() const {
    std::vector<size_t> width(header_.size(), 0);
    const auto measure = [&](const std::vector<std::string>& row) {
      for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
        width[i] = std::max(width[i], row[i].size());
      }
    };
    measure(header_);
    for (const auto& row : rows_) measure(row);
    const auto line = [&](const std::vector<std::string>& row) {
      std::string out;
      for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
        if (i > 0) out += "  ";
        out += i < text_columns_ ? fmt::format("{:<{}}", row[i], width[i])
                                 : fmt::format("{:>{}}", row[i], width[i]);
      }
      while (!out.empty() && out.back() == ' ') out.pop_back();
      fmt::print("{}\n", out);
    };
    line(header_);
    size_t total = 0;
    for (size_t w : width) total += w;
    fmt::print("{}\n", std::string(total + 2 * (width.size() - 1), '-'));
    for (const auto& row : rows_) line(row);
  }

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  size_t text_columns_ = 1;
};

}  // namespace offtune::bench
