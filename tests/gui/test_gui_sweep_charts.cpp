// The sweep charts on a hand-made sweep with known figures: the heatmap's grid mapping, colours and
// marks, the Pareto scatter's mapping, recommendation and constraint shading, the shared tooltip,
// clicks and hovers, and the degenerate sweeps (none, empty, one point, all failed, filling live).
#include <gtest/gtest.h>

#include <QHelpEvent>
#include <QImage>
#include <QLabel>
#include <QMouseEvent>
#include <QSet>
#include <QSignalSpy>
#include <QTest>
#include <QToolTip>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <memory>

#include "gui_test_util.hpp"
#include "offtune/gui/recommend_panel.hpp"
#include "offtune/gui/sweep_charts.hpp"
#include "offtune/profiler/recommend.hpp"

namespace offtune::gui {
namespace {

namespace pf = offtune::profiler;

constexpr int64_t kMiB = 1024 * 1024;

pf::PointRecord make_point(int64_t index, bool offload, int64_t min_size, int64_t stash,
                           pf::PointStatus status, double ms, int64_t peak_mib, double hidden,
                           int64_t run) {
  pf::PointRecord p;
  p.id = pf::PointId(index + 1);
  p.sweep = pf::SweepId(7);
  p.index = index;
  p.config.offload = offload;
  p.config.min_offload_size = min_size;
  p.config.max_fwd_stash_size = stash;
  p.status = status;
  p.run = pf::RunId(run);
  p.summary.step_ms_median = ms;
  p.summary.peak_allocated = peak_mib * kMiB;
  p.summary.hidden_copy_pct = hidden;
  p.summary.offloaded_bytes = offload ? kMiB : 0;
  return p;
}

// Baseline and a grid of min_offload_size {1 KiB, 1 MiB} (rows) x max_fwd_stash_size {1, 2, 4}
// (columns). Step time falls and peak memory rises along the grid; point 3 failed (it has a run),
// point 5 ran out of memory (no run).
std::shared_ptr<SweepData> make_sweep() {
  using S = pf::PointStatus;
  auto d = std::make_shared<SweepData>();
  d->sweep.id = pf::SweepId(7);
  d->sweep.name = "grid";
  d->points = {
      make_point(0, false, 1024, 5, S::Ok, 10.0, 400, 0.0, 100),
      make_point(1, true, 1024, 1, S::Ok, 14.0, 120, 60.0, 101),
      make_point(2, true, 1024, 2, S::Ok, 13.0, 160, 65.0, 102),
      make_point(3, true, 1024, 4, S::Failed, 0.0, 0, 0.0, 103),
      make_point(4, true, kMiB, 1, S::Ok, 11.0, 250, 70.0, 104),
      make_point(5, true, kMiB, 2, S::OutOfMemory, 0.0, 0, 0.0, -1),
      make_point(6, true, kMiB, 4, S::Ok, 10.5, 300, 90.0, 106),
  };
  d->points[3].error = "CUDA error: an illegal <memory> access";
  d->points[5].error = "CUDA out of memory";
  return d;
}

bool near(QColor a, QColor b, int tol = 3) {
  return std::abs(a.red() - b.red()) <= tol && std::abs(a.green() - b.green()) <= tol &&
         std::abs(a.blue() - b.blue()) <= tol;
}

int distinct_colors(const QImage& img) {
  QSet<QRgb> seen;
  for (int y = 0; y < img.height(); y += 2) {
    for (int x = 0; x < img.width(); x += 2) seen.insert(img.pixel(x, y));
  }
  return static_cast<int>(seen.size());
}

// Share of the pixels in `r` that satisfy `pred`.
double share(const QImage& img, const QRect& r, const std::function<bool(QColor)>& pred) {
  int hit = 0, all = 0;
  const QRect in = r.intersected(img.rect());
  for (int y = in.top(); y <= in.bottom(); ++y) {
    for (int x = in.left(); x <= in.right(); ++x) {
      ++all;
      hit += pred(QColor(img.pixel(x, y)));
    }
  }
  return all == 0 ? 0.0 : static_cast<double>(hit) / all;
}

// A fill pixel of a cell: inside the marks' outlines, away from the centred text.
QColor cell_fill(const QImage& img, const QRect& cell) {
  return QColor(img.pixel(cell.topLeft() + QPoint(8, 8)));
}

void send_move(QWidget& w, QPoint pos) {
  QMouseEvent move(QEvent::MouseMove, QPointF(pos), QPointF(w.mapToGlobal(pos)), Qt::NoButton,
                   Qt::NoButton, Qt::NoModifier);
  QCoreApplication::sendEvent(&w, &move);
}

// --- point_tooltip ------------------------------------------------------------------------------

// Each of `parts` is in `text`; a missing one is reported with the text.
void expect_contains(const QString& text, std::initializer_list<const char*> parts) {
  for (const char* part : parts) {
    EXPECT_TRUE(text.contains(QString::fromUtf8(part))) << part << " not in " << text.toStdString();
  }
}

TEST(PointTooltip, OkPointHasItsFigures) {
  const auto d = make_sweep();
  const QString t = point_tooltip(*d, d->points[4]);
  expect_contains(
      t, {"Point 4", "ok", "min_offload_size 1 MiB", "max_fwd_stash_size 1", "run 104",
          "step time 11.0 ms", "slowdown 1.10x", "peak allocated 250.0 MiB", "hidden copy 70.0 %"});
  EXPECT_FALSE(t.contains(QStringLiteral("error")));
}

TEST(PointTooltip, FailedPointHasItsErrorEscaped) {
  const auto d = make_sweep();
  const QString t = point_tooltip(*d, d->points[3]);
  expect_contains(t, {"Point 3", "failed", "error: CUDA error: an illegal &lt;memory&gt; access"});
  EXPECT_FALSE(t.contains(QStringLiteral("step time")));  // no figures for a failed point
  const QString oom = point_tooltip(*d, d->points[5]);
  EXPECT_TRUE(oom.contains(QStringLiteral("out of memory")));
  EXPECT_FALSE(oom.contains(QStringLiteral("run ")));
}

TEST(PointTooltip, BaselineAndPending) {
  auto d = make_sweep();
  const QString base = point_tooltip(*d, d->points[0]);
  EXPECT_TRUE(base.contains(QStringLiteral("baseline"))) << base.toStdString();
  EXPECT_TRUE(base.contains(QStringLiteral("slowdown 1.00x")));
  EXPECT_TRUE(base.contains(QStringLiteral("hidden copy n/a")));
  auto pending = d->points[2];
  pending.status = pf::PointStatus::Pending;
  pending.run = pf::RunId();
  EXPECT_TRUE(point_tooltip(*d, pending).contains(QStringLiteral("not measured yet")));
}

// CIE L*: the lightness the eye sees, which a sequential map must raise evenly.
double cie_lightness(QColor c) {
  const auto lin = [](int v) {
    const double x = v / 255.0;
    return x <= 0.04045 ? x / 12.92 : std::pow((x + 0.055) / 1.055, 2.4);
  };
  const double y = 0.2126 * lin(c.red()) + 0.7152 * lin(c.green()) + 0.0722 * lin(c.blue());
  return y > 0.008856 ? 116.0 * std::cbrt(y) - 16.0 : 903.3 * y;
}

TEST(SequentialColor, LightnessRisesEvenlyAndEndsClamp) {
  const QColor dark = sequential_color(0.0);
  const QColor light = sequential_color(1.0);
  EXPECT_LT(cie_lightness(dark), 25);
  EXPECT_GT(cie_lightness(light), 85);
  EXPECT_EQ(sequential_color(-3.0), dark);
  EXPECT_EQ(sequential_color(7.0), light);
  EXPECT_EQ(sequential_color(std::nan("")), dark);
  // Strictly rising, in steps of similar size: order and distance read without a legend.
  double last = cie_lightness(dark);
  for (int i = 1; i <= 20; ++i) {
    const double l = cie_lightness(sequential_color(i / 20.0));
    EXPECT_GT(l - last, 1.5) << "at " << i;
    EXPECT_LT(l - last, 8.0) << "at " << i;
    last = l;
  }
}

// --- HeatmapWidget ------------------------------------------------------------------------------

// A chart of make_sweep(), 800x500.
template <typename Chart>
class ChartOfSweep : public ::testing::Test {
 protected:
  void SetUp() override {
    data = make_sweep();
    w.resize(800, 500);
    w.setData(data);
  }
  std::shared_ptr<SweepData> data;
  Chart w;
};

using Heatmap = ChartOfSweep<HeatmapWidget>;

TEST_F(Heatmap, AxesAreTheDistinctValuesAscending) {
  EXPECT_EQ(w.stashSizes(), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(w.offloadSizes(), (std::vector<int64_t>{1024, kMiB}));
}

// A sweep over checkpointing and layer offloading too: the heatmap can be drawn over any two of
// its knobs, the others becoming the variant; each cell of a variant holds one point.
TEST(HeatmapAxes, AnyTwoKnobsAreTheGridAndTheRestIsTheVariant) {
  using S = pf::PointStatus;
  auto d = std::make_shared<SweepData>();
  d->sweep.id = pf::SweepId(9);
  d->points.push_back(make_point(0, false, 1024, 5, S::Ok, 10.0, 400, 0.0, 100));
  int64_t index = 1;
  for (const std::string ckpt : {"none", "all"}) {
    for (const int64_t layers : {int64_t{0}, int64_t{1}}) {  // off, on:1
      for (const int64_t size : {int64_t{1024}, kMiB}) {
        for (const int64_t window : {int64_t{1}, int64_t{4}}) {
          auto p = make_point(index, true, size, window, S::Ok, 10.0 + static_cast<double>(index),
                              400 - index, 50.0, 100 + index);
          p.config.checkpoint = parse_checkpoint_policy(ckpt);
          p.config.layer_offload = layers;
          d->points.push_back(p);
          ++index;
        }
      }
    }
  }
  const auto axes = heatmap_axes(*d);
  EXPECT_EQ(axes, (std::vector<HeatmapAxis>{
                      heatmap_axis("min_offload_size"), heatmap_axis("max_fwd_stash_size"),
                      heatmap_axis("checkpoint"), heatmap_axis("layer_offload")}));
  // The default axes: the variants are the checkpointing x layer offloading pairs.
  EXPECT_EQ(sweep_variants(*d), (std::vector<std::string>{
                                    "no checkpointing, layers off", "no checkpointing, layers on:1",
                                    "checkpoint all, layers off", "checkpoint all, layers on:1"}));
  HeatmapWidget w;
  w.resize(800, 500);
  w.setData(d);
  EXPECT_EQ(w.columnLabels(), (QStringList{"1", "4"}));
  // Checkpointing (rows) x layer offloading (columns): the thresholds are the variant now.
  w.setAxes(heatmap_axis("checkpoint"), heatmap_axis("layer_offload"));
  EXPECT_EQ(w.rowLabels(), (QStringList{"none", "all"})) << "in the sweep's order, not sorted";
  EXPECT_EQ(w.columnLabels(), (QStringList{"off", "on:1"}));
  EXPECT_TRUE(w.stashSizes().empty());
  const auto variants =
      sweep_variants(*d, heatmap_axis("checkpoint"), heatmap_axis("layer_offload"));
  ASSERT_EQ(variants.size(), 4u);
  EXPECT_EQ(variants[0], "min_offload_size 1 KiB, window 1");
  std::vector<int64_t> shown;
  for (const auto& [i, label] :
       variants_by_index(*d, heatmap_axis("checkpoint"), heatmap_axis("layer_offload"))) {
    if (label == variants[0]) shown.push_back(i);
  }
  EXPECT_EQ(shown, (std::vector<int64_t>{1, 5, 9, 13}));
  w.setShownPoints(shown);
  // One point per cell, each cell whole and apart from the others.
  std::vector<QRect> cells;
  for (int64_t i : shown) {
    const QRect r = w.cellRect(i);
    ASSERT_FALSE(r.isEmpty()) << i;
    EXPECT_EQ(w.pointAt(r.center()), i);
    for (const QRect& other : cells) EXPECT_FALSE(r.intersects(other)) << i;
    cells.push_back(r);
  }
  EXPECT_TRUE(w.cellRect(2).isEmpty()) << "another variant is not shown";
  // The same axis twice is refused; the axes stay.
  w.setAxes(heatmap_axis("tier"), heatmap_axis("tier"));
  EXPECT_EQ(w.rowAxis(), heatmap_axis("checkpoint"));
  // A sweep of the thresholds alone offers only them.
  EXPECT_EQ(heatmap_axes(*make_sweep()).size(), 2u);
}

TEST_F(Heatmap, PointAtTheCentreOfEachCellIsThatPoint) {
  for (int64_t i = 0; i <= 6; ++i) {
    const QRect r = w.cellRect(i);
    ASSERT_FALSE(r.isEmpty()) << "point " << i;
    EXPECT_TRUE(w.rect().contains(r)) << "point " << i;
    EXPECT_EQ(w.pointAt(r.center()), i);
    EXPECT_EQ(w.pointAt(r.topLeft()), i);
    EXPECT_EQ(w.pointAt(r.bottomRight()), i);
  }
  // Columns ascend rightwards, rows upwards; cells of a row or column line up and do not overlap.
  EXPECT_LT(w.cellRect(1).right(), w.cellRect(2).left());
  EXPECT_LT(w.cellRect(2).right(), w.cellRect(3).left());
  EXPECT_EQ(w.cellRect(1).top(), w.cellRect(3).top());
  EXPECT_LT(w.cellRect(4).bottom(), w.cellRect(1).top());
  EXPECT_EQ(w.cellRect(4).left(), w.cellRect(1).left());
  // The baseline is shown apart, above the grid.
  EXPECT_LT(w.cellRect(0).bottom(), w.cellRect(4).top());
  EXPECT_EQ(w.pointAt(QPoint(1, w.height() - 2)), -1);
  EXPECT_TRUE(w.cellRect(99).isEmpty());
  EXPECT_EQ(w.pointAt(QPoint(-5, -5)), -1);
}

TEST_F(Heatmap, RendersColoursWithBestAtTheLightEnd) {
  const QImage img = test::render_on_black(w);
  EXPECT_GT(distinct_colors(img), 30);
  // Step time, lower is better: point 6 (10.5 ms) is the best, point 1 (14 ms) the worst.
  const QColor best = cell_fill(img, w.cellRect(6));
  const QColor worst = cell_fill(img, w.cellRect(1));
  EXPECT_TRUE(near(best, sequential_color(1.0))) << best.name().toStdString();
  EXPECT_TRUE(near(worst, sequential_color(0.0))) << worst.name().toStdString();
  EXPECT_FALSE(near(best, worst, 40));
  // In between: 13 ms and 11 ms sit at their share of the range.
  EXPECT_TRUE(near(cell_fill(img, w.cellRect(2)), sequential_color(1.0 / 3.5)));
  EXPECT_TRUE(near(cell_fill(img, w.cellRect(4)), sequential_color(3.0 / 3.5)));
}

TEST_F(Heatmap, FailedAndOomCellsAreMarkedNotColoured) {
  const QImage img = test::render_on_black(w);
  const auto failed = w.cellRect(3).adjusted(4, 4, -4, -4);
  const auto oom = w.cellRect(5).adjusted(4, 4, -4, -4);
  const auto corner = [](const QRect& r) { return QRect(r.topLeft(), QSize(24, 24)); };
  // Failed: grey fill and grey hatch, nothing of the colour map.
  EXPECT_DOUBLE_EQ(share(img, corner(failed),
                         [](QColor c) {
                           return std::abs(c.red() - c.green()) <= 6 &&
                                  std::abs(c.green() - c.blue()) <= 6;
                         }),
                   1.0);
  // Hatched: two shades at least.
  EXPECT_GT(share(img, corner(failed), [](QColor c) { return c.lightness() < 170; }), 0.02);
  // Out of memory: red hatch on pink.
  EXPECT_DOUBLE_EQ(
      share(img, corner(oom),
            [](QColor c) { return c.red() >= c.green() + 20 && c.red() >= c.blue() + 20; }),
      1.0);
  EXPECT_GT(share(img, corner(oom), [](QColor c) { return c.red() - c.green() > 80; }), 0.02);
  // Neither holds the colour of any value.
  for (const QRect& r : {failed, oom}) {
    for (double t = 0.0; t <= 1.0; t += 0.05) {
      const QColor m = sequential_color(t);
      EXPECT_LT(share(img, corner(r), [&](QColor c) { return near(c, m, 4); }), 0.01) << t;
    }
  }
}

TEST_F(Heatmap, SwitchingMetricsRecolours) {
  w.setMetric(SweepMetric::PeakAllocated);  // lower is better: point 1 (120 MiB) now the best
  QImage img = test::render_on_black(w);
  EXPECT_TRUE(near(cell_fill(img, w.cellRect(1)), sequential_color(1.0)));
  EXPECT_TRUE(near(cell_fill(img, w.cellRect(6)), sequential_color(0.0)));
  w.setMetric(SweepMetric::HiddenCopy);  // higher is better: point 6 (90 %) the best
  img = test::render_on_black(w);
  EXPECT_TRUE(near(cell_fill(img, w.cellRect(6)), sequential_color(1.0)));
  EXPECT_TRUE(near(cell_fill(img, w.cellRect(1)), sequential_color(0.0)));
  // Slowdown diverges from 1.0x (the baseline, 10 ms) on a log scale: every offload point here is
  // slower, the slowest (point 1, 1.4x) at the dark red end, and 1.05x (point 6) near the neutral
  // middle.
  w.setMetric(SweepMetric::Slowdown);
  img = test::render_on_black(w);
  EXPECT_TRUE(near(cell_fill(img, w.cellRect(1)), diverging_color(0.0)));
  EXPECT_TRUE(near(cell_fill(img, w.cellRect(6)),
                   diverging_color(0.5 - std::log(1.05) / (2 * std::log(1.4))), 4));
  EXPECT_EQ(w.sweepMetric(), SweepMetric::Slowdown);
}

// A point whose thresholds kept every tensor copied nothing: its hidden-copy share is not 0 % (the
// worst colour) but not applicable, like the baseline's.
TEST(SweepMetrics, HiddenCopyOfAPointThatCopiedNothingIsNotApplicable) {
  const auto sweep = make_sweep();
  pf::PointRecord p = sweep->points[1];
  ASSERT_TRUE(metric_value(*sweep, p, SweepMetric::HiddenCopy));
  p.summary.offloaded_bytes = 0;
  p.summary.hidden_copy_pct = 0.0;
  EXPECT_FALSE(metric_value(*sweep, p, SweepMetric::HiddenCopy));
  EXPECT_TRUE(metric_value(*sweep, p, SweepMetric::StepTime));
  EXPECT_FALSE(metric_value(*sweep, sweep->points[0], SweepMetric::HiddenCopy));  // the baseline
}

TEST_F(Heatmap, HighlightedCellIsOutlined) {
  const QImage before = test::render_on_black(w);
  w.setHighlighted(2);
  const QImage after = test::render_on_black(w);
  const QRect r = w.cellRect(2);
  const QPoint edge = r.topLeft() + QPoint(2, r.height() / 3);
  EXPECT_NE(before.pixel(edge), after.pixel(edge));
  EXPECT_TRUE(near(QColor(after.pixel(edge)), Qt::black, 10));
  // The fill inside stays the value's colour.
  EXPECT_EQ(before.pixel(r.topLeft() + QPoint(8, 8)), after.pixel(r.topLeft() + QPoint(8, 8)));
}

TEST_F(Heatmap, ClickActivatesOnlyPointsWithARun) {
  QSignalSpy spy(&w, &HeatmapWidget::pointActivated);
  QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, w.cellRect(4).center());
  ASSERT_EQ(spy.count(), 1);
  EXPECT_EQ(spy.at(0).at(0).toLongLong(), 4);
  QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, w.cellRect(0).center());  // baseline
  ASSERT_EQ(spy.count(), 2);
  EXPECT_EQ(spy.at(1).at(0).toLongLong(), 0);
  QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, w.cellRect(5).center());     // OOM, no run
  QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, QPoint(2, w.height() - 2));  // nothing
  QTest::mouseClick(&w, Qt::RightButton, Qt::NoModifier, w.cellRect(4).center());
  EXPECT_EQ(spy.count(), 2);
}

