// Which blocks of a model are checkpointed (offtune/checkpoint.hpp runs them): a value of its own,
// without libtorch, so that a run's settings (offtune/knobs.hpp) can hold it typed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace offtune {

// Which blocks of a model are checkpointed: none, all, or every k-th (blocks 0, k, 2k, ...).
struct CheckpointPolicy {
  enum class Kind : uint8_t { None, All, Every };
  Kind kind = Kind::None;
  int64_t every = 1;  // for Kind::Every, >= 2 (every:1 is all)

  static CheckpointPolicy none() { return {}; }
  static CheckpointPolicy all() { return {Kind::All, 1}; }
  static CheckpointPolicy every_k(int64_t k) { return {Kind::Every, k}; }

  bool enabled() const { return kind != Kind::None; }
  bool applies(int64_t block) const {
    return kind == Kind::All || (kind == Kind::Every && block % every == 0);
  }
  bool operator==(const CheckpointPolicy&) const = default;
};
// "none", "all", "every:K" (every:1 is all).
std::string to_string(const CheckpointPolicy& policy);
// Accepts what to_string writes; throws OptionsError (offtune/options.hpp) naming the valid forms.
CheckpointPolicy parse_checkpoint_policy(std::string_view text);

}  // namespace offtune
