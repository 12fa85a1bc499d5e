// What the sweep charts say must read true at a glance: the slowdown scale's ends are real,
// positive slowdowns, and a cell no point can have (checkpoint none x offload boundaries) is marked
// not applicable with a tooltip saying why, rather than left blank like a gap. The heatmap's cells
// show their values legibly at the window sizes people use; the tables print apart what rounds
// alike and show each step time's spread; a sweep's variants fill the heatmap one at a time or side
// by side; the Pareto chart's labels, axis and legend neither collide nor mislead.
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
#include <set>
#include <string_view>

#include "gui_test_util.hpp"
#include "offtune/gui/main_window.hpp"
#include "offtune/gui/models.hpp"
#include "offtune/gui/recommend_panel.hpp"
#include "offtune/gui/sweep_charts.hpp"
#include "offtune/gui/sweep_view.hpp"
#include "offtune/profiler/knob_text.hpp"
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
  p.summary.peak_reserved = p.summary.peak_allocated + 2 * kMiB;  // what an allocator rounds up
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

// Pixels of `r` whose colour is far from `fill`: the ink of a label drawn on it.
QRect ink_box(const QImage& img, const QRect& r, QColor fill, int* count) {
  QRect box;
  *count = 0;
  const QRect in = r.intersected(img.rect());
  for (int y = in.top(); y <= in.bottom(); ++y) {
    for (int x = in.left(); x <= in.right(); ++x) {
      const QColor c(img.pixel(x, y));
      const int d = std::abs(c.red() - fill.red()) + std::abs(c.green() - fill.green()) +
                    std::abs(c.blue() - fill.blue());
      if (d > 120) {
        ++*count;
        box = box.united(QRect(x, y, 1, 1));
      }
    }
  }
  return box;
}

// At 1280x800, 1600x1000 and 1920x1080 every cell of an 8 x 4 grid shows its value in legible
// text, and the recommended cell's text stays inside its outline.
TEST(HeatmapLabels, HeatmapCellsShowTheirValuesAtCommonWindowSizes) {
  const auto sweep = test::realistic_sweep();
  for (QSize size : {QSize(1280, 800), QSize(1600, 1000), QSize(1920, 1080)}) {
    MainWindow window;
    window.resize(size);
    window.sweepView()->setSweepData(sweep, "");
    test::settle(window);
    HeatmapWidget* heat = window.sweepView()->heatmap();
    const QImage img = heat->grab().toImage();
    const auto rec = pf::recommend(sweep->points, {});
    ASSERT_TRUE(rec.chosen.has_value());
    for (const auto& p : sweep->points) {
      if (!p.config.offload) continue;
      const QRect r = heat->cellRect(p.index);
      ASSERT_FALSE(r.isEmpty()) << size.width() << " point " << p.index;
      const QColor fill(img.pixel(r.topLeft() + QPoint(8, 8)));
      int ink = 0;
      const QRect box = ink_box(img, r.adjusted(6, 6, -6, -6), fill, &ink);
      EXPECT_GT(ink, 15) << size.width() << "x" << size.height() << ": point " << p.index
                         << " shows no value in a " << r.width() << "x" << r.height() << " cell";
      // Digits at least 7 px tall: not the 8 px font of the issue.
      EXPECT_GE(box.height(), 7) << size.width() << ": point " << p.index;
      EXPECT_GE(r.width(), 0.12 * heat->width()) << "the grid uses its pane";
    }
    // The recommended cell: its white inner line (4 px in) is whole, no text crosses it.
    const QRect r = heat->cellRect(rec.chosen->index);
    const QRect inner = r.adjusted(4, 4, -4, -4);
    int crossed = 0;
    for (int x = inner.left(); x <= inner.right(); ++x) {
      for (int y : {inner.top(), inner.bottom()})
        crossed += QColor(img.pixel(x, y)).lightness() < 235;
    }
    for (int y = inner.top(); y <= inner.bottom(); ++y) {
      for (int x : {inner.left(), inner.right()})
        crossed += QColor(img.pixel(x, y)).lightness() < 235;
    }
    EXPECT_EQ(crossed, 0) << size.width() << ": the recommended cell's text crosses its outline";
  }
}