TEST_F(Heatmap, HoverReportsThePointAndLeaving) {
  QSignalSpy spy(&w, &HeatmapWidget::pointHovered);
  send_move(w, w.cellRect(2).center());
  send_move(w, w.cellRect(2).center() + QPoint(1, 1));  // same point: no repeat
  send_move(w, w.cellRect(5).center());
  QEvent leave(QEvent::Leave);
  QCoreApplication::sendEvent(&w, &leave);
  ASSERT_EQ(spy.count(), 3);
  EXPECT_EQ(spy.at(0).at(0).toLongLong(), 2);
  EXPECT_EQ(spy.at(1).at(0).toLongLong(), 5);
  EXPECT_EQ(spy.at(2).at(0).toLongLong(), -1);
}

TEST_F(Heatmap, ToolTipEventShowsThePointsFigures) {
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  const QPoint at = w.cellRect(6).center();
  QHelpEvent help(QEvent::ToolTip, at, w.mapToGlobal(at));
  QCoreApplication::sendEvent(&w, &help);
  EXPECT_TRUE(QToolTip::isVisible());
  EXPECT_EQ(QToolTip::text(), point_tooltip(*data, data->points[6]));
  const QPoint nowhere(2, w.height() - 2);
  QHelpEvent none(QEvent::ToolTip, nowhere, w.mapToGlobal(nowhere));
  QCoreApplication::sendEvent(&w, &none);
  // Away from every point the tooltip goes (Qt hides it on a short timer).
  EXPECT_TRUE(QTest::qWaitFor([] { return !QToolTip::isVisible(); }, 5000));
}

