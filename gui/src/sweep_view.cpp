#include "offtune/gui/sweep_view.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QEvent>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QResizeEvent>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalBlocker>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>

#include "offtune/gui/models.hpp"
#include "offtune/gui/recommend_panel.hpp"
#include "offtune/gui/sweep_charts.hpp"
#include "offtune/profiler/export.hpp"
#include "offtune/profiler/units.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;

namespace {
// The narrowest a heatmap side by side gets: its grid, axis labels and colour bar still readable.
constexpr int kFacetMinWidth = 260;

// The recommendation panel's pane: the panel fills it, and it scrolls only where the pane is
// smaller than the panel's minimum. A resizable QScrollArea would size the panel by the height its
// wrapped labels prefer (taller than 800 with a variant sweep's texts), and without a scroll area
// those labels' wrapped height at the narrowest width made the window's minimum 885 high.
class PanelArea : public QScrollArea {
 public:
  using QScrollArea::QScrollArea;

 protected:
  void resizeEvent(QResizeEvent* e) override {
    QScrollArea::resizeEvent(e);
    if (QWidget* w = widget()) {
      const QSize min = w->minimumSizeHint(), room = viewport()->size();
      w->resize(std::max(min.width(), room.width()), std::max(min.height(), room.height()));
    }
  }
};

// The heatmap's axis combos hold each knob by its key.
void add_axis(QComboBox* combo, HeatmapAxis axis) {
  const QString name = QString::fromStdString(axis_name(axis));
  combo->addItem(name, name);
}
void select_axis(QComboBox* combo, HeatmapAxis axis) {
  combo->setCurrentIndex(combo->findData(QString::fromStdString(axis_name(axis))));
}
// Null when the combo offers nothing (no sweep).
HeatmapAxis axis_of(const QComboBox* combo) {
  const QString key = combo->currentData().toString();
  return key.isEmpty() ? nullptr : heatmap_axis(key.toStdString());
}
}  // namespace

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
  // The figures the charts show, on a row of their own under the title: side by side with it they
  // made the view's minimum wider than a 1280x800 window leaves it.
  auto* figures_row = new QHBoxLayout;
  figures_row->addWidget(new QLabel(QStringLiteral("Colour by:"), left));
  metric_ = new QComboBox(left);
  for (SweepMetric m : kSweepMetrics) {
    metric_->addItem(QString::fromLatin1(metric_label(m)), static_cast<int>(m));
  }
  figures_row->addWidget(metric_);
  // The Pareto chart's memory axis: any memory figure; it follows the figure the recommendation
  // panel checks a budget against, until chosen here.
  figures_row->addSpacing(12);
  figures_row->addWidget(new QLabel(QStringLiteral("Pareto by:"), left));
  pareto_axis_ = new QComboBox(left);
  pareto_axis_->setObjectName(QStringLiteral("paretoAxis"));
  for (SweepMetric m : kMemoryMetrics) {
    pareto_axis_->addItem(QString::fromLatin1(metric_label(m)), static_cast<int>(m));
  }
  pareto_axis_->setToolTip(QStringLiteral(
      "the memory figure on the Pareto chart's horizontal axis; the budget's line is drawn when "
      "it is the figure the budget is checked against"));
  figures_row->addWidget(pareto_axis_);
  figures_row->addStretch(1);
  // A sweep over other knobs too (semantics, prefetch, ...): the heatmap shows one variant at a
  // time, or all of them with their cells split.
  variant_label_ = new QLabel(QStringLiteral("Variant:"), left);
  variant_ = new QComboBox(left);
  variant_->setObjectName(QStringLiteral("variant"));
  variant_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  variant_->setToolTip(QStringLiteral(
      "the settings besides the heatmap's rows and columns that this sweep varies: the heatmap "
      "shows one of them, or all with each cell split among them"));
  // Rows of their own for the heatmap's axes and for its variant, so that the title keeps its
  // room and no combo is squeezed below its text.
  auto* axes_row = new QHBoxLayout;
  auto* variant_row = new QHBoxLayout;
  variant_row->addWidget(variant_label_);
  variant_row->addWidget(variant_);
  variant_label_->hide();
  variant_->hide();
  // Which two knobs the heatmap spreads out (rows x columns); the others are the variant.
  axes_label_ = new QLabel(QStringLiteral("Rows \u00d7 columns:"), left);
  rows_ = new QComboBox(left);
  rows_->setObjectName(QStringLiteral("heatmapRows"));
  columns_ = new QComboBox(left);
  columns_->setObjectName(QStringLiteral("heatmapColumns"));
  axes_label_->setToolTip(QStringLiteral("the heatmap's rows and columns"));
  for (QComboBox* c : {rows_, columns_}) {
    c->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    c->setToolTip(QStringLiteral(
        "which knobs the heatmap's rows and columns are; the sweep's other knobs become the "
        "variant (one at a time, or every variant with each cell split)"));
    for (HeatmapAxis a : heatmap_axis_order()) add_axis(c, a);
  }
  select_axis(rows_, default_row_axis());
  select_axis(columns_, default_column_axis());
  axes_row->addWidget(axes_label_);
  axes_row->addWidget(rows_);
  axes_row->addWidget(columns_);
  axes_row->addStretch(1);
  side_by_side_ = new QCheckBox(QStringLiteral("side by side"), left);
  side_by_side_->setObjectName(QStringLiteral("sideBySide"));
  side_by_side_->setToolTip(QStringLiteral(
      "one heatmap per variant, on one colour scale (small multiples), instead of one heatmap"));
  side_by_side_->hide();
  variant_row->addWidget(side_by_side_);
  variant_row->addStretch(1);
  axes_label_->hide();
  rows_->hide();
  columns_->hide();
  layout->addLayout(header);
  layout->addLayout(figures_row);
  layout->addLayout(axes_row);
  layout->addLayout(variant_row);

  auto* vsplit = new QSplitter(Qt::Vertical, left);
  auto* charts = new QSplitter(Qt::Horizontal, vsplit);
  heat_stack_ = new QStackedWidget(charts);
  heatmap_ = new HeatmapWidget(heat_stack_);
  heat_stack_->addWidget(heatmap_);
  facets_area_ = new QScrollArea(heat_stack_);
  facets_area_->setWidgetResizable(true);
  facets_area_->setFrameShape(QFrame::NoFrame);
  facets_area_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  facets_box_ = new QWidget(facets_area_);
  facets_box_->setObjectName(QStringLiteral("facets"));
  new QGridLayout(facets_box_);
  facets_area_->setWidget(facets_box_);
  facets_area_->viewport()->installEventFilter(this);
  heat_stack_->addWidget(facets_area_);
  pareto_ = new ParetoWidget(charts);
  // Small enough minimums that the window fits below 1000x700 with the charts shrunk, not cropped
  // (their labels thin out as they narrow, sweep_charts.hpp); at 1280x800 they have far more.
  heatmap_->setMinimumSize(200, 160);
  pareto_->setMinimumSize(200, 160);
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

  // The panel scrolls up and down where the window is too short for its snippets and exports
  // (PanelArea); it never asks for more width than its own rows need.
  auto* panel_area = new PanelArea(split);
  panel_area->setObjectName(QStringLiteral("recommendArea"));
  panel_area->setFrameShape(QFrame::NoFrame);
  panel_area->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  panel_ = new RecommendPanel(panel_area);
  panel_area->setWidget(panel_);
  // 300 px at least: the front table's four columns and the snippets' lines want that much.
  panel_area->setMinimumWidth(std::max(300, panel_->minimumSizeHint().width()) +
                              panel_area->verticalScrollBar()->sizeHint().width());
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  split->setCollapsible(0, false);
  split->setCollapsible(1, false);

  connect(metric_, &QComboBox::currentIndexChanged, this, [this] {
    heatmap_->setMetric(static_cast<SweepMetric>(metric_->currentData().toInt()));
    rebuildFacets();
  });
  connect(pareto_axis_, &QComboBox::currentIndexChanged, this, [this] {
    pareto_->setMemoryMetric(static_cast<SweepMetric>(pareto_axis_->currentData().toInt()));
  });
  connect(side_by_side_, &QCheckBox::toggled, this, [this] { applyVariant(); });
  connect(variant_, &QComboBox::currentIndexChanged, this, [this] { applyVariant(); });
  // Choosing the axis the other combo has swaps them: rows and columns are never the same knob.
  const auto axes_changed = [this](QComboBox* changed) {
    const HeatmapAxis rows = axis_of(rows_);
    const HeatmapAxis columns = axis_of(columns_);
    if (rows == nullptr || columns == nullptr) return;
    if (rows == columns) {
      QComboBox* other = changed == rows_ ? columns_ : rows_;
      const HeatmapAxis previous = changed == rows_ ? heatmap_->rowAxis() : heatmap_->columnAxis();
      QSignalBlocker block(other);
      select_axis(other, previous);
    }
    if (axis_of(rows_) == nullptr || axis_of(columns_) == nullptr) return;
    heatmap_->setAxes(axis_of(rows_), axis_of(columns_));
    refreshVariants();
  };
  connect(rows_, &QComboBox::currentIndexChanged, this, [=, this] { axes_changed(rows_); });
  connect(columns_, &QComboBox::currentIndexChanged, this, [=, this] { axes_changed(columns_); });
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
    // A new figure to check budgets against moves the Pareto axis to it; the user's own choice of
    // axis stays while the figure does not change.
    if (const SweepMetric judged = memory_metric(rec.constraint.memory); judged_ != judged) {
      judged_ = judged;
      setParetoAxis(judged);
    }
    pareto_->setRecommendation(rec);
    pareto_->setTies(ties);
    heatmap_->setHighlighted(rec.chosen ? rec.chosen->index : -1);
    heatmap_->setTies(ties);
    for (HeatmapWidget* f : facets_) {
      f->setHighlighted(rec.chosen ? rec.chosen->index : -1);
      f->setTies(ties);
    }
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
  // Reading the sweep on screen again (F5, a store followed) keeps its heading until the new
  // figures are in; another sweep says it is loading.
  if (!sweep_ || sweep_->sweep.id != id || store_path != store_path_) {
    title_->setText(QStringLiteral("Loading sweep %1\u2026").arg(id.value));
  }
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

