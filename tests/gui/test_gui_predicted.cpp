// Predicted points beside measured ones (issue 14, "the new axes"): a predict-first sweep's store
// read into the sweep view, whose points table lists every predicted grid point with the
// prediction and its error, and whose Pareto chart plots the predictions; a sweep without
// predictions shows none of it.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QFont>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTemporaryDir>

#include "gui_test_util.hpp"
#include "offtune/gui/jobs.hpp"
#include "offtune/gui/models.hpp"
#include "offtune/gui/predicted.hpp"
#include "offtune/gui/sweep_charts.hpp"
#include "offtune/gui/sweep_view.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"

namespace offtune::gui {
namespace {

namespace pf = offtune::profiler;
using Tester = QAbstractItemModelTester;
constexpr int kWaitMs = 60000;
constexpr int64_t kMiB = 1024 * 1024;

pf::PointPrediction prediction(pf::SweepId sweep, int64_t index, double ms, int64_t peak_mib) {
  pf::PointPrediction q;
  q.sweep = sweep;
  q.index = index;
  q.step_ns = static_cast<int64_t>(ms * 1e6);
  q.peak_allocated = peak_mib * kMiB;
  q.hidden_copy_pct = 50.0;
  q.offloaded_bytes = index == 0 ? 0 : kMiB;
  q.predictor = "what-if, offtune test";
  q.created_unix_ns = 1;
  return q;
}

// A predict-first sweep of 5 grid points (the baseline, then min_offload_size {1 KiB, 1 MiB} x
// max_fwd_stash_size {1, 2}) that measured 0 and 2 ok and 3 failed; all 5 predicted, point 2 5 %
// slow and 5 % high, point 0 exactly.
std::string predicted_store(const QTemporaryDir& dir) {
  const std::string path = dir.filePath("predicted.db").toStdString();
  auto store = pf::open_sqlite_store(path);
  pf::Grid grid;
  grid.set_numbers("min_offload_size", {1024, kMiB});
  grid.set_numbers("max_fwd_stash_size", {1, 2});
  const auto configs = pf::expand_grid(grid);
  EXPECT_EQ(configs.size(), 5u);
  pf::SweepRecord rec;
  rec.name = "predicted";
  rec.key = "predicted-key";
  rec.workload.model = "tiny";
  rec.grid = pf::grid_json(grid);
  const pf::SweepId sweep = store->create_sweep(rec);
  const auto measured = [&](int64_t index, pf::PointStatus status, double ms, int64_t peak_mib) {
    pf::PointRecord p;
    p.sweep = sweep;
    p.index = index;
    p.config = configs[static_cast<size_t>(index)];
    p.status = status;
    p.summary.step_ms_median = p.summary.step_ms_min = p.summary.step_ms_max = ms;
    p.summary.peak_allocated = peak_mib * kMiB;
    p.summary.offloaded_bytes = index == 0 ? 0 : kMiB;
    if (status == pf::PointStatus::Failed) p.error = "failed on purpose";
    store->put_point(p);
  };
  measured(0, pf::PointStatus::Ok, 10.0, 400);
  measured(2, pf::PointStatus::Ok, 12.0, 200);
  measured(3, pf::PointStatus::Failed, 0.0, 0);
  store->put_predictions({prediction(sweep, 0, 10.0, 400), prediction(sweep, 1, 13.0, 150),
                          prediction(sweep, 2, 12.6, 210), prediction(sweep, 3, 11.5, 250),
                          prediction(sweep, 4, 11.0, 300)});
  return path;
}

class Predicted : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    path_ = predicted_store(dir_);
  }
  QTemporaryDir dir_;
  std::string path_;
};

TEST_F(Predicted, TheSweepSnapshotCarriesThePredictions) {
  const SweepData data = load_sweep(path_, pf::SweepId(1));
  ASSERT_EQ(data.predictions.size(), 5u);
  EXPECT_EQ(data.points.size(), 3u);
  ASSERT_NE(find_prediction(data, 2), nullptr);
  EXPECT_EQ(find_prediction(data, 2)->peak_allocated, 210 * kMiB);
  EXPECT_EQ(find_prediction(data, 7), nullptr);
  const auto err = prediction_error(*find_prediction(data, 2), data.points[1]);
  ASSERT_TRUE(err);
  EXPECT_NEAR(err->step_pct, 5.0, 1e-9);
  EXPECT_NEAR(err->peak_pct, 5.0, 1e-9);
  EXPECT_EQ(describe_prediction_error(*err), "step +5.0 %, peak +5.0 %");
  EXPECT_EQ(format_error_pct(-0.354), "-0.35 %");
  EXPECT_EQ(format_error_pct(0.0001), "0 %");
  EXPECT_FALSE(prediction_error(*find_prediction(data, 3), data.points[2])) << "failed: no error";
  const auto only = predicted_only_points(data);
  ASSERT_EQ(only.size(), 2u);
  EXPECT_EQ(only[0].index, 1);
  EXPECT_EQ(only[1].index, 4);
  EXPECT_EQ(only[1].config.min_offload_size, kMiB) << "the grid's config";
  EXPECT_EQ(only[1].config.max_fwd_stash_size, 2);
  // The store index carries them too.
  EXPECT_EQ(load_store_index(path_).sweeps.at(0).predictions.size(), 5u);
}