TEST(HeatmapEdge, NoDataNoPointsAndBaselineOnly) {
  HeatmapWidget w;
  w.resize(400, 300);
  EXPECT_EQ(w.pointAt(QPoint(200, 150)), -1);
  EXPECT_TRUE(w.cellRect(0).isEmpty());
  EXPECT_GT(distinct_colors(test::render_on_black(w)), 1);  // "No sweep"
  w.setData(std::make_shared<SweepData>());
  test::render_on_black(w);
  EXPECT_EQ(w.pointAt(QPoint(200, 150)), -1);
  auto d = make_sweep();
  d->points.resize(1);  // the baseline alone
  w.setData(d);
  test::render_on_black(w);
  EXPECT_TRUE(w.stashSizes().empty());
  EXPECT_EQ(w.pointAt(w.cellRect(0).center()), 0);
  w.setData(nullptr);
  test::render_on_black(w);
  EXPECT_EQ(w.pointAt(QPoint(200, 150)), -1);
}

TEST(HeatmapEdge, SingleCellIsBoundedAndMapped) {
  auto d = make_sweep();
  d->points.resize(2);
  HeatmapWidget w;
  w.resize(900, 700);
  w.setData(d);
  const QRect r = w.cellRect(1);
  ASSERT_FALSE(r.isEmpty());
  EXPECT_LE(r.width(), 240);
  EXPECT_LE(r.height(), 140);
  EXPECT_EQ(w.pointAt(r.center()), 1);
  // One value: the cell is coloured, not blank.
  const QImage img = test::render_on_black(w);
  const QColor fill = cell_fill(img, r);
  EXPECT_NE(fill, QColor(Qt::white));
  EXPECT_TRUE(near(fill, sequential_color(0.5)));
}

