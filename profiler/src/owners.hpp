// Owners: the process that records a run or measures a sweep point (host, pid, start time), and
// whether it still runs. A run or claim whose owner ended is recognised as such, so that nothing
// waits for it forever: reads show such a run as interrupted, and a writable open marks it so in
// the file and drops its claims. current_owner() and owner_alive() are public (store.hpp).
#pragma once

#include <optional>
#include <string>

#include "offtune/profiler/store.hpp"
#include "sqlite_db.hpp"

namespace offtune::profiler::detail {

// The owner columns of a SELECT that LEFT JOINs run_owners as `o`: present, host, pid, pid_start.
inline constexpr const char* kOwnerSelect =
    "o.run IS NOT NULL, coalesce(o.host, ''), coalesce(o.pid, 0), coalesce(o.pid_start, 0)";
// What a file without run_owners (schema 1) selects instead: no owner.
inline constexpr const char* kNoOwnerSelect = "0, '', 0, 0";

// A run's owner from the next columns of a row (kOwnerSelect). Nothing when the run has no owner
// row (written before schema 2).
std::optional<Owner> read_owner(Query& q);

// The error of a run that is `running` while its owner has ended.
std::string interrupted_error(const std::optional<Owner>& owner);

// On a writable open: the running runs of owners that ended become interrupted in the file, and
// their claims go (nobody is left to release them).
void interrupt_orphans(const Connection& c);

}  // namespace offtune::profiler::detail
