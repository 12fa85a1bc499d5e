// What the sweep charts say must read true at a glance: the slowdown scale's ends are real,
// positive slowdowns, and a cell no point can have (checkpoint none x offload boundaries) is marked
// not applicable with a tooltip saying why, rather than left blank like a gap.
#include <gtest/gtest.h>

#include <QApplication>
#include <QComboBox>
#include <QHeaderView>
#include <QHelpEvent>
#include <QImage>
#include <QTableView>
#include <QTest>
#include <QToolTip>
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "gui_test_util.hpp"
#include "offtune/gui/models.hpp"
#include "offtune/gui/recommend_panel.hpp"
#include "offtune/gui/sweep_charts.hpp"
#include "offtune/gui/sweep_view.hpp"
#include "offtune/profiler/recommend.hpp"

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
  const QImage img = test::render_on_black(w);
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
  alone.config.checkpoint = CheckpointPolicy::all();
  d->points.push_back(alone);
  int64_t index = 2;
  for (const std::string ckpt : {"none", "all"}) {
    for (const std::string set : {"all", "boundaries"}) {
      if (ckpt == "none" && set == "boundaries") continue;
      auto p = ok_point(index, true, 10.0 + static_cast<double>(index), 300 - index);
      p.config.max_fwd_stash_size = 1;
      p.config.checkpoint = parse_checkpoint_policy(ckpt);
      p.config.offload_set = parse_offload_set(set);
      d->points.push_back(p);
      ++index;
    }
  }
  HeatmapWidget w;
  w.resize(800, 500);
  w.setData(d);
  w.setAxes(heatmap_axis("checkpoint"), heatmap_axis("offload_set"));
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
  const QImage img = test::render_on_black(w);
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
  w.setAxes(heatmap_axis("min_offload_size"), heatmap_axis("max_fwd_stash_size"));
  EXPECT_TRUE(w.notApplicableCells().empty());
}

// A sweep over one more knob than the thresholds: the baseline and (1 KiB, window 1) under each
// value of the knob, set by `vary` (point 1 gets the first value, point 2 the second).
std::shared_ptr<SweepData> two_variants(const std::function<void(pf::EngineConfig&, int)>& vary) {
  auto d = std::make_shared<SweepData>();
  d->sweep.id = pf::SweepId(3);
  d->points.push_back(ok_point(0, false, 10.0, 400));
  for (int k = 0; k < 2; ++k) {
    auto p = ok_point(1 + k, true, 11.0 + k, 300 - k);
    p.config.max_fwd_stash_size = 1;
    vary(p.config, k);
    d->points.push_back(p);
  }
  return d;
}

QString variant_text(const PointsTableModel& m, int row) {
  return m.data(m.index(row, PointsTableModel::Variant)).toString();
}

// Two "1 KiB, 1" rows of a trl,offtune sweep (or a prefetch 0,2 sweep) must say what tells them
// apart: the Variant column is shown and names the knob's value.
TEST(SweepTables, EveryKnobTheSweepVariesShowsInTheVariantColumn) {
  const auto semantics = two_variants([](pf::EngineConfig& c, int k) {
    c.semantics = k == 0 ? Semantics::Offtune : Semantics::Trl;
  });
  EXPECT_TRUE(has_variants(*semantics)) << "the views hide the Variant column otherwise";
  PointsTableModel m;
  m.setSweep(semantics);
  ASSERT_EQ(m.rowCount(), 3);
  EXPECT_TRUE(variant_text(m, 1).contains(QStringLiteral("offtune semantics")))
      << variant_text(m, 1).toStdString();
  EXPECT_TRUE(variant_text(m, 2).contains(QStringLiteral("trl semantics")))
      << variant_text(m, 2).toStdString();
  const auto prefetch = two_variants([](pf::EngineConfig& c, int k) { c.prefetch = 2 * k; });
  EXPECT_TRUE(has_variants(*prefetch));
  m.setSweep(prefetch);
  EXPECT_EQ(variant_text(m, 1), QStringLiteral("prefetch 0"));
  EXPECT_EQ(variant_text(m, 2), QStringLiteral("prefetch 2"));
  // A checkpointing sweep keeps its words; a sweep of the thresholds alone has no variant.
  const auto ckpt = two_variants([](pf::EngineConfig& c, int k) {
    c.checkpoint = k == 0 ? CheckpointPolicy::none() : CheckpointPolicy::all();
  });
  m.setSweep(ckpt);
  EXPECT_EQ(variant_text(m, 2), QStringLiteral("checkpoint all"));
  const auto plain = two_variants([](pf::EngineConfig& c, int k) { c.min_offload_size <<= k; });
  EXPECT_FALSE(has_variants(*plain));
}