TEST(HeatmapEdge, DuplicateConfigsSplitTheCell) {
  auto d = make_sweep();
  d->points[2].config = d->points[1].config;  // same config, e.g. a grid over another knob
  d->points[2].config.prefetch = 2;
  HeatmapWidget w;
  w.resize(800, 500);
  w.setData(d);
  const QRect a = w.cellRect(1);
  const QRect b = w.cellRect(2);
  ASSERT_FALSE(a.isEmpty());
  ASSERT_FALSE(b.isEmpty());
  EXPECT_FALSE(a.intersects(b));
  EXPECT_EQ(a.top(), b.top());
  EXPECT_EQ(w.pointAt(a.center()), 1);
  EXPECT_EQ(w.pointAt(b.center()), 2);
  EXPECT_EQ(a.left(), w.cellRect(4).left());  // both in the column of stash size 1
  EXPECT_EQ(b.right(), w.cellRect(4).right());
  test::render_on_black(w);
}

TEST(HeatmapEdge, FillingLiveKeepsTheLayoutAndMarks) {
  const auto full = make_sweep();
  auto live = std::make_shared<SweepData>(*full);
  for (auto& p : live->points) {
    p.status = pf::PointStatus::Pending;
    p.run = pf::RunId();
    p.error.clear();
  }
  HeatmapWidget w;
  w.resize(800, 500);
  w.setHighlighted(6);
  w.setData(live);
  const QRect cell6 = w.cellRect(6);
  QImage img = test::render_on_black(w);
  // Pending: no value's colour yet.
  EXPECT_FALSE(near(cell_fill(img, w.cellRect(1)), sequential_color(0.0), 20));
  QSignalSpy spy(&w, &HeatmapWidget::pointActivated);
  QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, w.cellRect(1).center());
  EXPECT_EQ(spy.count(), 0);  // pending points have no run
  for (size_t i = 0; i < full->points.size(); ++i) {
    auto next = std::make_shared<SweepData>(*live);
    next->points[i] = full->points[i];
    live = next;
    w.setData(live);
    test::render_on_black(w);
  }
  EXPECT_EQ(w.cellRect(6), cell6);
  img = test::render_on_black(w);
  EXPECT_TRUE(near(cell_fill(img, w.cellRect(1)), sequential_color(0.0)));
  QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, w.cellRect(1).center());
  EXPECT_EQ(spy.count(), 1);
}

