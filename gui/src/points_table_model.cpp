// A sweep's points as a table (points_table_model.hpp).
#include "offtune/gui/points_table_model.hpp"

#include <QBrush>
#include <QFont>
#include <QString>
#include <QStringList>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "offtune/gui/predicted.hpp"
#include "offtune/profiler/export.hpp"
#include "offtune/profiler/units.hpp"
#include "text_util.hpp"
namespace offtune::gui {

namespace pf = offtune::profiler;
using detail::qs;

// ---------------------------------------------------------------------------------------------
// PointsTableModel

PointsTableModel::PointsTableModel(QObject* parent) : QAbstractTableModel(parent) {}

int PointsTableModel::memoryColumn(SweepMetric m) {
  switch (m) {
    case SweepMetric::PeakAllocated:
      return PeakAllocated;
    case SweepMetric::PeakReserved:
      return PeakReserved;
    case SweepMetric::PeakTotal:
      return PeakTotal;
    case SweepMetric::HostHeld:
      return HostHeld;
    default:
      return -1;
  }
}

void PointsTableModel::setSweep(SweepDataPtr sweep,
                                std::optional<std::vector<pf::PointRecord>> subset,
                                int64_t highlight, std::vector<int64_t> ties) {
  beginResetModel();
  sweep_ = std::move(sweep);
  ties_ = std::move(ties);
  variant_texts_ = sweep_ ? variant_texts(*sweep_) : std::map<int64_t, std::string>{};
  decimals_ = sweep_ ? metric_decimals(*sweep_) : MetricDecimals{};
  exact_ = sweep_ && exact_times(*sweep_);
  rows_.clear();
  predicted_only_.clear();
  if (subset) {
    rows_ = std::move(*subset);
  } else if (sweep_) {
    // A predict-first sweep of 27 points that measured 8 still shows 27 rows: the other 19 are
    // what the user has of them, their predictions.
    std::vector<pf::PointRecord> all = sweep_->points;
    std::vector<bool> only(all.size(), false);
    for (auto& p : predicted_only_points(*sweep_)) {
      all.push_back(std::move(p));
      only.push_back(true);
    }
    std::vector<size_t> order(all.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return all[a].index < all[b].index; });
    for (size_t i : order) {
      rows_.push_back(std::move(all[i]));
      predicted_only_.push_back(only[i]);
    }
  }
  predicted_only_.resize(rows_.size(), false);
  highlight_ = highlight;
  endResetModel();
}

QString PointsTableModel::variantText(const pf::PointRecord& p) const {
  const auto it = variant_texts_.find(p.index);
  return qs(it != variant_texts_.end() ? it->second : pf::describe_variant(p.config));
}

const pf::PointRecord* PointsTableModel::point(int row) const {
  return row >= 0 && static_cast<size_t>(row) < rows_.size() ? &rows_[static_cast<size_t>(row)]
                                                             : nullptr;
}

bool PointsTableModel::isPredictedOnly(int row) const {
  return row >= 0 && static_cast<size_t>(row) < predicted_only_.size() &&
         predicted_only_[static_cast<size_t>(row)];
}

bool PointsTableModel::hasPredictions() const { return sweep_ && !sweep_->predictions.empty(); }

