// The store's column lists (sqlite_rows.hpp), one per record type, in the order of the schema's
// columns. A column added by a migration names its schema version and what older files read.
#include "sqlite_rows.hpp"

#include <variant>

#include "offtune/knobs.hpp"
#include "sqlite_schema.hpp"

namespace offtune::profiler::detail {

namespace {

// The interval columns are NULL in rows written before schema 3, and 0 means "not known".
Column<RunSummary> interval_field(std::string name, double RunSummary::*member) {
  Column<RunSummary> c = field(std::move(name), member, kCiSchema, "NULL");
  c.read = [member](Query& q, RunSummary& s) {
    const double v = q.col_real();
    s.*member = std::isnan(v) ? 0.0 : v;
  };
  return c;
}

// A knob's value as its column holds it: a Switch 0/1 (INTEGER), a Count or a Size an INTEGER, a
// Choice its name (TEXT). A value's alternative is its kind's.
void bind_value(Query& q, const KnobValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) {
    q.boolean(*b);
  } else if (const auto* i = std::get_if<int64_t>(&v)) {
    q.i64(*i);
  } else {
    q.text(std::get<std::string>(v));
  }
}
KnobValue read_value(Query& q, KnobKind kind) {
  switch (kind) {
    case KnobKind::Switch:
      return q.col_bool();
    case KnobKind::Count:
    case KnobKind::Size:
      return q.col_i64();
    case KnobKind::Choice:
      break;
  }
  return q.col_text();
}

// A knob's value as an SQL literal: what a SELECT from a file older than its column reads.
std::string sql_literal(const KnobValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "1" : "0";
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  return "'" + std::get<std::string>(v) + "'";  // the table's names hold no quote
}

// A run's place in a distributed job, of a run or of its description.
template <typename R>
Columns<R> rank_columns() {
  return {field("rank", &R::rank, kRanksSchema, "0"),
          field("world_size", &R::world_size, kRanksSchema, "1"),
          Column<R>{"job_run",
                    [](Query& q, const R& r) { q.id_or_null(r.job_run ? r.job_run->value : -1); },
                    [](Query& q, R& r) {
                      if (const int64_t job = q.col_id_or_invalid(); job >= 0)
                        r.job_run = RunId(job);
                    },
                    kRanksSchema, "NULL"}};
}

// The key of a grid point's row (points, predictions): its sweep and its index in the grid.
template <typename R>
const Columns<R>& grid_point_key() {
  static const Columns<R> cols = fields("sweep", &R::sweep, "point_index", &R::index);
  return cols;
}

}  // namespace

std::string placeholders(size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += i == 0 ? "?" : ", ?";
  return out;
}

const Columns<Environment>& env_columns() {
  using E = Environment;
  static const Columns<E> cols =
      fields("env_offtune_version", &E::offtune_version, "env_torch_version", &E::torch_version,
             "env_backend", &E::backend, "env_device", &E::device, "env_git_revision",
             &E::git_revision, "env_host", &E::host);
  return cols;
}

const Columns<Workload>& workload_columns() {
  using W = Workload;
  static const Columns<W> cols = join<W>(
      {fields("model", &W::model, "batch", &W::batch, "seq", &W::seq, "dtype", &W::dtype, "seed",
              &W::seed, "steps", &W::steps, "warmup", &W::warmup, "optimizer", &W::optimizer),
       {field("lora_rank", &W::lora_rank, kLayerSchema, "0")}});
  return cols;
}