TEST(HeatmapEdge, AllFailedAndTinySizes) {
  auto d = make_sweep();
  for (auto& p : d->points) p.status = pf::PointStatus::Failed;
  HeatmapWidget w;
  w.resize(800, 500);
  w.setData(d);
  for (SweepMetric m : kSweepMetrics) {
    w.setMetric(m);
    test::render_on_black(w);
  }
  EXPECT_EQ(w.pointAt(w.cellRect(4).center()), 4);
  for (QSize s : {QSize(1, 1), QSize(30, 20), QSize(120, 80)}) {
    w.resize(s);
    test::render_on_black(w);
    w.pointAt(QPoint(s.width() / 2, s.height() / 2));
  }
}

// --- ParetoWidget -------------------------------------------------------------------------------

bool is_shade(QColor c) {
  // The over-limit shading over the white base: light, reddish, green and blue alike.
  return c.red() > 240 && c.green() > 200 && c.green() < 238 &&
         std::abs(c.green() - c.blue()) < 8 && c.red() - c.green() > 12;
}

class Pareto : public ChartOfSweep<ParetoWidget> {
 protected:
  // Judged on peak allocated, the figure the chart plots, as the dashboard's Recommend panel does.
  pf::Recommendation recommend_with(pf::Constraint c) {
    c.memory = pf::MemoryFigure::Allocated;
    return pf::recommend(data->points, c);
  }
};

