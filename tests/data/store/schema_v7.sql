index events_run_start:
CREATE INDEX events_run_start ON events (run, start_ns)
 | index occupancy_run_time:
CREATE INDEX occupancy_run_time ON occupancy (run, time_ns)
 | index points_run:
CREATE INDEX points_run ON points (run)
 | index recommendations_sweep:
CREATE INDEX recommendations_sweep ON recommendations (sweep)
 | index runs_job:
CREATE INDEX runs_job ON runs (job_run)
 | index sqlite_autoindex_claims_1:

 | index sqlite_autoindex_points_1:

 | index sqlite_autoindex_predictions_1:

 | index sqlite_autoindex_steps_1:

 | index sqlite_autoindex_sweeps_1:

 | table claims:
CREATE TABLE claims (
  sweep           INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  point_index     INTEGER NOT NULL,
  host            TEXT    NOT NULL,
  pid             INTEGER NOT NULL,
  pid_start       INTEGER NOT NULL,
  claimed_unix_ns INTEGER NOT NULL,
  PRIMARY KEY (sweep, point_index)
)
 | table events:
CREATE TABLE events (
  id       INTEGER PRIMARY KEY,
  run      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  kind     TEXT    NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns   INTEGER NOT NULL,
  stream   INTEGER NOT NULL,
  bytes    INTEGER NOT NULL,
  tensor   INTEGER NOT NULL,
  pinned   INTEGER NOT NULL,
  prefetch INTEGER NOT NULL,
  name     TEXT    NOT NULL
)
 | table meta:
