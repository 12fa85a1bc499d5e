#include "offtune/gui/models.hpp"

#include <QBrush>
#include <QFont>
#include <QString>
#include <limits>
#include <set>

#include "offtune/profiler/export.hpp"
#include "offtune/profiler/units.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

QString size_text(int64_t bytes) { return bytes > 0 ? qs(pf::format_size(bytes)) : QString(); }

QString point_name(const pf::PointRecord& p) {
  if (!p.config.offload) return QStringLiteral("#%1 baseline (no offload)").arg(p.index);
  QString name = QStringLiteral("#%1 min %2, stash %3")
                     .arg(p.index)
                     .arg(qs(pf::format_size(p.config.min_offload_size)))
                     .arg(p.config.max_fwd_stash_size);
  if (p.config.semantics != "offtune") name += QStringLiteral(", %1").arg(qs(p.config.semantics));
  return name;
}

QString sweep_name(const pf::SweepRecord& s) {
  QString name = QStringLiteral("sweep %1").arg(s.id.value);
  if (!s.name.empty()) name += QStringLiteral(" \u2014 ") + qs(s.name);
  return name + QStringLiteral(" (%1, b%2 s%3)")
                    .arg(qs(s.workload.model))
                    .arg(s.workload.batch)
                    .arg(s.workload.seq);
}

// Internal ids of the tree's items: the kind in the top byte, then row numbers.
enum Kind : quintptr { kGroup = 1, kSweep = 2, kPoint = 3, kRun = 4 };
constexpr int kKindShift = 56;
constexpr int kRowShift = 28;
constexpr quintptr kRowMask = (quintptr{1} << kRowShift) - 1;
constexpr int kSweepsGroup = 0, kRunsGroup = 1;

quintptr make_id(Kind kind, quintptr a, quintptr b = 0) {
  return (static_cast<quintptr>(kind) << kKindShift) | (a << kRowShift) | b;
}
Kind kind_of(quintptr id) { return static_cast<Kind>(id >> kKindShift); }
int row_a(quintptr id) { return static_cast<int>((id >> kRowShift) & kRowMask); }
int row_b(quintptr id) { return static_cast<int>(id & kRowMask); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// StoreTreeModel

StoreTreeModel::StoreTreeModel(QObject* parent) : QAbstractItemModel(parent) {}

void StoreTreeModel::setIndex(StoreIndexPtr index) {
  beginResetModel();
  index_ = std::move(index);
  standalone_.clear();
  if (index_) {
    std::set<int64_t> in_sweeps;
    for (const auto& s : index_->sweeps) {
      for (const auto& p : s.points) {
        if (p.run.valid()) in_sweeps.insert(p.run.value);
      }
    }
    for (const auto& r : index_->runs) {
      if (!in_sweeps.contains(r.id.value)) standalone_.push_back(&r);
    }
  }
  endResetModel();
}

QModelIndex StoreTreeModel::index(int row, int column, const QModelIndex& parent) const {
  if (!hasIndex(row, column, parent)) return {};
  const auto r = static_cast<quintptr>(row);
  if (!parent.isValid()) return createIndex(row, column, make_id(kGroup, 0, r));
  const quintptr pid = parent.internalId();
  switch (kind_of(pid)) {
    case kGroup:
      return createIndex(row, column, make_id(row_b(pid) == kSweepsGroup ? kSweep : kRun, 0, r));
    case kSweep:
      return createIndex(row, column, make_id(kPoint, static_cast<quintptr>(row_b(pid)), r));
    default:
      return {};
  }
}

QModelIndex StoreTreeModel::parent(const QModelIndex& child) const {
  if (!child.isValid()) return {};
  const quintptr id = child.internalId();
  switch (kind_of(id)) {
    case kSweep:
      return createIndex(kSweepsGroup, 0, make_id(kGroup, 0, kSweepsGroup));
    case kRun:
      return createIndex(kRunsGroup, 0, make_id(kGroup, 0, kRunsGroup));
    case kPoint:
      return createIndex(row_a(id), 0, make_id(kSweep, 0, static_cast<quintptr>(row_a(id))));
    default:
      return {};
  }
}

int StoreTreeModel::rowCount(const QModelIndex& parent) const {
  if (!parent.isValid()) return index_ ? 2 : 0;
  if (parent.column() != 0) return 0;
  const quintptr id = parent.internalId();
  switch (kind_of(id)) {
    case kGroup:
      return row_b(id) == kSweepsGroup ? static_cast<int>(index_->sweeps.size())
                                       : static_cast<int>(standalone_.size());
    case kSweep:
      return static_cast<int>(index_->sweeps[static_cast<size_t>(row_b(id))].points.size());
    default:
      return 0;
  }
}

int StoreTreeModel::columnCount(const QModelIndex&) const { return ColumnCount; }

QVariant StoreTreeModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Name:
      return QStringLiteral("Item");
    case Status:
      return QStringLiteral("Status");
    case StepTime:
      return QStringLiteral("Step");
    case Peak:
      return QStringLiteral("Peak");
    default:
      return {};
  }
}