void PointsTableModel::setCompactHeaders(bool compact) {
  compact_ = compact;
  Q_EMIT headerDataChanged(Qt::Horizontal, 0, ColumnCount - 1);
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

namespace {

// A column's title, its title in compact headers (nullptr: the same) and its tooltip (nullptr:
// none), by column.
struct ColumnText {
  const char* title = nullptr;
  const char* compact = nullptr;
  const char* tip = nullptr;
};
constexpr auto kColumnTexts = [] {
  std::array<ColumnText, PointsTableModel::ColumnCount> t{};
  t[PointsTableModel::Index] = {"#", nullptr, nullptr};
  t[PointsTableModel::Status] = {"Status", nullptr, nullptr};
  t[PointsTableModel::Choice] = {
      "Recommended", nullptr,
      "the recommended point, and the points it cannot be told apart from: equal step time within "
      "noise (overlapping intervals) and equal peak within 1 %"};
  t[PointsTableModel::MinOffloadSize] = {"min_offload_size", "min size", "min_offload_size"};
  t[PointsTableModel::MaxFwdStashSize] = {"max_fwd_stash_size", "stash", "max_fwd_stash_size"};
  t[PointsTableModel::Variant] = {"Variant", nullptr, nullptr};
  t[PointsTableModel::StepTime] = {"Step (median)", "step", "median step time"};
  t[PointsTableModel::PredictedStep] = {"Predicted step", "pred. step",
                                        "step time the what-if predictor gave before measuring"};
  t[PointsTableModel::PredictionErr] = {
      "Prediction error", "pred. error",
      "how far the prediction was from the measurement: (predicted - measured) / measured, for "
      "step time and peak memory"};
  t[PointsTableModel::StepInterval] = {"Step interval", nullptr,
                                       "confidence interval of the median step time; exact "
                                       "(modelled) when a device model timed every step alike"};
  t[PointsTableModel::Slowdown] = {"Slowdown", nullptr, nullptr};
  t[PointsTableModel::PeakAllocated] = {
      "Peak allocated", "allocated",
      "peak allocated device memory: the bytes of live tensors at their peak (exact bytes in the "
      "cell's tooltip)"};
  t[PointsTableModel::PredictedPeak] = {
      "Predicted peak", "pred. peak",
      "peak allocated device memory the what-if predictor gave before measuring"};
  t[PointsTableModel::PeakReserved] = {
      "Peak reserved", "reserved",
      "peak reserved device memory: what the caching allocator held at most, cached blocks and "
      "fragmentation included; what torch runs out of"};
  t[PointsTableModel::PeakTotal] = {
      "Device total", "total",
      "peak device total: peak reserved plus what lies outside the allocator (the CUDA context "
      "and libraries); what the GPU runs out of"};
  t[PointsTableModel::HostHeld] = {
      "Host held", "host",
      "host memory the run held: the process's peak where measured, else offtune's pinned pool "
      "(or its host copies at their peak when more); the cell's tooltip has each figure"};
  t[PointsTableModel::HiddenCopy] = {"Hidden copy", nullptr, nullptr};
  t[PointsTableModel::Error] = {"Error", nullptr, nullptr};
  return t;
}();

}  // namespace

QVariant PointsTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
  const ColumnText& text = kColumnTexts[static_cast<size_t>(section)];
  if (role == Qt::ToolTipRole) return text.tip ? QString::fromUtf8(text.tip) : QVariant();
  if (role != Qt::DisplayRole) return {};
  return QString::fromUtf8(compact_ && text.compact ? text.compact : text.title);
}

