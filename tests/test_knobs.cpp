// The knob table (offtune/knobs.hpp) against everything that reads it. Every test here walks the
// table, so a knob added as a row is checked everywhere it must arrive without a test of its own:
// the CLI's flags, the request layer's check and grid, the text forms, JSON and the store.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "offtune/cli/command_line.hpp"
#include "offtune/knobs.hpp"
#include "offtune/profiler/json.hpp"
#include "offtune/profiler/knob_text.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/requests/request.hpp"

namespace offtune {
namespace {

namespace pf = profiler;

// A text of `k` whose value is neither its default nor what a request assumes (the link's
// pcie4): from its examples, or the other switch position.
std::string other_text(const Knob& k) {
  if (k.kind == KnobKind::Switch) {
    return std::get<bool>(default_value(k)) ? "off" : "on";
  }
  const KnobValue assumed = pf::parse_knob_text(k, pf::default_text(k, /*sweep=*/false));
  for (const std::string& text : k.examples()) {
    if (text.find(',') != std::string::npos) continue;  // a list
    const KnobValue v = pf::parse_knob_text(k, text);
    if (v != default_value(k) && v != assumed) return text;
  }
  ADD_FAILURE() << k.key << ": no example differs from the default";
  return {};
}

// What a run request needs besides `k`'s value for that value to be valid.
void add_companions(const Knob& k, requests::RunRequest& r) {
  if (k.key == "offload_set") r.knobs["checkpoint"] = "all";  // boundaries of checkpointed blocks
  if (k.key == "layer_offload") r.workload.lora_rank = 4;     // frozen weights to move
}

TEST(Knobs, EachRowIsNamedOnceAndComplete) {
  std::set<std::string_view> keys, flags, python;
  std::set<int> nests;
  for (const Knob& k : knob_table()) {
    SCOPED_TRACE(std::string(k.key));
    EXPECT_TRUE(keys.insert(k.key).second) << "key twice";
    if (!k.flag.empty()) {
      EXPECT_TRUE(k.flag.starts_with("--"));
      EXPECT_TRUE(flags.insert(k.flag).second) << "flag twice";
    }
    if (!k.python.empty()) {
      EXPECT_TRUE(python.insert(k.python).second) << "keyword twice";
    }
    ASSERT_NE(k.get, nullptr);
    ASSERT_NE(k.set, nullptr);
    ASSERT_NE(k.words, nullptr);
    EXPECT_FALSE(k.help.empty());
    if (k.nest > 0) {
      EXPECT_TRUE(nests.insert(k.nest).second) << "two axes at one place";
      EXPECT_FALSE(k.flag.empty()) << "an axis the user cannot give";
    }
    if (k.kind == KnobKind::Count || k.kind == KnobKind::Size) {
      const int64_t d = std::get<int64_t>(default_value(k));
      EXPECT_LE(k.lo, d);
      EXPECT_LE(d, k.hi);
    }
    if (!k.flag.empty() && !k.plain_flag()) {
      ASSERT_NE(k.examples, nullptr);
    }
    if (k.always_axis) {
      EXPECT_GT(k.nest, 0);
    }
    EXPECT_EQ(&knob(k.key), &k);
  }
  EXPECT_THROW(knob("no_such_knob"), OptionsError);
}

TEST(Knobs, DefaultTextsAndExamplesParseAsTheKnobTakesThem) {
  for (const Knob& k : knob_table()) {
    if (k.flag.empty()) continue;
    SCOPED_TRACE(std::string(k.key));
    const KnobValue parsed = pf::parse_knob_text(k, pf::default_text(k, /*sweep=*/false));
    if (k.request_default.empty()) {
      EXPECT_EQ(parsed, default_value(k));
    }
    // The text written back reads as the same value.
    EXPECT_EQ(pf::parse_knob_text(k, pf::knob_text(k, parsed)), parsed);
    EXPECT_FALSE(pf::parse_knob_list(k, pf::default_text(k, /*sweep=*/true)).empty());
    if (k.examples == nullptr) continue;
    for (const std::string& example : k.examples()) {
      EXPECT_NO_THROW(pf::parse_knob_list(k, example)) << example;
    }
  }
}

TEST(Knobs, AValueOfAnotherKindIsRefusedNamingTheKnob) {
  const std::vector<KnobValue> kinds = {true, int64_t{3}, std::string("x")};
  for (const Knob& k : knob_table()) {
    SCOPED_TRACE(std::string(k.key));
    for (const KnobValue& v : kinds) {
      const bool fits = (k.kind == KnobKind::Switch && std::holds_alternative<bool>(v)) ||
                        ((k.kind == KnobKind::Count || k.kind == KnobKind::Size) &&
                         std::holds_alternative<int64_t>(v)) ||
                        (k.kind == KnobKind::Choice && std::holds_alternative<std::string>(v));
      if (fits) continue;
      Knobs c;
      try {
        k.set(c, v);
        ADD_FAILURE() << "accepted " << plain_text(v, k.kind);
      } catch (const OptionsError& e) {
        EXPECT_TRUE(std::string(e.what()).starts_with(std::string(k.key))) << e.what();
      }
    }
  }
}

// A config with every knob away from its default.
Knobs every_knob_changed() {
  Knobs c;
  for (const Knob& k : knob_table()) {
    if (k.flag.empty()) {
      k.set(c, k.kind == KnobKind::Switch ? KnobValue(!std::get<bool>(default_value(k)))
                                          : default_value(k));
      continue;
    }
    k.set(c, pf::parse_knob_text(k, other_text(k)));
  }
  return c;
}

// A run with `config` written to a new SQLite store comes back with the same config, and the
// store's listing of its runs reads it too.
void expect_stored_and_read_back(const Knobs& config) {
  const auto dir = std::filesystem::temp_directory_path() / "offtune_test_knobs";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    auto store = pf::open_sqlite_store((dir / "s.db").string());
    pf::RunRecord rec;
    rec.config = config;
    rec.workload.model = "tiny";
    const pf::RunId id = store->begin_run(rec);
    const auto back = store->run(id);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->config, config);
    const auto runs = store->runs();
    ASSERT_EQ(runs.size(), 1U);
    EXPECT_EQ(runs.front().config, config);
  }
  std::filesystem::remove_all(dir);
}