QVariant StoreTreeModel::data(const QModelIndex& idx, int role) const {
  if (!checkIndex(idx, CheckIndexOption::IndexIsValid) || !index_) return {};
  const quintptr id = idx.internalId();
  const int col = idx.column();
  switch (kind_of(id)) {
    case kGroup: {
      const bool sweeps = row_b(id) == kSweepsGroup;
      if (role == Qt::DisplayRole && col == Name) {
        return sweeps ? QStringLiteral("Sweeps (%1)").arg(index_->sweeps.size())
                      : QStringLiteral("Runs (%1)").arg(standalone_.size());
      }
      if (role == Qt::FontRole) {
        QFont f;
        f.setBold(true);
        return f;
      }
      return {};
    }
    case kSweep: {
      const auto& s = index_->sweeps[static_cast<size_t>(row_b(id))];
      if (role == SweepIdRole) return QVariant::fromValue<qint64>(s.sweep.id.value);
      if (role == Qt::DisplayRole && col == Name) return sweep_name(s.sweep);
      if (role == Qt::DisplayRole && col == Status) {
        int64_t done = 0;
        for (const auto& p : s.points) done += p.status != pf::PointStatus::Pending;
        return QStringLiteral("%1/%2 done").arg(done).arg(s.points.size());
      }
      if (role == Qt::ToolTipRole) return qs(s.sweep.grid);
      return {};
    }
    case kPoint: {
      const auto& s = index_->sweeps[static_cast<size_t>(row_a(id))];
      const auto& p = s.points[static_cast<size_t>(row_b(id))];
      if (role == SweepIdRole) return QVariant::fromValue<qint64>(s.sweep.id.value);
      if (role == PointIndexRole) return QVariant::fromValue<qint64>(p.index);
      if (role == RunIdRole) return QVariant::fromValue<qint64>(p.run.value);
      if (role == Qt::ToolTipRole && !p.error.empty()) return qs(p.error);
      if (role != Qt::DisplayRole) return {};
      const bool ok = p.status == pf::PointStatus::Ok;
      switch (col) {
        case Name:
          return point_name(p);
        case Status:
          return QString::fromLatin1(pf::to_string(p.status));
        case StepTime:
          return ok ? qs(format_metric(SweepMetric::StepTime, p.summary.step_ms_median))
                    : QString();
        case Peak:
          return ok ? size_text(p.summary.peak_allocated) : QString();
        default:
          return {};
      }
    }
    case kRun: {
      const auto& r = *standalone_[static_cast<size_t>(row_b(id))];
      if (role == RunIdRole) return QVariant::fromValue<qint64>(r.id.value);
      if (role == Qt::ToolTipRole && !r.error.empty()) return qs(r.error);
      if (role != Qt::DisplayRole) return {};
      const bool ok = r.status == pf::RunStatus::Ok;
      switch (col) {
        case Name:
          return qs(pf::run_title(r));
        case Status:
          return QString::fromLatin1(pf::to_string(r.status));
        case StepTime:
          return ok ? qs(format_metric(SweepMetric::StepTime, r.summary.step_ms_median))
                    : QString();
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
  for (size_t i = 0; i < index_->sweeps.size(); ++i) {
    if (index_->sweeps[i].sweep.id == id) return index(static_cast<int>(i), 0, group);
  }
  return {};
}

QModelIndex StoreTreeModel::runIndex(pf::RunId id) const {
  if (!index_) return {};
  for (size_t i = 0; i < standalone_.size(); ++i) {
    if (standalone_[i]->id == id) return index(static_cast<int>(i), 0, index(kRunsGroup, 0));
  }
  const QModelIndex group = index(kSweepsGroup, 0);
  for (size_t s = 0; s < index_->sweeps.size(); ++s) {
    const auto& points = index_->sweeps[s].points;
    for (size_t p = 0; p < points.size(); ++p) {
      if (points[p].run == id) {
        return index(static_cast<int>(p), 0, index(static_cast<int>(s), 0, group));
      }
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// PointsTableModel

PointsTableModel::PointsTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void PointsTableModel::setSweep(SweepDataPtr sweep,
                                std::optional<std::vector<pf::PointRecord>> subset,
                                int64_t highlight) {
  beginResetModel();
  sweep_ = std::move(sweep);
  rows_.clear();
  if (subset) {
    rows_ = std::move(*subset);
  } else if (sweep_) {
    rows_ = sweep_->points;
  }
  highlight_ = highlight;
  endResetModel();
}

const pf::PointRecord* PointsTableModel::point(int row) const {
  return row >= 0 && static_cast<size_t>(row) < rows_.size() ? &rows_[static_cast<size_t>(row)]
                                                             : nullptr;
}

int PointsTableModel::rowOfPoint(int64_t point_index) const {
  for (size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].index == point_index) return static_cast<int>(i);
  }
  return -1;
}

int PointsTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int PointsTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant PointsTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Index:
      return QStringLiteral("#");
    case Status:
      return QStringLiteral("Status");
    case MinOffloadSize:
      return QStringLiteral("min_offload_size");
    case MaxFwdStashSize:
      return QStringLiteral("max_fwd_stash_size");
    case StepTime:
      return QStringLiteral("Step (median)");
    case Slowdown:
      return QStringLiteral("Slowdown");
    case Peak:
      return QStringLiteral("Peak device");
    case HiddenCopy:
      return QStringLiteral("Hidden copy");
    case Error:
      return QStringLiteral("Error");
    default:
      return {};
  }
}

QVariant PointsTableModel::data(const QModelIndex& idx, int role) const {
  if (!checkIndex(idx, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const auto& p = rows_[static_cast<size_t>(idx.row())];
  if (role == PointIndexRole) return QVariant::fromValue<qint64>(p.index);
  if (role == RunIdRole) return QVariant::fromValue<qint64>(p.run.value);
  if (role == Qt::FontRole && p.index == highlight_) {
    QFont f;
    f.setBold(true);
    return f;
  }
  if (role == Qt::ForegroundRole &&
      (p.status == pf::PointStatus::Failed || p.status == pf::PointStatus::OutOfMemory)) {
    return QBrush(QColor(0xb0, 0x20, 0x20));
  }
  if (role == Qt::TextAlignmentRole && idx.column() != Status && idx.column() != Error) {
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  }
  const auto metric = [&](SweepMetric m) -> std::optional<double> {
    return sweep_ ? metric_value(*sweep_, p, m) : std::nullopt;
  };
  const auto column_metric = [&]() -> std::optional<SweepMetric> {
    switch (idx.column()) {
      case StepTime:
        return SweepMetric::StepTime;
      case Slowdown:
        return SweepMetric::Slowdown;
      case Peak:
        return SweepMetric::PeakMemory;
      case HiddenCopy:
        return SweepMetric::HiddenCopy;
      default:
        return std::nullopt;
    }
  }();
  if (role == SortRole) {
    switch (idx.column()) {
      case Index:
        return QVariant::fromValue<qint64>(p.index);
      case Status:
        return QString::fromLatin1(pf::to_string(p.status));
      case MinOffloadSize:
        return QVariant::fromValue<qint64>(p.config.offload ? p.config.min_offload_size : -1);
      case MaxFwdStashSize:
        return QVariant::fromValue<qint64>(p.config.offload ? p.config.max_fwd_stash_size : -1);
      case Error:
        return qs(p.error);
      default: {
        // Points without the figure sort after every measured one.
        const auto v = metric(*column_metric);
        return v ? *v : std::numeric_limits<double>::infinity();
      }
    }
  }
  if (role == Qt::ToolTipRole && idx.column() == Error && !p.error.empty()) return qs(p.error);
  if (role != Qt::DisplayRole) return {};
  switch (idx.column()) {
    case Index:
      return QVariant::fromValue<qint64>(p.index);
    case Status:
      return QString::fromLatin1(pf::to_string(p.status));
    case MinOffloadSize:
      return p.config.offload ? qs(pf::format_size(p.config.min_offload_size))
                              : QStringLiteral("baseline");
    case MaxFwdStashSize:
      return p.config.offload ? QString::number(p.config.max_fwd_stash_size) : QString();
    case Error:
      return qs(p.error);
    default: {
      const auto v = metric(*column_metric);
      if (v) return qs(format_metric(*column_metric, *v));
      // Measured, but nothing was copied: no overlap to speak of.
      if (*column_metric == SweepMetric::HiddenCopy && p.status == pf::PointStatus::Ok) {
        return QStringLiteral("n/a");
      }
      return QString();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// RunSummaryModel

RunSummaryModel::RunSummaryModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunSummaryModel::setRun(RunDataPtr run) {
  beginResetModel();
  rows_.clear();
  if (run) {
    const auto& r = run->run;
    const auto& s = r.summary;
    const auto ms = [](double v) { return QString::number(v, 'f', 3) + QStringLiteral(" ms"); };
    const auto size = [](int64_t b) { return qs(pf::format_size(b)); };
    // Hidden-copy shares of a run that copied nothing are not applicable, not 0 % (the worst).
    const bool copied = s.offloaded_bytes > 0 || s.reloaded_bytes > 0;
    const auto pct = [copied](double v) {
      return copied ? QString::number(v, 'f', 1) + QStringLiteral(" %") : QStringLiteral("n/a");
    };
    rows_ = {
        {QStringLiteral("run"), QString::number(r.id.value)},
        {QStringLiteral("status"), QString::fromLatin1(pf::to_string(r.status))},
        {QStringLiteral("model"), QStringLiteral("%1, batch %2, seq %3, %4")
                                      .arg(qs(r.workload.model))
                                      .arg(r.workload.batch)
                                      .arg(r.workload.seq)
                                      .arg(qs(r.workload.dtype))},
        {QStringLiteral("settings"), qs(pf::describe_config(r.config))},
        {QStringLiteral("backend"), qs(r.env.backend + " \u2014 " + r.env.device)},
        {QStringLiteral("measured steps"), QString::number(run->steps.size())},
        {QStringLiteral("step time (median)"), ms(s.step_ms_median)},
        {QStringLiteral("step time (min \u2013 max)"),
         ms(s.step_ms_min) + QStringLiteral(" \u2013 ") + ms(s.step_ms_max)},
        {QStringLiteral("step time (std dev)"), ms(s.step_ms_stddev)},
        {QStringLiteral("peak device allocated"), size(s.peak_allocated)},
        {QStringLiteral("peak device reserved"), size(s.peak_reserved)},
        {QStringLiteral("offloaded per step"), size(s.offloaded_bytes)},
        {QStringLiteral("reloaded per step"), size(s.reloaded_bytes)},
        {QStringLiteral("host copies (peak)"), size(s.host_bytes_peak)},
        {QStringLiteral("pinned pool"), size(s.pinned_bytes)},
        {QStringLiteral("hidden copy (all)"), pct(s.hidden_copy_pct)},
        {QStringLiteral("hidden copy D2H / H2D"),
         pct(s.hidden_d2h_pct) + QStringLiteral(" / ") + pct(s.hidden_h2d_pct)},
        {QStringLiteral("exposed copy per step"),
         QString::number(static_cast<double>(s.exposed_copy_ns) / 1e6, 'f', 3) +
             QStringLiteral(" ms")},
        {QStringLiteral("pageable copies per step"), QString::number(s.pageable_copies)},
        {QStringLiteral("final loss"), QString::number(s.final_loss, 'g', 6)},
        {QStringLiteral("timeline events"), QString::number(run->events.size())},
    };
    if (!r.error.empty()) rows_.emplace_back(QStringLiteral("error"), qs(r.error));
  }
  endResetModel();
}

int RunSummaryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int RunSummaryModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : 2;
}

QVariant RunSummaryModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  return section == 0 ? QStringLiteral("Figure") : QStringLiteral("Value");
}

QVariant RunSummaryModel::data(const QModelIndex& idx, int role) const {
  if (!checkIndex(idx, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  if (role != Qt::DisplayRole && role != Qt::ToolTipRole) return {};
  const auto& row = rows_[static_cast<size_t>(idx.row())];
  return idx.column() == 0 ? row.first : row.second;
}

}  // namespace offtune::gui
