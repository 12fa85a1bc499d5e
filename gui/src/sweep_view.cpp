#include "offtune/gui/sweep_view.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSignalBlocker>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>

#include "offtune/gui/models.hpp"
#include "offtune/gui/recommend_panel.hpp"
#include "offtune/gui/sweep_charts.hpp"
#include "offtune/profiler/units.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;

SweepView::SweepView(QWidget* parent) : QWidget(parent) {
  auto* outer = new QHBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* split = new QSplitter(Qt::Horizontal, this);
  outer->addWidget(split);

  auto* left = new QWidget(split);
  auto* layout = new QVBoxLayout(left);
  auto* header = new QHBoxLayout;
  title_ = new QLabel(QStringLiteral("No sweep open"), left);
  title_->setObjectName(QStringLiteral("sweepTitle"));
  QFont bold = title_->font();
  bold.setBold(true);
  title_->setFont(bold);
  // A long title wraps rather than widening the window.
  title_->setWordWrap(true);
  title_->setMinimumWidth(120);
  title_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  header->addWidget(title_, 1);
  header->addWidget(new QLabel(QStringLiteral("Colour by:"), left));
  metric_ = new QComboBox(left);
  for (SweepMetric m : kSweepMetrics) {
    metric_->addItem(QString::fromLatin1(metric_label(m)), static_cast<int>(m));
  }
  header->addWidget(metric_);
  // A sweep over other knobs too (semantics, prefetch, ...): the heatmap shows one variant at a
  // time, or all of them with their cells split.
  variant_label_ = new QLabel(QStringLiteral("Variant:"), left);
  variant_ = new QComboBox(left);
  variant_->setObjectName(QStringLiteral("variant"));
  variant_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  variant_->setToolTip(QStringLiteral(
      "the settings besides min_offload_size and max_fwd_stash_size that this sweep varies: the "
      "heatmap shows one of them, or all with each cell split among them"));
  header->addWidget(variant_label_);
  header->addWidget(variant_);
  variant_label_->hide();
  variant_->hide();
  layout->addLayout(header);

  auto* vsplit = new QSplitter(Qt::Vertical, left);
  auto* charts = new QSplitter(Qt::Horizontal, vsplit);
  heatmap_ = new HeatmapWidget(charts);
  pareto_ = new ParetoWidget(charts);
  heatmap_->setMinimumSize(320, 260);
  pareto_->setMinimumSize(320, 260);
  table_ = new QTableView(vsplit);
  points_ = new PointsTableModel(this);
  sorted_ = new QSortFilterProxyModel(this);
  sorted_->setSourceModel(points_);
  sorted_->setSortRole(PointsTableModel::SortRole);
  table_->setModel(sorted_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(PointsTableModel::Index, Qt::AscendingOrder);
  table_->verticalHeader()->hide();
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->horizontalHeader()->setStretchLastSection(true);
  // Columns as wide as their header and figures: nothing clipped (the table scrolls sideways).
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(PointsTableModel::Error, QHeaderView::Stretch);
  table_->horizontalHeader()->setMinimumSectionSize(40);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  vsplit->setStretchFactor(0, 3);
  vsplit->setStretchFactor(1, 2);
  layout->addWidget(vsplit, 1);

  panel_ = new RecommendPanel(split);
  panel_->setMinimumWidth(340);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  split->setCollapsible(0, false);
  split->setCollapsible(1, false);

  connect(metric_, &QComboBox::currentIndexChanged, this, [this] {
    heatmap_->setMetric(static_cast<SweepMetric>(metric_->currentData().toInt()));
  });
  connect(variant_, &QComboBox::currentIndexChanged, this, [this] { applyVariant(); });
  connect(heatmap_, &HeatmapWidget::pointActivated, this, &SweepView::activatePoint);
  connect(pareto_, &ParetoWidget::pointActivated, this, &SweepView::activatePoint);
  connect(panel_, &RecommendPanel::pointActivated, this, &SweepView::activatePoint);
  // Hovering in one chart marks the point in the other.
  connect(heatmap_, &HeatmapWidget::pointHovered, pareto_, &ParetoWidget::setSelected);
  connect(pareto_, &ParetoWidget::pointHovered, heatmap_, &HeatmapWidget::setSelected);
  connect(table_, &QTableView::doubleClicked, this, [this](const QModelIndex& idx) {
    activatePoint(sorted_->data(idx, PointsTableModel::PointIndexRole).toLongLong());
  });
  connect(panel_, &RecommendPanel::recommendationChanged, this, [this] {
    const auto& rec = panel_->recommendation();
    std::vector<int64_t> ties;
    for (const auto& t : rec.ties) ties.push_back(t.index);
    pareto_->setRecommendation(rec);
    pareto_->setTies(ties);
    heatmap_->setHighlighted(rec.chosen ? rec.chosen->index : -1);
    heatmap_->setTies(ties);
    points_->setSweep(sweep_, std::nullopt, rec.chosen ? rec.chosen->index : -1, ties);
    table_->setColumnHidden(PointsTableModel::Variant, !sweep_ || !has_variants(*sweep_));
    for (int c : {PointsTableModel::PredictedStep, PointsTableModel::PredictedPeak,
                  PointsTableModel::PredictionErr}) {
      table_->setColumnHidden(c, !points_->hasPredictions());
    }
  });
}

void SweepView::showSweep(const std::string& store_path, pf::SweepId id) {
  const uint64_t job = jobs_.next();
  title_->setText(QStringLiteral("Loading sweep %1\u2026").arg(id.value));
  run_job<SweepData>(
      this, [store_path, id] { return load_sweep(store_path, id); },
      [this, job, store_path](const JobResult<SweepData>& r) {
        if (!jobs_.is_current(job)) return;  // a newer sweep was asked for meanwhile
        if (!r.value) {
          title_->setText(QStringLiteral("Could not load the sweep: %1").arg(r.error));
          Q_EMIT loadFailed(r.error);
          return;
        }
        setSweepData(r.value, store_path);
        Q_EMIT loaded();
      });
}

void SweepView::setSweepData(SweepDataPtr sweep, const std::string& store_path) {
  sweep_ = std::move(sweep);
  store_path_ = store_path;
  refresh();
}

void SweepView::applyPoint(const pf::PointRecord& point) {
  if (!sweep_ || point.sweep != sweep_->sweep.id) return;
  // Copy on write: the old snapshot may still be referenced by a chart or a job.
  auto next = std::make_shared<SweepData>(*sweep_);
  auto it = std::find_if(next->points.begin(), next->points.end(),
                         [&](const pf::PointRecord& p) { return p.index == point.index; });
  if (it != next->points.end()) {
    *it = point;
  } else {
    next->points.insert(std::upper_bound(next->points.begin(), next->points.end(), point,
                                         [](const pf::PointRecord& a, const pf::PointRecord& b) {
                                           return a.index < b.index;
                                         }),
                        point);
  }
  sweep_ = std::move(next);
  refresh();
}

void SweepView::setMetric(SweepMetric metric) {
  metric_->setCurrentIndex(metric_->findData(static_cast<int>(metric)));
}

void SweepView::setVariant(const QString& label) {
  const int i = label.isEmpty() ? 0 : variant_->findText(label);
  if (i >= 0) variant_->setCurrentIndex(i);
}

void SweepView::applyVariant() {
  const QString chosen = variant_->currentIndex() > 0 ? variant_->currentText() : QString();
  if (!sweep_ || chosen.isEmpty()) {
    heatmap_->setShownPoints(std::nullopt);
    return;
  }
  std::vector<int64_t> shown;
  for (const auto& [index, label] : variants_by_index(*sweep_)) {
    if (QString::fromStdString(label) == chosen) shown.push_back(index);
  }
  heatmap_->setShownPoints(shown);
}

void SweepView::refresh() {
  // The variant list of this sweep, keeping the choice when it still exists.
  {
    const QString kept = variant_->currentIndex() > 0 ? variant_->currentText() : QString();
    const auto variants = sweep_ ? sweep_variants(*sweep_) : std::vector<std::string>{};
    QSignalBlocker block(variant_);
    variant_->clear();
    variant_->addItem(QStringLiteral("all (cells split)"));
    for (const auto& v : variants) variant_->addItem(QString::fromStdString(v));
    const int i = kept.isEmpty() ? 0 : variant_->findText(kept);
    variant_->setCurrentIndex(std::max(i, 0));
    variant_->setVisible(!variants.empty());
    variant_label_->setVisible(!variants.empty());
  }
  applyVariant();
  if (sweep_) {
    const auto& s = sweep_->sweep;
    // The count the tree and the form show too (sweep_counts): the grid's points, measured/total.
    const SweepCounts c = sweep_counts(*sweep_);
    title_->setText(QStringLiteral("Sweep %1%2 \u2014 %3, batch %4, seq %5, %6 \u2014 %7")
                        .arg(s.id.value)
                        .arg(s.name.empty()
                                 ? QString()
                                 : QStringLiteral(" (%1)").arg(QString::fromStdString(s.name)))
                        .arg(QString::fromStdString(s.workload.model))
                        .arg(s.workload.batch)
                        .arg(s.workload.seq)
                        .arg(QString::fromStdString(s.workload.dtype))
                        .arg(QString::fromStdString(describe_counts(c))));
    title_->setToolTip(
        QStringLiteral("%1 of %2 points measured: %3 ok, %4 failed, %5 out of memory; %6 not "
                       "measured")
            .arg(c.measured)
            .arg(c.total)
            .arg(c.ok)
            .arg(c.failed)
            .arg(c.oom)
            .arg(c.unmeasured()));
  }
  heatmap_->setData(sweep_);
  pareto_->setData(sweep_);
  panel_->setSweep(sweep_, store_path_);  // recomputes, then recommendationChanged updates the rest
}

void SweepView::activatePoint(qint64 point_index) {
  if (!sweep_) return;
  for (const auto& p : sweep_->points) {
    if (p.index == point_index && p.run.valid()) {
      Q_EMIT runRequested(p.run.value);
      return;
    }
  }
}

}  // namespace offtune::gui
