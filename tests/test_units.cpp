// Command-line input parsing: sizes, size and integer lists, shards; and size formatting.
#include "offtune/profiler/units.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace offtune::profiler {
namespace {

constexpr int64_t KiB = int64_t{1} << 10;
constexpr int64_t MiB = int64_t{1} << 20;
constexpr int64_t GiB = int64_t{1} << 30;
constexpr int64_t TiB = int64_t{1} << 40;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

using Values = std::vector<int64_t>;

struct BadInput {
  std::string text;
  std::string fragment;  // must appear in the message
};

// Runs `parse` on each bad input and checks that it throws a one-line ParseError containing the
// expected fragment.
template <typename Parse>
void expect_errors(Parse parse, const std::vector<BadInput>& table) {
  for (const BadInput& bad : table) {
    SCOPED_TRACE("input: \"" + bad.text + "\"");
    try {
      parse(bad.text);
      ADD_FAILURE() << "no error";
    } catch (const ParseError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(bad.fragment), std::string::npos)
          << "message: " << what << "\nexpected fragment: " << bad.fragment;
      EXPECT_EQ(what.find('\n'), std::string::npos) << "message spans lines: " << what;
    }
  }
}

// --- parse_size ----------------------------------------------------------------------------------

TEST(ParseSize, GoodInputs) {
  const std::vector<std::pair<std::string, int64_t>> table = {
      {"0", 0},
      {"1024", 1024},
      {"007", 7},
      {"512B", 512},
      {"512 b", 512},
      {"64KiB", 64 * KiB},
      {"64kib", 64 * KiB},
      {"64KIB", 64 * KiB},
      {"1MiB", MiB},
      {"2GiB", 2 * GiB},
      {"1TiB", TiB},
      {"1Ki", KiB},
      {"1K", KiB},
      {"1k", KiB},
      {"3M", 3 * MiB},
      {"2g", 2 * GiB},
      {"1T", TiB},
      {"1KB", 1000},
      {"1kb", 1000},
      {"1MB", 1000000},
      {"5GB", 5000000000},
      {"2TB", 2000000000000},
      {"1 MiB", MiB},
      {"1   GiB", GiB},
      {"1.5MiB", 1572864},
      {"1.5 GB", 1500000000},
      {"0.5KiB", 512},
      {"1.001KB", 1001},
      {"9223372036854775807", kMax},
      {"9223372036854775807B", kMax},
      {"7EiB", 7 * (int64_t{1} << 60)},
  };
  for (const auto& [text, bytes] : table) {
    EXPECT_EQ(parse_size(text), bytes) << "input: \"" << text << "\"";
  }
}

TEST(ParseSize, BadInputs) {
  expect_errors(parse_size, {
                                {"", "empty size"},
                                {"   ", "empty size"},
                                {"-1", "\"-1\": a size cannot be negative"},
                                {"-1MiB", "cannot be negative"},
                                {"+1", "invalid size \"+1\""},
                                {"abc", "invalid size \"abc\": expected"},
                                {"MiB", "invalid size \"MiB\""},
                                {".5", "invalid size \".5\""},
                                {"1.", "digits after the decimal point"},
                                {"1.KiB", "digits after the decimal point"},
                                {"1.2.3", "unexpected \".3\" after the number"},
                                {"1,5MiB", "unexpected \",5MiB\""},
                                {"1e6", "unexpected \"e6\""},
                                {"1 K B", "unexpected \"K B\""},
                                {"1XB", "unknown unit \"XB\""},
                                {"1MiBx", "unknown unit \"MiBx\""},
                                {"1 bytes", "unknown unit \"bytes\""},
                                {"9223372036854775808", "too large"},
                                {"8EiB", "too large"},
                                {"8589934592GiB", "too large"},
                                {"100000000000000000000000", "too large"},
                                {"1.0000000000000000001", "too many decimal places"},
                                // Issue 11: no trimming, no rounding to a byte.
                                {"  8 KiB  ", "remove the spaces around the value"},
                                {" 1KiB", "remove the spaces"},
                                {"1KiB\t", "remove the spaces"},
                                {"0.5", "not a whole number of bytes"},
                                {"1.5", "not a whole number of bytes"},
                                {"0.25", "not a whole number of bytes"},
                                {"1.1KiB", "not a whole number of bytes"},
                                {"1.0005KB", "not a whole number of bytes"},
                                {"0.000000000000000001EiB", "not a whole number of bytes"},
                            });
}

TEST(ParseSize, ErrorsAreInvalidArgument) {
  EXPECT_THROW(parse_size("nope"), std::invalid_argument);
}

TEST(ParseSize, MessageStaysOnOneLineForControlCharacters) {
  try {
    parse_size("1\nMiB");
    ADD_FAILURE() << "no error";
  } catch (const ParseError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find("\\x0a"), std::string::npos) << what;
  }
}