void SweepView::setParetoAxis(SweepMetric metric) {
  if (!is_memory_metric(metric)) return;
  const QSignalBlocker block(pareto_axis_);
  pareto_axis_->setCurrentIndex(pareto_axis_->findData(static_cast<int>(metric)));
  pareto_->setMemoryMetric(metric);
}

void SweepView::setVariant(const QString& label) {
  const int i = label.isEmpty() ? 0 : variant_->findText(label);
  if (i >= 0) variant_->setCurrentIndex(i);
}

void SweepView::setAxes(HeatmapAxis rows, HeatmapAxis columns) {
  if (rows == columns) return;
  QSignalBlocker block_rows(rows_);
  QSignalBlocker block_columns(columns_);
  select_axis(rows_, rows);
  select_axis(columns_, columns);
  heatmap_->setAxes(rows, columns);
  refreshVariants();
}

void SweepView::setSideBySide(bool on) { side_by_side_->setChecked(on); }

void SweepView::rebuildFacets() {
  const bool on = side_by_side_->isChecked() && !side_by_side_->isHidden() && sweep_;
  const auto rows = heatmap_->rowAxis(), columns = heatmap_->columnAxis();
  const auto variants = on ? sweep_variants(*sweep_, rows, columns) : std::vector<std::string>{};
  // As many heatmaps as variants, reused from one refresh to the next (a sweep filling in live).
  while (facets_.size() > variants.size()) {
    delete facets_.back();
    delete facet_titles_.back();
    facets_.pop_back();
    facet_titles_.pop_back();
  }
  while (facets_.size() < variants.size()) {
    auto* title = new QLabel(facets_box_);
    QFont bold = title->font();
    bold.setBold(true);
    title->setFont(bold);
    title->setWordWrap(true);
    auto* f = new HeatmapWidget(facets_box_);
    f->setMinimumSize(kFacetMinWidth, 230);
    connect(f, &HeatmapWidget::pointActivated, this, &SweepView::activatePoint);
    connect(f, &HeatmapWidget::pointHovered, pareto_, &ParetoWidget::setSelected);
    facet_titles_.push_back(title);
    facets_.push_back(f);
  }
  heat_stack_->setCurrentIndex(on && !variants.empty() ? 1 : 0);
  if (variants.empty()) return;
  // One colour scale for all: the range of the metric over every offload point.
  const auto metric = static_cast<SweepMetric>(metric_->currentData().toInt());
  std::optional<std::pair<double, double>> range;
  for (const auto& p : sweep_->points) {
    if (!p.config.offload) continue;
    const auto v = metric_value(*sweep_, p, metric);
    if (!v || !std::isfinite(*v)) continue;
    range = range ? std::make_pair(std::min(range->first, *v), std::max(range->second, *v))
                  : std::make_pair(*v, *v);
  }
  const auto by_index = variants_by_index(*sweep_, rows, columns);
  const auto& rec = panel_->recommendation();
  std::vector<int64_t> ties;
  for (const auto& t : rec.ties) ties.push_back(t.index);
  for (size_t k = 0; k < variants.size(); ++k) {
    std::vector<int64_t> shown;
    for (const auto& [index, label] : by_index) {
      if (label == variants[k]) shown.push_back(index);
    }
    HeatmapWidget* f = facets_[k];
    f->setAxes(rows, columns);
    f->setMetric(metric);
    f->setSharedRange(range);
    f->setData(sweep_);
    f->setShownPoints(shown);
    f->setHighlighted(rec.chosen ? rec.chosen->index : -1);
    f->setTies(ties);
    facet_titles_[k]->setText(QString::fromStdString(variants[k]));
  }
  facet_columns_ = 0;  // placed again
  layoutFacets();
}