const Columns<EngineConfig>& config_columns() {
  // One column per knob, in the table's order (the schema's), named by its key, the value through
  // its get and set. A file older than the knob's column reads its default. A stored value the
  // knob refuses (a file edited by hand) throws OptionsError, a std::invalid_argument: the
  // store's error for a bad row (read_checked).
  static const Columns<EngineConfig> cols = [] {
    Columns<EngineConfig> out;
    const EngineConfig defaults;  // (not default_value(): its temporary trips GCC 12's
                                  // -Wmaybe-uninitialized here)
    for (const Knob& k : knob_table()) {
      const Knob* knob = &k;
      out.push_back(Column<EngineConfig>{
          std::string(k.key),
          [knob](Query& q, const EngineConfig& c) { bind_value(q, knob->get(c)); },
          [knob](Query& q, EngineConfig& c) { knob->set(c, read_value(q, knob->kind)); },
          k.since_schema, sql_literal(k.get(defaults))});
    }
    return out;
  }();
  return cols;
}

const Columns<RunSummary>& summary_columns() {
  using S = RunSummary;
  static const Columns<S> cols =
      join<S>({fields("step_ms_median", &S::step_ms_median, "step_ms_min", &S::step_ms_min,
                      "step_ms_max", &S::step_ms_max, "step_ms_stddev", &S::step_ms_stddev,
                      "peak_allocated", &S::peak_allocated, "peak_reserved", &S::peak_reserved,
                      "host_bytes_peak", &S::host_bytes_peak, "pinned_bytes", &S::pinned_bytes,
                      "offloaded_bytes", &S::offloaded_bytes, "reloaded_bytes", &S::reloaded_bytes,
                      "hidden_copy_pct", &S::hidden_copy_pct, "hidden_d2h_pct", &S::hidden_d2h_pct,
                      "hidden_h2d_pct", &S::hidden_h2d_pct, "exposed_copy_ns", &S::exposed_copy_ns,
                      "pageable_copies", &S::pageable_copies, "final_loss", &S::final_loss),
               {interval_field("step_ms_ci_low", &S::step_ms_ci_low),
                interval_field("step_ms_ci_high", &S::step_ms_ci_high),
                interval_field("step_ms_ci_level", &S::step_ms_ci_level)},
               {field("device_outside", &S::device_outside, kHoldingsSchema, "0"),
                field("host_rss_peak", &S::host_rss_peak, kHoldingsSchema, "0")}});
  return cols;
}

const Columns<RunRecord>& run_columns() {
  using R = RunRecord;
  static const Columns<R> cols = join<R>(
      {{enum_field("status", &R::status, &parse_run_status), field("error", &R::error),
        field("label", &R::label)},
       nested(&R::env, env_columns()),
       nested(&R::workload, workload_columns()),
       nested(&R::config, config_columns()),
       fields("started_unix_ns", &R::started_unix_ns, "finished_unix_ns", &R::finished_unix_ns),
       nested(&R::summary, summary_columns()),
       rank_columns<R>()});
  return cols;
}

const Columns<RunDescription>& description_columns() {
  using D = RunDescription;
  static const Columns<D> cols =
      join<D>({nested(&D::env, env_columns()), nested(&D::workload, workload_columns()),
               rank_columns<D>()});
  return cols;
}

const Columns<StepRecord>& step_columns() {
  using S = StepRecord;
  static const Columns<S> cols = fields(
      "run", &S::run, "step", &S::step, "begin_ns", &S::begin_ns, "end_ns", &S::end_ns,
      "peak_allocated", &S::peak_allocated, "peak_reserved", &S::peak_reserved, "offloaded_bytes",
      &S::offloaded_bytes, "reloaded_bytes", &S::reloaded_bytes, "hidden_copy_pct",
      &S::hidden_copy_pct, "exposed_copy_ns", &S::exposed_copy_ns, "loss", &S::loss);
  return cols;
}

const Columns<TimelineEvent>& event_columns() {
  using E = TimelineEvent;
  static const Columns<E> cols =
      join<E>({fields("run", &E::run),
               {enum_field("kind", &E::kind, &parse_event_kind)},
               fields("start_ns", &E::start_ns, "end_ns", &E::end_ns, "stream", &E::stream, "bytes",
                      &E::bytes, "tensor", &E::tensor, "pinned", &E::pinned, "prefetch",
                      &E::prefetch, "name", &E::name)});
  return cols;
}