CREATE TABLE meta (
  key   TEXT NOT NULL PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID
 | table occupancy:
CREATE TABLE occupancy (
  id           INTEGER PRIMARY KEY,
  run          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  time_ns      INTEGER NOT NULL,
  fwd_count    INTEGER NOT NULL,
  fwd_bytes    INTEGER NOT NULL,
  bwd_count    INTEGER NOT NULL,
  bwd_bytes    INTEGER NOT NULL,
  device_bytes INTEGER NOT NULL
)
 | table points:
CREATE TABLE points (
  id                  INTEGER PRIMARY KEY,
  sweep               INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  point_index         INTEGER NOT NULL,
  offload             INTEGER NOT NULL,
  min_offload_size    INTEGER NOT NULL,
  max_fwd_stash_size  INTEGER NOT NULL,
  max_fwd_stash_bytes INTEGER NOT NULL,
  prefetch            INTEGER NOT NULL,
  use_streams         INTEGER NOT NULL,
  use_pin_memory      INTEGER NOT NULL,
  link                TEXT    NOT NULL,
  status              TEXT    NOT NULL,
  error               TEXT    NOT NULL,
  run                 INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  step_ms_median      REAL,
  step_ms_min         REAL,
  step_ms_max         REAL,
  step_ms_stddev      REAL,
  peak_allocated      INTEGER NOT NULL,
  peak_reserved       INTEGER NOT NULL,
  host_bytes_peak     INTEGER NOT NULL,
  pinned_bytes        INTEGER NOT NULL,
  offloaded_bytes     INTEGER NOT NULL,
  reloaded_bytes      INTEGER NOT NULL,
  hidden_copy_pct     REAL,
  hidden_d2h_pct      REAL,
  hidden_h2d_pct      REAL,
  exposed_copy_ns     INTEGER NOT NULL,
  pageable_copies     INTEGER NOT NULL,
  final_loss          REAL, step_ms_ci_low REAL, step_ms_ci_high REAL, step_ms_ci_level REAL, semantics TEXT NOT NULL DEFAULT 'offtune', checkpoint TEXT NOT NULL DEFAULT 'none', offload_set TEXT NOT NULL DEFAULT 'all', tier TEXT NOT NULL DEFAULT 'host', layer_offload TEXT NOT NULL DEFAULT 'off', verify INTEGER NOT NULL DEFAULT 0,
  UNIQUE (sweep, point_index)
)
 | table predictions:
CREATE TABLE predictions (
  sweep           INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  point_index     INTEGER NOT NULL,
  step_ns         INTEGER NOT NULL,
  peak_allocated  INTEGER NOT NULL,
  hidden_copy_pct REAL    NOT NULL,
  offloaded_bytes INTEGER NOT NULL,
  predictor       TEXT    NOT NULL,
  created_unix_ns INTEGER NOT NULL,
  PRIMARY KEY (sweep, point_index)
)
 | table recommendations:
CREATE TABLE recommendations (
  id              INTEGER PRIMARY KEY,
  sweep           INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  constraint_spec TEXT    NOT NULL,
  point_index     INTEGER NOT NULL,
  rationale       TEXT    NOT NULL,
  snippets_json   TEXT    NOT NULL,
  created_unix_ns INTEGER NOT NULL
)
 | table run_owners:
CREATE TABLE run_owners (
  run       INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  host      TEXT    NOT NULL,
  pid       INTEGER NOT NULL,
  pid_start INTEGER NOT NULL
)
 | table runs:
CREATE TABLE runs (
  id                  INTEGER PRIMARY KEY,
  status              TEXT    NOT NULL,
  error               TEXT    NOT NULL,
  label               TEXT    NOT NULL,
  env_offtune_version TEXT    NOT NULL,
  env_torch_version   TEXT    NOT NULL,
  env_backend         TEXT    NOT NULL,
  env_device          TEXT    NOT NULL,
  env_git_revision    TEXT    NOT NULL,
  env_host            TEXT    NOT NULL,
  model               TEXT    NOT NULL,
  batch               INTEGER NOT NULL,
  seq                 INTEGER NOT NULL,
  dtype               TEXT    NOT NULL,
  seed                INTEGER NOT NULL,
  steps               INTEGER NOT NULL,
  warmup              INTEGER NOT NULL,
  optimizer           INTEGER NOT NULL,
  offload             INTEGER NOT NULL,
  min_offload_size    INTEGER NOT NULL,
  max_fwd_stash_size  INTEGER NOT NULL,
  max_fwd_stash_bytes INTEGER NOT NULL,
  prefetch            INTEGER NOT NULL,
  use_streams         INTEGER NOT NULL,
  use_pin_memory      INTEGER NOT NULL,
  link                TEXT    NOT NULL,
  started_unix_ns     INTEGER NOT NULL,
  finished_unix_ns    INTEGER NOT NULL,
  step_ms_median      REAL,
  step_ms_min         REAL,
  step_ms_max         REAL,
  step_ms_stddev      REAL,
  peak_allocated      INTEGER NOT NULL,
  peak_reserved       INTEGER NOT NULL,
  host_bytes_peak     INTEGER NOT NULL,
  pinned_bytes        INTEGER NOT NULL,
  offloaded_bytes     INTEGER NOT NULL,
  reloaded_bytes      INTEGER NOT NULL,
  hidden_copy_pct     REAL,
  hidden_d2h_pct      REAL,
  hidden_h2d_pct      REAL,
  exposed_copy_ns     INTEGER NOT NULL,
  pageable_copies     INTEGER NOT NULL,
  final_loss          REAL
, step_ms_ci_low REAL, step_ms_ci_high REAL, step_ms_ci_level REAL, semantics TEXT NOT NULL DEFAULT 'offtune', checkpoint TEXT NOT NULL DEFAULT 'none', offload_set TEXT NOT NULL DEFAULT 'all', tier TEXT NOT NULL DEFAULT 'host', layer_offload TEXT NOT NULL DEFAULT 'off', lora_rank INTEGER NOT NULL DEFAULT 0, verify INTEGER NOT NULL DEFAULT 0, rank INTEGER NOT NULL DEFAULT 0, world_size INTEGER NOT NULL DEFAULT 1, job_run INTEGER)
 | table steps:
CREATE TABLE steps (
  run             INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step            INTEGER NOT NULL,
  begin_ns        INTEGER NOT NULL,
  end_ns          INTEGER NOT NULL,
  peak_allocated  INTEGER NOT NULL,
  peak_reserved   INTEGER NOT NULL,
  offloaded_bytes INTEGER NOT NULL,
  reloaded_bytes  INTEGER NOT NULL,
  hidden_copy_pct REAL,
  exposed_copy_ns INTEGER NOT NULL,
  loss            REAL,
  PRIMARY KEY (run, step)
)
 | table sweeps:
CREATE TABLE sweeps (
  id              INTEGER PRIMARY KEY,
  name            TEXT    NOT NULL,
  key             TEXT    NOT NULL UNIQUE,
  model           TEXT    NOT NULL,
  batch           INTEGER NOT NULL,
  seq             INTEGER NOT NULL,
  dtype           TEXT    NOT NULL,
  seed            INTEGER NOT NULL,
  steps           INTEGER NOT NULL,
  warmup          INTEGER NOT NULL,
  optimizer       INTEGER NOT NULL,
  grid            TEXT    NOT NULL,
  created_unix_ns INTEGER NOT NULL
, lora_rank INTEGER NOT NULL DEFAULT 0)