QVariant PointsTableModel::data(const QModelIndex& idx, int role) const {
  if (!checkIndex(idx, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const auto& p = rows_[static_cast<size_t>(idx.row())];
  const bool predicted_only = isPredictedOnly(idx.row());
  if (role == PointIndexRole) return QVariant::fromValue<qint64>(p.index);
  if (role == RunIdRole) return QVariant::fromValue<qint64>(p.run.value);
  if (role == Qt::FontRole && p.index == highlight_) {
    QFont f;
    f.setBold(true);
    return f;
  }
  // Rows of points only predicted read as second-hand figures: italic and grey.
  if (role == Qt::FontRole && predicted_only) {
    QFont f;
    f.setItalic(true);
    return f;
  }
  if (role == Qt::ForegroundRole && predicted_only) return QBrush(QColor(0x6e, 0x6e, 0x6e));
  if (role == Qt::ForegroundRole &&
      (p.status == pf::PointStatus::Failed || p.status == pf::PointStatus::OutOfMemory)) {
    return QBrush(QColor(0xb0, 0x20, 0x20));
  }
  if (role == Qt::TextAlignmentRole && idx.column() != Status && idx.column() != Error &&
      idx.column() != Choice && idx.column() != Variant) {
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  }
  const bool tie = std::find(ties_.begin(), ties_.end(), p.index) != ties_.end();
  const bool ok = p.status == pf::PointStatus::Ok;
  if (idx.column() == Choice && (role == Qt::DisplayRole || role == SortRole)) {
    // Sorted: the recommended point first, then its ties, then the rest.
    if (role == SortRole) return p.index == highlight_ ? 0 : tie ? 1 : 2;
    if (p.index == highlight_) return QStringLiteral("recommended");
    if (!tie) return QString();
    return exact_ ? QStringLiteral("= tie (exact)") : QStringLiteral("\u2248 within noise");
  }
  if (idx.column() == StepInterval && (role == Qt::DisplayRole || role == SortRole)) {
    const StepSpread sp = step_spread(p.summary);
    if (role == SortRole) return ok ? sp.relative : std::numeric_limits<double>::infinity();
    return ok ? qs(describe_spread(p.summary, decimals_.step)) : QString();
  }
  if (role == Qt::ToolTipRole && ok) {
    if (const auto tip = memoryTooltip(idx.column(), p.summary); !tip.isEmpty()) return tip;
    if (idx.column() == StepTime) return qs(describe_spread(p.summary, decimals_.step));
    if (idx.column() == Choice && tie) {
      return exact_ ? QStringLiteral("exactly as good as the recommended point (modelled times)")
                    : QStringLiteral("as good as the recommended point within noise");
    }
  }
  if (idx.column() == PredictedStep || idx.column() == PredictedPeak ||
      idx.column() == PredictionErr || (idx.column() == Status && predicted_only)) {
    return predictionData(idx.column(), p, predicted_only, role);
  }
  const bool text_role = role == Qt::DisplayRole || role == SortRole;
  // The variant and the error: one text to show and to sort by, whole in the tooltip of a cell
  // that elides it.
  if (text_role || role == Qt::ToolTipRole) {
    if (idx.column() == Variant) return variantText(p);
    if (idx.column() == Error) {
      if (role != Qt::ToolTipRole) return qs(p.error);
      // Rich text, so that the tooltip wraps: a plain one is one line, cut at the screen's edge
      // for an error of a few hundred characters (issue 43 defect 12).
      return p.error.empty()
                 ? QVariant()
                 : QVariant(QStringLiteral("<qt>%1</qt>").arg(qs(p.error).toHtmlEscaped()));
    }
  }
  if (text_role && idx.column() == Index) return QVariant::fromValue<qint64>(p.index);
  if (text_role && idx.column() == Status) return QString::fromLatin1(pf::to_string(p.status));
  const auto metric = [&](SweepMetric m) -> std::optional<double> {
    return sweep_ ? metric_value(*sweep_, p, m) : std::nullopt;
  };
  const auto column_metric = [&]() -> std::optional<SweepMetric> {
    switch (idx.column()) {
      case StepTime:
        return SweepMetric::StepTime;
      case Slowdown:
        return SweepMetric::Slowdown;
      case HiddenCopy:
        return SweepMetric::HiddenCopy;
      default:
        // A memory column: the metric memoryColumn() places there.
        for (const SweepMetric m : kMemoryMetrics) {
          if (memoryColumn(m) == idx.column()) return m;
        }
        return std::nullopt;
    }
  }();
  if (role == SortRole) {
    switch (idx.column()) {
      case MinOffloadSize:
        return QVariant::fromValue<qint64>(p.config.offload ? p.config.min_offload_size : -1);
      case MaxFwdStashSize:
        return QVariant::fromValue<qint64>(p.config.offload ? p.config.max_fwd_stash_size : -1);
      default: {
        // Points without the figure sort after every measured one.
        const auto v = metric(*column_metric);
        return v ? *v : std::numeric_limits<double>::infinity();
      }
    }
  }
  if (role != Qt::DisplayRole) return {};
  switch (idx.column()) {
    case MinOffloadSize:
      if (p.config.offload) return qs(pf::format_size(p.config.min_offload_size));
      return is_baseline(p.config) ? QStringLiteral("baseline") : QStringLiteral("no offload");
    case MaxFwdStashSize:
      return p.config.offload ? QString::number(p.config.max_fwd_stash_size) : QString();
    default: {
      const auto v = metric(*column_metric);
      if (v) return qs(format_metric(*column_metric, *v, decimals_.of(*column_metric)));
      // Measured, but nothing was copied: no overlap to speak of; or a figure the store did not
      // record.
      if ((*column_metric == SweepMetric::HiddenCopy || is_memory_metric(*column_metric)) &&
          p.status == pf::PointStatus::Ok) {
        return QStringLiteral("n/a");
      }
      return QString();
    }
  }
}

QString PointsTableModel::memoryTooltip(int column, const pf::RunSummary& s) const {
  const auto size = [](int64_t bytes) { return qs(pf::format_size(bytes)); };
  switch (column) {
    case PeakAllocated:
      return qs(format_bytes_exact(s.peak_allocated));
    case PeakReserved: {
      QString tip = qs(format_bytes_exact(s.peak_reserved));
      if (s.peak_reserved > s.peak_allocated) {
        tip += QStringLiteral(
                   "\n%1 above peak allocated: blocks the caching allocator keeps "
                   "cached, split or held for another stream")
                   .arg(size(s.peak_reserved - s.peak_allocated));
      }
      return tip;
    }
    case PeakTotal:
      return QStringLiteral("%1\npeak reserved %2 + outside the allocator %3")
          .arg(qs(format_bytes_exact(pf::peak_device_total(s))))
          .arg(size(s.peak_reserved))
          .arg(s.device_outside > 0 ? size(s.device_outside) : QStringLiteral("0 (not known)"));
    case HostHeld: {
      QStringList lines;
      lines << QStringLiteral("pinned pool %1").arg(size(s.pinned_bytes))
            << QStringLiteral("host copies at their peak %1").arg(size(s.host_bytes_peak))
            << (s.host_rss_peak > 0
                    ? QStringLiteral("process host peak %1").arg(size(s.host_rss_peak))
                    : QStringLiteral("process host peak not measured (host-sim)"));
      return lines.join(QLatin1Char('\n'));
    }
    default:
      return {};
  }
}

QVariant PointsTableModel::predictionData(int column, const pf::PointRecord& p, bool predicted_only,
                                          int role) const {
  const pf::PointPrediction* q = sweep_ ? find_prediction(*sweep_, p.index) : nullptr;
  const auto err = q != nullptr ? prediction_error(*q, p) : std::nullopt;
  constexpr double kLast = std::numeric_limits<double>::infinity();  // sorts after every figure
  switch (column) {
    case Status:
      if (role == SortRole || role == Qt::DisplayRole) return QStringLiteral("predicted");
      if (role == Qt::ToolTipRole) {
        return QStringLiteral(
            "predicted, not measured: a predict-first sweep measures only the points that matter "
            "(the predicted front and its neighbours); run the sweep again without predict-first "
            "to measure the rest");
      }
      return {};
    case PredictedStep:
      if (role == SortRole) return q != nullptr ? q->step_ms() : kLast;
      if (q == nullptr) return {};
      if (role == Qt::DisplayRole) {
        return qs(format_metric(SweepMetric::StepTime, q->step_ms(), decimals_.step));
      }
      if (role == Qt::ToolTipRole) {
        QString tip = QStringLiteral("predicted by %1").arg(qs(q->predictor));
        if (q->offloaded_bytes > 0) {
          tip += QStringLiteral("; hidden copy %1 of %2 offloaded")
                     .arg(qs(format_metric(SweepMetric::HiddenCopy, q->hidden_copy_pct)))
                     .arg(qs(pf::format_size(q->offloaded_bytes)));
        }
        return tip;
      }
      return {};
    case PredictedPeak:
      if (role == SortRole) return q != nullptr ? static_cast<double>(q->peak_allocated) : kLast;
      if (q == nullptr) return {};
      if (role == Qt::DisplayRole) {
        return qs(format_metric(SweepMetric::PeakAllocated, static_cast<double>(q->peak_allocated),
                                decimals_.peak));
      }
      if (role == Qt::ToolTipRole) return qs(format_bytes_exact(q->peak_allocated));
      return {};
    case PredictionErr:
      if (role == SortRole) return err ? std::abs(err->step_pct) : kLast;
      if (!err) {
        // Predicted, and measured but not ok: nothing to compare the prediction with.
        if (role == Qt::DisplayRole && q != nullptr && !predicted_only &&
            (p.status == pf::PointStatus::Failed || p.status == pf::PointStatus::OutOfMemory)) {
          return QStringLiteral("n/a");
        }
        return {};
      }
      if (role == Qt::DisplayRole) return qs(describe_prediction_error(*err));
      if (role == Qt::ToolTipRole) {
        return QStringLiteral(
                   "step time: predicted %1, measured %2\npeak: predicted %3, measured %4")
            .arg(qs(format_metric(SweepMetric::StepTime, q->step_ms(), 3)))
            .arg(qs(format_metric(SweepMetric::StepTime, p.summary.step_ms_median, 3)))
            .arg(qs(format_bytes_exact(q->peak_allocated)))
            .arg(qs(format_bytes_exact(p.summary.peak_allocated)));
      }
      return {};
    default:
      return {};
  }
}

}  // namespace offtune::gui
