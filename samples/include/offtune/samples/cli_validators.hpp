// CLI11 validators shared by the sample programs (offtune-demo, offtune-bench). Header-only: only
// the programs that parse a command line link CLI11.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <string>

namespace offtune::samples {

// Integer lower bound with a message that says what is wrong (CLI11's PositiveNumber and
// NonNegativeNumber report a range up to DBL_MAX).
inline CLI::Validator at_least(int64_t min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        int64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (ec != std::errc{} || ptr != end) return {};  // not an integer: conversion reports it
        if (value >= min) return {};
        return "must be >= " + std::to_string(min) + ", got " + text;
      },
      ">=" + std::to_string(min));
}

}  // namespace offtune::samples