// --- format_size ---------------------------------------------------------------------------------

TEST(FormatSize, Examples) {
  EXPECT_EQ(format_size(0), "0 B");
  EXPECT_EQ(format_size(1), "1 B");
  EXPECT_EQ(format_size(512), "512 B");
  EXPECT_EQ(format_size(1023), "1023 B");
  EXPECT_EQ(format_size(KiB), "1 KiB");
  EXPECT_EQ(format_size(1280), "1.25 KiB");
  EXPECT_EQ(format_size(1126), "1.1 KiB");  // 1.0996
  EXPECT_EQ(format_size(1025), "1.0 KiB");  // inexact keeps a decimal
  EXPECT_EQ(format_size(MiB + MiB / 2), "1.5 MiB");
  EXPECT_EQ(format_size(64 * MiB), "64 MiB");
  EXPECT_EQ(format_size(MiB - 1), "1.0 MiB");  // not "1024.0 KiB"
  EXPECT_EQ(format_size(2 * GiB), "2 GiB");
  EXPECT_EQ(format_size(3 * TiB), "3 TiB");
  EXPECT_EQ(format_size(1000000), "976.56 KiB");
  EXPECT_EQ(format_size(kMax), "8.0 EiB");
  EXPECT_EQ(format_size(-2 * KiB), "-2 KiB");
  EXPECT_EQ(format_size(std::numeric_limits<int64_t>::min()), "-8 EiB");
}

TEST(FormatSize, ExactValuesRoundTrip) {
  const std::vector<int64_t> multipliers = {1, 3, 5, 64, 100, 1000, 1023};
  for (int k = 0; k <= 5; ++k) {
    for (const int64_t m : multipliers) {
      const int64_t bytes = m << (10 * k);
      EXPECT_EQ(parse_size(format_size(bytes)), bytes) << format_size(bytes);
    }
  }
  // Halves and quarters print exactly too.
  for (const int64_t bytes : {MiB + MiB / 2, GiB + GiB / 4, 3 * KiB + 3 * KiB / 4}) {
    EXPECT_EQ(parse_size(format_size(bytes)), bytes) << format_size(bytes);
  }
}

TEST(FormatSize, FixedDecimals) {
  const auto d = [](int64_t b) { return static_cast<double>(b); };
  EXPECT_EQ(format_size(d(MiB + MiB / 2), 2), "1.50 MiB");
  EXPECT_EQ(format_size(d(MiB + MiB / 2), 0), "2 MiB");
  EXPECT_EQ(format_size(d(64 * MiB), 1), "64.0 MiB");
  EXPECT_EQ(format_size(512.4, 2), "512 B");  // whole bytes below 1 KiB
  EXPECT_EQ(format_size(0.0, 2), "0 B");
  EXPECT_EQ(format_size(d(1000000), 1), "976.6 KiB");
  EXPECT_EQ(format_size(d(MiB - 1), 1), "1.0 MiB");  // not "1024.0 KiB"
  EXPECT_EQ(format_size(1023.7, 2), "1.0 KiB");      // not "1024 B"
  EXPECT_EQ(format_size(d(-3 * GiB), 2), "-3.00 GiB");
  EXPECT_EQ(format_size(-0.001 * d(KiB), 1), "-1 B");
  EXPECT_EQ(format_size(d(5 * TiB), 12), "5.000000000 TiB");  // decimals clamped to 9
  EXPECT_EQ(format_size(std::nan(""), 1), "n/a");
}

TEST(FormatSize, UnitIsTheLargestNotAboveTheValue) {
  EXPECT_EQ(size_unit(0).name, "B");
  EXPECT_EQ(size_unit(1023).name, "B");
  EXPECT_EQ(size_unit(1024).name, "KiB");
  EXPECT_EQ(size_unit(1024).bytes, 1024.0);
  EXPECT_EQ(size_unit(static_cast<double>(MiB) - 1).name, "KiB");
  EXPECT_EQ(size_unit(-static_cast<double>(3 * GiB)).name, "GiB");
  EXPECT_EQ(size_unit(static_cast<double>(kMax)).name, "EiB");
  EXPECT_EQ(size_unit(1e30).name, "EiB");
  EXPECT_EQ(size_unit(std::nan("")).name, "B");
}

// --- parse_size_list -----------------------------------------------------------------------------

