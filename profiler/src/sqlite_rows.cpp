// The store's column lists (sqlite_rows.hpp), one per record type, in the order of the schema's
// columns. A column added by a migration names its schema version and what older files read.
#include "sqlite_rows.hpp"

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

}  // namespace

std::string placeholders(size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += i == 0 ? "?" : ", ?";
  return out;
}

const Columns<Environment>& env_columns() {
  using E = Environment;
  static const Columns<E> cols{field("env_offtune_version", &E::offtune_version),
                               field("env_torch_version", &E::torch_version),
                               field("env_backend", &E::backend),
                               field("env_device", &E::device),
                               field("env_git_revision", &E::git_revision),
                               field("env_host", &E::host)};
  return cols;
}

const Columns<Workload>& workload_columns() {
  using W = Workload;
  static const Columns<W> cols{field("model", &W::model),
                               field("batch", &W::batch),
                               field("seq", &W::seq),
                               field("dtype", &W::dtype),
                               field("seed", &W::seed),
                               field("steps", &W::steps),
                               field("warmup", &W::warmup),
                               field("optimizer", &W::optimizer),
                               field("lora_rank", &W::lora_rank, kLayerSchema, "0")};
  return cols;
}

const Columns<EngineConfig>& config_columns() {
  using C = EngineConfig;
  static const Columns<C> cols{field("offload", &C::offload),
                               field("min_offload_size", &C::min_offload_size),
                               field("max_fwd_stash_size", &C::max_fwd_stash_size),
                               field("max_fwd_stash_bytes", &C::max_fwd_stash_bytes),
                               field("prefetch", &C::prefetch),
                               field("use_streams", &C::use_streams),
                               field("use_pin_memory", &C::use_pin_memory),
                               field("link", &C::link),
                               field("semantics", &C::semantics, kCiSchema, "'offtune'"),
                               field("checkpoint", &C::checkpoint, kVariantSchema, "'none'"),
                               field("offload_set", &C::offload_set, kVariantSchema, "'all'"),
                               field("tier", &C::tier, kVariantSchema, "'host'"),
                               field("layer_offload", &C::layer_offload, kLayerSchema, "'off'"),
                               field("verify", &C::verify, kVerifySchema, "0")};
  return cols;
}

const Columns<RunSummary>& summary_columns() {
  using S = RunSummary;
  static const Columns<S> cols{field("step_ms_median", &S::step_ms_median),
                               field("step_ms_min", &S::step_ms_min),
                               field("step_ms_max", &S::step_ms_max),
                               field("step_ms_stddev", &S::step_ms_stddev),
                               field("peak_allocated", &S::peak_allocated),
                               field("peak_reserved", &S::peak_reserved),
                               field("host_bytes_peak", &S::host_bytes_peak),
                               field("pinned_bytes", &S::pinned_bytes),
                               field("offloaded_bytes", &S::offloaded_bytes),
                               field("reloaded_bytes", &S::reloaded_bytes),
                               field("hidden_copy_pct", &S::hidden_copy_pct),
                               field("hidden_d2h_pct", &S::hidden_d2h_pct),
                               field("hidden_h2d_pct", &S::hidden_h2d_pct),
                               field("exposed_copy_ns", &S::exposed_copy_ns),
                               field("pageable_copies", &S::pageable_copies),
                               field("final_loss", &S::final_loss),
                               interval_field("step_ms_ci_low", &S::step_ms_ci_low),
                               interval_field("step_ms_ci_high", &S::step_ms_ci_high),
                               interval_field("step_ms_ci_level", &S::step_ms_ci_level)};
  return cols;
}