TEST_F(Pareto, PointsMapToTheirPositionsAndBack) {
  const QRectF plot = w.plotArea();
  ASSERT_FALSE(plot.isEmpty());
  for (int64_t i : {0, 1, 2, 4, 6}) {
    const QPointF at = w.positionOf(i);
    EXPECT_TRUE(plot.contains(at)) << "point " << i;
    EXPECT_EQ(w.pointAt(at.toPoint()), i);
    EXPECT_EQ(w.pointAt(at.toPoint() + QPoint(5, 0)), i);  // within reach
    const auto& s = data->points[static_cast<size_t>(i)].summary;
    EXPECT_EQ(w.mapToPlot(static_cast<double>(s.peak_allocated), s.step_ms_median), at);
  }
  // Failed and out-of-memory points are not plotted.
  EXPECT_EQ(w.positionOf(3), QPointF(-1, -1));
  EXPECT_EQ(w.positionOf(5), QPointF(-1, -1));
  EXPECT_EQ(w.caption(), QStringLiteral("1 failed, 1 out of memory"));
  // More memory lies to the right, more time higher up.
  EXPECT_LT(w.positionOf(1).x(), w.positionOf(6).x());
  EXPECT_GT(w.positionOf(6).x(), w.positionOf(4).x());
  EXPECT_LT(w.positionOf(1).y(), w.positionOf(6).y());
  EXPECT_EQ(w.pointAt(QPoint(2, 2)), -1);
  EXPECT_EQ(w.pointAt((w.positionOf(1).toPoint() + w.positionOf(2).toPoint()) / 2 + QPoint(0, 40)),
            -1);
}

TEST_F(Pareto, RecommendedPointIsMarked) {
  const QRect around(w.positionOf(2).toPoint() - QPoint(14, 14), QSize(29, 29));
  const auto green = [](QColor c) { return c.green() > c.red() + 60 && c.green() > c.blue() + 40; };
  EXPECT_EQ(share(test::render_on_black(w), around, green), 0.0);
  pf::Constraint c;
  c.memory_budget = 200 * kMiB;
  const auto rec = recommend_with(c);
  ASSERT_TRUE(rec.chosen);
  ASSERT_EQ(rec.chosen->index, 2);
  w.setRecommendation(rec);
  const QImage img = test::render_on_black(w);
  EXPECT_GT(share(img, around, green), 0.05);
  EXPECT_GT(distinct_colors(img), 30);
}

TEST_F(Pareto, MemoryBudgetShadesTheRegionBeyondIt) {
  const QImage plain = test::render_on_black(w);
  pf::Constraint c;
  c.memory_budget = 200 * kMiB;
  w.setRecommendation(recommend_with(c));
  const QImage img = test::render_on_black(w);
  const QRectF plot = w.plotArea();
  const int line_x = static_cast<int>(w.mapToPlot(200.0 * kMiB, 12.0).x());
  ASSERT_GT(line_x, plot.left() + 10);
  ASSERT_LT(line_x, plot.right() - 10);
  const QRect beyond(
      QPoint(line_x + 3, static_cast<int>(plot.top()) + 30),
      QPoint(static_cast<int>(plot.right()) - 3, static_cast<int>(plot.bottom()) - 3));
  const QRect within(QPoint(static_cast<int>(plot.left()) + 3, static_cast<int>(plot.top()) + 3),
                     QPoint(line_x - 3, static_cast<int>(plot.bottom()) - 30));
  EXPECT_GT(share(img, beyond, is_shade), 0.6);
  EXPECT_LT(share(img, within, is_shade), 0.02);
  EXPECT_LT(share(plain, beyond, is_shade), 0.02);
}

TEST_F(Pareto, MaxSlowdownShadesTheRegionAboveIt) {
  pf::Constraint c;
  c.max_slowdown = 1.2;  // 12 ms over a 10 ms baseline
  const auto rec = recommend_with(c);
  ASSERT_TRUE(rec.chosen);
  EXPECT_EQ(rec.chosen->index, 4);
  w.setRecommendation(rec);
  const QImage img = test::render_on_black(w);
  const QRectF plot = w.plotArea();
  const int line_y = static_cast<int>(w.mapToPlot(200.0 * kMiB, 12.0).y());
  ASSERT_GT(line_y, plot.top() + 10);
  ASSERT_LT(line_y, plot.bottom() - 10);
  const QRect above(QPoint(static_cast<int>(plot.left()) + 3, static_cast<int>(plot.top()) + 3),
                    QPoint(static_cast<int>(plot.right()) - 3, line_y - 3));
  const QRect below(
      QPoint(static_cast<int>(plot.left()) + 3, line_y + 24),
      QPoint(static_cast<int>(plot.right()) - 3, static_cast<int>(plot.bottom()) - 3));
  EXPECT_GT(share(img, above, is_shade), 0.6);
  EXPECT_LT(share(img, below, is_shade), 0.02);
}

