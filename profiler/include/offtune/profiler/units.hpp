// Parsing and printing of what users type at the command line: byte sizes ("64MiB", "1.5GB"),
// lists and ranges of sizes and integers for sweep grids ("1MiB:1GiB:x4", "1:8:+2"), and shard
// selectors ("2/3"). Every parse error is a ParseError whose one-line message quotes the bad text
// and says what would be valid, so front ends can print it as is. docs/metrics.md has the syntax.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace offtune::profiler {

// Thrown for malformed input; what() is one line, ready for the user.
class ParseError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// One rule for every value a user types, in every command and in the dashboard: no white space
// before or after it (a stray space is refused, not trimmed), and no rounding of what was asked.

// Bytes from a size: a non-negative decimal number (fractions allowed) and an optional unit,
// case-insensitive, optionally separated by one space as format_size() prints it:
//   none or B: bytes;  K, KiB, M, MiB, G, GiB, T, TiB: powers of 1024;  KB, MB, GB, TB: powers of
//   1000. The result must be a whole number of bytes: "1.5MiB" -> 1572864, "0.5" is refused.
// Throws ParseError for empty text, outer spaces, a sign, junk, an unknown unit, a fraction of a
// byte, or more than INT64_MAX bytes.
int64_t parse_size(std::string_view text);

// A whole number with an optional '-': "4", "-1". Throws ParseError for anything else, outer
// spaces, or a value outside int64 (never clamped).
int64_t parse_int64(std::string_view text);
// A whole number without a sign, up to 2^64-1 (seeds). Throws ParseError for a sign, outer spaces,
// junk or overflow (never clamped or wrapped: "-1" is not 2^64-1).
uint64_t parse_uint64(std::string_view text);
// A positive finite decimal number ("1.25", "40"). Throws ParseError for nan, inf, zero, a
// negative value, outer spaces or junk.
double parse_positive_number(std::string_view text);

// A short human-readable size in binary units: "0 B", "512 B", "1 KiB", "1.5 MiB", "2 GiB". Exact
// multiples of the unit print without decimals (and parse back to the same value); others print
// one or two decimals ("1.25 MiB", and "1.0 MiB" for a value just above 1 MiB).
std::string format_size(int64_t bytes);

// The binary unit a size is shown in: the largest of B, KiB, MiB, ..., EiB that is not above
// |bytes| (B below 1 KiB). Charts use it to pick the unit of a byte axis.
struct SizeUnit {
  double bytes = 1.0;
  std::string_view name = "B";
};
SizeUnit size_unit(double bytes);

// A measured or averaged size with a fixed number of decimals in its unit: format_size(1.5 * MiB,
// 2) is "1.50 MiB"; bytes below 1 KiB print whole ("512 B"). A value that rounds up to 1024 of its
// unit prints in the next ("1.0 MiB", not "1024.0 KiB"). Unlike format_size(int64_t) the result is
// rounded for display and need not parse back to the same value. `decimals` is clamped to 0..9.
std::string format_size(double bytes, int decimals);

// Sizes from a comma-separated list (no spaces around items) whose items are sizes or ranges:
//   LO:HI:xF     LO, LO*F, LO*F*F, ... while <= HI (F an integer >= 2, LO > 0)
//   LO:HI:+STEP  LO, LO+STEP, ... while <= HI (STEP a size > 0)
// LO and HI are sizes with LO <= HI. Returns the values sorted ascending without duplicates.
// Throws ParseError for a malformed item, a range without a step, or more than 10000 values.
std::vector<int64_t> parse_size_list(std::string_view text);

// Integers from a comma-separated list whose items are integers (a leading '-' allowed) or ranges:
//   LO:HI        LO, LO+1, ..., HI
//   LO:HI:+STEP  LO, LO+STEP, ... while <= HI (STEP >= 1)
//   LO:HI:xF     LO, LO*F, ... while <= HI (F >= 2, LO >= 1)
// Returns the values sorted ascending without duplicates; same errors as parse_size_list.
std::vector<int64_t> parse_int_list(std::string_view text);

// The most values one list may expand to, so that a typo ("1:1000000000") fails fast instead of
// queueing a sweep that never ends.
inline constexpr size_t kMaxListValues = 10000;

// One of `count` disjoint parts of a sweep grid; `index` is 1-based as users write it ("1/3").
struct Shard {
  int index = 1;
  int count = 1;
};

// A shard from "I/N" with 1 <= I <= N. Throws ParseError otherwise.
Shard parse_shard(std::string_view text);

// Whether grid point `point_index` (0-based) belongs to `shard`: point_index % count == index - 1.
// Throws std::invalid_argument for a shard with count < 1.
bool in_shard(int64_t point_index, Shard shard);

}  // namespace offtune::profiler
