// Issue 14 (an hour of real use of the dashboard): each finding held to a check of what the user
// saw. A realistic 8 x 4 sweep at the window sizes people use, a sweep cancelled from the form,
// the tree while a store changes under it, rounding, layout, spread and the remaining details.
#include <gtest/gtest.h>

#include <QApplication>
#include <QComboBox>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QSignalSpy>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeView>
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "gui_test_util.hpp"
#include "offtune/gui/jobs.hpp"
#include "offtune/gui/main_window.hpp"
#include "offtune/gui/models.hpp"
#include "offtune/gui/recommend_panel.hpp"
#include "offtune/gui/sweep_charts.hpp"
#include "offtune/gui/sweep_form.hpp"
#include "offtune/gui/sweep_view.hpp"
#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/store.hpp"

namespace offtune::gui {
namespace {

namespace pf = offtune::profiler;
constexpr int kWaitMs = 60000;
constexpr int kSweepWaitMs = 300000;
constexpr int64_t kKiB = 1024, kMiB = 1024 * 1024;

// The grid of the issue's sweep: 8 min_offload_size rows x 4 max_fwd_stash_size columns, timed by a
// device model (exact step times), figures shaped like `offtune sweep --model small` on h100-sxm.
std::shared_ptr<SweepData> realistic_sweep(bool exact = true) {
  auto d = std::make_shared<SweepData>();
  d->sweep.id = pf::SweepId(1);
  d->sweep.name = "sweep";
  d->sweep.workload.model = "small";
  const int64_t sizes[] = {kKiB,     16 * kKiB, 256 * kKiB, kMiB,
                           4 * kMiB, 16 * kMiB, 64 * kMiB,  256 * kMiB};
  const int64_t windows[] = {1, 2, 5, 10};
  const auto point = [&](int64_t index, bool offload, int64_t size, int64_t window, double ms,
                         int64_t peak) {
    pf::PointRecord p;
    p.id = pf::PointId(index + 1);
    p.sweep = d->sweep.id;
    p.index = index;
    p.config.offload = offload;
    p.config.min_offload_size = size;
    p.config.max_fwd_stash_size = window;
    p.status = pf::PointStatus::Ok;
    p.run = pf::RunId(index + 1);
    p.summary.step_ms_median = ms;
    p.summary.step_ms_ci_level = 0.95;
    // Exact: every step the same (a device model); else a few percent either side.
    p.summary.step_ms_ci_low = exact ? ms : ms * 0.97;
    p.summary.step_ms_ci_high = exact ? ms : ms * 1.04;
    p.summary.peak_allocated = peak;
    p.summary.offloaded_bytes = offload && size < 4 * kMiB ? 8 * kMiB : 0;
    p.summary.reloaded_bytes = p.summary.offloaded_bytes;
    p.summary.hidden_copy_pct = p.summary.offloaded_bytes > 0 ? 25.0 + 5.0 * window : 0.0;
    return p;
  };
  d->points.push_back(point(0, false, 1024, 5, 1.87, 92507144));
  int64_t index = 1;
  for (int s = 0; s < 8; ++s) {
    for (int w = 0; w < 4; ++w) {
      const bool keeps_all = sizes[s] >= 4 * kMiB;  // thresholds above every tensor: no copies
      const double ms = keeps_all ? 1.87 : (s < 3 ? 6.01 - 0.1 * s - 0.2 * w : 3.40 - 0.3 * w);
      const int64_t peak =
          keeps_all ? 92507144 : (s < 3 ? 46285832 + 1000000 * w : 71371784 + 4000000 * w);
      d->points.push_back(point(index++, true, sizes[s], windows[w], ms, peak));
    }
  }
  return d;
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

void settle(QWidget& w) {
  w.show();
  for (int i = 0; i < 5; ++i) QApplication::processEvents();
}

// --- 1. The heatmap keeps its numbers
// -------------------------------------------------------------

// At the window sizes of the issue (and 1280x800, 1920x1080) every cell of the 8 x 4 grid shows its
// value in legible text, and the recommended cell's text stays inside its outline.
TEST(Issue14, HeatmapCellsShowTheirValuesAtCommonWindowSizes) {
  const auto sweep = realistic_sweep();
  for (QSize size : {QSize(1280, 800), QSize(1600, 1000), QSize(1920, 1080)}) {
    MainWindow window;
    window.resize(size);
    window.sweepView()->setSweepData(sweep, "");
    settle(window);
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
TEST(Issue14, CellLabelsKeepAMinimumFontAndShortenInstead) {
  const auto sweep = realistic_sweep();
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

// --- 2. A cancelled sweep does not look complete
// ----------------------------------------------------

QString heading(const SweepView& view) {
  QStringList all;
  for (const auto* label : view.findChildren<QLabel*>()) {
    if (label->text().startsWith(QStringLiteral("Sweep "))) return label->text();
    all << label->text();
  }
  return all.join(QStringLiteral(" | "));
}

QString tree_status(const StoreTreeModel& model) {
  const QModelIndex sweep = model.index(0, 0, model.index(0, 0));
  return model.data(sweep.siblingAtColumn(StoreTreeModel::Status)).toString();
}

// Cancelled after its first points, a sweep of 7 counts k/7 in the tree, the heading and the form
// alike, and its unmeasured grid points are drawn (hatched), not left out.
TEST(Issue14, ACancelledSweepCountsItsGridInTreeHeadingAndForm) {
  QTemporaryDir dir;
  const QString db = dir.filePath("cancel.db");
  MainWindow window;
  window.resize(1280, 800);
  settle(window);
  SweepForm* form = window.sweepForm();
  form->setRequest(test::tiny_request(db.toStdString(), "1KiB,4KiB,16KiB", "1,2"));  // 7 points
  QSignalSpy finished(form, &SweepForm::sweepFinished);
  int reported = 0;
  QObject::connect(form, &SweepForm::pointFinished, form, [&] {
    if (++reported == 2) form->cancelSweep();
  });
  ASSERT_TRUE(form->startSweep());
  ASSERT_TRUE(finished.wait(kSweepWaitMs));
  ASSERT_TRUE(finished[0][1].toBool()) << "interrupted";
  const int measured = reported;
  ASSERT_GE(measured, 2);
  ASSERT_LT(measured, 7);
  const QString count = QStringLiteral("%1/7").arg(measured);
  // The tree and the view catch up with the store (reload after the sweep ends).
  ASSERT_TRUE(QTest::qWaitFor(
      [&] {
        const auto& d = window.sweepView()->sweepData();
        return window.storeModel()->rowCount() == 2 && d &&
               static_cast<int>(d->points.size()) >= measured &&
               tree_status(*window.storeModel()).startsWith(count) &&
               heading(*window.sweepView()).contains(count);
      },
      kWaitMs))
      << tree_status(*window.storeModel()).toStdString() << " / "
      << heading(*window.sweepView()).toStdString();
  const auto* status = form->findChild<QLabel*>(QStringLiteral("status"));
  ASSERT_NE(status, nullptr);
  EXPECT_TRUE(status->text().contains(count)) << status->text().toStdString();

  // The points the sweep did not reach are on the heatmap, hatched.
  HeatmapWidget* heat = window.sweepView()->heatmap();
  settle(window);
  const QImage img = heat->grab().toImage();
  const auto& points = window.sweepView()->sweepData()->points;
  int unmeasured = 0;
  for (int64_t i = 1; i < 7; ++i) {
    if (std::any_of(points.begin(), points.end(), [&](const auto& p) { return p.index == i; })) {
      continue;
    }
    ++unmeasured;
    const QRect r = heat->cellRect(i);
    ASSERT_FALSE(r.isEmpty()) << "grid point " << i << " is not drawn";
    int hatch = 0;
    for (int y = r.top() + 4; y < r.bottom() - 4; ++y) {
      for (int x = r.left() + 4; x < r.right() - 4; ++x)
        hatch += QColor(img.pixel(x, y)).lightness() < 225;
    }
    EXPECT_GT(hatch, r.width() * r.height() / 40) << "grid point " << i << " is not hatched";
  }
  EXPECT_EQ(unmeasured, 7 - measured);
}

// --- 3. The tree keeps its state
// ------------------------------------------------------------------

using Issue14Store = test::FixtureStore;

// A newer index of the same store (points and runs added, statuses changed) leaves an expanded
// sweep expanded and the selected point selected.
TEST_F(Issue14Store, TreeExpansionAndSelectionSurviveANewerIndex) {
  auto index = std::make_shared<StoreIndex>(load_store_index(path_));
  auto older = std::make_shared<StoreIndex>(*index);
  older->sweeps[0].points.erase(older->sweeps[0].points.begin() + 1);  // point 1 not yet in
  older->sweeps[0].points[2].status = pf::PointStatus::Pending;        // point 3 in progress
  StoreTreeModel model;
  QTreeView tree;
  tree.setModel(&model);
  tree.resize(500, 400);
  model.setIndex(older);
  const QModelIndex sweep = model.sweepIndex(pf::SweepId(1));
  ASSERT_TRUE(sweep.isValid());
  tree.expand(model.index(0, 0));
  tree.expand(sweep);
  const QModelIndex point3 = model.index(2, 0, sweep);
  ASSERT_EQ(model.data(point3, StoreTreeModel::PointIndexRole).toLongLong(), 3);
  tree.setCurrentIndex(point3);
  settle(tree);

  model.setIndex(index);  // point 1 inserted before it, point 3 finished
  const QModelIndex sweep_after = model.sweepIndex(pf::SweepId(1));
  EXPECT_TRUE(tree.isExpanded(sweep_after));
  EXPECT_TRUE(tree.isExpanded(model.index(0, 0)));
  ASSERT_TRUE(tree.currentIndex().isValid());
  EXPECT_EQ(model.data(tree.currentIndex(), StoreTreeModel::PointIndexRole).toLongLong(), 3);
  EXPECT_TRUE(tree.selectionModel()->isSelected(tree.currentIndex()));
  EXPECT_EQ(model.data(tree.currentIndex().siblingAtColumn(StoreTreeModel::Status)).toString(),
            "ok");
}

// The same through the main window: F5 while a sweep is expanded and a point selected.
TEST_F(Issue14Store, MainWindowReloadKeepsTheTreeAsItWas) {
  MainWindow window;
  QSignalSpy loaded(&window, &MainWindow::storeLoaded);
  window.openStore(QString::fromStdString(path_));
  ASSERT_TRUE(loaded.wait(kWaitMs));
  auto* tree = window.findChild<QTreeView*>();
  ASSERT_NE(tree, nullptr);
  const QModelIndex sweep = window.storeModel()->sweepIndex(pf::SweepId(1));
  tree->expand(sweep);
  tree->setCurrentIndex(window.storeModel()->index(2, 0, sweep));
  for (int i = 0; i < 3; ++i) {
    window.reloadStore();
    ASSERT_TRUE(loaded.wait(kWaitMs));
  }
  EXPECT_TRUE(tree->isExpanded(window.storeModel()->sweepIndex(pf::SweepId(1))));
  EXPECT_EQ(tree->currentIndex().data(StoreTreeModel::PointIndexRole).toLongLong(), 2);
}

// The run measuring a sweep's point shows as that point, under its sweep, not under "Runs".
TEST_F(Issue14Store, ARunningPointShowsUnderItsSweep) {
  auto index = std::make_shared<StoreIndex>(load_store_index(path_));
  auto& sweep = index->sweeps[0];
  auto& point = sweep.points[4];
  // The point's run, as it is while it measures: running, and not yet the point's.
  auto running = std::find_if(index->runs.begin(), index->runs.end(),
                              [&](const auto& r) { return r.id == point.run; });
  ASSERT_NE(running, index->runs.end());
  running->id = pf::RunId(77);
  running->status = pf::RunStatus::Running;
  running->label = sweep.sweep.name + " point " + std::to_string(point.index);
  point.status = pf::PointStatus::Pending;
  point.run = pf::RunId();
  StoreTreeModel model;
  model.setIndex(index);
  EXPECT_EQ(model.data(model.index(1, 0)).toString(), "Runs (1)");  // the MLP run only
  const QModelIndex at = model.runIndex(pf::RunId(77));
  ASSERT_TRUE(at.isValid());
  EXPECT_EQ(at.parent(), model.sweepIndex(pf::SweepId(1)));
  EXPECT_EQ(model.data(at, StoreTreeModel::PointIndexRole).toLongLong(), 4);
  EXPECT_EQ(model.data(at.siblingAtColumn(StoreTreeModel::Status)).toString(), "measuring");
}

// --- 6. Rounding
// -----------------------------------------------------------------------------------

TEST(Issue14, PeaksThatRoundAlikePrintApartWithExactBytesInTheTooltip) {
  auto d = realistic_sweep();
  d->points[1].summary.peak_allocated = 7466248;
  d->points[2].summary.peak_allocated = 7486728;
  PointsTableModel model;
  model.setSweep(d);
  const QString a = model.data(model.index(1, PointsTableModel::Peak)).toString();
  const QString b = model.data(model.index(2, PointsTableModel::Peak)).toString();
  EXPECT_NE(a, b) << a.toStdString();
  EXPECT_TRUE(a.startsWith(QStringLiteral("7.12"))) << a.toStdString();
  EXPECT_TRUE(model.data(model.index(1, PointsTableModel::Peak), Qt::ToolTipRole)
                  .toString()
                  .contains(QStringLiteral("7,466,248")));
  EXPECT_TRUE(point_tooltip(*d, d->points[2]).contains(QStringLiteral("7,486,728")));
}

// An out-of-memory sweep whose two survivors peak 2 KiB apart: the axis is not zoomed into those
// 2 KiB (the points sit near each other, not at the two edges), and no tick labels overlap.
TEST(Issue14, ParetoAxisKeepsASensibleSpanAndTicksApart) {
  auto d = realistic_sweep();
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

// --- 8. Layout
// -------------------------------------------------------------------------------------

TEST(Issue14, ALongFormErrorWrapsAndGoesOnceFixed) {
  SweepForm form;
  form.resize(900, 700);
  auto r = test::tiny_request("x.db", "1KiB", "0");
  r.knobs["min_offload_size"] = "1KiB," + std::string(300, 'z');
  form.setRequest(r);
  settle(form);
  EXPECT_LT(form.minimumSizeHint().width(), 900);
  EXPECT_LT(form.sizeHint().width(), 1400);
  EXPECT_FALSE(form.startSweep());
  const auto* status = form.findChild<QLabel*>(QStringLiteral("status"));
  ASSERT_NE(status, nullptr);
  EXPECT_TRUE(status->text().startsWith(QStringLiteral("error:")));
  EXPECT_LT(form.minimumSizeHint().width(), 900);
  form.setRequest(test::tiny_request("x.db", "1KiB", "1,2"));  // fixed
  EXPECT_FALSE(status->text().startsWith(QStringLiteral("error:"))) << status->text().toStdString();
}

// Nothing is clipped at 1280x800 and 1920x1080: table headers, the recommendation's front table,
// the snippets, the tree's labels; the tree takes a small share of the width.
TEST(Issue14, ViewsFitTheirLabelsAtCommonWindowSizes) {
  const auto sweep = realistic_sweep(false);
  for (QSize size : {QSize(1280, 800), QSize(1920, 1080)}) {
    MainWindow window;
    window.resize(size);
    auto index = std::make_shared<StoreIndex>();
    index->path = "mem";
    index->sweeps.push_back(*sweep);
    window.storeModel()->setIndex(index);
    window.sweepView()->setSweepData(sweep, "");
    settle(window);
    auto* tree = window.findChild<QTreeView*>();
    ASSERT_NE(tree, nullptr);
    tree->expandAll();
    settle(window);
    // A quarter at most (issue 34, item 11: the names whole and the Status column whole beside
    // them take 260 px at 1280, a little more than the fifth this asked for before).
    EXPECT_LE(tree->width(), 0.25 * size.width()) << size.width();
    // Every label whole: its cell as wide as its text.
    const QFontMetrics tree_fm(tree->font());
    std::function<void(const QModelIndex&)> check = [&](const QModelIndex& parent) {
      for (int row = 0; row < window.storeModel()->rowCount(parent); ++row) {
        for (int col : {0, 1}) {
          const QModelIndex idx = window.storeModel()->index(row, col, parent);
          const QString text = idx.data().toString();
          EXPECT_GE(tree->visualRect(idx).width(), tree_fm.horizontalAdvance(text) + 6)
              << size.width() << ": '" << text.toStdString() << "' clipped";
        }
        check(window.storeModel()->index(row, 0, parent));
      }
    };
    check({});
    for (QTableView* table : window.sweepView()->findChildren<QTableView*>()) {
      const QFontMetrics fm(table->horizontalHeader()->font());
      for (int c = 0; c < table->model()->columnCount(); ++c) {
        if (table->isColumnHidden(c)) continue;
        const QString text = table->model()->headerData(c, Qt::Horizontal).toString();
        EXPECT_GE(table->horizontalHeader()->sectionSize(c), fm.horizontalAdvance(text) + 8)
            << size.width() << ": header '" << text.toStdString() << "' clipped";
      }
    }
    // The front table fits its panel; the snippets wrap rather than run off it.
    auto* panel = window.sweepView()->recommendPanel();
    auto* front = panel->findChild<QTableView*>();
    ASSERT_NE(front, nullptr);
    EXPECT_EQ(front->horizontalScrollBar()->maximum(), 0) << size.width();
    auto* tabs = panel->findChild<QTabWidget*>();
    ASSERT_NE(tabs, nullptr);
    for (int t = 0; t < tabs->count(); ++t) {
      tabs->setCurrentIndex(t);
      settle(window);
      auto* snippet = qobject_cast<QPlainTextEdit*>(tabs->currentWidget());
      ASSERT_NE(snippet, nullptr);
      EXPECT_EQ(snippet->horizontalScrollBar()->maximum(), 0) << size.width() << " tab " << t;
    }
  }
}

TEST(Issue14, TheConstraintLabelIsNotCrossedByItsLine) {
  const auto d = realistic_sweep(false);
  for (QSize size : {QSize(320, 260), QSize(700, 450)}) {
    ParetoWidget w;
    w.resize(size);
    w.setData(d);
    for (pf::Constraint c : {pf::Constraint{}, pf::Constraint{{}, 3.0}, pf::Constraint{{}, 1.02},
                             pf::Constraint{50 * kMiB, {}}, pf::Constraint{46 * kMiB, {}}}) {
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

// --- 5. Spread
// -------------------------------------------------------------------------------------

TEST(Issue14, SpreadIsShownAndTiesAreMarked) {
  const auto noisy = realistic_sweep(false);
  const auto exact = realistic_sweep(true);
  EXPECT_TRUE(point_tooltip(*noisy, noisy->points[5]).contains(QStringLiteral("95 % CI")));
  EXPECT_TRUE(point_tooltip(*exact, exact->points[5]).contains(QStringLiteral("exact (modelled)")));
  PointsTableModel model;
  const auto rec = pf::recommend(noisy->points, {});
  ASSERT_TRUE(rec.chosen.has_value());
  ASSERT_FALSE(rec.ties.empty());
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

// --- 10. The rest
// -----------------------------------------------------------------------------------

// The Pareto chart says which dots are the front: a legend above the plot with the front's colour.
TEST(Issue14, ParetoHasALegendForFrontAndOtherPoints) {
  const auto d = realistic_sweep(false);
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

TEST(Issue14, TheInputSpecIsForTorchScriptModelsOnly) {
  SweepForm form;
  auto r = test::tiny_request("x.db", "1KiB", "1");
  form.setRequest(r);
  auto* spec = form.findChild<QLineEdit*>(QStringLiteral("inputSpec"));
  ASSERT_NE(spec, nullptr);
  EXPECT_FALSE(spec->isEnabled());
  r.workload.model = "/tmp/model.pt";
  form.setRequest(r);
  EXPECT_TRUE(spec->isEnabled());
}

// The new axes: a sweep over another knob besides the two of the heatmap (here the semantics)
// offers its variants; one chosen fills each cell alone, "all" splits the cells among them.
TEST(Issue14, AVariantOfTheSweepFillsTheHeatmapAlone) {
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
  view.setMetric(SweepMetric::PeakMemory);
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

}  // namespace
}  // namespace offtune::gui