QStringList items(const QComboBox* c) {
  QStringList out;
  for (int i = 0; i < c->count(); ++i) out << c->itemText(i);
  return out;
}

// The heatmap's axes on offer are the sweep's: the thresholds and the knobs it varies. Axes chosen
// for one sweep that the next does not vary go back to the thresholds.
TEST(SweepAxes, OnlyTheSweepsVariedAxesAreOfferedAndOthersAreReset) {
  SweepView view;
  view.resize(1200, 800);
  auto* rows = view.findChild<QComboBox*>(QStringLiteral("heatmapRows"));
  auto* columns = view.findChild<QComboBox*>(QStringLiteral("heatmapColumns"));
  ASSERT_TRUE(rows && columns);
  const auto semantics = two_variants([](pf::EngineConfig& c, int k) {
    c.semantics = k == 0 ? Semantics::Offtune : Semantics::Trl;
  });
  view.setSweepData(semantics, "a.db");
  const QStringList offered{"min_offload_size", "max_fwd_stash_size", "semantics"};
  EXPECT_EQ(items(rows), offered);
  EXPECT_EQ(items(columns), offered);
  view.setAxes(heatmap_axis("min_offload_size"), heatmap_axis("semantics"));
  EXPECT_EQ(view.heatmap()->columnAxis(), heatmap_axis("semantics"));
  // Another sweep, of checkpointing: semantics does not apply there.
  const auto ckpt = two_variants([](pf::EngineConfig& c, int k) {
    c.checkpoint = k == 0 ? CheckpointPolicy::none() : CheckpointPolicy::all();
  });
  view.setSweepData(ckpt, "b.db");
  EXPECT_EQ(items(columns), (QStringList{"min_offload_size", "max_fwd_stash_size", "checkpoint"}));
  EXPECT_EQ(view.heatmap()->rowAxis(), heatmap_axis("min_offload_size"));
  EXPECT_EQ(view.heatmap()->columnAxis(), heatmap_axis("max_fwd_stash_size"));
  EXPECT_EQ(columns->currentText(), QStringLiteral("max_fwd_stash_size"));
  // A choice that still applies stays.
  view.setAxes(heatmap_axis("checkpoint"), heatmap_axis("max_fwd_stash_size"));
  view.setSweepData(ckpt, "b.db");
  EXPECT_EQ(view.heatmap()->rowAxis(), heatmap_axis("checkpoint"));
  EXPECT_EQ(rows->currentText(), QStringLiteral("checkpoint"));
}

