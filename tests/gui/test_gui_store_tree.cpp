// The store tree (StoreTreeModel in the main window's QTreeView): a newer index of the same store
// (F5, a store written meanwhile) keeps what was expanded and selected; a sweep's runs, measuring
// or re-measured, show under their point, not loose under "Runs"; its columns fit its pane.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QHeaderView>
#include <QSignalSpy>
#include <QTreeView>
#include <algorithm>
#include <memory>
#include <string>

#include "gui_test_util.hpp"
#include "offtune/gui/main_window.hpp"
#include "offtune/gui/models.hpp"
#include "offtune/profiler/store.hpp"

namespace offtune::gui {
namespace {

namespace pf = offtune::profiler;
constexpr int kWaitMs = 60000;

using StoreTree = test::StoreInWindow;

// A newer index of the same store (points and runs added, statuses changed) leaves an expanded
// sweep expanded and the selected point selected.
TEST_F(StoreTree, TreeExpansionAndSelectionSurviveANewerIndex) {
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
  test::settle(tree);

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
TEST_F(StoreTree, MainWindowReloadKeepsTheTreeAsItWas) {
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
TEST_F(StoreTree, ARunningPointShowsUnderItsSweep) {
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

// A re-measured point's first run (labelled as the point) and its re-measured runs show under
// their point, not loose under "Runs".
TEST_F(StoreTree, RemeasuredPointsRunsAreUnderTheirPoints) {
  auto index = std::make_shared<StoreIndex>();
  index->path = "x.db";
  SweepData s;
  s.sweep.id = pf::SweepId(1);
  s.sweep.name = "sweep";
  s.sweep.workload.model = "tiny";
  s.sweep.workload.steps = 4;
  const auto run = [&](int64_t id, const std::string& label, const pf::EngineConfig& config) {
    pf::RunRecord r;
    r.id = pf::RunId(id);
    r.label = label;
    r.status = pf::RunStatus::Ok;
    r.workload = s.sweep.workload;
    r.config = config;
    r.summary.step_ms_median = 1.0 + static_cast<double>(id);
    return r;
  };
  pf::PointRecord base;
  base.sweep = s.sweep.id;
  base.index = 0;
  base.config.offload = false;
  base.status = pf::PointStatus::Ok;
  base.run = pf::RunId(1);
  pf::PointRecord p = base;
  p.index = 1;
  p.config.offload = true;
  p.config.min_offload_size = 1024;
  p.run = pf::RunId(3);  // the re-measured run; run 2 measured it first
  s.points = {base, p};
  index->sweeps.push_back(s);
  index->runs.push_back(run(1, "sweep point 0", base.config));
  index->runs.push_back(run(2, "sweep point 1", p.config));
  auto remeasured = run(3, "sweep point 1 (re-measured)", p.config);
  remeasured.workload.steps = 20;
  index->runs.push_back(remeasured);
  index->runs.push_back(run(4, "standalone", p.config));

  StoreTreeModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  model.setIndex(index);
  const QModelIndex runs = model.index(1, 0);
  ASSERT_EQ(model.rowCount(runs), 1) << "loose runs under Runs";
  EXPECT_EQ(model.index(0, 0, runs).data(StoreTreeModel::RunIdRole).toLongLong(), 4);
  const QModelIndex point = model.index(1, 0, model.sweepIndex(pf::SweepId(1)));
  ASSERT_EQ(point.data(StoreTreeModel::RunIdRole).toLongLong(), 3);
  ASSERT_EQ(model.rowCount(point), 1);
  const QModelIndex first = model.index(0, 0, point);
  EXPECT_EQ(first.data(StoreTreeModel::RunIdRole).toLongLong(), 2);
  EXPECT_EQ(first.parent(), point);
  EXPECT_FALSE(first.data().toString().isEmpty());
  // A newer index of the same store merges without losing them.
  model.setIndex(std::make_shared<StoreIndex>(*index));
  EXPECT_EQ(model.rowCount(model.index(1, 0, model.sweepIndex(pf::SweepId(1)))), 1);
}

// With a sweep expanded, the tree's Status column shows whole in its pane; the sweep's tooltip
// gives its grid as text, not JSON.
// Points of a prefetch sweep with the same thresholds are named apart by what the sweep varies,
// and a point's name tooltip gives its step time and peaks (issue 43 item 7; before: "#1 min 64
// KiB, stash 1" for each, and the tooltip repeated the name).
TEST_F(StoreTree, PointsOfOneThresholdPairAreNamedByWhatTheSweepVaries) {
  auto index = std::make_shared<StoreIndex>();
  index->path = "p.db";
  SweepData s;
  s.sweep.id = pf::SweepId(1);
  s.sweep.name = "sweep";
  s.sweep.workload.model = "tiny";
  pf::PointRecord base;
  base.sweep = s.sweep.id;
  base.config.offload = false;
  base.status = pf::PointStatus::Ok;
  s.points.push_back(base);
  for (int64_t prefetch : {0, 1, 2}) {
    pf::PointRecord p = base;
    p.index = 1 + prefetch;
    p.config.offload = true;
    p.config.min_offload_size = 64 << 10;
    p.config.max_fwd_stash_size = 1;
    p.config.prefetch = prefetch;
    p.summary.step_ms_median = 10.0 + static_cast<double>(prefetch);
    p.summary.peak_allocated = 48 << 20;
    p.summary.peak_reserved = 64 << 20;
    s.points.push_back(p);
  }
  index->sweeps.push_back(s);
  StoreTreeModel model;
  model.setIndex(index);
  const QModelIndex sweep = model.sweepIndex(pf::SweepId(1));
  QSet<QString> names;
  for (int row = 1; row <= 3; ++row) {
    const QString name = model.index(row, 0, sweep).data().toString();
    EXPECT_TRUE(name.startsWith(QStringLiteral("#%1 min 64 KiB, stash 1, prefetch").arg(row)))
        << name.toStdString();
    names.insert(name);
  }
  EXPECT_EQ(names.size(), 3) << "three points named alike";
  const QString tip = model.index(2, 0, sweep).data(Qt::ToolTipRole).toString();
  EXPECT_TRUE(tip.contains(QStringLiteral("step 11.0 ms (median)"))) << tip.toStdString();
  EXPECT_TRUE(tip.contains(QStringLiteral("peak allocated 48.0 MiB, reserved 64.0 MiB")))
      << tip.toStdString();
}

TEST_F(StoreTree, TheTreesStatusColumnIsWholeWithASweepExpanded) {
  MainWindow window;
  window.resize(1280, 800);
  window.show();
  open(window);
  auto* tree = window.findChild<QTreeView*>();
  ASSERT_NE(tree, nullptr);
  const QModelIndex sweep = window.storeModel()->sweepIndex(pf::SweepId(1));
  tree->expand(sweep);
  tree->expand(window.storeModel()->index(1, 0));
  QApplication::processEvents();
  const int col = StoreTreeModel::Status;
  const int right = tree->header()->sectionViewportPosition(col) + tree->header()->sectionSize(col);
  EXPECT_LE(right, tree->viewport()->width()) << "Status ends beyond the tree's pane";
  EXPECT_GE(tree->header()->sectionSize(col),
            static_cast<QAbstractItemView*>(tree)->sizeHintForColumn(col));

  const QString tip = sweep.data(Qt::ToolTipRole).toString();
  EXPECT_FALSE(tip.contains(QLatin1Char('{'))) << tip.toStdString();
  EXPECT_TRUE(tip.contains(QStringLiteral("min_offload_size 1 KiB, 64 KiB"))) << tip.toStdString();
  EXPECT_TRUE(tip.contains(QStringLiteral("max_fwd_stash_size 1, 4"))) << tip.toStdString();
}

}  // namespace
}  // namespace offtune::gui