const Columns<RunRecord>& run_columns() {
  using R = RunRecord;
  static const Columns<R> cols = join<R>({{enum_field("status", &R::status, &parse_run_status),
                                           field("error", &R::error), field("label", &R::label)},
                                          nested(&R::env, env_columns()),
                                          nested(&R::workload, workload_columns()),
                                          nested(&R::config, config_columns()),
                                          {field("started_unix_ns", &R::started_unix_ns),
                                           field("finished_unix_ns", &R::finished_unix_ns)},
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
  static const Columns<S> cols{field("run", &S::run),
                               field("step", &S::step),
                               field("begin_ns", &S::begin_ns),
                               field("end_ns", &S::end_ns),
                               field("peak_allocated", &S::peak_allocated),
                               field("peak_reserved", &S::peak_reserved),
                               field("offloaded_bytes", &S::offloaded_bytes),
                               field("reloaded_bytes", &S::reloaded_bytes),
                               field("hidden_copy_pct", &S::hidden_copy_pct),
                               field("exposed_copy_ns", &S::exposed_copy_ns),
                               field("loss", &S::loss)};
  return cols;
}

const Columns<TimelineEvent>& event_columns() {
  using E = TimelineEvent;
  static const Columns<E> cols{
      field("run", &E::run),           enum_field("kind", &E::kind, &parse_event_kind),
      field("start_ns", &E::start_ns), field("end_ns", &E::end_ns),
      field("stream", &E::stream),     field("bytes", &E::bytes),
      field("tensor", &E::tensor),     field("pinned", &E::pinned),
      field("prefetch", &E::prefetch), field("name", &E::name)};
  return cols;
}

const Columns<OccupancySample>& occupancy_columns() {
  using O = OccupancySample;
  static const Columns<O> cols{field("run", &O::run),
                               field("time_ns", &O::time_ns),
                               field("fwd_count", &O::fwd_count),
                               field("fwd_bytes", &O::fwd_bytes),
                               field("bwd_count", &O::bwd_count),
                               field("bwd_bytes", &O::bwd_bytes),
                               field("device_bytes", &O::device_bytes)};
  return cols;
}

const Columns<SweepRecord>& sweep_columns() {
  using S = SweepRecord;
  static const Columns<S> cols =
      join<S>({{field("name", &S::name), field("key", &S::key)},
               nested(&S::workload, workload_columns()),
               {field("grid", &S::grid), field("created_unix_ns", &S::created_unix_ns)}});
  return cols;
}

const Columns<PointRecord>& point_key_columns() {
  using P = PointRecord;
  static const Columns<P> cols{field("sweep", &P::sweep), field("point_index", &P::index)};
  return cols;
}

const Columns<PointRecord>& point_value_columns() {
  using P = PointRecord;
  static const Columns<P> cols = join<P>({nested(&P::config, config_columns()),
                                          {enum_field("status", &P::status, &parse_point_status),
                                           field("error", &P::error), nullable_id("run", &P::run)},
                                          nested(&P::summary, summary_columns())});
  return cols;
}

const Columns<PointPrediction>& prediction_key_columns() {
  using P = PointPrediction;
  static const Columns<P> cols{field("sweep", &P::sweep), field("point_index", &P::index)};
  return cols;
}

const Columns<PointPrediction>& prediction_value_columns() {
  using P = PointPrediction;
  static const Columns<P> cols{field("step_ns", &P::step_ns),
                               field("peak_allocated", &P::peak_allocated),
                               field("hidden_copy_pct", &P::hidden_copy_pct),
                               field("offloaded_bytes", &P::offloaded_bytes),
                               field("predictor", &P::predictor),
                               field("created_unix_ns", &P::created_unix_ns)};
  return cols;
}

const Columns<RecommendationRecord>& recommendation_columns() {
  using R = RecommendationRecord;
  static const Columns<R> cols{field("sweep", &R::sweep),
                               field("constraint_spec", &R::constraint),
                               field("point_index", &R::point_index),
                               field("rationale", &R::rationale),
                               field("snippets_json", &R::snippets_json),
                               field("created_unix_ns", &R::created_unix_ns)};
  return cols;
}

const Columns<Owner>& owner_columns() {
  static const Columns<Owner> cols{field("host", &Owner::host), field("pid", &Owner::pid),
                                   field("pid_start", &Owner::start)};
  return cols;
}

}  // namespace offtune::profiler::detail
