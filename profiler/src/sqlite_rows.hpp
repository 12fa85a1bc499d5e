// Row mapping of the SQLite store: for each record type ONE column list, which says each column's
// name, how a record's field binds to it and reads back from it, and since which schema version
// the column exists (with what a read of an older file selects instead). INSERT, UPDATE, upsert and
// SELECT statements are all built from these lists, so that the order of binds and reads cannot
// drift apart from the order of names.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "offtune/profiler/records.hpp"
#include "offtune/profiler/store.hpp"
#include "sqlite_db.hpp"

namespace offtune::profiler::detail {

template <typename R>
struct Column {
  std::string name;
  std::function<void(Query&, const R&)> bind;
  std::function<void(Query&, R&)> read;
  int since = 1;       // the first schema version with the column
  std::string before;  // what a read of a file older than `since` selects instead
};
template <typename R>
using Columns = std::vector<Column<R>>;

// A column for a plain field; its SQL type follows the field's C++ type.
template <typename R, typename T>
Column<R> field(std::string name, T R::*member, int since = 1, std::string before = {}) {
  Column<R> c{std::move(name), nullptr, nullptr, since, std::move(before)};
  c.bind = [member](Query& q, const R& r) {
    const T& v = r.*member;
    if constexpr (std::is_same_v<T, bool>) {
      q.boolean(v);
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      q.u64(v);
    } else if constexpr (std::is_integral_v<T>) {
      q.i64(v);
    } else if constexpr (std::is_same_v<T, double>) {
      q.real(v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      q.text(v);
    } else {  // an Id
      q.i64(v.value);
    }
  };
  c.read = [member](Query& q, R& r) {
    T& v = r.*member;
    if constexpr (std::is_same_v<T, bool>) {
      v = q.col_bool();
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      v = q.col_u64();
    } else if constexpr (std::is_integral_v<T>) {
      v = q.col_i64();
    } else if constexpr (std::is_same_v<T, double>) {
      v = q.col_real();
    } else if constexpr (std::is_same_v<T, std::string>) {
      v = q.col_text();
    } else {
      v = T(q.col_i64());
    }
  };
  return c;
}

// Plain fields, all there since schema 1: fields("a", &R::a, "b", &R::b, ...).
template <typename R, typename T, typename... Rest>
Columns<R> fields(const char* name, T R::*member, Rest... rest) {
  Columns<R> out{field(std::string(name), member)};
  if constexpr (sizeof...(Rest) > 0) {
    const Columns<R> tail = fields<R>(rest...);
    out.insert(out.end(), tail.begin(), tail.end());
  }
  return out;
}

// A column for an Id that may be unset: an invalid id is NULL.
template <typename R, typename T>
Column<R> nullable_id(std::string name, T R::*member) {
  return Column<R>{std::move(name),
                   [member](Query& q, const R& r) { q.id_or_null((r.*member).value); },
                   [member](Query& q, R& r) { r.*member = T(q.col_id_or_invalid()); }};
}

// A column for an enum stored by name. A name this build does not know throws
// std::invalid_argument (read_row_of turns it into the store's error).
template <typename R, typename E>
Column<R> enum_field(std::string name, E R::*member, E (*parse)(const std::string&)) {
  return Column<R>{std::move(name),
                   [member](Query& q, const R& r) { q.text(to_string(r.*member)); },
                   [member, parse](Query& q, R& r) { r.*member = parse(q.col_text()); }};
}

// The columns of a struct held by R as its `member`.
template <typename R, typename S>
Columns<R> nested(S R::*member, const Columns<S>& inner) {
  Columns<R> out;
  for (const Column<S>& c : inner) {
    out.push_back(Column<R>{c.name, [member, b = c.bind](Query& q, const R& r) { b(q, r.*member); },
                            [member, rd = c.read](Query& q, R& r) { rd(q, r.*member); }, c.since,
                            c.before});
  }
  return out;
}

template <typename R>
Columns<R> join(std::initializer_list<Columns<R>> parts) {
  Columns<R> out;
  for (const Columns<R>& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

template <typename R>
void bind_row(Query& q, const Columns<R>& cols, const R& r) {
  for (const Column<R>& c : cols) c.bind(q, r);
}
template <typename R>
void read_row(Query& q, const Columns<R>& cols, R& r) {
  for (const Column<R>& c : cols) c.read(q, r);
}

// "a, b, c": for INSERT, and for SELECT from a file at the current schema.
template <typename R>
std::string names(const Columns<R>& cols) {
  std::string out;
  for (const Column<R>& c : cols) out += (out.empty() ? "" : ", ") + c.name;
  return out;
}
// The same for SELECT from a file at `schema`: a column it does not have yet reads as `before`.
template <typename R>
std::string select_list(const Columns<R>& cols, int schema) {
  std::string out;
  for (const Column<R>& c : cols) {
    out += (out.empty() ? "" : ", ") + (schema >= c.since ? c.name : c.before);
  }
  return out;
}
// "a = <rhs(a)>, b = <rhs(b)>": for UPDATE and upsert statements.
template <typename R>
std::string assignments(const Columns<R>& cols,
                        const std::function<std::string(const std::string&)>& rhs) {
  std::string out;
  for (const Column<R>& c : cols) out += (out.empty() ? "" : ", ") + c.name + " = " + rhs(c.name);
  return out;
}
template <typename R>
std::string set_params(const Columns<R>& cols) {
  return assignments(cols, [](const std::string&) { return std::string("?"); });
}
template <typename R>
std::string set_excluded(const Columns<R>& cols) {
  return assignments(cols, [](const std::string& name) { return "excluded." + name; });
}
std::string placeholders(size_t n);

// The column lists, one per record type (and per part shared by several).
const Columns<Environment>& env_columns();
const Columns<Workload>& workload_columns();
const Columns<EngineConfig>& config_columns();
const Columns<RunSummary>& summary_columns();
const Columns<RunRecord>& run_columns();  // all but the id
// What a continued run re-describes (describe_run).
const Columns<RunDescription>& description_columns();
const Columns<StepRecord>& step_columns();
const Columns<TimelineEvent>& event_columns();  // all but the row id
const Columns<OccupancySample>& occupancy_columns();
const Columns<MemoryEventRecord>& memory_event_columns();
const Columns<MemoryBlockRecord>& memory_block_columns();
const Columns<SweepRecord>& sweep_columns();  // all but the id
// A point is its key (sweep, point_index) and its values; an upsert replaces the values.
const Columns<PointRecord>& point_key_columns();
const Columns<PointRecord>& point_value_columns();
const Columns<PointPrediction>& prediction_key_columns();
const Columns<PointPrediction>& prediction_value_columns();
const Columns<PointPrediction>& prediction_columns();  // key, then values
const Columns<RecommendationRecord>& recommendation_columns();
// host, pid, pid_start: of run_owners and claims.
const Columns<Owner>& owner_columns();

}  // namespace offtune::profiler::detail
