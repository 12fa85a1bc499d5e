#include "offtune/profiler/units.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

namespace offtune::profiler {

namespace {

// 128-bit arithmetic keeps scaling and rounding exact: a 20-digit integer part times 2^60 still
// fits, so overflow is a plain comparison against INT64_MAX afterwards. __extension__ keeps
// -Wpedantic quiet about the GCC/Clang builtin type.
__extension__ using u128 = unsigned __int128;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr size_t kMaxFractionDigits = 18;  // 10^18 * 2^60 still fits in 128 bits

constexpr std::string_view kSizeHelp =
    "expected a non-negative number and an optional unit: B, K/KiB, M/MiB, G/GiB, T/TiB "
    "(1024-based) or KB, MB, GB, TB (1000-based), e.g. \"64MiB\" or \"1.5 GB\"";

// The text in double quotes, on one line: control characters are escaped and very long input is
// cut, so that a message stays printable whatever was typed.
std::string quote(std::string_view s) {
  constexpr size_t kMaxShown = 80;
  std::string out = "\"";
  const size_t shown = std::min(s.size(), kMaxShown);
  for (size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      std::array<char, 8> buf{};
      std::snprintf(buf.data(), buf.size(), "\\x%02x", static_cast<unsigned>(c));
      out += buf.data();
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (shown < s.size()) out += "...";
  out += '"';
  return out;
}

[[noreturn]] void fail(const std::string& message) { throw ParseError(message); }

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

char upper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

u128 pow_u128(u128 base, int exp) {
  u128 r = 1;
  for (int i = 0; i < exp; ++i) r *= base;
  return r;
}

// Bytes per unit, or nothing for an unknown unit. `unit` is already upper-cased.
std::optional<u128> unit_multiplier(std::string_view unit) {
  if (unit.empty() || unit == "B") return u128{1};
  constexpr std::string_view kPrefixes = "KMGTPE";
  const size_t p = kPrefixes.find(unit.front());
  if (p == std::string_view::npos) return std::nullopt;
  const int exp = static_cast<int>(p) + 1;
  const std::string_view rest = unit.substr(1);
  // "K", "Ki" and "KiB" are binary as in most tools' flags; only the explicit "KB" is decimal.
  if (rest.empty() || rest == "I" || rest == "IB") return pow_u128(1024, exp);
  if (rest == "B") return pow_u128(1000, exp);
  return std::nullopt;
}

std::optional<int64_t> to_int64(std::string_view s) {
  int64_t v = 0;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(first, last, v);
  if (ec != std::errc() || ptr != last || s.empty()) return std::nullopt;
  return v;
}

// Leading or trailing white space is refused everywhere rather than trimmed here and kept there: a
// value typed with a stray space means the same to every command, which is "not a value".
void refuse_outer_space(std::string_view text, std::string_view what) {
  if (!text.empty() && (is_space(text.front()) || is_space(text.back()))) {
    fail("invalid " + std::string(what) + " " + quote(text) +
         ": remove the spaces around the value");
  }
}

int64_t parse_integer(std::string_view text) {
  refuse_outer_space(text, "integer");
  const std::string_view t = text;
  if (const auto v = to_int64(t)) return *v;
  if (!t.empty() && (is_digit(t.front()) || t.front() == '-') &&
      std::all_of(t.begin() + 1, t.end(), is_digit) && t != "-") {
    fail("invalid integer " + quote(text) + ": out of range (at most " + std::to_string(kInt64Max) +
         ")");
  }
  fail("invalid integer " + quote(text) + ": expected a whole number such as 4");
}

}  // namespace

int64_t parse_size(std::string_view text) {
  if (trim(text).empty()) fail("empty size: " + std::string(kSizeHelp));
  refuse_outer_space(text, "size");
  const std::string_view t = text;
  if (t.front() == '-') fail("invalid size " + quote(text) + ": a size cannot be negative");

  size_t pos = 0;
  // Integer part; digits past the 20th significant one can only mean overflow.
  u128 int_part = 0;
  size_t significant = 0;
  bool too_many_digits = false;
  const size_t int_begin = pos;
  while (pos < t.size() && is_digit(t[pos])) {
    const auto d = static_cast<unsigned>(t[pos] - '0');
    if (significant > 0 || d != 0) ++significant;
    if (significant > 20) {
      too_many_digits = true;
    } else {
      int_part = int_part * 10 + d;
    }
    ++pos;
  }
  if (pos == int_begin) fail("invalid size " + quote(text) + ": " + std::string(kSizeHelp));

  // Fraction: kept exactly as frac_num / 10^frac_digits.
  u128 frac_num = 0;
  int frac_digits = 0;
  if (pos < t.size() && t[pos] == '.') {
    ++pos;
    const size_t frac_begin = pos;
    while (pos < t.size() && is_digit(t[pos])) {
      if (pos - frac_begin >= kMaxFractionDigits) {
        fail("invalid size " + quote(text) + ": too many decimal places (at most " +
             std::to_string(kMaxFractionDigits) + ")");
      }
      frac_num = frac_num * 10 + static_cast<unsigned>(t[pos] - '0');
      ++frac_digits;
      ++pos;
    }
    if (pos == frac_begin) {
      fail("invalid size " + quote(text) + ": expected digits after the decimal point");
    }
  }

  while (pos < t.size() && is_space(t[pos])) ++pos;
  const std::string_view unit_text = t.substr(pos);
  if (!std::all_of(unit_text.begin(), unit_text.end(), is_letter)) {
    fail("invalid size " + quote(text) + ": unexpected " + quote(unit_text) +
         " after the number; " + std::string(kSizeHelp));
  }
  std::string unit;
  for (char c : unit_text) unit += upper(c);
  const std::optional<u128> mult = unit_multiplier(unit);
  if (!mult) {
    fail("invalid size " + quote(text) + ": unknown unit " + quote(unit_text) +
         "; valid units: B, K, KiB, M, MiB, G, GiB, T, TiB (1024-based), KB, MB, GB, TB "
         "(1000-based)");
  }

  const auto too_large = [&] {
    fail("invalid size " + quote(text) + ": too large (at most " + std::to_string(kInt64Max) +
         " bytes, about 8 EiB)");
  };
  if (too_many_digits) too_large();
  u128 bytes = int_part * *mult;
  if (frac_digits > 0) {
    // Round the scaled fraction to the nearest byte, halves up.
    const u128 denom = pow_u128(10, frac_digits);
    const u128 scaled = frac_num * *mult;
    // A size is a count of bytes: "0.5" or "1.1KiB" would have to be rounded to mean anything,
    // and a rounded threshold is not what the user asked for.
    if (scaled % denom != 0) {
      fail("invalid size " + quote(text) + ": not a whole number of bytes");
    }
    bytes += scaled / denom;
  }
  if (bytes > static_cast<u128>(kInt64Max)) too_large();
  return static_cast<int64_t>(bytes);
}

std::string format_size(int64_t bytes) {
  static constexpr std::array<const char*, 7> kUnits = {"B",   "KiB", "MiB", "GiB",
                                                        "TiB", "PiB", "EiB"};
  // Work on the magnitude as unsigned so that INT64_MIN has one too.
  const bool negative = bytes < 0;
  const uint64_t mag =
      negative ? uint64_t{0} - static_cast<uint64_t>(bytes) : static_cast<uint64_t>(bytes);
  const std::string sign = negative ? "-" : "";

  size_t k = 0;
  while (k + 1 < kUnits.size() && mag >= (uint64_t{1} << (10 * (k + 1)))) ++k;
  uint64_t unit = uint64_t{1} << (10 * k);
  if (mag % unit == 0) return sign + std::to_string(mag / unit) + " " + kUnits[k];

  const auto hundredths = [&](uint64_t u) {
    const u128 scaled = static_cast<u128>(mag) * 100;
    u128 h = scaled / u;
    if (2 * (scaled % u) >= u) ++h;
    return static_cast<uint64_t>(h);
  };
  uint64_t h = hundredths(unit);
  // Just below the next unit, rounding can reach "1024.00 KiB"; say "1.0 MiB" instead.
  if (h >= 1024 * 100 && k + 1 < kUnits.size()) {
    ++k;
    unit <<= 10;
    h = hundredths(unit);
  }
  std::string out = sign + std::to_string(h / 100) + ".";
  const uint64_t frac = h % 100;
  // Inexact values keep at least one decimal, so that "1.0 MiB" never reads as exactly 1 MiB.
  if (frac % 10 == 0) {
    out += std::to_string(frac / 10);
  } else {
    out += static_cast<char>('0' + frac / 10);
    out += static_cast<char>('0' + frac % 10);
  }
  return out + " " + kUnits[k];
}

namespace {

constexpr std::array<std::string_view, 7> kBinaryUnits = {"B",   "KiB", "MiB", "GiB",
                                                          "TiB", "PiB", "EiB"};

}  // namespace

SizeUnit size_unit(double bytes) {
  const double mag = std::abs(bytes);
  SizeUnit u;
  for (size_t k = 1; k < kBinaryUnits.size(); ++k) {
    const double unit = std::ldexp(1.0, static_cast<int>(10 * k));
    if (!(mag >= unit)) break;  // also stops on NaN
    u = {unit, kBinaryUnits[k]};
  }
  return u;
}

std::string format_size(double bytes, int decimals) {
  if (!std::isfinite(bytes)) return "n/a";
  decimals = std::clamp(decimals, 0, 9);
  SizeUnit u = size_unit(bytes);
  if (u.name == "B") decimals = 0;
  const auto rounded = [&] {
    const double scale = std::pow(10.0, decimals);
    return std::round(bytes / u.bytes * scale) / scale;
  };
  double v = rounded();
  // 1023.96 KiB with one decimal would read "1024.0 KiB": say "1.0 MiB".
  if (std::abs(v) >= 1024.0 && u.name != kBinaryUnits.back()) {
    u = {u.bytes * 1024.0, kBinaryUnits[static_cast<size_t>(
                               std::find(kBinaryUnits.begin(), kBinaryUnits.end(), u.name) -
                               kBinaryUnits.begin() + 1)]};
    decimals = std::max(decimals, 1);
    v = rounded();
  }
  if (v == 0.0) v = 0.0;  // no "-0.0"
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), "%.*f", decimals, v);
  return std::string(buf.data()) + " " + std::string(u.name);
}