TEST(Knobs, AConfigWithEveryKnobChangedComesBackFromJsonAndTheStore) {
  const Knobs changed = every_knob_changed();
  for (const Knob& k : knob_table()) {
    EXPECT_NE(k.get(changed), default_value(k)) << k.key;
  }
  const Knobs defaults;
  EXPECT_EQ(pf::config_from_json(pf::to_json(changed), defaults), changed);

  expect_stored_and_read_back(changed);
}

// What the engine ran with is recorded and read back, at the engine's own extremes too: a size of
// INT64_MAX ("offload nothing"), a window beyond any typo guard, a link the CLI never names. (The
// first table refused them on reading: the store's listing of such a run failed whole.)
TEST(Knobs, WhatTheEngineTakesIsRecordedAndReadBack) {
  OffloadOptions o;
  o.min_offload_size = std::numeric_limits<int64_t>::max();
  o.max_fwd_stash_size = int64_t{1} << 30;
  o.max_fwd_stash_bytes = std::numeric_limits<int64_t>::max();
  o.link = LinkModel{1e6, 0.0, 1000};  // named "1e+06:1"
  const Knobs k = knobs_of(o);
  EXPECT_EQ(k.link.name, "1e+06:1");
  EXPECT_EQ(parse_link(k.link.name).model.pinned_gbps, 1e6);
  // A disabled model is "none", whatever its pageable rate says.
  EXPECT_EQ(link_of(LinkModel{0.0, 5.0, 0}).name, "none");
  expect_stored_and_read_back(k);
}

