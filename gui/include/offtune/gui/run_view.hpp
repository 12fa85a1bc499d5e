// The run view: the timeline of one run (phases, compute, offload and reload copies, waits, packs
// and unpacks) with zoom and pan, the stash occupancy and device memory charts beneath it on the
// same time axis, and the run's summary figures. The run and its timeline index are loaded and
// built on a job thread; the view shows them when the newest job ends.
#pragma once

#include <QWidget>
#include <memory>
#include <optional>
#include <string>

#include "offtune/gui/data.hpp"
#include "offtune/gui/jobs.hpp"
#include "offtune/gui/run_peak.hpp"

class QLabel;
class QSplitter;
class QTableView;

namespace offtune::gui {

class RunChart;
class RunSummaryModel;
class TimeAxis;
class TimelineWidget;
struct TimelineIndex;

class RunView : public QWidget {
  Q_OBJECT

 public:
  explicit RunView(QWidget* parent = nullptr);

  // Loads the run and indexes its timeline on a job thread; loaded() or loadFailed() follows.
  void showRun(const std::string& store_path, profiler::RunId id);
  // `peak`: the run's peak_breakdown, computed by the caller off the GUI thread (showRun's job
  // does); computed here when not given.
  void setRunData(RunDataPtr run, std::shared_ptr<const TimelineIndex> index,
                  std::optional<PeakBreakdown> peak = std::nullopt);

  const RunDataPtr& runData() const { return run_; }
  // The store the run on screen is of (named in the heading): its exports read this store.
  const std::string& storePath() const { return store_path_; }
  TimeAxis* axis() const { return axis_; }
  TimelineWidget* timeline() const { return timeline_; }
  RunChart* occupancyChart() const { return occupancy_; }
  RunChart* memoryChart() const { return memory_; }
  RunChart* hostChart() const { return host_; }
  RunSummaryModel* summaryModel() const { return summary_; }
  // Timeline, occupancy chart and memory chart, top to bottom.
  QSplitter* chartsSplitter() const { return charts_split_; }

 Q_SIGNALS:
  void loaded();
  void loadFailed(const QString& error);

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  // Widens the summary's pane to its values, up to half the view (only ever wider).
  void fitSummary();
  JobTicket jobs_;
  bool split_sized_ = false;
  RunDataPtr run_;
  std::string store_path_;
  QLabel* title_ = nullptr;
  QLabel* range_ = nullptr;   // the timeline's selected stretch, measured (timeline_range.hpp)
  QLabel* tensor_ = nullptr;  // the tensor the timeline follows, event by event
  void showSelection();
  TimeAxis* axis_ = nullptr;
  QSplitter* charts_split_ = nullptr;
  QSplitter* split_ = nullptr;  // the charts | the summary
  TimelineWidget* timeline_ = nullptr;
  RunChart* occupancy_ = nullptr;
  RunChart* memory_ = nullptr;
  RunChart* host_ = nullptr;
  QTableView* table_ = nullptr;
  RunSummaryModel* summary_ = nullptr;
};

}  // namespace offtune::gui