TEST(ParseSizeList, GoodInputs) {
  EXPECT_EQ(parse_size_list("1MiB"), (Values{MiB}));
  EXPECT_EQ(parse_size_list("1MiB,2MiB"), (Values{MiB, 2 * MiB}));
  EXPECT_EQ(parse_size_list("2KiB,1KiB"), (Values{KiB, 2 * KiB}));
  EXPECT_THROW(parse_size_list(" 2KiB , 1KiB "), ParseError);  // one rule: no outer spaces
  EXPECT_EQ(parse_size_list("4KiB,1KiB,4KiB"), (Values{KiB, 4 * KiB}));
  EXPECT_EQ(parse_size_list("1MiB:8MiB:x2"), (Values{MiB, 2 * MiB, 4 * MiB, 8 * MiB}));
  EXPECT_EQ(parse_size_list("1MiB:5MiB:x2"), (Values{MiB, 2 * MiB, 4 * MiB}));
  EXPECT_EQ(parse_size_list("1MiB:1GiB:X32"), (Values{MiB, 32 * MiB, GiB}));
  EXPECT_EQ(parse_size_list("0:4KiB:+1KiB"), (Values{0, KiB, 2 * KiB, 3 * KiB, 4 * KiB}));
  EXPECT_EQ(parse_size_list("1MiB:2MiB:+768KiB"), (Values{MiB, MiB + 768 * KiB}));
  EXPECT_EQ(parse_size_list("1KiB:1KiB:+1"), (Values{KiB}));
  EXPECT_EQ(parse_size_list("0,1KiB:4KiB:x2,3KiB"), (Values{0, KiB, 2 * KiB, 3 * KiB, 4 * KiB}));
  // Near the top of the range the loop must stop without overflowing.
  const Values top = parse_size_list("4EiB:9223372036854775807:x2");
  EXPECT_EQ(top, (Values{int64_t{1} << 62}));
  const Values steps = parse_size_list("9223372036854775000:9223372036854775807:+500");
  EXPECT_EQ(steps, (Values{9223372036854775000, 9223372036854775500}));
}

TEST(ParseSizeList, BadInputs) {
  expect_errors(parse_size_list,
                {
                    {"", "empty size list"},
                    {" ", "empty size list"},
                    {"1KiB,,2KiB", "\"1KiB,,2KiB\": empty item"},
                    {"1KiB,", "empty item"},
                    {"abc", "invalid size \"abc\""},
                    {"1KiB,-2KiB", "cannot be negative"},
                    {"1KiB:2KiB", "\"1KiB:2KiB\": a size range needs a step"},
                    {"2KiB:1KiB:x2", "LO must not exceed HI"},
                    {"1KiB:2KiB:x1", "factor after 'x' must be an integer >= 2"},
                    {"1KiB:2KiB:xa", "factor after 'x'"},
                    {"1KiB:2KiB:x", "factor after 'x'"},
                    {"1KiB:2KiB:+0", "step after '+' must be at least 1"},
                    {"1KiB:2KiB:+x", "invalid size \"x\""},
                    {"1KiB:2KiB:2", "the step must be xF or +STEP"},
                    {"1:2:x2:4", "too many ':'"},
                    {"0:1KiB:x2", "geometric range must start at 1 or more"},
                    {"0:20000:+1", "expands to more than 10000 values"},
                    {"1:6000:+1,6001:12000:+1", "expands to more than 10000 values"},
                    {":1KiB:x2", "empty size"},
                });
}

// --- parse_int_list ------------------------------------------------------------------------------

