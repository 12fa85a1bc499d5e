// The dashboard at the window sizes people use: at 1280x800 and 1920x1080 no label, header, table
// or snippet is clipped and the tree takes a small share of the width; every view fits 1280x800
// and shrinks below it rather than cropping; the run summary's values are whole.
#include <gtest/gtest.h>

#include <QApplication>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QTreeView>
#include <functional>
#include <memory>

#include "gui_test_util.hpp"
#include "offtune/gui/main_window.hpp"
#include "offtune/gui/models.hpp"
#include "offtune/gui/recommend_panel.hpp"
#include "offtune/gui/run_view.hpp"
#include "offtune/gui/sweep_charts.hpp"
#include "offtune/gui/sweep_view.hpp"
#include "offtune/gui/timeline.hpp"

namespace offtune::gui {
namespace {

namespace pf = offtune::profiler;
constexpr int kWaitMs = 60000;

using Layout = test::StoreInWindow;

// A sweep of several variants (semantics x checkpoint): the view that asked for 1214x885.
std::shared_ptr<SweepData> variant_sweep() {
  auto d = std::make_shared<SweepData>();
  d->sweep.id = pf::SweepId(1);
  d->sweep.name = "variants";
  d->sweep.workload.model = "small";
  int64_t index = 0;
  const auto add = [&](bool offload, int64_t size, int64_t window, const char* semantics,
                       const char* checkpoint) {
    pf::PointRecord p;
    p.sweep = d->sweep.id;
    p.index = index;
    p.id = pf::PointId(index + 1);
    p.run = pf::RunId(index + 1);
    ++index;
    p.config.offload = offload;
    p.config.min_offload_size = size;
    p.config.max_fwd_stash_size = window;
    p.config.semantics = parse_semantics(semantics);
    p.config.checkpoint = parse_checkpoint_policy(checkpoint);
    p.status = pf::PointStatus::Ok;
    p.summary.step_ms_median = 2.0 + 0.1 * static_cast<double>(index);
    p.summary.peak_allocated = (100 - index) * 1024 * 1024;
    d->points.push_back(p);
  };
  add(false, 1024, 5, "offtune", "none");
  for (const char* sem : {"offtune", "trl"}) {
    for (const char* ck : {"none", "all"}) {
      for (int64_t size : {1024, 65536, 1048576}) {
        for (int64_t w : {1, 2, 4}) add(true, size, w, sem, ck);
      }
    }
  }
  return d;
}

// Nothing is clipped at 1280x800 and 1920x1080: table headers, the recommendation's front table,
// the snippets, the tree's labels; the tree takes a small share of the width.
TEST_F(Layout, ViewsFitTheirLabelsAtCommonWindowSizes) {
  const auto sweep = test::realistic_sweep(false);
  for (QSize size : {QSize(1280, 800), QSize(1920, 1080)}) {
    MainWindow window;
    window.resize(size);
    auto index = std::make_shared<StoreIndex>();
    index->path = "mem";
    index->sweeps.push_back(*sweep);
    window.storeModel()->setIndex(index);
    window.sweepView()->setSweepData(sweep, "");
    test::settle(window);
    auto* tree = window.findChild<QTreeView*>();
    ASSERT_NE(tree, nullptr);
    tree->expandAll();
    test::settle(window);
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
      test::settle(window);
      auto* snippet = qobject_cast<QPlainTextEdit*>(tabs->currentWidget());
      ASSERT_NE(snippet, nullptr);
      EXPECT_EQ(snippet->horizontalScrollBar()->maximum(), 0) << size.width() << " tab " << t;
    }
  }
}

// Every view fits 1280x800 with a variant sweep on screen (the export buttons and the status bar
// inside the window), and below 1000x700 the charts shrink instead of being cropped.
TEST_F(Layout, EveryViewFitsAt1280x800AndShrinksBelow) {
  MainWindow window;
  window.resize(1280, 800);
  window.show();
  open(window);
  window.sweepView()->setSweepData(variant_sweep(), path_);
  window.sweepView()->setSideBySide(true);
  for (int tab = 0; tab < window.tabs()->count(); ++tab) {
    window.tabs()->setCurrentIndex(tab);
    QApplication::processEvents();
    const QSize min = window.minimumSizeHint().expandedTo(window.minimumSize());
    EXPECT_LE(min.width(), 1280) << "tab " << tab;
    EXPECT_LE(min.height(), 760) << "tab " << tab;  // the rest for the title bar and a panel
    EXPECT_EQ(window.size(), QSize(1280, 800)) << "tab " << tab;
  }
  window.tabs()->setCurrentWidget(window.sweepView());
  QApplication::processEvents();
  for (auto* b : window.sweepView()->recommendPanel()->findChildren<QPushButton*>()) {
    const QRect r(b->mapTo(&window, QPoint(0, 0)), b->size());
    EXPECT_TRUE(window.rect().contains(r)) << b->text().toStdString();
  }
  window.resize(960, 660);
  QApplication::processEvents();
  EXPECT_EQ(window.size(), QSize(960, 660))
      << "minimum " << window.minimumSizeHint().width() << "x" << window.minimumSizeHint().height();
  ParetoWidget* pareto = window.sweepView()->pareto();
  const QRect shown = pareto->visibleRegion().boundingRect();
  EXPECT_EQ(shown.size(), pareto->size()) << "the Pareto chart is cropped";
}

// The run summary's values are whole in their column at 1280x800.
TEST_F(Layout, RunSummaryValuesAreNotCutOff) {
  MainWindow window;
  window.resize(1280, 800);
  window.show();
  open(window);
  QSignalSpy run_loaded(window.runView(), &RunView::loaded);
  window.showRun(pf::RunId(2));
  ASSERT_TRUE(run_loaded.wait(kWaitMs));
  QApplication::processEvents();
  auto* table = window.runView()->findChild<QTableView*>();
  ASSERT_NE(table, nullptr);
  // Each value whole: in its column, inside the table, on as many lines as it wraps to.
  const QFontMetrics fm(table->font());
  for (int row = 0; row < table->model()->rowCount(); ++row) {
    const QModelIndex idx = table->model()->index(row, 1);
    const QRect cell = table->visualRect(idx);
    const QString text = idx.data().toString();
    const QRect needed = fm.boundingRect(QRect(0, 0, cell.width() - 10, 100000),
                                         Qt::TextWordWrap | Qt::TextWrapAnywhere, text);
    EXPECT_LE(needed.height(), cell.height()) << "cut off: " << text.toStdString();
    EXPECT_LE(cell.right(), table->viewport()->width()) << text.toStdString();
  }
}

// Issue 43 defect 6: a long Run heading (a run's label) wraps inside a 1280 px window instead of
// growing it (before: 1298-1306 px, the tree squeezed to "#10 ..."); the window's title names the
// store; the window opens within the screen (before: 1500x950 on a 1280x800 screen).
TEST_F(Layout, ALongRunHeadingWrapsAndTheWindowNamesItsStoreAndFitsTheScreen) {
  MainWindow window;
  window.resize(1280, 800);
  window.show();
  open(window);
  EXPECT_TRUE(window.windowTitle().startsWith(QStringLiteral("p.db")))
      << window.windowTitle().toStdString();
  auto run = std::make_shared<RunData>();
  run->run.id = pf::RunId(10);
  run->run.workload.model = "small";
  run->run.label = std::string(
      "grid point 31 (sweep 2, min_offload_size 64 KiB, max_fwd_stash_size 4, checkpoint all, "
      "offload boundaries, link nvlink-c2c, re-measured, round 3 of 3)");
  window.tabs()->setCurrentWidget(window.runView());
  window.runView()->setRunData(run, build_timeline_index(*run));
  for (int i = 0; i < 5; ++i) QApplication::processEvents();
  EXPECT_LE(window.minimumSizeHint().width(), 1280);
  EXPECT_EQ(window.size(), QSize(1280, 800));
  auto* title = window.runView()->findChild<QLabel*>(QStringLiteral("runTitle"));
  ASSERT_NE(title, nullptr);
  const QRect shown(title->mapTo(&window, QPoint(0, 0)), title->size());
  EXPECT_TRUE(window.rect().contains(shown));

  EXPECT_EQ(initial_window_size(QSize(1280, 800)), QSize(1280, 800));
  EXPECT_EQ(initial_window_size(QSize(1920, 1050)), kDefaultWindowSize);
  EXPECT_EQ(initial_window_size(QSize()), kDefaultWindowSize);
}

// Issue 43 defect 10: below the minimum size (960x640) labels overlapped and charts squashed
// (640x480 was unreadable); the window does not go below it.
TEST_F(Layout, TheWindowKeepsItsMinimumSize) {
  MainWindow window;
  window.resize(640, 480);
  window.show();
  open(window);
  QApplication::processEvents();
  EXPECT_GE(window.width(), kMinimumWindowSize.width());
  EXPECT_GE(window.height(), kMinimumWindowSize.height());
}

}  // namespace
}  // namespace offtune::gui
