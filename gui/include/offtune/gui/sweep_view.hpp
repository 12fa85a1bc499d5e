// The sweep view: a heatmap of one metric over min_offload_size x max_fwd_stash_size, the Pareto
// scatter of peak memory against step time with the recommended point and the constraint, the
// points as a sortable table, and the recommendation panel. Clicking a point asks for its run.
// Points measured while the view is open (a sweep running from the GUI) are merged in live.
#pragma once

#include <QWidget>
#include <optional>
#include <string>

#include "offtune/gui/data.hpp"
#include "offtune/gui/jobs.hpp"

class QComboBox;
class QCheckBox;
class QLabel;
class QScrollArea;
class QStackedWidget;
class QTableView;
class QSortFilterProxyModel;

namespace offtune::gui {

class HeatmapWidget;
class ParetoWidget;
class PointsTableModel;
class RecommendPanel;

class SweepView : public QWidget {
  Q_OBJECT

 public:
  explicit SweepView(QWidget* parent = nullptr);

  // Loads the sweep on a job thread; loaded() or loadFailed() follows. A newer call drops the
  // result of an older one still in flight.
  void showSweep(const std::string& store_path, profiler::SweepId id);
  // Shows data already in hand.
  void setSweepData(SweepDataPtr sweep, const std::string& store_path);
  // Merges a point just measured into the sweep on show, if it belongs to it.
  void applyPoint(const profiler::PointRecord& point);
  void setMetric(SweepMetric metric);
  // The Pareto chart's memory axis (one of kMemoryMetrics). It follows the figure the
  // recommendation panel checks a budget against whenever that changes.
  void setParetoAxis(SweepMetric metric);
  // The heatmap's variant, by its label (sweep_variants), or every variant (empty).
  void setVariant(const QString& label);
  // The heatmap's rows and columns (heatmap_axes() of the sweep offers them; an axis the sweep
  // does not vary still works, as one row or column). The variants follow: every knob but these.
  void setAxes(HeatmapAxis rows, HeatmapAxis columns);
  // Small multiples: one heatmap per variant, side by side on one colour scale, instead of the one
  // heatmap (a sweep of one variant has nothing to show side by side).
  void setSideBySide(bool on);
  // The heatmaps side by side, in variant order (empty unless shown).
  const std::vector<HeatmapWidget*>& facets() const { return facets_; }

  const SweepDataPtr& sweepData() const { return sweep_; }
  // The store the sweep on screen is of (named in the heading); empty when none is shown.
  const std::string& storePath() const { return store_path_; }
  HeatmapWidget* heatmap() const { return heatmap_; }
  ParetoWidget* pareto() const { return pareto_; }
  PointsTableModel* pointsModel() const { return points_; }
  QTableView* pointsTable() const { return table_; }
  RecommendPanel* recommendPanel() const { return panel_; }

 Q_SIGNALS:
  void loaded();
  void loadFailed(const QString& error);
  void runRequested(qint64 run_id);

 private:
  void activatePoint(qint64 point_index);
  void refresh();
  void applyVariant();

  JobTicket jobs_;
  SweepDataPtr sweep_;
  std::string store_path_;
  QLabel* title_ = nullptr;
  QComboBox* metric_ = nullptr;
  QComboBox* pareto_axis_ = nullptr;
  // The figure the panel last judged on: when the panel changes it, the Pareto axis follows.
  std::optional<SweepMetric> judged_;
  QLabel* variant_label_ = nullptr;
  QComboBox* variant_ = nullptr;  // which variant the heatmap shows (sweeps of several)
  // The heatmap's axes, offered when the sweep varies more than the two thresholds.
  QLabel* axes_label_ = nullptr;
  QComboBox* rows_ = nullptr;
  QComboBox* columns_ = nullptr;
  void refreshVariants();
  void rebuildFacets();
  // Places the facets in as many columns as the pane's width takes.
  void layoutFacets();
  bool eventFilter(QObject* watched, QEvent* event) override;
  QScrollArea* facets_area_ = nullptr;
  int facet_columns_ = 0;
  QCheckBox* side_by_side_ = nullptr;
  QStackedWidget* heat_stack_ = nullptr;  // the heatmap, or the facets
  QWidget* facets_box_ = nullptr;
  std::vector<HeatmapWidget*> facets_;
  std::vector<QLabel*> facet_titles_;
  HeatmapWidget* heatmap_ = nullptr;
  ParetoWidget* pareto_ = nullptr;
  QTableView* table_ = nullptr;
  PointsTableModel* points_ = nullptr;
  QSortFilterProxyModel* sorted_ = nullptr;
  RecommendPanel* panel_ = nullptr;
};

}  // namespace offtune::gui