TEST(ParseIntList, GoodInputs) {
  EXPECT_EQ(parse_int_list("1,4"), (Values{1, 4}));
  EXPECT_EQ(parse_int_list("7"), (Values{7}));
  EXPECT_EQ(parse_int_list("1:8"), (Values{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(parse_int_list("1:8:+2"), (Values{1, 3, 5, 7}));
  EXPECT_EQ(parse_int_list("1:64:x2"), (Values{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(parse_int_list("1:100:x3"), (Values{1, 3, 9, 27, 81}));
  EXPECT_EQ(parse_int_list("3:3"), (Values{3}));
  EXPECT_EQ(parse_int_list("-1,0,2"), (Values{-1, 0, 2}));
  EXPECT_EQ(parse_int_list("-2:1"), (Values{-2, -1, 0, 1}));
  EXPECT_EQ(parse_int_list("5,1,5,3"), (Values{1, 3, 5}));
  EXPECT_THROW(parse_int_list("5,1,5, 3"), ParseError);  // one rule: no spaces around items
  EXPECT_EQ(parse_int_list("0,1:4:x2,2:6:+2"), (Values{0, 1, 2, 4, 6}));
  EXPECT_EQ(parse_int_list("9223372036854775806:9223372036854775807"), (Values{kMax - 1, kMax}));
  const Values powers = parse_int_list("1:9223372036854775807:x2");
  ASSERT_EQ(powers.size(), 63u);
  EXPECT_EQ(powers.back(), int64_t{1} << 62);
}

TEST(ParseIntList, BadInputs) {
  expect_errors(parse_int_list,
                {
                    {"", "empty integer list"},
                    {"1K", "invalid integer \"1K\""},
                    {"1.5", "invalid integer \"1.5\""},
                    {"+3", "invalid integer \"+3\""},
                    {"1,,2", "empty item"},
                    {"8:1", "\"8:1\": LO must not exceed HI"},
                    {"0:8:x2", "geometric range must start at 1 or more"},
                    {"-4:8:x2", "geometric range must start at 1 or more"},
                    {"1:8:+0", "step after '+' must be at least 1"},
                    {"1:8:+-1", "step after '+' must be at least 1"},
                    {"1:8:x1", "factor after 'x'"},
                    {"1:8:2", "the step must be xF or +STEP"},
                    {"99999999999999999999", "out of range"},
                    {"1:20000", "expands to more than 10000 values"},
                    {"-9223372036854775807:9223372036854775807", "more than 10000 values"},
                });
}

// --- shards --------------------------------------------------------------------------------------

TEST(ParseShard, GoodInputs) {
  const Shard a = parse_shard("1/3");
  EXPECT_EQ(a.index, 1);
  EXPECT_EQ(a.count, 3);
  const Shard b = parse_shard("2/5");
  EXPECT_EQ(b.index, 2);
  EXPECT_EQ(b.count, 5);
  const Shard c = parse_shard("1/1");
  EXPECT_EQ(c.index, 1);
  EXPECT_EQ(c.count, 1);
}

TEST(ParseShard, BadInputs) {
  expect_errors(parse_shard, {
                                 {"", "invalid shard \"\": expected I/N"},
                                 {"1", "invalid shard \"1\""},
                                 {"0/3", "invalid shard \"0/3\": expected I/N with 1 <= I <= N"},
                                 {"4/3", "1 <= I <= N"},
                                 {"-1/3", "1 <= I <= N"},
                                 {"1/0", "N must be between 1 and"},
                                 {"1/99999999999", "N must be between 1 and"},
                                 {"a/b", "invalid shard \"a/b\""},
                                 {"1/3/5", "invalid shard \"1/3/5\""},
                                 {" 2/5", "remove the spaces"},
                                 {"2 / 5", "invalid shard"},
                             });
}

// --- single values (issue 11: one rule per value, never clamped) ---------------------------------

TEST(ParseInt64, GoodAndBad) {
  EXPECT_EQ(parse_int64("4"), 4);
  EXPECT_EQ(parse_int64("-1"), -1);
  EXPECT_EQ(parse_int64("9223372036854775807"), kMax);
  expect_errors(parse_int64, {
                                 {"", "expected a whole number"},
                                 {" 4", "remove the spaces"},
                                 {"4 ", "remove the spaces"},
                                 {"4.0", "expected a whole number"},
                                 {"1e3", "expected a whole number"},
                                 {"+4", "expected a whole number"},
                                 {"99999999999999999999", "out of range"},
                                 {"-99999999999999999999", "out of range"},
                             });
}

TEST(ParseUint64, NeverWrapsANegativeOrClampsAnOverflow) {
  EXPECT_EQ(parse_uint64("0"), 0U);
  EXPECT_EQ(parse_uint64("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  expect_errors(parse_uint64, {
                                  {"-1", "must not be negative"},
                                  {"18446744073709551616", "out of range"},
                                  {"", "expected a whole number"},
                                  {"0x10", "expected a whole number"},
                                  {" 1", "remove the spaces"},
                              });
}

TEST(ParsePositiveNumber, FiniteAndAboveZero) {
  EXPECT_DOUBLE_EQ(parse_positive_number("1.25"), 1.25);
  EXPECT_DOUBLE_EQ(parse_positive_number("40"), 40.0);
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "0", "0.0", "-1", "", " 1", "1x", "1e999"}) {
    EXPECT_THROW(parse_positive_number(bad), ParseError) << bad;
  }
}

TEST(InShard, PartitionsPoints) {
  const Shard shards[] = {{1, 3}, {2, 3}, {3, 3}};
  EXPECT_TRUE(in_shard(0, shards[0]));
  EXPECT_TRUE(in_shard(3, shards[0]));
  EXPECT_TRUE(in_shard(1, shards[1]));
  EXPECT_TRUE(in_shard(5, shards[2]));
  EXPECT_FALSE(in_shard(1, shards[0]));
  EXPECT_FALSE(in_shard(2, shards[1]));
  for (int64_t p = 0; p < 20; ++p) {
    int owners = 0;
    for (const Shard& s : shards) owners += in_shard(p, s) ? 1 : 0;
    EXPECT_EQ(owners, 1) << "point " << p;
  }
  EXPECT_TRUE(in_shard(7, Shard{1, 1}));
  EXPECT_THROW(in_shard(0, Shard{1, 0}), std::invalid_argument);
}

}  // namespace
}  // namespace offtune::profiler