TEST_F(Pareto, ClickAndHover) {
  QSignalSpy activated(&w, &ParetoWidget::pointActivated);
  QSignalSpy hovered(&w, &ParetoWidget::pointHovered);
  QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, w.positionOf(6).toPoint());
  ASSERT_EQ(activated.count(), 1);
  EXPECT_EQ(activated.at(0).at(0).toLongLong(), 6);
  QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, QPoint(3, 3));
  EXPECT_EQ(activated.count(), 1);
  send_move(w, w.positionOf(1).toPoint() + QPoint(3, -3));
  send_move(w, QPoint(3, 3));
  ASSERT_EQ(hovered.count(), 2);
  EXPECT_EQ(hovered.at(0).at(0).toLongLong(), 1);
  EXPECT_EQ(hovered.at(1).at(0).toLongLong(), -1);
  w.setSelected(4);
  test::render_on_black(w);
}

TEST(ParetoEdge, DegenerateSweeps) {
  ParetoWidget w;
  w.resize(600, 400);
  test::render_on_black(w);  // no data
  EXPECT_EQ(w.pointAt(QPoint(300, 200)), -1);
  EXPECT_EQ(w.positionOf(0), QPointF(-1, -1));
  EXPECT_TRUE(w.plotArea().isEmpty());
  w.setRecommendation(pf::Recommendation{});
  w.setData(std::make_shared<SweepData>());
  test::render_on_black(w);
  EXPECT_TRUE(w.caption().isEmpty());

  // A single point: plotted inside the axes, not on the frame.
  auto one = make_sweep();
  one->points.resize(1);
  w.setData(one);
  test::render_on_black(w);
  const QPointF at = w.positionOf(0);
  EXPECT_TRUE(w.plotArea().adjusted(5, 5, -5, -5).contains(at));
  EXPECT_EQ(w.pointAt(at.toPoint()), 0);

  // All-equal figures.
  auto same = make_sweep();
  for (auto& p : same->points) {
    p.status = pf::PointStatus::Ok;
    p.summary.step_ms_median = 12.0;
    p.summary.peak_allocated = 64 * kMiB;
  }
  w.setData(same);
  w.setRecommendation(pf::recommend(same->points, {}));
  test::render_on_black(w);
  EXPECT_TRUE(w.plotArea().contains(w.positionOf(3)));

  // Everything failed: nothing plotted, all counted.
  auto failed = make_sweep();
  for (auto& p : failed->points) p.status = pf::PointStatus::Failed;
  w.setData(failed);
  w.setRecommendation(pf::recommend(failed->points, {}));
  test::render_on_black(w);
  EXPECT_TRUE(w.plotArea().isEmpty());
  EXPECT_EQ(w.caption(), QStringLiteral("7 failed"));
  EXPECT_EQ(w.pointAt(QPoint(300, 200)), -1);
  // It says so, not that points are to come (issue 43 item 12), and so does the panel, rather than
  // that nothing fits a budget.
  EXPECT_EQ(w.emptyText(), QStringLiteral("No point measured ok: 7 failed"));
  {
    RecommendPanel panel;
    panel.setSweep(failed, "");
    const QString result = panel.findChild<QLabel*>(QStringLiteral("result"))->text();
    EXPECT_TRUE(result.startsWith(QStringLiteral("No point was measured ok: 7 failed, 0 out of")))
        << result.toStdString();
  }
  auto empty = std::make_shared<SweepData>();
  w.setData(empty);
  EXPECT_EQ(w.emptyText(), QStringLiteral("No measured points yet"));

  // Zero figures and a budget far off the axis.
  auto zero = make_sweep();
  for (auto& p : zero->points) {
    p.summary.step_ms_median = 0.0;
    p.summary.peak_allocated = 0;
  }
  w.setData(zero);
  pf::Constraint c;
  c.memory_budget = int64_t{80} * 1024 * kMiB;
  w.setRecommendation(pf::recommend(zero->points, c));
  test::render_on_black(w);
  w.resize(10, 10);
  test::render_on_black(w);
  EXPECT_EQ(w.pointAt(QPoint(5, 5)), -1);
}

// --- ParetoWidget with predictions (predict-first sweeps)
// -----------------------------------------

pf::PointPrediction predicted(int64_t index, double ms, int64_t peak_mib) {
  pf::PointPrediction q;
  q.sweep = pf::SweepId(7);
  q.index = index;
  q.step_ns = static_cast<int64_t>(ms * 1e6);
  q.peak_allocated = peak_mib * kMiB;
  q.hidden_copy_pct = 55.0;
  q.offloaded_bytes = kMiB;
  q.predictor = "what-if, offtune test";
  return q;
}

bool is_predicted_purple(QColor c) {
  return c.red() > c.green() + 25 && c.blue() > c.green() + 40 && c.green() < 200;
}

