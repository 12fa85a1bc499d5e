// The store's tree (store_tree_model.hpp), merged incrementally from newer indexes.
#include "offtune/gui/store_tree_model.hpp"

#include <QFont>
#include <QString>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>

#include "offtune/gui/predicted.hpp"
#include "offtune/profiler/export.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/profiler/units.hpp"
#include "text_util.hpp"
namespace offtune::gui {

namespace pf = offtune::profiler;
using detail::qs;

namespace {

QString size_text(int64_t bytes) { return bytes > 0 ? qs(pf::format_size(bytes)) : QString(); }

// A median step time in the tree; empty for what was not measured ok.
QString step_text(bool ok, double ms, int decimals = 0) {
  return ok ? qs(format_metric(SweepMetric::StepTime, ms, decimals)) : QString();
}

// "#5 min 64 KiB, stash 1", then what else tells it apart in its sweep (`variants`, the Variant
// column's text: "trl semantics", "prefetch 2, link pcie5"), so that points of a prefetch, link,
// streams or semantics sweep are not named alike.
QString point_name(const pf::PointRecord& p, const std::map<int64_t, std::string>& variants) {
  const std::string variant = pf::describe_variant(p.config);
  if (is_baseline(p.config)) return QStringLiteral("#%1 baseline (no offload)").arg(p.index);
  if (!p.config.offload) {
    return QStringLiteral("#%1 %2 (no offload)").arg(p.index).arg(qs(variant));
  }
  QString name = QStringLiteral("#%1 min %2, stash %3")
                     .arg(p.index)
                     .arg(qs(pf::format_size(p.config.min_offload_size)))
                     .arg(p.config.max_fwd_stash_size);
  if (const auto it = variants.find(p.index); it != variants.end() && !it->second.empty()) {
    return name + QStringLiteral(", %1").arg(qs(it->second));
  }
  if (p.config.semantics != Semantics::Offtune) {
    name += QStringLiteral(", %1").arg(qs(std::string(to_string(p.config.semantics))));
  }
  if (!variant.empty()) name += QStringLiteral(", %1").arg(qs(variant));
  return name;
}

QString sweep_name(const pf::SweepRecord& s) {
  QString name = QStringLiteral("sweep %1").arg(s.id.value);
  // "sweep" is the default name (offtune sweep --name): saying it again adds only width.
  if (!s.name.empty() && s.name != "sweep") name += QStringLiteral(" \u2014 ") + qs(s.name);
  // A script sweep's workload is the user's script (profiler/script_point.hpp): no batch or length.
  if (s.workload.model == "script") return name + QStringLiteral(" (script)");
  return name + QStringLiteral(" (%1, b%2 s%3)")
                    .arg(qs(s.workload.model))
                    .arg(s.workload.batch)
                    .arg(s.workload.seq);
}

// Internal ids of the tree's items: the kind in the top byte and, for a point, its sweep's row.
// An item's own row is QModelIndex::row(), not part of the id, so that inserting a point before
// others leaves the ids of persistent indexes (a view's selection and expansion) valid.
// A point's other run has its sweep's row and its point's index (stable while points are inserted
// before it, as the row is not) in the id, and its own row as the row.
enum Kind : quintptr { kGroup = 1, kSweep = 2, kPoint = 3, kRun = 4, kPointRun = 5 };
constexpr int kKindShift = 56;
constexpr int kRowShift = 28;
constexpr quintptr kRowMask = (quintptr{1} << kRowShift) - 1;
constexpr int kSweepsGroup = 0, kRunsGroup = 1;

quintptr make_id(Kind kind, quintptr a = 0) {
  return (static_cast<quintptr>(kind) << kKindShift) | (a << kRowShift);
}
Kind kind_of(quintptr id) { return static_cast<Kind>(id >> kKindShift); }
int row_a(quintptr id) { return static_cast<int>((id >> kRowShift) & kRowMask); }
int64_t low_b(quintptr id) { return static_cast<int64_t>(id & kRowMask); }

// A sweep's grid as a user reads it: each knob it varies and its values ("min_offload_size 1 KiB,
// 64 KiB; max_fwd_stash_size 1, 4"), from the JSON profiler::grid_json writes; the JSON is for
// programs. The axes in the dashboard's order (heatmap_axis_order: the two thresholds first).
// Empty when the text is not such a grid.
QString grid_text(const std::string& text) {
  pf::Grid grid;
  try {
    grid = pf::parse_grid_json(text);
  } catch (const std::invalid_argument&) {
    return {};
  }
  QStringList knobs;
  for (HeatmapAxis axis : heatmap_axis_order()) {
    const auto it = grid.axes.find(axis->key);
    if (it == grid.axes.end()) continue;
    QStringList values;
    for (const KnobValue& v : it->second) values << qs(value_text(*axis, v));
    knobs << QStringLiteral("%1 %2").arg(qs(axis_name(axis)), values.join(QStringLiteral(", ")));
  }
  return knobs.join(QStringLiteral("; "));
}

bool same_workload(const pf::Workload& a, const pf::Workload& b) {
  return a.model == b.model && a.batch == b.batch && a.seq == b.seq && a.dtype == b.dtype &&
         a.seed == b.seed;
}

bool same_point(const pf::PointRecord& a, const pf::PointRecord& b) {
  return a.status == b.status && a.run == b.run && a.error == b.error &&
         a.summary.step_ms_median == b.summary.step_ms_median &&
         a.summary.step_ms_ci_low == b.summary.step_ms_ci_low &&
         a.summary.step_ms_ci_high == b.summary.step_ms_ci_high &&
         a.summary.peak_allocated == b.summary.peak_allocated && a.config == b.config;
}

// Sorted merge of `next` into `cur` (both ascending by key): rows only in cur are removed, rows
// only in next inserted, rows in both replaced when they differ, each through the callbacks that
// tell the views.
template <typename T, typename Key, typename Remove, typename Insert, typename Change>
void merge_sorted(std::vector<T>& cur, std::vector<T> next, Key key, Remove on_remove,
                  Insert on_insert, Change on_change) {
  size_t i = 0;
  for (auto& item : next) {
    while (i < cur.size() && key(cur[i]) < key(item)) on_remove(static_cast<int>(i));  // erases
    if (i < cur.size() && key(cur[i]) == key(item)) {
      on_change(static_cast<int>(i), std::move(item));
    } else {
      on_insert(static_cast<int>(i), std::move(item));
    }
    ++i;
  }
  while (i < cur.size()) on_remove(static_cast<int>(i));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// StoreTreeModel

namespace {

// Splits the index into sweeps (with the runs measuring their pending points) and standalone runs.
void split_index(const StoreIndex& index, std::vector<pf::RunRecord>* standalone,
                 std::vector<std::vector<std::pair<int64_t, pf::RunRecord>>>* live,
                 std::vector<std::map<int64_t, std::vector<pf::RunRecord>>>* others) {
  std::set<int64_t> in_sweeps;
  for (const auto& s : index.sweeps) {
    for (const auto& p : s.points) {
      if (p.run.valid()) in_sweeps.insert(p.run.value);
    }
  }
  live->assign(index.sweeps.size(), {});
  others->assign(index.sweeps.size(), {});
  for (const auto& r : index.runs) {
    if (in_sweeps.contains(r.id.value)) continue;
    // A run not (yet) linked to a point: the sweep runner labels the run of a point
    // "<sweep name> point <index>" and stores the point as pending while it measures.
    bool placed = false;
    if (r.status == pf::RunStatus::Running || r.status == pf::RunStatus::Interrupted) {
      for (size_t si = 0; si < index.sweeps.size() && !placed; ++si) {
        const auto& s = index.sweeps[si];
        if (!same_workload(s.sweep.workload, r.workload)) continue;
        for (const auto& p : s.points) {
          if (p.status == pf::PointStatus::Pending && p.config == r.config &&
              r.label == s.sweep.name + " point " + std::to_string(p.index)) {
            (*live)[si].emplace_back(p.index, r);
            placed = true;
            break;
          }
        }
      }
    }
    if (placed) continue;
    // The other runs of a sweep's point (a later round of --repeat, a re-measured finalist),
    // labelled "<sweep name> point <index> (...)", and the first run of a point measured again
    // with more steps (labelled as the point; the point's run is the new one): they go under
    // their point, as `offtune report` labels them. "Runs" is for runs outside any sweep.
    bool extra = false;
    for (size_t si = 0; si < index.sweeps.size() && !extra; ++si) {
      const auto& s = index.sweeps[si];
      if (!same_workload(s.sweep.workload, r.workload)) continue;
      for (const auto& p : s.points) {
        const std::string name = s.sweep.name + " point " + std::to_string(p.index);
        if (p.config == r.config && (r.label == name || r.label.rfind(name + " (", 0) == 0)) {
          (*others)[si][p.index].push_back(r);
          extra = true;
          break;
        }
      }
    }
    if (!extra) standalone->push_back(r);
  }
}

}  // namespace

StoreTreeModel::StoreTreeModel(QObject* parent) : QAbstractItemModel(parent) {}

void StoreTreeModel::setIndex(StoreIndexPtr index) {
  std::vector<SweepItem> sweeps;
  std::vector<pf::RunRecord> standalone;
  if (index) {
    std::vector<std::vector<std::pair<int64_t, pf::RunRecord>>> live;
    std::vector<std::map<int64_t, std::vector<pf::RunRecord>>> others;
    split_index(*index, &standalone, &live, &others);
    for (size_t i = 0; i < index->sweeps.size(); ++i) {
      SweepItem item{index->sweeps[i], std::move(live[i]), {}, {}, std::move(others[i])};
      item.decimals = metric_decimals(item.data);
      item.variants = variant_texts(item.data);
      sweeps.push_back(std::move(item));
    }
  }
  // The same store, grown: merge, so that views keep their state. Sweeps are only ever added (by
  // id, at the end); anything else resets.
  bool mergeable =
      index_ && index && index_->path == index->path && sweeps.size() >= sweeps_.size();
  for (size_t i = 0; mergeable && i < sweeps_.size(); ++i) {
    mergeable = sweeps_[i].data.sweep.id == sweeps[i].data.sweep.id;
  }
  if (!mergeable) {
    beginResetModel();
    index_ = std::move(index);
    sweeps_ = std::move(sweeps);
    runs_ = std::move(standalone);
    endResetModel();
    return;
  }
  index_ = std::move(index);
  for (size_t i = 0; i < sweeps_.size(); ++i) mergeSweep(static_cast<int>(i), std::move(sweeps[i]));
  if (sweeps.size() > sweeps_.size()) {
    const QModelIndex group = this->index(kSweepsGroup, 0);
    beginInsertRows(group, static_cast<int>(sweeps_.size()), static_cast<int>(sweeps.size()) - 1);
    for (size_t i = sweeps_.size(); i < sweeps.size(); ++i) sweeps_.push_back(std::move(sweeps[i]));
    endInsertRows();
    Q_EMIT dataChanged(group, group);
  }
  mergeRuns(std::move(standalone));
}

void StoreTreeModel::mergeSweep(int row, SweepItem next) {
  SweepItem& cur = sweeps_[static_cast<size_t>(row)];
  const QModelIndex parent = index(row, 0, index(kSweepsGroup, 0));
  auto points = std::move(next.data.points);
  const bool decimals_changed = !(cur.decimals == next.decimals) || cur.variants != next.variants;
  cur.data.sweep = std::move(next.data.sweep);
  cur.data.grid = std::move(next.data.grid);
  cur.live = std::move(next.live);
  cur.decimals = next.decimals;
  cur.variants = std::move(next.variants);
  auto& rows = cur.data.points;
  merge_sorted(
      rows, std::move(points), [](const pf::PointRecord& p) { return p.index; },
      [&](int i) {
        beginRemoveRows(parent, i, i);
        cur.others.erase(rows[static_cast<size_t>(i)].index);  // its children go with it
        rows.erase(rows.begin() + i);
        endRemoveRows();
      },
      [&](int i, pf::PointRecord p) {
        beginInsertRows(parent, i, i);
        cur.others.erase(p.index);  // inserted childless; its runs follow below
        rows.insert(rows.begin() + i, std::move(p));
        endInsertRows();
      },
      [&](int i, pf::PointRecord p) {
        auto& at = rows[static_cast<size_t>(i)];
        const bool changed = !same_point(at, p);
        at = std::move(p);
        // A pending point's live run may have changed without the point.
        if (changed || decimals_changed || at.status == pf::PointStatus::Pending) {
          Q_EMIT dataChanged(index(i, 0, parent), index(i, ColumnCount - 1, parent));
        }
      });
  // Each point's other runs: replaced where they changed (they only ever grow, a few at a time).
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t p = rows[i].index;
    const auto found = next.others.find(p);
    std::vector<pf::RunRecord> now =
        found != next.others.end() ? std::move(found->second) : std::vector<pf::RunRecord>{};
    const auto had = cur.others.find(p);
    const size_t before = had != cur.others.end() ? had->second.size() : 0;
    const QModelIndex point = index(static_cast<int>(i), 0, parent);
    if (before == now.size()) {
      if (before == 0) continue;
      had->second = std::move(now);
      Q_EMIT dataChanged(index(0, 0, point),
                         index(static_cast<int>(before) - 1, ColumnCount - 1, point));
      continue;
    }
    if (before > 0) {
      beginRemoveRows(point, 0, static_cast<int>(before) - 1);
      cur.others.erase(had);
      endRemoveRows();
    }
    if (!now.empty()) {
      beginInsertRows(point, 0, static_cast<int>(now.size()) - 1);
      cur.others[p] = std::move(now);
      endInsertRows();
    }
  }
  Q_EMIT dataChanged(parent, parent.siblingAtColumn(ColumnCount - 1));
}

const std::vector<pf::RunRecord>* StoreTreeModel::otherRuns(const SweepItem& s,
                                                            int64_t point_index) const {
  const auto it = s.others.find(point_index);
  return it != s.others.end() && !it->second.empty() ? &it->second : nullptr;
}

void StoreTreeModel::mergeRuns(std::vector<pf::RunRecord> next) {
  const QModelIndex parent = index(kRunsGroup, 0);
  merge_sorted(
      runs_, std::move(next), [](const pf::RunRecord& r) { return r.id.value; },
      [&](int i) {
        beginRemoveRows(parent, i, i);
        runs_.erase(runs_.begin() + i);
        endRemoveRows();
      },
      [&](int i, pf::RunRecord r) {
        beginInsertRows(parent, i, i);
        runs_.insert(runs_.begin() + i, std::move(r));
        endInsertRows();
      },
      [&](int i, pf::RunRecord r) {
        auto& at = runs_[static_cast<size_t>(i)];
        const bool changed = at.status != r.status ||
                             at.summary.step_ms_median != r.summary.step_ms_median ||
                             at.summary.peak_allocated != r.summary.peak_allocated;
        at = std::move(r);
        if (changed) Q_EMIT dataChanged(index(i, 0, parent), index(i, ColumnCount - 1, parent));
      });
  Q_EMIT dataChanged(parent, parent);  // "Runs (n)"
}

void StoreTreeModel::applyPoint(const pf::PointRecord& point) {
  for (size_t s = 0; s < sweeps_.size(); ++s) {
    if (sweeps_[s].data.sweep.id == point.sweep) {
      setPoint(static_cast<int>(s), point);
      return;
    }
  }
}

void StoreTreeModel::setPoint(int sweep_row, const pf::PointRecord& point) {
  SweepItem& item = sweeps_[static_cast<size_t>(sweep_row)];
  const QModelIndex parent = index(sweep_row, 0, index(kSweepsGroup, 0));
  auto& rows = item.data.points;
  auto it = std::lower_bound(rows.begin(), rows.end(), point.index,
                             [](const pf::PointRecord& p, int64_t i) { return p.index < i; });
  const int row = static_cast<int>(it - rows.begin());
  if (point.status != pf::PointStatus::Pending) {
    std::erase_if(item.live, [&](const auto& l) { return l.first == point.index; });
  }
  if (it != rows.end() && it->index == point.index) {
    *it = point;
  } else {
    beginInsertRows(parent, row, row);
    rows.insert(it, point);
    endInsertRows();
  }
  const MetricDecimals before = item.decimals;
  item.decimals = metric_decimals(item.data);
  auto variants = variant_texts(item.data);
  const bool renamed = variants != item.variants;
  item.variants = std::move(variants);
  if ((!(before == item.decimals) || renamed) && !rows.empty()) {
    Q_EMIT dataChanged(index(0, 0, parent),
                       index(static_cast<int>(rows.size()) - 1, ColumnCount - 1, parent));
  } else {
    Q_EMIT dataChanged(index(row, 0, parent), index(row, ColumnCount - 1, parent));
  }
  Q_EMIT dataChanged(parent, parent.siblingAtColumn(ColumnCount - 1));
}

const pf::RunRecord* StoreTreeModel::liveRun(const SweepItem& s, int64_t point_index) const {
  for (const auto& [index, run] : s.live) {
    if (index == point_index) return &run;
  }
  return nullptr;
}

QModelIndex StoreTreeModel::index(int row, int column, const QModelIndex& parent) const {
  if (!hasIndex(row, column, parent)) return {};
  if (!parent.isValid()) return createIndex(row, column, make_id(kGroup));
  const quintptr pid = parent.internalId();
  switch (kind_of(pid)) {
    case kGroup:
      return createIndex(row, column, make_id(parent.row() == kSweepsGroup ? kSweep : kRun));
    case kSweep:
      return createIndex(row, column, make_id(kPoint, static_cast<quintptr>(parent.row())));
    case kPoint: {
      const int sweep_row = row_a(pid);
      const auto& p =
          sweeps_[static_cast<size_t>(sweep_row)].data.points[static_cast<size_t>(parent.row())];
      return createIndex(
          row, column,
          make_id(kPointRun, static_cast<quintptr>(sweep_row)) | static_cast<quintptr>(p.index));
    }
    default:
      return {};
  }
}

QModelIndex StoreTreeModel::parent(const QModelIndex& child) const {
  if (!child.isValid()) return {};
  const quintptr id = child.internalId();
  switch (kind_of(id)) {
    case kSweep:
      return createIndex(kSweepsGroup, 0, make_id(kGroup));
    case kRun:
      return createIndex(kRunsGroup, 0, make_id(kGroup));
    case kPoint:
      return createIndex(row_a(id), 0, make_id(kSweep));
    case kPointRun: {
      const auto& points = sweeps_[static_cast<size_t>(row_a(id))].data.points;
      const auto it =
          std::lower_bound(points.begin(), points.end(), low_b(id),
                           [](const pf::PointRecord& p, int64_t i) { return p.index < i; });
      return createIndex(static_cast<int>(it - points.begin()), 0,
                         make_id(kPoint, static_cast<quintptr>(row_a(id))));
    }
    default:
      return {};
  }
}

int StoreTreeModel::rowCount(const QModelIndex& parent) const {
  if (!parent.isValid()) return index_ ? 2 : 0;
  if (parent.column() != 0) return 0;
  switch (kind_of(parent.internalId())) {
    case kGroup:
      return parent.row() == kSweepsGroup ? static_cast<int>(sweeps_.size())
                                          : static_cast<int>(runs_.size());
    case kSweep:
      return static_cast<int>(sweeps_[static_cast<size_t>(parent.row())].data.points.size());
    case kPoint: {
      const auto& item = sweeps_[static_cast<size_t>(row_a(parent.internalId()))];
      const auto* others =
          otherRuns(item, item.data.points[static_cast<size_t>(parent.row())].index);
      return others != nullptr ? static_cast<int>(others->size()) : 0;
    }
    default:
      return 0;
  }
}

int StoreTreeModel::columnCount(const QModelIndex&) const { return ColumnCount; }

QVariant StoreTreeModel::headerData(int section, Qt::Orientation o, int role) const {
  static constexpr const char* kTitles[ColumnCount] = {"Item", "Status", "Step", "Peak"};  // Column
  if (o != Qt::Horizontal || role != Qt::DisplayRole || section < 0 || section >= ColumnCount) {
    return {};
  }
  return QString::fromLatin1(kTitles[section]);
}

QVariant StoreTreeModel::data(const QModelIndex& idx, int role) const {
  if (!checkIndex(idx, CheckIndexOption::IndexIsValid) || !index_) return {};
  const quintptr id = idx.internalId();
  const int col = idx.column();
  const auto row = static_cast<size_t>(idx.row());
  switch (kind_of(id)) {
    case kGroup: {
      const bool sweeps = idx.row() == kSweepsGroup;
      if (role == Qt::DisplayRole && col == Name) {
        return sweeps ? QStringLiteral("Sweeps (%1)").arg(sweeps_.size())
                      : QStringLiteral("Runs (%1)").arg(runs_.size());
      }
      if (role == Qt::ToolTipRole && !sweeps) {
        return QStringLiteral("runs that belong to no sweep (offtune run)");
      }
      if (role == Qt::FontRole) {
        QFont f;
        f.setBold(true);
        return f;
      }
      return {};
    }
    case kSweep: {
      const auto& s = sweeps_[row].data;
      if (role == SweepIdRole) return QVariant::fromValue<qint64>(s.sweep.id.value);
      if (role == Qt::DisplayRole && col == Name) return sweep_name(s.sweep);
      if (role == Qt::DisplayRole && col == Status) {
        // The count of describe_counts() without its word: the tree is narrow, and the tooltip
        // and the heading say what it counts.
        const SweepCounts c = sweep_counts(s);
        return QStringLiteral("%1/%2").arg(c.measured).arg(c.total);
      }
      if (role == Qt::ToolTipRole) {
        const SweepCounts c = sweep_counts(s);
        return QStringLiteral(
                   "%1<br/>%2 of %3 points measured: %4 ok, %5 failed, %6 out of memory"
                   "%7<br/>grid: %8")
            .arg(sweep_name(s.sweep).toHtmlEscaped())
            .arg(c.measured)
            .arg(c.total)
            .arg(c.ok)
            .arg(c.failed)
            .arg(c.oom)
            .arg(c.pending > 0 ? QStringLiteral("; %1 in progress").arg(c.pending) : QString())
            .arg(grid_text(s.sweep.grid).toHtmlEscaped());
      }
      return {};
    }
    case kPoint: {
      const auto& item = sweeps_[static_cast<size_t>(row_a(id))];
      const auto& s = item.data;
      const auto& p = s.points[row];
      const pf::RunRecord* live =
          p.status == pf::PointStatus::Pending ? liveRun(item, p.index) : nullptr;
      if (role == SweepIdRole) return QVariant::fromValue<qint64>(s.sweep.id.value);
      if (role == PointIndexRole) return QVariant::fromValue<qint64>(p.index);
      if (role == RunIdRole) {
        return QVariant::fromValue<qint64>(live != nullptr ? live->id.value : p.run.value);
      }
      if (role == Qt::ToolTipRole) {
        if (!p.error.empty()) return qs(p.error);
        if (col == Peak && p.status == pf::PointStatus::Ok) {
          return qs(format_bytes_exact(p.summary.peak_allocated));
        }
        if (col == StepTime && p.status == pf::PointStatus::Ok) {
          return qs(describe_spread(p.summary, item.decimals.step));
        }
        // The whole name, for a tree too narrow to show it (its Status column stays whole), and
        // the point's step time and peak (docs/gui.md).
        if (col == Name) {
          QString tip = point_name(p, item.variants);
          if (p.status == pf::PointStatus::Ok) {
            tip += QStringLiteral("\nstep %1 (median), peak allocated %2")
                       .arg(step_text(true, p.summary.step_ms_median, item.decimals.step))
                       .arg(qs(format_metric(SweepMetric::PeakAllocated,
                                             static_cast<double>(p.summary.peak_allocated),
                                             item.decimals.peak)));
            if (p.summary.peak_reserved > 0) {
              tip += QStringLiteral(", reserved %1")
                         .arg(qs(format_metric(SweepMetric::PeakReserved,
                                               static_cast<double>(p.summary.peak_reserved),
                                               item.decimals.reserved)));
            }
          }
          return tip;
        }
        return {};
      }
      if (role != Qt::DisplayRole) return {};
      const bool ok = p.status == pf::PointStatus::Ok;
      switch (col) {
        case Name:
          return point_name(p, item.variants);
        case Status:
          if (live != nullptr) {
            return live->status == pf::RunStatus::Running ? QStringLiteral("measuring")
                                                          : QStringLiteral("interrupted");
          }
          return QString::fromLatin1(pf::to_string(p.status));
        case StepTime:
          return step_text(ok, p.summary.step_ms_median, item.decimals.step);
        case Peak:
          return ok ? qs(format_metric(SweepMetric::PeakAllocated,
                                       static_cast<double>(p.summary.peak_allocated),
                                       item.decimals.peak))
                    : QString();
        default:
          return {};
      }
    }
    case kPointRun: {
      const auto& item = sweeps_[static_cast<size_t>(row_a(id))];
      const auto* others = otherRuns(item, low_b(id));
      if (others == nullptr || row >= others->size()) return {};
      const auto& r = (*others)[row];
      if (role == RunIdRole) return QVariant::fromValue<qint64>(r.id.value);
      if (role == Qt::ToolTipRole) return qs(r.error.empty() ? pf::run_title(r) : r.error);
      if (role != Qt::DisplayRole) return {};
      const bool ok = r.status == pf::RunStatus::Ok;
      switch (col) {
        case Name: {
          // What the label adds to the point's name: "(sweep 1, re-measured)", "(sweep 1, repeat
          // 2 of 3)"; a run labelled as the point itself measured it first.
          const std::string name = item.data.sweep.name + " point " + std::to_string(low_b(id));
          const std::string rest = r.label.size() > name.size() ? r.label.substr(name.size() + 1)
                                                                : std::string("(measured first)");
          return QStringLiteral("run %1 %2").arg(r.id.value).arg(qs(rest));
        }
        case Status:
          return QString::fromLatin1(pf::to_string(r.status));
        case StepTime:
          return step_text(ok, r.summary.step_ms_median, item.decimals.step);
        case Peak:
          return ok ? size_text(r.summary.peak_allocated) : QString();
        default:
          return {};
      }
    }
    case kRun: {
      const auto& r = runs_[row];
      if (role == RunIdRole) return QVariant::fromValue<qint64>(r.id.value);
      if (role == Qt::ToolTipRole) {
        if (!r.error.empty()) return qs(r.error);
        if (col == Peak && r.status == pf::RunStatus::Ok) {
          return qs(format_bytes_exact(r.summary.peak_allocated));
        }
        return qs(pf::run_title(r));
      }
      if (role != Qt::DisplayRole) return {};
      const bool ok = r.status == pf::RunStatus::Ok;
      switch (col) {
        case Name:
          return qs(pf::run_title(r));
        case Status:
          return QString::fromLatin1(pf::to_string(r.status));
        case StepTime:
          return step_text(ok, r.summary.step_ms_median);
        case Peak:
          return ok ? size_text(r.summary.peak_allocated) : QString();
        default:
          return {};
      }
    }
  }
  return {};
}

QModelIndex StoreTreeModel::sweepIndex(pf::SweepId id) const {
  if (!index_) return {};
  const QModelIndex group = index(kSweepsGroup, 0);
  for (size_t i = 0; i < sweeps_.size(); ++i) {
    if (sweeps_[i].data.sweep.id == id) return index(static_cast<int>(i), 0, group);
  }
  return {};
}

QModelIndex StoreTreeModel::runIndex(pf::RunId id) const {
  if (!index_) return {};
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (runs_[i].id == id) return index(static_cast<int>(i), 0, index(kRunsGroup, 0));
  }
  const QModelIndex group = index(kSweepsGroup, 0);
  for (size_t s = 0; s < sweeps_.size(); ++s) {
    const auto& points = sweeps_[s].data.points;
    for (size_t p = 0; p < points.size(); ++p) {
      const auto* live = points[p].status == pf::PointStatus::Pending
                             ? liveRun(sweeps_[s], points[p].index)
                             : nullptr;
      if (points[p].run == id || (live != nullptr && live->id == id)) {
        return index(static_cast<int>(p), 0, index(static_cast<int>(s), 0, group));
      }
    }
  }
  return {};
}

}  // namespace offtune::gui