// Every grid point of a predict-first sweep is a row: measured ones with their prediction and its
// error, the others as "predicted" with the prediction alone.
TEST_F(Predicted, TheTableListsPredictedRowsWithTheirErrors) {
  auto sweep = std::make_shared<const SweepData>(load_sweep(path_, pf::SweepId(1)));
  PointsTableModel model;
  Tester tester(&model, Tester::FailureReportingMode::Fatal);
  model.setSweep(sweep);
  EXPECT_TRUE(model.hasPredictions());
  ASSERT_EQ(model.rowCount(), 5);
  const auto text = [&](int row, int column) {
    return model.data(model.index(row, column)).toString();
  };
  for (int row = 0; row < 5; ++row) EXPECT_EQ(model.point(row)->index, row);
  EXPECT_EQ(model.headerData(PointsTableModel::PredictedStep, Qt::Horizontal).toString(),
            "Predicted step");
  EXPECT_EQ(model.headerData(PointsTableModel::PredictionErr, Qt::Horizontal).toString(),
            "Prediction error");
  // Measured and predicted.
  EXPECT_EQ(text(0, PointsTableModel::Status), "ok");
  EXPECT_EQ(text(0, PointsTableModel::PredictionErr), "exact");
  EXPECT_EQ(text(2, PointsTableModel::Status), "ok");
  EXPECT_TRUE(text(2, PointsTableModel::PredictedStep).startsWith("12.6"))
      << text(2, PointsTableModel::PredictedStep).toStdString();
  EXPECT_EQ(text(2, PointsTableModel::PredictionErr), "step +5.0 %, peak +5.0 %");
  EXPECT_TRUE(text(2, PointsTableModel::PredictedPeak).startsWith("210")) << "MiB";
  EXPECT_TRUE(model.data(model.index(2, PointsTableModel::PredictionErr), Qt::ToolTipRole)
                  .toString()
                  .contains("measured 12.000 ms"));
  // Measured but failed: a prediction, and nothing to compare it with.
  EXPECT_EQ(text(3, PointsTableModel::Status), "failed");
  EXPECT_EQ(text(3, PointsTableModel::PredictionErr), "n/a");
  // Only predicted: status "predicted", the prediction, no measured figures, set apart.
  EXPECT_TRUE(model.isPredictedOnly(1));
  EXPECT_FALSE(model.isPredictedOnly(2));
  EXPECT_EQ(text(1, PointsTableModel::Status), "predicted");
  EXPECT_TRUE(text(1, PointsTableModel::PredictedStep).startsWith("13.0"));
  EXPECT_EQ(text(1, PointsTableModel::StepTime), "");
  EXPECT_EQ(text(1, PointsTableModel::PredictionErr), "");
  EXPECT_EQ(text(1, PointsTableModel::MinOffloadSize), "1 KiB");
  EXPECT_TRUE(model.data(model.index(1, 0), Qt::FontRole).value<QFont>().italic());
  EXPECT_EQ(model.data(model.index(1, 0), PointsTableModel::RunIdRole).toLongLong(), -1);

  // Sorted by the error: the measured points by how far off, the rest after them.
  QSortFilterProxyModel proxy;
  Tester proxy_tester(&proxy, Tester::FailureReportingMode::Fatal);
  proxy.setSourceModel(&model);
  proxy.setSortRole(PointsTableModel::SortRole);
  proxy.sort(PointsTableModel::PredictionErr, Qt::AscendingOrder);
  EXPECT_EQ(proxy.data(proxy.index(0, 0), PointsTableModel::PointIndexRole).toLongLong(), 0);
  EXPECT_EQ(proxy.data(proxy.index(1, 0), PointsTableModel::PointIndexRole).toLongLong(), 2);

  // A subset (the recommend panel's front) stays the points given.
  model.setSweep(sweep, std::vector<pf::PointRecord>{sweep->points[0]});
  EXPECT_EQ(model.rowCount(), 1);
}

TEST_F(Predicted, TheSweepViewShowsPredictionColumnsAndMarkersOnlyForAPredictedSweep) {
  SweepView view;
  view.resize(1280, 800);
  QSignalSpy loaded(&view, &SweepView::loaded);
  view.showSweep(path_, pf::SweepId(1));
  ASSERT_TRUE(loaded.wait(kWaitMs));
  EXPECT_EQ(view.pointsModel()->rowCount(), 5);
  for (int c : {PointsTableModel::PredictedStep, PointsTableModel::PredictedPeak,
                PointsTableModel::PredictionErr}) {
    EXPECT_FALSE(view.pointsTable()->isColumnHidden(c)) << c;
  }
  // Predictions are of peak allocated: on the device total (the budget's figure by default) the
  // caption says where they are; on peak allocated they are plotted.
  EXPECT_EQ(view.pareto()->memoryMetric(), SweepMetric::PeakTotal);
  EXPECT_EQ(view.pareto()->predictedCount(), 0);
  EXPECT_TRUE(
      view.pareto()->caption().contains(QStringLiteral("5 predicted (of peak allocated only)")))
      << view.pareto()->caption().toStdString();
  view.setParetoAxis(SweepMetric::PeakAllocated);
  EXPECT_EQ(view.pareto()->predictedCount(), 5);
  EXPECT_TRUE(view.pareto()->legendLabels().contains("predicted"));

  // The fixture's sweep predicted nothing: no columns, no markers, no legend entry.
  const std::string fixture = test::fixture_copy(dir_);
  ASSERT_FALSE(fixture.empty());
  view.showSweep(fixture, pf::SweepId(1));
  ASSERT_TRUE(loaded.wait(kWaitMs));
  EXPECT_EQ(view.pointsModel()->rowCount(), 5);
  EXPECT_FALSE(view.pointsModel()->hasPredictions());
  for (int c : {PointsTableModel::PredictedStep, PointsTableModel::PredictedPeak,
                PointsTableModel::PredictionErr}) {
    EXPECT_TRUE(view.pointsTable()->isColumnHidden(c)) << c;
  }
  EXPECT_EQ(view.pareto()->predictedCount(), 0);
  EXPECT_FALSE(view.pareto()->legendLabels().contains("predicted"));
}

}  // namespace
}  // namespace offtune::gui
