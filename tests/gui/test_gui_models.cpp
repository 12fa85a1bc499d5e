// The dashboard's item models over the fixture store, each under QAbstractItemModelTester (Fatal
// mode: a broken model contract aborts the suite), with the figures read back checked.
#include <gtest/gtest.h>

#include <algorithm>

#include <QAbstractItemModelTester>
#include <QFont>
#include <QSortFilterProxyModel>
#include <QTextDocument>

#include "gui_test_util.hpp"
#include "offtune/gui/jobs.hpp"
#include "offtune/gui/models.hpp"
#include "offtune/profiler/store.hpp"

namespace offtune::gui {
namespace {

namespace pf = offtune::profiler;
using Tester = QAbstractItemModelTester;

class ItemModels : public test::FixtureStore {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(test::FixtureStore::SetUp());
    index_ = std::make_shared<const StoreIndex>(load_store_index(path_));
  }
  StoreIndexPtr index_;
};

TEST_F(ItemModels, StoreIndexReadsTheFixture) {
  ASSERT_EQ(index_->sweeps.size(), 1u);
  EXPECT_EQ(index_->sweeps[0].sweep.name, "fixture");
  ASSERT_EQ(index_->sweeps[0].points.size(), 5u);
  EXPECT_FALSE(index_->sweeps[0].points[0].config.offload);
  EXPECT_EQ(index_->runs.size(), 6u);
}

TEST_F(ItemModels, StoreTreeGroupsSweepsPointsAndStandaloneRuns) {
  StoreTreeModel model;
  Tester tester(&model, Tester::FailureReportingMode::Fatal);
  EXPECT_EQ(model.rowCount(), 0);  // nothing before an index is set
  model.setIndex(index_);
  ASSERT_EQ(model.rowCount(), 2);
  const QModelIndex sweeps = model.index(0, 0), runs = model.index(1, 0);
  EXPECT_EQ(model.data(sweeps).toString(), "Sweeps (1)");
  EXPECT_EQ(model.data(runs).toString(), "Runs (1)");  // runs 1-5 belong to the sweep's points
  ASSERT_EQ(model.rowCount(sweeps), 1);
  const QModelIndex sweep = model.index(0, 0, sweeps);
  EXPECT_EQ(model.data(sweep, StoreTreeModel::SweepIdRole).toLongLong(), 1);
  EXPECT_EQ(model.data(sweep.siblingAtColumn(StoreTreeModel::Status)).toString(), "5/5");
  ASSERT_EQ(model.rowCount(sweep), 5);
  const QModelIndex baseline = model.index(0, 0, sweep);
  EXPECT_EQ(baseline.parent(), sweep);
  EXPECT_TRUE(model.data(baseline).toString().contains("baseline"));
  EXPECT_EQ(model.data(baseline, StoreTreeModel::RunIdRole).toLongLong(),
            index_->sweeps[0].points[0].run.value);
  const QModelIndex point2 = model.index(2, 0, sweep);
  EXPECT_EQ(model.data(point2, StoreTreeModel::PointIndexRole).toLongLong(), 2);
  EXPECT_TRUE(model.data(point2).toString().contains("1 KiB"));
  EXPECT_TRUE(
      model.data(point2.siblingAtColumn(StoreTreeModel::StepTime)).toString().endsWith("ms"));
  const QModelIndex mlp = model.index(0, 0, runs);
  EXPECT_EQ(model.data(mlp, StoreTreeModel::RunIdRole).toLongLong(), 6);
  EXPECT_TRUE(model.data(mlp).toString().contains("mlp"));
  EXPECT_EQ(model.rowCount(mlp), 0);

  EXPECT_EQ(model.sweepIndex(pf::SweepId(1)), sweep);
  EXPECT_EQ(model.runIndex(pf::RunId(6)), mlp);
  EXPECT_EQ(model.runIndex(pf::RunId(3)).parent(), sweep);
  EXPECT_FALSE(model.sweepIndex(pf::SweepId(42)).isValid());

  // A smaller index of the same store: merged row by row (the tester checks the removals and every
  // index again); the count is still of the sweep's grid (2 x 2 and the baseline).
  auto smaller = std::make_shared<StoreIndex>(*index_);
  smaller->sweeps[0].points.resize(2);
  smaller->sweeps[0].points[1].status = pf::PointStatus::Pending;
  model.setIndex(smaller);
  EXPECT_EQ(model.rowCount(model.index(0, 0, model.index(0, 0))), 2);
  EXPECT_EQ(model.data(model.index(0, StoreTreeModel::Status, model.index(0, 0))).toString(),
            "1/5");
  EXPECT_EQ(model.data(model.index(1, 0)).toString(), "Runs (4)");  // runs 3-6 are now standalone
  model.setIndex(nullptr);
  EXPECT_EQ(model.rowCount(), 0);
}

TEST_F(ItemModels, ARepeatOrRemeasureOfASweepPointIsNotAStandaloneRun) {
  // A later round of --repeat and a re-measured finalist: runs of the sweep's points that the
  // points do not link (each keeps its first run), labelled "<sweep> point <i> (...)".
  auto index = std::make_shared<StoreIndex>(*index_);
  const auto& point = index->sweeps[0].points[2];
  auto run = *std::find_if(index->runs.begin(), index->runs.end(),
                           [&](const pf::RunRecord& r) { return r.id == point.run; });
  run.id = pf::RunId(100);
  run.label = "fixture point 2 (sweep 1, repeat 2 of 3)";
  index->runs.push_back(run);
  run.id = pf::RunId(101);
  run.label = "fixture point 2 (re-measured)";
  index->runs.push_back(run);
  // Not one of them: another point's label with this point's config.
  run.id = pf::RunId(102);
  run.label = "fixture point 3 (sweep 1, repeat 2 of 3)";
  index->runs.push_back(run);
  StoreTreeModel model;
  Tester tester(&model, Tester::FailureReportingMode::Fatal);
  model.setIndex(index);
  EXPECT_EQ(model.data(model.index(1, 0)).toString(), "Runs (2)");
  EXPECT_TRUE(model.runIndex(pf::RunId(102)).isValid());
  EXPECT_FALSE(model.runIndex(pf::RunId(100)).isValid());
}

// A sweep across engine variants: checkpointing alone is not the baseline, slowdowns are against
// plain training, and the variant column names each point's variant.
TEST_F(ItemModels, PointsTableNamesEachPointsVariant) {
  SweepData data = index_->sweeps[0];
  EXPECT_FALSE(has_variants(data));
  data.points[1].config.offload = false;
  data.points[1].config.checkpoint = CheckpointPolicy::all();
  data.points[3].config.checkpoint = parse_checkpoint_policy("every:2");
  data.points[3].config.offload_set = OffloadSet::Boundaries;
  EXPECT_TRUE(has_variants(data));
  EXPECT_EQ(baseline_point(data)->index, 0);
  auto sweep = std::make_shared<const SweepData>(data);
  PointsTableModel model;
  Tester tester(&model, Tester::FailureReportingMode::Fatal);
  model.setSweep(sweep);
  EXPECT_EQ(model.data(model.index(0, PointsTableModel::MinOffloadSize)).toString(), "baseline");
  EXPECT_EQ(model.data(model.index(1, PointsTableModel::MinOffloadSize)).toString(), "no offload");
  EXPECT_EQ(model.data(model.index(1, PointsTableModel::Variant)).toString(), "checkpoint all");
  EXPECT_EQ(model.data(model.index(3, PointsTableModel::Variant)).toString(),
            "checkpoint every:2, offload boundaries");
  EXPECT_EQ(model.data(model.index(2, PointsTableModel::Variant)).toString(), "");
  EXPECT_EQ(model.headerData(PointsTableModel::Variant, Qt::Horizontal).toString(), "Variant");
  // Slowdown against the plain baseline, not against checkpointing alone.
  const double base = data.points[0].summary.step_ms_median;
  const double alone = data.points[1].summary.step_ms_median;
  QString shown = model.data(model.index(1, PointsTableModel::Slowdown)).toString();
  shown.chop(1);  // "2.236x"
  EXPECT_NEAR(shown.toDouble(), alone / base, 0.001) << shown.toStdString();
}

TEST_F(ItemModels, PointsTableShowsFiguresAndSortsNumerically) {
  auto sweep = std::make_shared<const SweepData>(index_->sweeps[0]);
  PointsTableModel model;
  Tester tester(&model, Tester::FailureReportingMode::Fatal);
  model.setSweep(sweep, std::nullopt, 2);
  ASSERT_EQ(model.rowCount(), 5);
  EXPECT_EQ(model.columnCount(), PointsTableModel::ColumnCount);
  EXPECT_EQ(model.data(model.index(0, PointsTableModel::MinOffloadSize)).toString(), "baseline");
  // As many digits as tell the fixture's slowdowns apart.
  EXPECT_TRUE(model.data(model.index(0, PointsTableModel::Slowdown)).toString().startsWith("1.00"));
  EXPECT_EQ(model.data(model.index(0, PointsTableModel::HiddenCopy)).toString(), "n/a");
  EXPECT_EQ(model.data(model.index(1, PointsTableModel::MinOffloadSize)).toString(), "1 KiB");
  EXPECT_EQ(model.data(model.index(3, PointsTableModel::MinOffloadSize)).toString(), "64 KiB");
  EXPECT_EQ(model.data(model.index(2, PointsTableModel::MaxFwdStashSize)).toString(), "4");
  EXPECT_TRUE(model.data(model.index(2, 0), Qt::FontRole).value<QFont>().bold());
  EXPECT_FALSE(model.data(model.index(1, 0), Qt::FontRole).isValid());
  EXPECT_EQ(model.rowOfPoint(3), 3);
  EXPECT_EQ(model.point(4)->index, 4);
  EXPECT_EQ(model.point(5), nullptr);

  // Sorting by peak memory through a proxy orders by bytes, not by the text "1.48 MiB".
  QSortFilterProxyModel proxy;
  Tester proxy_tester(&proxy, Tester::FailureReportingMode::Fatal);
  proxy.setSourceModel(&model);
  proxy.setSortRole(PointsTableModel::SortRole);
  proxy.sort(PointsTableModel::PeakAllocated, Qt::AscendingOrder);
  double previous = -1;
  for (int r = 0; r < proxy.rowCount(); ++r) {
    const int64_t point =
        proxy.data(proxy.index(r, 0), PointsTableModel::PointIndexRole).toLongLong();
    const double peak =
        static_cast<double>(sweep->points[static_cast<size_t>(point)].summary.peak_allocated);
    EXPECT_GE(peak, previous);
    previous = peak;
  }

  // A subset (the recommender's front) and a failed point.
  auto failed = std::make_shared<SweepData>(*sweep);
  failed->points[1].status = pf::PointStatus::Failed;
  failed->points[1].error = "boom";
  model.setSweep(failed, std::vector<pf::PointRecord>{failed->points[1], failed->points[4]});
  ASSERT_EQ(model.rowCount(), 2);
  EXPECT_EQ(model.data(model.index(0, PointsTableModel::Status)).toString(), "failed");
  EXPECT_EQ(model.data(model.index(0, PointsTableModel::StepTime)).toString(), "");
  EXPECT_EQ(model.data(model.index(0, PointsTableModel::Error)).toString(), "boom");
  // The whole error in a tooltip that wraps (rich text), its "<...>" shown, not taken as markup:
  // a plain tooltip is one line, cut at the screen's edge (issue 43 defect 12).
  failed->points[1].error =
      "host-sim device out of memory: <a long message> " + std::string(300, 'x');
  model.setSweep(failed, std::vector<pf::PointRecord>{failed->points[1], failed->points[4]});
  const QString tip =
      model.data(model.index(0, PointsTableModel::Error), Qt::ToolTipRole).toString();
  EXPECT_TRUE(Qt::mightBeRichText(tip)) << tip.toStdString();
  QTextDocument doc;
  doc.setHtml(tip);
  EXPECT_EQ(doc.toPlainText().toStdString(), failed->points[1].error);
  EXPECT_EQ(model.data(model.index(1, PointsTableModel::Index)).toLongLong(), 4);
  model.setSweep(nullptr);
  EXPECT_EQ(model.rowCount(), 0);
}

TEST_F(ItemModels, RunSummaryListsTheRunsFigures) {
  auto run = std::make_shared<const RunData>(load_run(path_, pf::RunId(2)));
  RunSummaryModel model;
  Tester tester(&model, Tester::FailureReportingMode::Fatal);
  model.setRun(run);
  ASSERT_GT(model.rowCount(), 10);
  EXPECT_EQ(model.columnCount(), 2);
  QMap<QString, QString> rows;
  for (int r = 0; r < model.rowCount(); ++r) {
    rows[model.data(model.index(r, 0)).toString()] = model.data(model.index(r, 1)).toString();
  }
  EXPECT_EQ(rows["run"], "2");
  EXPECT_EQ(rows["status"], "ok");
  EXPECT_TRUE(rows["model"].startsWith("tiny, batch 2, seq 64"));
  EXPECT_EQ(rows["measured steps"], QString::number(run->steps.size()));
  EXPECT_EQ(rows["timeline events"], QString::number(run->events.size()));
  EXPECT_EQ(rows["step time (median)"],
            QString::number(run->run.summary.step_ms_median, 'f', 3) + " ms");
  // A run that copied nothing has no hidden-copy share: n/a, not 0 %.
  auto kept = std::make_shared<RunData>(*run);
  kept->run.summary.offloaded_bytes = kept->run.summary.reloaded_bytes = 0;
  kept->run.summary.hidden_copy_pct = 0.0;
  model.setRun(kept);
  for (int r = 0; r < model.rowCount(); ++r) {
    rows[model.data(model.index(r, 0)).toString()] = model.data(model.index(r, 1)).toString();
  }
  EXPECT_EQ(rows["hidden copy (all)"], "n/a");
  EXPECT_EQ(rows["hidden copy D2H / H2D"], "n/a / n/a");
  model.setRun(nullptr);
  EXPECT_EQ(model.rowCount(), 0);
}

}  // namespace
}  // namespace offtune::gui