// A grid made in code without one of the pair's axes still writes the pair, and reads back.
TEST(Knobs, AGridMadeInCodeReadsBackFromItsJson) {
  pf::Grid g;
  g.set_numbers("min_offload_size", {1024, 4096});
  g.set_names("checkpoint", {"none", "every:1"});  // every:1 is all, as a request has it
  EXPECT_EQ(g.values("checkpoint").back(), KnobValue(std::string("all")));
  const pf::Grid back = pf::parse_grid_json(pf::grid_json(g));
  EXPECT_EQ(back.axes, (std::map<std::string, std::vector<KnobValue>, std::less<>>{
                           {"checkpoint", g.values("checkpoint")},
                           {"max_fwd_stash_size", g.values("max_fwd_stash_size")},
                           {"min_offload_size", g.values("min_offload_size")}}));
  EXPECT_EQ(pf::expand_grid(back).size(), pf::expand_grid(g).size());
  EXPECT_THROW(g.set_names("tier", {"tape"}), OptionsError);
}

TEST(Knobs, EveryFlagSetsItsKnobInARun) {
  for (const Knob& k : knob_table()) {
    if (k.flag.empty()) continue;
    SCOPED_TRACE(std::string(k.key));
    requests::RunRequest r;
    r.workload.model = "tiny";
    add_companions(k, r);
    const std::string text = other_text(k);
    r.knobs[std::string(k.key)] = text;
    const auto checked = requests::check(r);
    ASSERT_TRUE(checked.ok()) << checked.errors.front().message;
    EXPECT_EQ(k.get(requests::to_engine_config(checked.value())), pf::parse_knob_text(k, text));
  }
}

TEST(Knobs, EveryAxisIsASweepAxisAndTheOthersTakeOneValue) {
  for (const Knob& k : knob_table()) {
    if (k.flag.empty()) continue;
    SCOPED_TRACE(std::string(k.key));
    requests::SweepRequest r;
    r.workload.model = "tiny";
    r.knobs["min_offload_size"] = "1KiB";
    r.knobs["max_fwd_stash_size"] = "1";
    if (k.key == "offload_set") r.knobs["checkpoint"] = "all";
    if (k.key == "layer_offload") r.workload.lora_rank = 4;
    const std::string two = pf::default_text(k, /*sweep=*/false) + "," + other_text(k);
    r.knobs[std::string(k.key)] = two;
    const auto checked = requests::check(r);
    if (k.nest == 0) {
      ASSERT_FALSE(checked.ok()) << "a list of a knob that is not an axis was taken";
      EXPECT_EQ(checked.errors.front().field, k.flag);
      continue;
    }
    ASSERT_TRUE(checked.ok()) << checked.errors.front().message;
    const pf::Grid grid = requests::to_grid(checked.value());
    ASSERT_TRUE(grid.axes.contains(k.key));
    std::set<std::string> seen;
    for (const Knobs& c : pf::expand_grid(grid)) {
      if (c.offload) seen.insert(plain_text(k.get(c), k.kind));
    }
    EXPECT_EQ(seen.size(), 2U) << "the offload points do not cross both values";
    EXPECT_EQ(static_cast<int64_t>(pf::expand_grid(grid).size()), pf::grid_size(grid));
  }
}

TEST(Knobs, EveryFlagIsInTheHelpOfRunSweepAndPredict) {
  for (const char* command : {"run", "sweep", "predict"}) {
    std::vector<std::string> storage{"offtune", command, "--help"};
    std::vector<char*> argv;
    for (auto& a : storage) argv.push_back(a.data());
    argv.push_back(nullptr);
    testing::internal::CaptureStdout();
    const int code = cli::run_command_line(static_cast<int>(storage.size()), argv.data());
    const std::string help = testing::internal::GetCapturedStdout();
    EXPECT_EQ(code, 0);
    for (const Knob& k : knob_table()) {
      if (k.flag.empty()) continue;
      // An option's line of the help: "  --prefetch TEXT=1   ...".
      const bool listed = help.find("\n  " + std::string(k.flag) + " ") != std::string::npos;
      // predict records checkpointing and what is offloaded and replays them: the other
      // variants are not its flags.
      const bool expected = std::string_view(command) != "predict" || !k.variant ||
                            k.key == "checkpoint" || k.key == "offload_set";
      EXPECT_EQ(listed, expected) << command << " " << k.flag;
    }
  }
}

}  // namespace
}  // namespace offtune
