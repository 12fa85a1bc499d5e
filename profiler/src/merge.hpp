// What merge_stores (sweep.cpp) copies of one run: the run with its rows, and the runs of the other
// ranks of its job (job.hpp), which no sweep point names but which belong to the point's result.
#pragma once

#include "offtune/profiler/store.hpp"

namespace offtune::profiler::detail {

// Copies run `id` of `src` (steps, events, occupancy, final status) into `dst`, then every run of
// `src` whose job is `id`, their job_run remapped to the copy. Returns the copy's id in `dst`; an
// unknown id is returned as it is (nothing to copy).
RunId copy_job(Store& dst, Store& src, RunId id);

}  // namespace offtune::profiler::detail