// The figures a user chooses by, step and peak, stay in view in the recommendation panel's front
// table however long the variants are, at the panel's width in a 1280x800 window (its minimum) and
// in a 1920x1080 one.
TEST(FrontTable, StepAndPeakAreAlwaysInView) {
  auto d = std::make_shared<SweepData>();
  d->sweep.id = pf::SweepId(3);
  d->points.push_back(ok_point(0, false, 10.0, 400));
  const char* variants[][3] = {
      {"every:2", "boundaries", "disk"}, {"all", "all", "auto"}, {"every:3", "boundaries", "host"}};
  for (int k = 0; k < 3; ++k) {
    // Each faster and bigger than the last: all on the front.
    auto p = ok_point(1 + k, true, 14.0 - k, 100 + 50 * k);
    p.config.checkpoint = parse_checkpoint_policy(variants[k][0]);
    p.config.offload_set = parse_offload_set(variants[k][1]);
    p.config.tier = parse_tier(variants[k][2]);
    p.config.layer_offload = 2;  // on:2
    p.config.semantics = k == 1 ? Semantics::Trl : Semantics::Offtune;
    d->points.push_back(p);
  }
  RecommendPanel panel;
  panel.setSweep(d, "front.db");
  ASSERT_GE(panel.frontModel()->rowCount(), 3);
  auto* table = panel.findChild<QTableView*>();
  ASSERT_NE(table, nullptr);
  ASSERT_EQ(table->model(), panel.frontModel());
  panel.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&panel));
  for (const int width : {340, 460}) {
    panel.resize(width, 700);
    QApplication::processEvents();
    EXPECT_FALSE(table->isColumnHidden(PointsTableModel::Variant));
    for (const int c : {PointsTableModel::StepTime, PointsTableModel::Peak}) {
      ASSERT_FALSE(table->isColumnHidden(c));
      const int left = table->columnViewportPosition(c);
      EXPECT_GE(left, 0) << "column " << c << " at width " << width;
      EXPECT_LE(left + table->columnWidth(c), table->viewport()->width())
          << "column " << c << " at width " << width;
      // Wide enough for its figures.
      for (int row = 0; row < panel.frontModel()->rowCount(); ++row) {
        const QString text = panel.frontModel()->data(panel.frontModel()->index(row, c)).toString();
        EXPECT_GE(table->columnWidth(c), table->fontMetrics().horizontalAdvance(text))
            << text.toStdString();
      }
    }
    // The variant, elided in its column, is whole in the cell's tooltip.
    const QModelIndex v = panel.frontModel()->index(0, PointsTableModel::Variant);
    EXPECT_EQ(panel.frontModel()->data(v, Qt::ToolTipRole).toString(),
              panel.frontModel()->data(v).toString());
  }
}

bool crosses(const QRectF& r, const QLineF& line) {
  if (r.contains(line.p1()) || r.contains(line.p2())) return true;
  const QLineF edges[] = {{r.topLeft(), r.topRight()},
                          {r.topRight(), r.bottomRight()},
                          {r.bottomRight(), r.bottomLeft()},
                          {r.bottomLeft(), r.topLeft()}};
  for (const QLineF& e : edges) {
    if (line.intersects(e, nullptr) == QLineF::BoundedIntersection) return true;
  }
  return false;
}

// Where the issue saw labels collide: points crowding the slowdown limit (its label among the
// front markers), the recommended point next to the baseline (the baseline's label through its
// ring), the front's steps passing the recommended label. At every size, no label overlaps a
// marker, a line or another label, and each is inside the plot.
// Issue 34, item 13: a variant's legend entry (a filled circle in the points' blue) looked exactly
// like "other points". No two entries of the legend may be drawn alike.
TEST(ParetoLegend, NoTwoEntriesLookAlikeInASweepOfVariants) {
  auto d = std::make_shared<SweepData>();
  d->sweep.id = pf::SweepId(3);
  d->points.push_back(ok_point(0, false, 10.0, 400));
  int64_t index = 1;
  for (const char* checkpoint : {"none", "all"}) {
    for (const auto& [ms, peak] : {std::pair{12.0, 200}, std::pair{15.0, 260}}) {
      pf::PointRecord p = ok_point(index++, true, ms, peak);
      p.config.checkpoint = parse_checkpoint_policy(checkpoint);
      d->points.push_back(p);
    }
  }
  ParetoWidget w;
  w.setData(d);
  pf::Constraint slowdown;
  slowdown.max_slowdown = 2.0;
  w.setRecommendation(pf::recommend(d->points, slowdown));
  w.resize(800, 500);
  const QStringList labels = w.legendLabels();
  const QStringList glyphs = w.legendGlyphs();
  ASSERT_EQ(labels.size(), glyphs.size());
  ASSERT_TRUE(labels.contains(QStringLiteral("other points"))) << labels.join(", ").toStdString();
  ASSERT_GE(w.markerShape(1), 0) << "the sweep has no variants";
  for (int i = 0; i < glyphs.size(); ++i) {
    for (int j = i + 1; j < glyphs.size(); ++j) {
      EXPECT_NE(glyphs[i], glyphs[j])
          << labels[i].toStdString() << " and " << labels[j].toStdString() << " are drawn alike";
    }
  }
}

