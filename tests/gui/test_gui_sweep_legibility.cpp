// What the sweep charts say must read true at a glance: the slowdown scale's ends are real,
// positive slowdowns, and a cell no point can have (checkpoint none x offload boundaries) is marked
// not applicable with a tooltip saying why, rather than left blank like a gap.
#include <gtest/gtest.h>

#include <QHelpEvent>
#include <QImage>
#include <QTest>
#include <QToolTip>
#include <cmath>
#include <memory>

#include "offtune/gui/sweep_charts.hpp"

namespace offtune::gui {
namespace {

namespace pf = offtune::profiler;

constexpr int64_t kMiB = 1024 * 1024;

pf::PointRecord ok_point(int64_t index, bool offload, double ms, int64_t peak_mib) {
  pf::PointRecord p;
  p.id = pf::PointId(index + 1);
  p.sweep = pf::SweepId(3);
  p.index = index;
  p.config.offload = offload;
  p.config.min_offload_size = 1024;
  p.config.max_fwd_stash_size = 1 + index;
  p.status = pf::PointStatus::Ok;
  p.run = pf::RunId(100 + index);
  p.summary.step_ms_median = ms;
  p.summary.peak_allocated = peak_mib * kMiB;
  p.summary.hidden_copy_pct = 50.0;
  p.summary.offloaded_bytes = offload ? kMiB : 0;
  return p;
}

QImage render(QWidget& w) {
  QImage img(w.size(), QImage::Format_ARGB32);
  img.fill(Qt::black);
  w.render(&img);
  return img;
}

double slowdown_of(const QString& label) {
  QString number = label.trimmed();
  EXPECT_TRUE(number.endsWith(QLatin1Char('x'))) << label.toStdString();
  number.chop(1);
  bool ok = false;
  const double v = number.toDouble(&ok);
  EXPECT_TRUE(ok) << label.toStdString();
  return v;
}

// The sweep: one point 4.249x slower than the baseline, one 0.8x (faster). A scale
// centred on 1.0x mirrored 4.249x into "-2.249x"; its ends are the real worst and best now.
TEST(HeatmapSlowdownScale, EndsAreTheRealWorstAndBestSlowdowns) {
  auto d = std::make_shared<SweepData>();
  d->sweep.id = pf::SweepId(3);
  d->points = {ok_point(0, false, 10.0, 400), ok_point(1, true, 42.49, 100),
               ok_point(2, true, 11.0, 200), ok_point(3, true, 8.0, 300)};
  HeatmapWidget w;
  w.resize(800, 500);
  w.setData(d);
  w.setMetric(SweepMetric::Slowdown);
  const auto [worst, best] = w.scaleLabels();
  EXPECT_NEAR(slowdown_of(worst), 4.249, 0.01) << worst.toStdString();
  EXPECT_NEAR(slowdown_of(best), 0.8, 0.01) << best.toStdString();
  // A sweep whose points are all slower: the best end is the baseline's 1.00x, never below it.
  d->points[3].summary.step_ms_median = 12.0;
  w.setData(d);
  const auto [worst2, best2] = w.scaleLabels();
  EXPECT_NEAR(slowdown_of(worst2), 4.249, 0.01) << worst2.toStdString();
  EXPECT_NEAR(slowdown_of(best2), 1.0, 1e-9) << best2.toStdString();
  // The cells are coloured on the scale drawn: the worst point at the scale's red end, a point at
  // 1.1x near white.
  const QImage img = render(w);
  const QColor worst_fill(img.pixel(w.cellRect(1).topLeft() + QPoint(8, 8)));
  EXPECT_LT(std::abs(worst_fill.red() - diverging_color(0.0).red()), 4)
      << worst_fill.name().toStdString();
  const QColor near_fill(img.pixel(w.cellRect(2).topLeft() + QPoint(8, 8)));
  EXPECT_GT(near_fill.lightness(), 200) << near_fill.name().toStdString();
}

// Checkpoint {none, all} x offload {all, boundaries}: the pair (none, boundaries) has no point, as
// expand_grid skips it. Its cell is cross-hatched, labelled, and its tooltip says why.
TEST(HeatmapNotApplicable, CheckpointNoneByOffloadBoundariesIsMarkedWithAReason) {
  auto d = std::make_shared<SweepData>();
  d->sweep.id = pf::SweepId(3);
  d->points.push_back(ok_point(0, false, 10.0, 400));
  auto alone = ok_point(1, false, 12.0, 300);
  alone.config.checkpoint = "all";
  d->points.push_back(alone);
  int64_t index = 2;
  for (const std::string ckpt : {"none", "all"}) {
    for (const std::string set : {"all", "boundaries"}) {
      if (ckpt == "none" && set == "boundaries") continue;
      auto p = ok_point(index, true, 10.0 + static_cast<double>(index), 300 - index);
      p.config.max_fwd_stash_size = 1;
      p.config.checkpoint = ckpt;
      p.config.offload_set = set;
      d->points.push_back(p);
      ++index;
    }
  }
  HeatmapWidget w;
  w.resize(800, 500);
  w.setData(d);
  w.setAxes(HeatmapAxis::Checkpoint, HeatmapAxis::OffloadSet);
  ASSERT_EQ(w.rowLabels(), (QStringList{"none", "all"}));
  ASSERT_EQ(w.columnLabels(), (QStringList{"all", "boundaries"}));
  // The empty cell: the row of (none, all) and the column of (all, boundaries).
  const QRect row = w.cellRect(2), col = w.cellRect(4);
  const QRect cell(QPoint(col.left(), row.top()), QPoint(col.right(), row.bottom()));
  ASSERT_FALSE(cell.isEmpty());
  EXPECT_EQ(w.pointAt(cell.center()), -1);
  const auto na = w.notApplicableCells();
  ASSERT_EQ(na.size(), 1u);
  EXPECT_EQ(na[0].rect, cell);
  // Hatched: a good share of the cell is the hatch's grey, not the background's white.
  const QImage img = render(w);
  int grey = 0, all = 0;
  for (int y = cell.top() + 2; y < cell.bottom() - 2; ++y) {
    for (int x = cell.left() + 2; x < cell.right() - 2; ++x) {
      const QColor c(img.pixel(x, y));
      ++all;
      grey += c.lightness() < 225 && c.saturation() < 20;
    }
  }
  EXPECT_GT(grey, all / 20) << "the not-applicable cell is plain";
  // Its tooltip says why.
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  QHelpEvent help(QEvent::ToolTip, cell.center(), w.mapToGlobal(cell.center()));
  QCoreApplication::sendEvent(&w, &help);
  EXPECT_TRUE(QToolTip::isVisible());
  EXPECT_TRUE(QToolTip::text().contains(QStringLiteral("not applicable")))
      << QToolTip::text().toStdString();
  EXPECT_TRUE(QToolTip::text().contains(QStringLiteral("checkpoint none")))
      << QToolTip::text().toStdString();
  // The other axes (the thresholds) have no impossible cell.
  w.setAxes(HeatmapAxis::MinOffloadSize, HeatmapAxis::MaxFwdStashSize);
  EXPECT_TRUE(w.notApplicableCells().empty());
}

}  // namespace
}  // namespace offtune::gui