// The label as painted: never below the minimum font size, inside the cell less the marks' margin;
// a cell too small for the value with its unit gets a shorter form, not a smaller font.
TEST(HeatmapLabels, CellLabelsKeepAMinimumFontAndShortenInstead) {
  const auto sweep = test::realistic_sweep();
  HeatmapWidget heat;
  heat.setData(sweep);
  heat.setHighlighted(16);
  bool shortened = false;
  for (QSize size :
       {QSize(900, 600), QSize(420, 600), QSize(300, 600), QSize(250, 600), QSize(300, 220)}) {
    heat.resize(size);
    for (const auto& p : sweep->points) {
      if (!p.config.offload) continue;
      const auto label = heat.cellLabel(p.index);
      ASSERT_FALSE(label.cell.isEmpty());
      const double pt = label.font.pointSizeF();
      EXPECT_GE(pt, HeatmapWidget::kMinLabelPointSize);
      EXPECT_GE(pt, heat.font().pointSizeF());  // never shrunk
      if (label.text.isEmpty()) continue;
      const QRect room =
          label.cell.adjusted(HeatmapWidget::kLabelInset, HeatmapWidget::kLabelInset,
                              -HeatmapWidget::kLabelInset, -HeatmapWidget::kLabelInset);
      EXPECT_TRUE(room.contains(label.rect))
          << size.width() << ": " << label.text.toStdString() << " of point " << p.index;
      shortened = shortened || !label.text.contains(QStringLiteral("ms"));
    }
    if (size.width() == 900) {
      EXPECT_TRUE(heat.cellLabel(16).text.startsWith(QStringLiteral("2.50 ms")))
          << heat.cellLabel(16).text.toStdString();
    }
  }
  EXPECT_TRUE(shortened);  // the small sizes dropped the unit rather than the font size
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
  // Issue 43 defect 14: under TRL's rules the engine prefetches nothing; a TRL x prefetch sweep's
  // variant says so instead of passing "trl semantics, prefetch 1" for a setting of its own.
  const auto trl_prefetch = two_variants([](pf::EngineConfig& c, int k) {
    c.semantics = Semantics::Trl;
    c.prefetch = k;
  });
  m.setSweep(trl_prefetch);
  EXPECT_EQ(variant_text(m, 2), QStringLiteral("prefetch 1 (unused: TRL's rules prefetch nothing)"))
      << variant_text(m, 2).toStdString();
  // Without streams the engine prefetches nothing either.
  const auto no_streams = two_variants([](pf::EngineConfig& c, int k) {
    c.use_streams = false;
    c.prefetch = k;
  });
  m.setSweep(no_streams);
  EXPECT_EQ(variant_text(m, 2), QStringLiteral("prefetch 1 (unused: no streams, no prefetch)"))
      << variant_text(m, 2).toStdString();
  // A checkpointing sweep keeps its words; a sweep of the thresholds alone has no variant.
  const auto ckpt = two_variants([](pf::EngineConfig& c, int k) {
    c.checkpoint = k == 0 ? CheckpointPolicy::none() : CheckpointPolicy::all();
  });
  m.setSweep(ckpt);
  EXPECT_EQ(variant_text(m, 2), QStringLiteral("checkpoint all"));
  const auto plain = two_variants([](pf::EngineConfig& c, int k) { c.min_offload_size <<= k; });
  EXPECT_FALSE(has_variants(*plain));
}

// Two peaks 20 KiB apart in 7.1 MiB print apart, and the tooltip gives the exact bytes.
TEST(SweepTables, PeaksThatRoundAlikePrintApartWithExactBytesInTheTooltip) {
  auto d = test::realistic_sweep();
  d->points[1].summary.peak_allocated = 7466248;
  d->points[2].summary.peak_allocated = 7486728;
  PointsTableModel model;
  model.setSweep(d);
  const QString a = model.data(model.index(1, PointsTableModel::PeakAllocated)).toString();
  const QString b = model.data(model.index(2, PointsTableModel::PeakAllocated)).toString();
  EXPECT_NE(a, b) << a.toStdString();
  EXPECT_TRUE(a.startsWith(QStringLiteral("7.12"))) << a.toStdString();
  EXPECT_TRUE(model.data(model.index(1, PointsTableModel::PeakAllocated), Qt::ToolTipRole)
                  .toString()
                  .contains(QStringLiteral("7,466,248")));
  EXPECT_TRUE(point_tooltip(*d, d->points[2]).contains(QStringLiteral("7,486,728")));
}