const Columns<OccupancySample>& occupancy_columns() {
  using O = OccupancySample;
  static const Columns<O> cols =
      join<O>({fields("run", &O::run, "time_ns", &O::time_ns, "fwd_count", &O::fwd_count,
                      "fwd_bytes", &O::fwd_bytes, "bwd_count", &O::bwd_count, "bwd_bytes",
                      &O::bwd_bytes, "device_bytes", &O::device_bytes),
               {field("reserved_bytes", &O::reserved_bytes, kMemoryCurvesSchema, "-1"),
                field("host_bytes", &O::host_bytes, kMemoryCurvesSchema, "-1"),
                field("host_pool_bytes", &O::host_pool_bytes, kMemoryCurvesSchema, "-1")}});
  return cols;
}

const Columns<MemoryEventRecord>& memory_event_columns() {
  using M = MemoryEventRecord;
  static const Columns<M> cols =
      fields("run", &M::run, "seq", &M::seq, "time_ns", &M::time_ns, "action", &M::action, "addr",
             &M::addr, "size", &M::size, "block_size", &M::block_size, "stream", &M::stream,
             "device_free", &M::device_free, "note", &M::note);
  return cols;
}

const Columns<MemoryBlockRecord>& memory_block_columns() {
  using B = MemoryBlockRecord;
  static const Columns<B> cols = fields(
      "run", &B::run, "segment_addr", &B::segment_addr, "segment_size", &B::segment_size, "stream",
      &B::stream, "small_pool", &B::small_pool, "expandable", &B::expandable, "addr", &B::addr,
      "size", &B::size, "requested", &B::requested, "state", &B::state, "note", &B::note);
  return cols;
}

const Columns<SweepRecord>& sweep_columns() {
  using S = SweepRecord;
  static const Columns<S> cols =
      join<S>({fields("name", &S::name, "key", &S::key), nested(&S::workload, workload_columns()),
               fields("grid", &S::grid, "created_unix_ns", &S::created_unix_ns)});
  return cols;
}

const Columns<PointRecord>& point_key_columns() { return grid_point_key<PointRecord>(); }

const Columns<PointRecord>& point_value_columns() {
  using P = PointRecord;
  static const Columns<P> cols = join<P>({nested(&P::config, config_columns()),
                                          {enum_field("status", &P::status, &parse_point_status),
                                           field("error", &P::error), nullable_id("run", &P::run)},
                                          nested(&P::summary, summary_columns())});
  return cols;
}

const Columns<PointPrediction>& prediction_key_columns() {
  return grid_point_key<PointPrediction>();
}

const Columns<PointPrediction>& prediction_value_columns() {
  using P = PointPrediction;
  static const Columns<P> cols = join<P>(
      {fields("step_ns", &P::step_ns, "peak_allocated", &P::peak_allocated, "hidden_copy_pct",
              &P::hidden_copy_pct, "offloaded_bytes", &P::offloaded_bytes, "predictor",
              &P::predictor, "created_unix_ns", &P::created_unix_ns),
       {field("peak_reserved", &P::peak_reserved, kMemoryCurvesSchema, "0")}});
  return cols;
}

const Columns<PointPrediction>& prediction_columns() {
  static const Columns<PointPrediction> cols =
      join<PointPrediction>({prediction_key_columns(), prediction_value_columns()});
  return cols;
}

const Columns<RecommendationRecord>& recommendation_columns() {
  using R = RecommendationRecord;
  static const Columns<R> cols =
      fields("sweep", &R::sweep, "constraint_spec", &R::constraint, "point_index", &R::point_index,
             "rationale", &R::rationale, "snippets_json", &R::snippets_json, "created_unix_ns",
             &R::created_unix_ns);
  return cols;
}

const Columns<Owner>& owner_columns() {
  static const Columns<Owner> cols =
      fields("host", &Owner::host, "pid", &Owner::pid, "pid_start", &Owner::start);
  return cols;
}

}  // namespace offtune::profiler::detail