namespace {

enum class ListKind { Size, Int };

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t p = s.find(sep, start);
    if (p == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, p - start));
    start = p + 1;
  }
}

std::vector<int64_t> parse_list(std::string_view text, ListKind kind) {
  const char* what = kind == ListKind::Size ? "size list" : "integer list";
  const std::string syntax =
      kind == ListKind::Size
          ? "items are sizes or ranges LO:HI:xF or LO:HI:+STEP, e.g. \"1MiB,64MiB:1GiB:x4\""
          : "items are integers or ranges LO:HI, LO:HI:+STEP or LO:HI:xF, e.g. \"1,4:16:x2\"";
  const auto value = [kind](std::string_view s) {
    return kind == ListKind::Size ? parse_size(s) : parse_integer(s);
  };

  if (trim(text).empty()) fail(std::string("empty ") + what + ": " + syntax);

  std::vector<int64_t> out;
  const auto push = [&](int64_t v) {
    if (out.size() >= kMaxListValues) {
      fail(std::string("invalid ") + what + " " + quote(text) + ": expands to more than " +
           std::to_string(kMaxListValues) + " values");
    }
    out.push_back(v);
  };

  for (const std::string_view item : split(text, ',')) {
    if (item.empty()) fail(std::string("invalid ") + what + " " + quote(text) + ": empty item");
    refuse_outer_space(item, what);
    const std::vector<std::string_view> parts = split(item, ':');
    if (parts.size() == 1) {
      push(value(item));
      continue;
    }
    const auto bad_range = [&](const std::string& why) {
      fail("invalid range " + quote(item) + ": " + why + "; " + syntax);
    };
    if (parts.size() > 3) bad_range("too many ':'");
    const int64_t lo = value(parts[0]);
    const int64_t hi = value(parts[1]);
    if (lo > hi) bad_range("LO must not exceed HI");

    // Step: "+STEP" (arithmetic) or "xF" (geometric); integer ranges default to +1.
    bool geometric = false;
    int64_t step = 1;
    if (parts.size() == 2) {
      if (kind == ListKind::Size) bad_range("a size range needs a step");
    } else {
      const std::string_view s = parts[2];
      if (!s.empty() && (s.front() == 'x' || s.front() == 'X')) {
        geometric = true;
        const std::optional<int64_t> f = to_int64(s.substr(1));
        if (!f || *f < 2) bad_range("the factor after 'x' must be an integer >= 2");
        step = *f;
      } else if (!s.empty() && s.front() == '+') {
        step = value(s.substr(1));
        if (step < 1) bad_range("the step after '+' must be at least 1");
      } else {
        bad_range("the step must be xF or +STEP");
      }
    }

    if (geometric) {
      if (lo < 1) bad_range("a geometric range must start at 1 or more");
      for (int64_t v = lo;; v *= step) {
        push(v);
        if (v > hi / step) break;  // v * step > hi, checked without overflowing
      }
    } else {
      // Unsigned differences: an integer range may span more than INT64_MAX.
      const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
      if (span / static_cast<uint64_t>(step) >= kMaxListValues) {
        fail(std::string("invalid ") + what + " " + quote(text) + ": expands to more than " +
             std::to_string(kMaxListValues) + " values");
      }
      for (int64_t v = lo;; v += step) {
        push(v);
        if (static_cast<uint64_t>(hi) - static_cast<uint64_t>(v) < static_cast<uint64_t>(step)) {
          break;
        }
      }
    }
  }

  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

std::vector<int64_t> parse_size_list(std::string_view text) {
  return parse_list(text, ListKind::Size);
}

std::vector<int64_t> parse_int_list(std::string_view text) {
  return parse_list(text, ListKind::Int);
}

Shard parse_shard(std::string_view text) {
  const std::string expected = "expected I/N with 1 <= I <= N, e.g. \"1/3\"";
  const std::string why = ": " + expected;
  refuse_outer_space(text, "shard");
  const std::string_view t = text;
  const size_t slash = t.find('/');
  if (slash == std::string_view::npos) fail("invalid shard " + quote(text) + why);
  const std::optional<int64_t> i = to_int64(t.substr(0, slash));
  const std::optional<int64_t> n = to_int64(t.substr(slash + 1));
  if (!i || !n) fail("invalid shard " + quote(text) + why);
  if (*n < 1 || *n > std::numeric_limits<int>::max()) {
    fail("invalid shard " + quote(text) + ": N must be between 1 and " +
         std::to_string(std::numeric_limits<int>::max()) + "; " + expected);
  }
  if (*i < 1 || *i > *n) fail("invalid shard " + quote(text) + why);
  return Shard{static_cast<int>(*i), static_cast<int>(*n)};
}

int64_t parse_int64(std::string_view text) { return parse_integer(text); }

uint64_t parse_uint64(std::string_view text) {
  refuse_outer_space(text, "integer");
  uint64_t v = 0;
  const char* last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), last, v);
  if (!text.empty() && ec == std::errc() && ptr == last) return v;
  if (!text.empty() && text.front() == '-') {
    fail("invalid integer " + quote(text) + ": must not be negative");
  }
  if (ec == std::errc::result_out_of_range) {
    fail("invalid integer " + quote(text) + ": out of range (at most " +
         std::to_string(std::numeric_limits<uint64_t>::max()) + ")");
  }
  fail("invalid integer " + quote(text) + ": expected a whole number such as 42");
}

double parse_positive_number(std::string_view text) {
  refuse_outer_space(text, "number");
  double v = 0;
  const char* last = text.data() + text.size();
  // from_chars reads "nan" and "inf" too: they are refused below with the rest.
  const auto [ptr, ec] = std::from_chars(text.data(), last, v);
  if (text.empty() || ec != std::errc() || ptr != last || !std::isfinite(v) || v <= 0) {
    fail("invalid number " + quote(text) + ": expected a positive finite number such as 1.25");
  }
  return v;
}

bool in_shard(int64_t point_index, Shard shard) {
  if (shard.count < 1) throw std::invalid_argument("in_shard: shard count must be at least 1");
  return point_index % shard.count == shard.index - 1;
}

}  // namespace offtune::profiler
