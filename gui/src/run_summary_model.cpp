// A run's summary figures (run_summary_model.hpp).
#include "offtune/gui/run_summary_model.hpp"

#include <QString>
#include <QStringList>
#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "offtune/gui/predicted.hpp"
#include "offtune/gui/run_peak.hpp"
#include "offtune/gui/timeline.hpp"
#include "offtune/profiler/export.hpp"
#include "offtune/profiler/units.hpp"
#include "text_util.hpp"
namespace offtune::gui {

namespace pf = offtune::profiler;
using detail::qs;

// ---------------------------------------------------------------------------------------------
// RunSummaryModel

RunSummaryModel::RunSummaryModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunSummaryModel::setRun(RunDataPtr run, std::optional<PeakBreakdown> peak) {
  beginResetModel();
  rows_.clear();
  if (run) {
    const auto& r = run->run;
    const auto& s = r.summary;
    const auto ms = [](double v) { return QString::number(v, 'f', 3) + QStringLiteral(" ms"); };
    const auto size = [](int64_t b) { return qs(pf::format_size(b)); };
    // Hidden-copy shares of a run that copied nothing are not applicable, not 0 % (the worst).
    const bool copied = pf::copied_anything(r.config, s);
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
        {QStringLiteral("device outside the allocator"), size(s.device_outside)},
        {QStringLiteral("peak device total"), size(pf::peak_device_total(s))},
        {QStringLiteral("offloaded per step"), size(s.offloaded_bytes)},
        {QStringLiteral("reloaded per step"), size(s.reloaded_bytes)},
        {QStringLiteral("host copies (peak)"), size(s.host_bytes_peak)},
        {QStringLiteral("pinned pool"), size(s.pinned_bytes)},
        {QStringLiteral("host peak (process)"),
         s.host_rss_peak > 0 ? size(s.host_rss_peak) : QStringLiteral("not measured")},
        {QStringLiteral("hidden copy (all)"), pct(s.hidden_copy_pct)},
        {QStringLiteral("hidden copy D2H / H2D"),
         pct(s.hidden_d2h_pct) + QStringLiteral(" / ") + pct(s.hidden_h2d_pct)},
        {QStringLiteral("exposed copy per step"),
         QString::number(static_cast<double>(s.exposed_copy_ns) / 1e6, 'f', 3) +
             QStringLiteral(" ms")},
        {QStringLiteral("pageable copies per step"), QString::number(s.pageable_copies)},
        {QStringLiteral("final loss"), std::isfinite(s.final_loss)
                                           ? QString::number(s.final_loss, 'g', 6)
                                           : QStringLiteral("not given")},
        {QStringLiteral("timeline events"), QString::number(run->events.size())},
    };
    addPeakRows(*run, peak ? *peak : peak_breakdown(*run));
    if (!r.error.empty()) rows_.emplace_back(QStringLiteral("error"), qs(r.error));
  }
  endResetModel();
}

void RunSummaryModel::addPeakRows(const RunData& run, const PeakBreakdown& peak) {
  // What was live when allocated memory peaked, and why reserved lay above it (issue 43 item 2).
  if (!peak.known) return;
  const auto size = [](int64_t b) { return qs(pf::format_size(b)); };
  const int64_t begin = run.events.empty() ? peak.time_ns : run_time_bounds(run).first;
  QString when = QStringLiteral("+%1: allocated %2")
                     .arg(format_duration_ns(static_cast<double>(peak.time_ns - begin)))
                     .arg(size(peak.allocated));
  if (peak.reserved >= 0) {
    when += QStringLiteral(
                ", reserved %1 (%2 beyond live tensors: blocks the allocator keeps "
                "cached, split, or held for another stream)")
                .arg(size(peak.reserved))
                .arg(size(std::max<int64_t>(0, peak.reserved - peak.allocated)));
  }
  rows_.emplace_back(QStringLiteral("at the peak"), when);
  if (!peak.saved_recorded) {
    rows_.emplace_back(QStringLiteral("saved tensors at the peak"),
                       QStringLiteral("not recorded: the run did not offload (no pack hooks)"));
    return;
  }
  const auto tensors = [&size](int64_t n, int64_t bytes) {
    return QStringLiteral("%1 %2, %3")
        .arg(n)
        .arg(n == 1 ? QStringLiteral("tensor") : QStringLiteral("tensors"))
        .arg(size(bytes));
  };
  QStringList parts;
  for (const auto& [state, figures] : peak.on_device) {
    parts
        << QStringLiteral("%1: %2, %3").arg(qs(state)).arg(figures.first).arg(size(figures.second));
  }
  rows_.emplace_back(
      QStringLiteral("saved on the device at the peak"),
      tensors(peak.device_count(), peak.device_bytes()) +
          (parts.isEmpty() ? QString()
                           : QStringLiteral(" (%1)").arg(parts.join(QStringLiteral("; ")))));
  rows_.emplace_back(
      QStringLiteral("allocated beyond them"),
      QStringLiteral("%1: weights not saved for backward, gradients, optimizer state, temporaries")
          .arg(size(std::max<int64_t>(0, peak.allocated - peak.device_bytes()))));
  rows_.emplace_back(
      QStringLiteral("offloaded at the peak"),
      tensors(peak.on_host_count, peak.on_host_bytes) + QStringLiteral(" on the host"));
  if (!peak.largest_on_device.empty()) {
    QStringList largest;
    for (const auto& t : peak.largest_on_device) {
      largest << QStringLiteral("#%1 %2 (%3)").arg(t.tensor).arg(size(t.bytes)).arg(qs(t.state));
    }
    rows_.emplace_back(QStringLiteral("largest saved on the device"),
                       largest.join(QStringLiteral(", ")));
  }
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
