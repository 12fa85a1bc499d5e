// The run view's charts beneath the timeline, on the same time axis and with the same left gutter,
// so that a time falls on the same x in all of them: the stash occupancy (bytes held in the forward
// and backward stashes), the device memory (reserved behind allocated) and the host memory
// (offtune's pinned pool behind its host copies), each as a step line over the run's
// occupancy samples. Many samples per pixel are drawn as one min/max column per pixel, read from a
// small min/max pyramid, so that a frame costs O(pixels · log samples) however long the run.
#pragma once

#include <QColor>
#include <QString>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "offtune/gui/data.hpp"
#include "offtune/gui/timeline.hpp"

namespace offtune::gui {

namespace detail {

// Min and max of any range of a series in O(kFanout · log n): level k holds the min and max of
// blocks of kFanout^(k+1) values.
class MinMaxPyramid {
 public:
  static constexpr size_t kFanout = 16;

  void build(const std::vector<int64_t>& values);
  // Of values[first, last), first < last; `values` is what build() was given.
  std::pair<int64_t, int64_t> query(const std::vector<int64_t>& values, size_t first,
                                    size_t last) const;

 private:
  std::vector<std::vector<int64_t>> min_;
  std::vector<std::vector<int64_t>> max_;
};

// One step line: value[i] holds from time[i] until time[i + 1].
struct ChartSeries {
  QString label;
  QColor colour;
  std::vector<int64_t> time;  // sorted
  std::vector<int64_t> value;
  std::vector<uint32_t> sample;  // index into RunData::occupancy, for tooltips
  MinMaxPyramid pyramid;
};

}  // namespace detail

class RunChart : public TimePlotWidget {
  Q_OBJECT

 public:
  // Occupancy: forward and backward stash bytes. DeviceMemory: reserved device bytes behind the
  // allocated ones (samples without a figure, < 0, are skipped: reserved is not known before
  // schema 11) and dashed lines at the run's peak_allocated and peak_reserved. HostMemory:
  // offtune's pinned pool (what it reserves) behind its host copies alive, and a dashed line at
  // the run's pinned_bytes.
  enum Mode { Occupancy, DeviceMemory, HostMemory };

  explicit RunChart(Mode mode, QWidget* parent = nullptr);

  Mode mode() const { return mode_; }
  // Prepares the series in O(samples); null clears the chart. Does not touch the axis.
  void setRun(RunDataPtr run);
  const RunDataPtr& run() const { return run_; }
  // Whether there is anything to plot (else the chart says so in its middle).
  bool hasData() const;
  // Time of the run's first event, step or sample: tooltips show times relative to it, like the
  // timeline's ruler.
  int64_t timeOrigin() const { return origin_; }

  // Paints [view_begin, view_end) into `area` (tests and benchmarks paint into a QImage this way;
  // paintEvent does the same with the axis' view).
  void paintChart(QPainter& painter, const QRect& area, int64_t view_begin, int64_t view_end,
                  RenderStats* out = nullptr) const;
  int lastFramePrimitives() const { return last_stats_.primitives; }

  QString toolTipAt(const QPoint& pos) const override;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* e) override;

 private:
  void drawSeries(QPainter& painter, const detail::ChartSeries& s, const QRect& plot,
                  int64_t view_begin, int64_t view_end, double y_max, RenderStats& stats) const;

  Mode mode_;
  RunDataPtr run_;
  std::vector<detail::ChartSeries> series_;
  int64_t origin_ = 0;
  int64_t y_max_ = 0;  // the largest value plotted (the peak line included)
  // Dashed lines at the run's peaks (DeviceMemory: allocated, then reserved; HostMemory: the
  // pinned pool), each beside its series' curve; 0 bytes: unknown, not drawn.
  struct PeakLine {
    QString label;
    QColor colour;  // its series'
    int64_t bytes = 0;
  };
  std::vector<PeakLine> peaks_;
  RenderStats last_stats_;
};

}  // namespace offtune::gui
