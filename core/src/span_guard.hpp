// Observer spans (observer.hpp: on_span_begin/on_span_end) around a piece of the engine's work:
// the hooks' waits (offloader.cpp) and a checkpointed region's recompute (checkpoint.cpp).
#pragma once

#include <c10/util/Exception.h>

#include <exception>

#include "offtune/observer.hpp"

namespace offtune::detail {

// Brackets a piece of the engine's work with on_span_begin/on_span_end (observer.hpp). `observer`
// is read once, without the mutex, as the hooks' other unlocked reads of observer_: set_observer is
// not allowed while hooks run, so it cannot change under a span. Without an observer this is a
// branch on construction and one on destruction. Never created under the engine's lock.
class SpanGuard {
 public:
  SpanGuard(Observer* observer, Span span) : observer_(observer), span_(span) {
    if (observer_) [[unlikely]] {
      observer_->on_span_begin(span_);
    }
  }
  ~SpanGuard() {
    if (!observer_) [[likely]] {
      return;
    }
    // The destructor may run while the work's exception propagates: a second one would terminate.
    try {
      observer_->on_span_end(span_);
    } catch (const std::exception& ex) {
      TORCH_WARN("offtune: observer threw from on_span_end: ", ex.what());
    } catch (...) {
      TORCH_WARN("offtune: observer threw from on_span_end");
    }
  }
  SpanGuard(const SpanGuard&) = delete;
  SpanGuard& operator=(const SpanGuard&) = delete;

 private:
  Observer* const observer_;
  const Span span_;
};

}  // namespace offtune::detail