TEST(ParetoLabels, NoLabelOverlapsAMarkerALineOrAnotherLabel) {
  auto d = std::make_shared<SweepData>();
  d->sweep.id = pf::SweepId(3);
  d->points.push_back(ok_point(0, false, 10.0, 400));
  const std::pair<double, int64_t> points[] = {{12.6, 110}, {12.45, 130}, {12.3, 150},
                                               {12.1, 175}, {11.0, 240},  {10.6, 300},
                                               {10.1, 380}, {13.5, 105},  {11.8, 260}};
  int64_t index = 1;
  for (const auto& [ms, peak] : points) d->points.push_back(ok_point(index++, true, ms, peak));
  pf::Constraint slowdown;
  slowdown.max_slowdown = 1.25;
  pf::Constraint budget;
  budget.memory_budget = 385 * kMiB;  // the point next to the baseline
  for (const pf::Constraint& c : {slowdown, budget}) {
    ParetoWidget w;
    w.setData(d);
    const auto rec = pf::recommend(d->points, c);
    ASSERT_TRUE(rec.chosen.has_value());
    w.setRecommendation(rec);
    for (const QSize size :
         {QSize(360, 280), QSize(520, 400), QSize(800, 500), QSize(1000, 640), QSize(640, 760)}) {
      w.resize(size);
      const std::string at = std::to_string(size.width()) + "x" + std::to_string(size.height()) +
                             (c.max_slowdown ? " slowdown" : " budget");
      const auto labels = w.plotLabels();
      ASSERT_EQ(labels.size(), 3u) << at;
      // Markers: each point's, and the recommended ring (radius 10, a 3 px pen).
      std::vector<std::pair<QRectF, std::string>> marks;
      for (const auto& p : d->points) {
        const QPointF pos = w.positionOf(p.index);
        marks.emplace_back(QRectF(pos - QPointF(7, 7), QSizeF(14, 14)),
                           "point " + std::to_string(p.index));
      }
      const QPointF chosen = w.positionOf(rec.chosen->index);
      marks.emplace_back(QRectF(chosen - QPointF(12, 12), QSizeF(24, 24)), "recommended ring");
      // Lines: the front's steps (across to the next point's memory, then down) and the limit.
      std::vector<QPointF> front;
      for (const auto& q : rec.front) front.push_back(w.positionOf(q.index));
      std::sort(front.begin(), front.end(), [](const QPointF& a, const QPointF& b) {
        return a.x() != b.x() ? a.x() < b.x() : a.y() > b.y();
      });
      std::vector<std::pair<QLineF, std::string>> lines;
      for (size_t i = 1; i < front.size(); ++i) {
        const QPointF corner(front[i].x(), front[i - 1].y());
        lines.emplace_back(QLineF(front[i - 1], corner), "front");
        lines.emplace_back(QLineF(corner, front[i]), "front");
      }
      const auto mark = w.constraintMark();
      ASSERT_TRUE(mark.has_value()) << at;
      lines.emplace_back(mark->line, "constraint line");
      const QRectF plot = w.plotArea();
      for (size_t a = 0; a < labels.size(); ++a) {
        const auto& l = labels[a];
        const std::string name = l.text.toStdString() + " at " + at;
        EXPECT_TRUE(plot.contains(l.rect)) << name;
        for (const auto& [r, what] : marks) {
          EXPECT_FALSE(l.rect.intersects(r)) << name << " covers " << what;
        }
        for (const auto& [line, what] : lines) {
          EXPECT_FALSE(crosses(l.rect, line)) << name << " crossed by " << what;
        }
        for (size_t b = a + 1; b < labels.size(); ++b) {
          EXPECT_FALSE(l.rect.intersects(labels[b].rect))
              << name << " overlaps " << labels[b].text.toStdString();
        }
      }
    }
  }
}

}  // namespace
}  // namespace offtune::gui