void SweepView::layoutFacets() {
  if (facets_.empty()) return;
  const int width = facets_area_->viewport()->width();
  const int columns =
      std::clamp(width / (kFacetMinWidth + 12), 1, static_cast<int>(facets_.size()));
  if (columns == facet_columns_) return;
  facet_columns_ = columns;
  auto* grid = static_cast<QGridLayout*>(facets_box_->layout());
  for (size_t k = 0; k < facets_.size(); ++k) {
    grid->removeWidget(facet_titles_[k]);
    grid->removeWidget(facets_[k]);
  }
  for (size_t k = 0; k < facets_.size(); ++k) {
    const int r = static_cast<int>(k) / columns * 2, c = static_cast<int>(k) % columns;
    grid->addWidget(facet_titles_[k], r, c);
    grid->addWidget(facets_[k], r + 1, c);
  }
}

bool SweepView::eventFilter(QObject* watched, QEvent* event) {
  if (watched == facets_area_->viewport() && event->type() == QEvent::Resize) layoutFacets();
  return QWidget::eventFilter(watched, event);
}

void SweepView::applyVariant() {
  // Side by side, the variant combo has nothing to choose: every variant has its heatmap.
  variant_->setEnabled(!side_by_side_->isChecked());
  rebuildFacets();
  const QString chosen = variant_->currentIndex() > 0 ? variant_->currentText() : QString();
  if (!sweep_ || chosen.isEmpty()) {
    heatmap_->setShownPoints(std::nullopt);
    return;
  }
  std::vector<int64_t> shown;
  for (const auto& [index, label] :
       variants_by_index(*sweep_, heatmap_->rowAxis(), heatmap_->columnAxis())) {
    if (QString::fromStdString(label) == chosen) shown.push_back(index);
  }
  heatmap_->setShownPoints(shown);
}