// A step time measured by a clock shows its 95 % interval (one from a device model says it is
// exact), in the tooltip, the table and the heatmap's cells; points tied with the recommended one
// within noise say so in the Choice column.
TEST(SweepTables, SpreadIsShownAndTiesAreMarked) {
  const auto noisy = test::realistic_sweep(false);
  const auto exact = test::realistic_sweep(true);
  EXPECT_TRUE(point_tooltip(*noisy, noisy->points[5]).contains(QStringLiteral("95 % CI")));
  EXPECT_TRUE(point_tooltip(*exact, exact->points[5]).contains(QStringLiteral("exact (modelled)")));
  PointsTableModel model;
  // Point 13 measured as point 14 within noise, at its peak: a tie under a 78 MB budget. (Points
  // whose thresholds keep every tensor are not ties of the baseline: they do its work.)
  noisy->points[13].summary = noisy->points[14].summary;
  noisy->points[13].summary.step_ms_median *= 1.01;
  pf::Constraint budget{78'000'000, std::nullopt};
  budget.memory = pf::MemoryFigure::Allocated;  // the fixture records allocated peaks only
  const auto rec = pf::recommend(noisy->points, budget);
  ASSERT_TRUE(rec.chosen.has_value());
  ASSERT_FALSE(rec.ties.empty()) << rec.rationale;
  std::vector<int64_t> ties;
  for (const auto& t : rec.ties) ties.push_back(t.index);
  model.setSweep(noisy, std::nullopt, rec.chosen->index, ties);
  const int row = model.rowOfPoint(ties[0]);
  EXPECT_TRUE(model.data(model.index(row, PointsTableModel::Choice)).toString().contains("noise"));
  EXPECT_EQ(model.data(model.index(model.rowOfPoint(rec.chosen->index), PointsTableModel::Choice))
                .toString(),
            "recommended");
  EXPECT_TRUE(model.data(model.index(row, PointsTableModel::StepInterval))
                  .toString()
                  .contains(QStringLiteral("95 % CI")));
  model.setSweep(exact);
  EXPECT_EQ(model.data(model.index(3, PointsTableModel::StepInterval)).toString(),
            "exact (modelled)");
  // The heatmap's cells carry the spread under the value when there is room.
  HeatmapWidget heat;
  heat.resize(1000, 700);
  heat.setData(noisy);
  EXPECT_TRUE(heat.cellLabel(5).text.contains(QStringLiteral("\u00b1")))
      << heat.cellLabel(5).text.toStdString();
  heat.setData(exact);
  EXPECT_FALSE(heat.cellLabel(5).text.contains(QStringLiteral("\u00b1")));
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

// A sweep over another knob besides the two of the heatmap (here the semantics) offers its
// variants; one chosen fills each cell alone, "all" splits the cells among them.
TEST(SweepAxes, AVariantOfTheSweepFillsTheHeatmapAlone) {
  auto d = std::make_shared<SweepData>();
  d->sweep.id = pf::SweepId(3);
  d->sweep.name = "axes";
  const auto point = [](int64_t index, bool offload, int64_t size, const char* semantics,
                        double ms) {
    pf::PointRecord p;
    p.sweep = pf::SweepId(3);
    p.index = index;
    p.config.offload = offload;
    p.config.min_offload_size = size;
    p.config.max_fwd_stash_size = 1;
    p.config.semantics = parse_semantics(semantics);
    p.status = pf::PointStatus::Ok;
    p.run = pf::RunId(index + 1);
    p.summary.step_ms_median = ms;
    p.summary.peak_allocated = 1000 + index;
    return p;
  };
  d->points = {point(0, false, 1024, "offtune", 1.0), point(1, true, 1024, "offtune", 2.0),
               point(2, true, 1024, "trl", 2.5), point(3, true, 1 << 20, "offtune", 1.5),
               point(4, true, 1 << 20, "trl", 1.7)};
  SweepView view;
  view.resize(1280, 800);
  view.show();
  view.setSweepData(d, "");
  QApplication::processEvents();
  const auto* variant = view.findChild<QComboBox*>(QStringLiteral("variant"));
  ASSERT_NE(variant, nullptr);
  EXPECT_TRUE(variant->isVisible());
  ASSERT_EQ(variant->count(), 3);
  EXPECT_EQ(variant->itemText(1).toStdString(), "offtune semantics");
  EXPECT_EQ(variant->itemText(2).toStdString(), "trl semantics");
  HeatmapWidget* heat = view.heatmap();
  const QRect split_offtune = heat->cellRect(1), split_trl = heat->cellRect(2);
  ASSERT_FALSE(split_offtune.isEmpty());
  EXPECT_FALSE(split_offtune.intersects(split_trl));  // one cell, two halves
  view.setVariant(QStringLiteral("trl semantics"));
  EXPECT_TRUE(heat->cellRect(1).isEmpty());
  EXPECT_TRUE(heat->cellRect(3).isEmpty());
  const QRect alone = heat->cellRect(2);
  EXPECT_GE(alone.width(), 2 * split_trl.width() - 2);
  EXPECT_TRUE(alone.contains(split_offtune.center()));
  EXPECT_EQ(heat->pointAt(alone.center()), 2);
  EXPECT_FALSE(heat->cellRect(0).isEmpty()) << "the baseline is always shown";
  // The choice survives a point measured live; "all" splits again.
  view.applyPoint(point(4, true, 1 << 20, "trl", 1.6));
  EXPECT_TRUE(heat->cellRect(1).isEmpty());
  view.setVariant(QString());
  EXPECT_FALSE(heat->cellRect(1).isEmpty());
  // The Pareto chart tells the variants apart by marker shape (colour says front or not).
  ParetoWidget* pareto = view.pareto();
  EXPECT_EQ(pareto->markerShape(0), -1);  // the baseline's square
  EXPECT_EQ(pareto->markerShape(1), 0);
  EXPECT_EQ(pareto->markerShape(3), 0);
  EXPECT_EQ(pareto->markerShape(2), 1);
  EXPECT_EQ(pareto->markerShape(4), 1);
  // Semantics as the columns, min_offload_size the rows: every point has its own cell, the window
  // (the same everywhere) is no variant, and the choice of a variant is gone with it.
  auto* rows = view.findChild<QComboBox*>(QStringLiteral("heatmapRows"));
  auto* columns = view.findChild<QComboBox*>(QStringLiteral("heatmapColumns"));
  ASSERT_TRUE(rows && columns);
  EXPECT_TRUE(columns->isVisible()) << "a sweep over another knob offers the axes";
  // As wide as the Sweep tab is in a 1280x800 window (the store tree beside it), no combo of the
  // header is narrower than its text.
  view.resize(1060, 760);
  QApplication::processEvents();
  for (const QComboBox* c :
       {static_cast<const QComboBox*>(rows), static_cast<const QComboBox*>(columns), variant}) {
    EXPECT_GE(c->width(), c->sizeHint().width()) << c->objectName().toStdString();
  }
  columns->setCurrentIndex(columns->findText(QStringLiteral("semantics")));
  EXPECT_EQ(heat->columnAxis(), heatmap_axis("semantics"));
  EXPECT_EQ(heat->columnLabels(), (QStringList{"offtune", "trl"}));
  EXPECT_FALSE(variant->isVisible());
  for (int64_t i = 1; i <= 4; ++i) EXPECT_EQ(heat->pointAt(heat->cellRect(i).center()), i);
  // Choosing for the rows what the columns show swaps them.
  rows->setCurrentIndex(rows->findText(QStringLiteral("semantics")));
  EXPECT_EQ(heat->rowAxis(), heatmap_axis("semantics"));
  EXPECT_EQ(heat->columnAxis(), heatmap_axis("min_offload_size"));
  EXPECT_EQ(columns->currentText(), QStringLiteral("min_offload_size"));
  view.setAxes(heatmap_axis("min_offload_size"), heatmap_axis("max_fwd_stash_size"));
  EXPECT_TRUE(variant->isVisible());
  // Side by side (small multiples): one heatmap per variant, each with its variant's points alone,
  // on one colour scale.
  view.setSideBySide(true);
  QApplication::processEvents();
  ASSERT_EQ(view.facets().size(), 2u);
  EXPECT_FALSE(heat->isVisible());
  for (size_t k = 0; k < 2; ++k) {
    HeatmapWidget* f = view.facets()[k];
    EXPECT_TRUE(f->isVisible());
    const std::vector<int64_t> own =
        k == 0 ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{2, 4};
    const std::vector<int64_t> other =
        k == 0 ? std::vector<int64_t>{2, 4} : std::vector<int64_t>{1, 3};
    for (int64_t i : own) EXPECT_EQ(f->pointAt(f->cellRect(i).center()), i) << k;
    for (int64_t i : other) EXPECT_TRUE(f->cellRect(i).isEmpty()) << k;
    ASSERT_TRUE(f->valueRange());
    EXPECT_EQ(*f->valueRange(), std::make_pair(1.5, 2.5)) << "every facet on the sweep's range";
  }
  view.setMetric(SweepMetric::PeakAllocated);
  EXPECT_EQ(*view.facets()[0]->valueRange(), std::make_pair(1001.0, 1004.0));
  view.setSideBySide(false);
  EXPECT_TRUE(heat->isVisible());
  // One variant: nothing to choose, one shape.
  auto one = std::make_shared<SweepData>(*d);
  one->points.resize(2);
  view.setSweepData(one, "");
  EXPECT_FALSE(variant->isVisible());
  EXPECT_FALSE(columns->isVisible()) << "only the two thresholds: nothing to choose";
  EXPECT_EQ(pareto->markerShape(1), -1);
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
    // The memory column is the figure the front was judged on (the device total by default).
    const int judged =
        PointsTableModel::memoryColumn(memory_metric(panel.recommendation().constraint.memory));
    EXPECT_EQ(judged, PointsTableModel::PeakTotal);
    for (const int c : {static_cast<int>(PointsTableModel::StepTime), judged}) {
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

// Nine variants (checkpoint x offload set x link, as `offtune sweep --link pcie4,pcie5,nvlink-c2c
// --checkpoint none,all --offload all,boundaries` makes): every point of the grid's pair, the
// baseline, and each variant twice.
std::shared_ptr<SweepData> nine_variants() {
  auto d = std::make_shared<SweepData>();
  d->sweep.id = pf::SweepId(3);
  d->points.push_back(ok_point(0, false, 10.0, 400));
  int64_t index = 1;
  const Knob& link = *heatmap_axis("link");
  const Knob& set = *heatmap_axis("offload_set");
  for (const char* checkpoint : {"none", "all"}) {
    for (const char* offload : {"all", "boundaries"}) {
      if (std::string_view(checkpoint) == "none" && std::string_view(offload) == "boundaries") {
        continue;
      }
      for (const char* l : {"pcie4", "pcie5", "nvlink-c2c"}) {
        for (int64_t size : {1024, 4 << 20}) {
          pf::PointRecord p =
              ok_point(index, true, 12.0 + static_cast<double>(index) * 0.3, 200 + index * 3);
          p.config.min_offload_size = size;
          p.config.max_fwd_stash_size = 1;
          p.config.checkpoint = parse_checkpoint_policy(checkpoint);
          set.set(p.config, pf::parse_knob_text(set, offload));
          link.set(p.config, pf::parse_knob_text(link, l));
          d->points.push_back(p);
          ++index;
        }
      }
    }
  }
  return d;
}

// Issue 43 defect 8: a sweep of nine variants reused four marker shapes, and its legend (one line
// per variant) took half of the Pareto chart. Each variant has a shape of its own, the legend keeps
// to a third of the chart (entries in columns; an entry cut short names itself in full in its
// tooltip), and each slice of a split heatmap cell carries its variant's shape.
TEST(ParetoLegend, NineVariantsHaveNineShapesAndTheLegendLeavesThePlotItsRoom) {
  const auto d = nine_variants();
  ASSERT_EQ(sweep_variants(*d).size(), 9u);
  ParetoWidget w;
  w.resize(340, 420);
  w.setData(d);
  w.setRecommendation(pf::recommend(d->points, {}));
  std::set<int> shapes;
  for (size_t i = 1; i < d->points.size(); ++i) shapes.insert(w.markerShape(d->points[i].index));
  EXPECT_EQ(shapes.size(), 9u) << "variants share a marker shape";
  EXPECT_GE(w.plotArea().height(), 0.5 * w.height())
      << "the legend leaves the plot " << w.plotArea().height() << " of " << w.height() << " px";
  const QStringList glyphs = w.legendGlyphs();
  EXPECT_EQ(std::set<QString>(glyphs.begin(), glyphs.end()).size(),
            static_cast<size_t>(glyphs.size()));
  // Every variant entry says its whole name somewhere: drawn whole, or in its tooltip.
  for (const std::string& v : sweep_variants(*d)) {
    const QString name = QString::fromStdString(v);
    EXPECT_TRUE(w.legendLabels().contains(name)) << v;
    EXPECT_EQ(w.legendTooltip(name), name) << v;
  }

  HeatmapWidget heat;
  heat.resize(420, 380);
  heat.setData(d);
  test::settle(heat);
  int marked = 0;
  for (size_t i = 1; i < d->points.size(); ++i) {
    const int64_t index = d->points[i].index;
    const int shape = heat.sliceShape(index);
    if (shape < 0) continue;
    ++marked;
    EXPECT_EQ(shape, w.markerShape(index)) << "point " << index;
  }
  EXPECT_EQ(marked, static_cast<int>(d->points.size()) - 1) << "a slice without its shape";
}

// Issue 43 defect 15: a recommended point off the grid (checkpointing alone) left no sign on the
// heatmap, whose legend still read "recommended". The legend says which point it is and that it
// is not on the grid; one on the grid keeps the plain entry.
TEST(HeatmapLegend, ARecommendedPointOffTheGridIsNamedInTheLegend) {
  const auto d = nine_variants();
  pf::PointRecord alone = ok_point(static_cast<int64_t>(d->points.size()), false, 11.0, 150);
  alone.config.checkpoint = CheckpointPolicy::all();
  d->points.push_back(alone);
  HeatmapWidget heat;
  heat.resize(420, 380);
  heat.setData(d);
  heat.setHighlighted(alone.index);
  test::settle(heat);
  EXPECT_TRUE(heat.cellRect(alone.index).isEmpty());
  const QString expected =
      QStringLiteral("recommended #%1, off the grid: checkpoint all, no offload").arg(alone.index);
  EXPECT_TRUE(heat.legendLabels().contains(expected))
      << heat.legendLabels().join(" | ").toStdString();
  // Drawn cut short or not, its tooltip has all of it.
  const QRect whole = heat.rect();
  bool tooltip = false;
  for (int y = 0; y < 60 && !tooltip; y += 2) {
    for (int x = 0; x < whole.width() && !tooltip; x += 4) {
      QHelpEvent help(QEvent::ToolTip, QPoint(x, y), heat.mapToGlobal(QPoint(x, y)));
      QApplication::sendEvent(&heat, &help);
      tooltip = QToolTip::isVisible() && QToolTip::text() == expected;
    }
  }
  EXPECT_TRUE(tooltip) << "no tooltip with the legend entry's whole text";
  QToolTip::hideText();
  heat.setHighlighted(1);
  EXPECT_TRUE(heat.legendLabels().contains(QStringLiteral("recommended")))
      << heat.legendLabels().join(" | ").toStdString();
}

// The Pareto chart says which dots are the front: a legend above the plot with the front's colour.
TEST(ParetoLegend, ParetoHasALegendForFrontAndOtherPoints) {
  const auto d = test::realistic_sweep(false);
  ParetoWidget w;
  w.resize(700, 450);
  w.setData(d);
  w.setRecommendation(pf::recommend(d->points, {}));
  const QImage img = w.grab().toImage();
  const QRect above(0, 0, w.width(), static_cast<int>(w.plotArea().top()) - 4);
  int front = 0, other = 0;
  for (int y = above.top(); y < above.bottom(); ++y) {
    for (int x = above.left(); x < above.right(); ++x) {
      const QColor c(img.pixel(x, y));
      front += std::abs(c.red() - 230) + std::abs(c.green() - 120) + std::abs(c.blue() - 20) < 30;
      other += std::abs(c.red() - 70) + std::abs(c.green() - 110) + std::abs(c.blue() - 170) < 30;
    }
  }
  EXPECT_GT(front, 10);
  EXPECT_GT(other, 10);
}

// Where the issue saw labels collide: points crowding the slowdown limit (its label among the
// front markers), the recommended point next to the baseline (the baseline's label through its
// ring), the front's steps passing the recommended label. At every size, no label overlaps a
// marker, a line or another label, and each is inside the plot.
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
  budget.memory_budget = 385 * kMiB;            // the point next to the baseline
  budget.memory = pf::MemoryFigure::Allocated;  // the widget's axis
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

// The constraint's label (a memory budget or a slowdown bound) is not crossed by its own line, and
// stays inside the plot.
TEST(ParetoLabels, TheConstraintLabelIsNotCrossedByItsLine) {
  const auto d = test::realistic_sweep(false);
  for (QSize size : {QSize(320, 260), QSize(700, 450)}) {
    ParetoWidget w;
    w.resize(size);
    w.setData(d);
    for (pf::Constraint c : {pf::Constraint{}, pf::Constraint{{}, 3.0}, pf::Constraint{{}, 1.02},
                             pf::Constraint{50 * kMiB, {}}, pf::Constraint{46 * kMiB, {}}}) {
      c.memory = pf::MemoryFigure::Allocated;  // the widget's axis
      w.setRecommendation(pf::recommend(d->points, c));
      const auto mark = w.constraintMark();
      ASSERT_TRUE(mark.has_value()) << c.describe();
      const QRectF label = mark->label;
      const QLineF line = mark->line;
      // A horizontal or vertical line: it crosses the label when its coordinate is inside it.
      const bool crosses = line.dy() == 0 ? line.y1() > label.top() && line.y1() < label.bottom()
                                          : line.x1() > label.left() && line.x1() < label.right();
      EXPECT_FALSE(crosses) << size.width() << " " << c.describe();
      EXPECT_TRUE(w.plotArea().contains(label)) << size.width() << " " << c.describe();
    }
  }
}

// An out-of-memory sweep whose two survivors peak 2 KiB apart: the axis is not zoomed into those
// 2 KiB (the points sit near each other, not at the two edges), and no tick labels overlap.
TEST(ParetoLabels, ParetoAxisKeepsASensibleSpanAndTicksApart) {
  auto d = test::realistic_sweep();
  for (auto& p : d->points) {
    if (p.index != 1 && p.index != 2) p.status = pf::PointStatus::OutOfMemory;  // baseline too
  }
  d->points[1].summary.peak_allocated = 46285832;
  d->points[2].summary.peak_allocated = 46287880;
  for (QSize size : {QSize(300, 260), QSize(520, 400), QSize(900, 500)}) {
    ParetoWidget w;
    w.resize(size);
    w.setData(d);
    w.setRecommendation(pf::recommend(d->points, {}));
    const QRectF plot = w.plotArea();
    ASSERT_FALSE(plot.isEmpty());
    const double dx = std::abs(w.positionOf(1).x() - w.positionOf(2).x());
    EXPECT_LT(dx, 0.2 * plot.width()) << size.width();
    const auto [lo, hi] = w.axisRange(Qt::Horizontal);
    EXPECT_GE(hi - lo, ParetoWidget::kMinRelativeSpan * 46287880.0);
    for (Qt::Orientation o : {Qt::Horizontal, Qt::Vertical}) {
      const auto rects = w.tickLabelRects(o);
      EXPECT_GE(rects.size(), 2u);
      for (size_t i = 1; i < rects.size(); ++i) {
        EXPECT_FALSE(rects[i].intersects(rects[i - 1]))
            << size.width() << (o == Qt::Horizontal ? " x" : " y") << " tick " << i;
      }
    }
  }
}

}  // namespace
}  // namespace offtune::gui