// make_sweep's points with predictions: point 1 off (15 ms, 110 MiB against 14 ms, 120 MiB), point
// 2 exact, point 3 (failed) and point 7 (not in the store: only predicted).
TEST(ParetoPredicted, PredictionsAreHollowMarkersLinkedToTheirMeasurements) {
  auto data = make_sweep();
  ParetoWidget w;
  w.resize(800, 500);
  w.setData(data);
  EXPECT_EQ(w.predictedCount(), 0);
  EXPECT_FALSE(w.legendLabels().contains("predicted"));
  const QImage before = test::render_on_black(w);

  data = make_sweep();
  data->predictions = {predicted(1, 15.0, 110), predicted(2, 13.0, 160), predicted(3, 12.0, 180),
                       predicted(7, 9.5, 420)};
  w.setData(data);
  EXPECT_EQ(w.predictedCount(), 4);
  const QStringList legend = w.legendLabels();
  EXPECT_TRUE(legend.contains("predicted")) << legend.join(", ").toStdString();
  EXPECT_TRUE(legend.contains(QStringLiteral("prediction \u2192 measured")));
  const QRectF plot = w.plotArea();
  for (int64_t i : {1, 2, 3, 7}) EXPECT_TRUE(plot.contains(w.predictedPositionOf(i))) << i;
  EXPECT_EQ(w.predictedPositionOf(4), QPointF(-1, -1)) << "no prediction of point 4";
  // An exact prediction sits on its measurement; an off one apart from it, where its figures say.
  EXPECT_EQ(w.predictedPositionOf(2), w.positionOf(2));
  EXPECT_NE(w.predictedPositionOf(1), w.positionOf(1));
  EXPECT_EQ(w.predictedPositionOf(1), w.mapToPlot(110.0 * kMiB, 15.0));
  // A point only predicted is plotted where predicted, and found there; a measured point stays
  // the one found on its own position.
  EXPECT_EQ(w.positionOf(7), w.predictedPositionOf(7));
  EXPECT_EQ(w.pointAt(w.predictedPositionOf(7).toPoint()), 7);
  EXPECT_EQ(w.pointAt(w.positionOf(2).toPoint()), 2);
  EXPECT_EQ(w.pointAt(w.predictedPositionOf(1).toPoint()), 1);
  // The predicted axis range includes point 7's 420 MiB beyond every measured peak.
  EXPECT_GE(w.axisRange(Qt::Horizontal).second, 420.0 * kMiB);

  const QImage img = test::render_on_black(w);
  // Point 7's hollow marker: a purple ring, the base colour inside it.
  const QPoint at7 = w.predictedPositionOf(7).toPoint();
  EXPECT_GT(share(img, QRect(at7 - QPoint(8, 8), QSize(17, 17)), is_predicted_purple), 0.05);
  EXPECT_EQ(share(before, QRect(at7 - QPoint(8, 8), QSize(17, 17)), is_predicted_purple), 0.0);
  const QColor centre(img.pixel(at7));
  EXPECT_GT(centre.lightness(), 200) << "hollow, not filled";
  // The line from point 1's prediction to its measurement: purple half way along.
  const QPointF mid = (w.predictedPositionOf(1) + w.positionOf(1)) / 2.0;
  EXPECT_GT(share(img, QRect(mid.toPoint() - QPoint(2, 2), QSize(5, 5)), is_predicted_purple), 0.0);

  // The tooltips: predicted figures, and the error where measured.
  const QString off = point_tooltip(*data, data->points[1]);
  EXPECT_TRUE(off.contains("<i>predicted</i>: step time 15")) << off.toStdString();
  EXPECT_TRUE(off.contains("prediction error: step time +7.1 %, peak -8.3 %")) << off.toStdString();
  const QString failed = point_tooltip(*data, data->points[3]);
  EXPECT_TRUE(failed.contains("predicted")) << failed.toStdString();
  EXPECT_FALSE(failed.contains("prediction error"));
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  QHelpEvent help(QEvent::ToolTip, at7, w.mapToGlobal(at7));
  QCoreApplication::sendEvent(&w, &help);
  ASSERT_TRUE(QToolTip::isVisible());
  EXPECT_TRUE(QToolTip::text().contains("predicted, not measured"))
      << QToolTip::text().toStdString();
  EXPECT_TRUE(QToolTip::text().contains("step time 9.5")) << QToolTip::text().toStdString();
  // Only predicted: nothing to open on a click.
  QSignalSpy activated(&w, &ParetoWidget::pointActivated);
  QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, at7);
  EXPECT_EQ(activated.count(), 0);
}

// Exact predictions (a device model) draw no lines: no legend entry for them.
TEST(ParetoPredicted, ExactPredictionsNeedNoLineInTheLegend) {
  auto data = make_sweep();
  data->predictions = {predicted(1, 14.0, 120), predicted(2, 13.0, 160)};
  ParetoWidget w;
  w.resize(800, 500);
  w.setData(data);
  EXPECT_TRUE(w.legendLabels().contains("predicted"));
  EXPECT_FALSE(w.legendLabels().contains(QStringLiteral("prediction \u2192 measured")));
  // Predictions alone (the sweep measured nothing yet): plotted.
  auto only = std::make_shared<SweepData>();
  only->predictions = {predicted(0, 10.0, 400), predicted(1, 14.0, 120)};
  w.setData(only);
  EXPECT_FALSE(w.plotArea().isEmpty());
  EXPECT_TRUE(w.plotArea().contains(w.positionOf(1)));
  test::render_on_black(w);
}

}  // namespace
}  // namespace offtune::gui