void SweepView::refreshVariants() {
  // The variant list of this sweep under the heatmap's axes, keeping the choice when it still
  // exists.
  const QString kept = variant_->currentIndex() > 0 ? variant_->currentText() : QString();
  const auto variants = sweep_
                            ? sweep_variants(*sweep_, heatmap_->rowAxis(), heatmap_->columnAxis())
                            : std::vector<std::string>{};
  {
    QSignalBlocker block(variant_);
    variant_->clear();
    variant_->addItem(QStringLiteral("all (cells split)"));
    for (const auto& v : variants) variant_->addItem(QString::fromStdString(v));
    const int i = kept.isEmpty() ? 0 : variant_->findText(kept);
    variant_->setCurrentIndex(std::max(i, 0));
    variant_->setVisible(!variants.empty());
    variant_label_->setVisible(!variants.empty());
    side_by_side_->setVisible(!variants.empty());
  }
  applyVariant();
}

void SweepView::refresh() {
  // The axes on offer: only where the sweep varies more than the two thresholds, and only those it
  // varies; a choice made for another sweep that does not apply here goes back to the thresholds.
  const auto offered = sweep_ ? heatmap_axes(*sweep_) : std::vector<HeatmapAxis>{};
  {
    const auto applies = [&](HeatmapAxis a) {
      return std::find(offered.begin(), offered.end(), a) != offered.end();
    };
    HeatmapAxis rows = heatmap_->rowAxis(), columns = heatmap_->columnAxis();
    if (!applies(rows) || !applies(columns)) {
      rows = default_row_axis();
      columns = default_column_axis();
    }
    QSignalBlocker block_rows(rows_);
    QSignalBlocker block_columns(columns_);
    for (QComboBox* c : {rows_, columns_}) {
      c->clear();
      for (HeatmapAxis a : offered) add_axis(c, a);
    }
    select_axis(rows_, rows);
    select_axis(columns_, columns);
    heatmap_->setAxes(rows, columns);
  }
  const bool more_axes = offered.size() > 2;
  axes_label_->setVisible(more_axes);
  rows_->setVisible(more_axes);
  columns_->setVisible(more_axes);
  refreshVariants();
  if (sweep_) {
    const auto& s = sweep_->sweep;
    // The count the tree and the form show too (sweep_counts): the grid's points, measured/total.
    const SweepCounts c = sweep_counts(*sweep_);
    // The store is named: sweep ids are per store, and the dashboard may have another store open
    // than the one this sweep is of (a sweep started from the form into a new store).
    const QString store = QString::fromStdString(store_path_);
    // A script sweep's workload is its command (before: "script, batch 0, seq 0, ").
    title_->setText(QStringLiteral("Sweep %1%2 in %3 \u2014 %4 \u2014 %5")
                        .arg(s.id.value)
                        .arg(s.name.empty()
                                 ? QString()
                                 : QStringLiteral(" (%1)").arg(QString::fromStdString(s.name)))
                        .arg(QFileInfo(store).fileName())
                        .arg(QString::fromStdString(pf::describe_workload(s)))
                        .arg(QString::fromStdString(describe_counts(c))));
    title_->setToolTip(
        QStringLiteral("%1 of %2 points measured: %3 ok, %4 failed, %5 out of memory; %6 not "
                       "measured<br/>store: %7")
            .arg(c.measured)
            .arg(c.total)
            .arg(c.ok)
            .arg(c.failed)
            .arg(c.oom)
            .arg(c.unmeasured())
            .arg(store.toHtmlEscaped()));
  } else {
    title_->setText(QStringLiteral("No sweep open"));
    title_->setToolTip(QString());
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
