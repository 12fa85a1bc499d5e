// The dashboard's memory figures (issue 43 item 1, issue 40's dashboard budget): peak allocated,
// peak reserved, the device total and the host memory held, each named, in the points table, the
// tooltips, "Colour by" and the Pareto axis; the budget checked against the figure the panel
// says, a host budget, and the Pareto axis following that figure.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTest>
#include <memory>

#include "gui_test_util.hpp"
#include "offtune/gui/models.hpp"
#include "offtune/gui/recommend_panel.hpp"
#include "offtune/gui/sweep_charts.hpp"
#include "offtune/profiler/recommend.hpp"

namespace offtune::gui {
namespace {

namespace pf = offtune::profiler;

constexpr int64_t kMiB = 1024 * 1024;

// A point whose memory figures tell apart which one a view uses: allocated rises along the grid
// while reserved falls (a fragmenting allocator), so the two orders are opposite.
pf::PointRecord point(int64_t index, bool offload, int64_t min_size, double ms, int64_t allocated,
                      int64_t reserved, int64_t pinned) {
  pf::PointRecord p;
  p.id = pf::PointId(index + 1);
  p.sweep = pf::SweepId(3);
  p.index = index;
  p.config.offload = offload;
  p.config.min_offload_size = min_size;
  p.config.max_fwd_stash_size = 1;
  p.status = pf::PointStatus::Ok;
  p.run = pf::RunId(index + 10);
  p.summary.step_ms_median = ms;
  p.summary.peak_allocated = allocated * kMiB;
  p.summary.peak_reserved = reserved * kMiB;
  p.summary.device_outside = 500 * kMiB;
  p.summary.pinned_bytes = pinned * kMiB;
  p.summary.host_bytes_peak = pinned / 2 * kMiB;
  p.summary.offloaded_bytes = offload ? kMiB : 0;
  return p;
}

std::shared_ptr<SweepData> memory_sweep() {
  auto d = std::make_shared<SweepData>();
  d->sweep.id = pf::SweepId(3);
  d->points = {
      point(0, false, 1024, 10.0, 400, 420, 0),  // the baseline
      point(1, true, 1024, 14.0, 100, 380, 64),  // least allocated, most reserved of the three
      point(2, true, 4096, 12.0, 200, 300, 32),
      point(3, true, 16384, 11.0, 300, 310, 8),  // most allocated, little reserved
  };
  return d;
}

TEST(MemoryFigures, EachMetricIsItsOwnFigureNamedAsWhatItIs) {
  const auto d = memory_sweep();
  const auto& p = d->points[1];
  EXPECT_EQ(metric_value(*d, p, SweepMetric::PeakAllocated), 100.0 * kMiB);
  EXPECT_EQ(metric_value(*d, p, SweepMetric::PeakReserved), 380.0 * kMiB);
  EXPECT_EQ(metric_value(*d, p, SweepMetric::PeakTotal), 880.0 * kMiB);  // reserved + outside
  EXPECT_EQ(metric_value(*d, p, SweepMetric::HostHeld), 64.0 * kMiB);    // the pinned pool
  EXPECT_STREQ(metric_label(SweepMetric::PeakReserved), "peak reserved");
  EXPECT_STREQ(metric_label(SweepMetric::PeakTotal), "peak device total");
  EXPECT_EQ(format_metric(SweepMetric::PeakReserved, 380.0 * kMiB), "380.0 MiB");
  // Host memory not recorded (a store from before the figure): not applicable, not 0 bytes.
  EXPECT_FALSE(metric_value(*d, d->points[0], SweepMetric::HostHeld));
  EXPECT_EQ(memory_metric(pf::MemoryFigure::Reserved), SweepMetric::PeakReserved);
  EXPECT_EQ(memory_figure(SweepMetric::PeakTotal), pf::MemoryFigure::Total);
  EXPECT_FALSE(memory_figure(SweepMetric::HostHeld));
}

TEST(MemoryFigures, ThePointsTableShowsAndSortsEveryFigureWithWhatItIsMadeOf) {
  const auto d = memory_sweep();
  PointsTableModel model;
  model.setSweep(d);
  const auto cell = [&](int row, int column, int role = Qt::DisplayRole) {
    return model.data(model.index(row, column), role).toString();
  };
  EXPECT_EQ(model.headerData(PointsTableModel::PeakReserved, Qt::Horizontal).toString(),
            QStringLiteral("Peak reserved"));
  EXPECT_EQ(model.headerData(PointsTableModel::PeakTotal, Qt::Horizontal).toString(),
            QStringLiteral("Device total"));
  EXPECT_EQ(cell(1, PointsTableModel::PeakAllocated), QStringLiteral("100.0 MiB"));
  EXPECT_EQ(cell(1, PointsTableModel::PeakReserved), QStringLiteral("380.0 MiB"));
  EXPECT_EQ(cell(1, PointsTableModel::PeakTotal), QStringLiteral("880.0 MiB"));
  EXPECT_EQ(cell(1, PointsTableModel::HostHeld), QStringLiteral("64.0 MiB"));
  EXPECT_EQ(cell(0, PointsTableModel::HostHeld), QStringLiteral("n/a"));
  // Why reserved is above allocated, and what the total and the host figure are made of.
  EXPECT_TRUE(cell(1, PointsTableModel::PeakReserved, Qt::ToolTipRole)
                  .contains(QStringLiteral("280 MiB above peak allocated")));
  EXPECT_TRUE(cell(1, PointsTableModel::PeakTotal, Qt::ToolTipRole)
                  .contains(QStringLiteral("peak reserved 380 MiB + outside the allocator")));
  const QString host = cell(1, PointsTableModel::HostHeld, Qt::ToolTipRole);
  EXPECT_TRUE(host.contains(QStringLiteral("pinned pool 64 MiB"))) << host.toStdString();
  EXPECT_TRUE(host.contains(QStringLiteral("not measured"))) << host.toStdString();
  // Sorted by reserved, the order is the reverse of allocated's among the offload points.
  QSortFilterProxyModel proxy;
  proxy.setSourceModel(&model);
  proxy.setSortRole(PointsTableModel::SortRole);
  const auto order = [&](int column) {
    proxy.sort(column, Qt::AscendingOrder);
    std::vector<int64_t> out;
    for (int r = 0; r < proxy.rowCount(); ++r) {
      out.push_back(proxy.data(proxy.index(r, 0), PointsTableModel::PointIndexRole).toLongLong());
    }
    return out;
  };
  EXPECT_EQ(order(PointsTableModel::PeakAllocated), (std::vector<int64_t>{1, 2, 3, 0}));
  EXPECT_EQ(order(PointsTableModel::PeakReserved), (std::vector<int64_t>{2, 3, 1, 0}));
}

TEST(MemoryFigures, APointsTooltipNamesEachFigure) {
  const auto d = memory_sweep();
  const QString t = point_tooltip(*d, d->points[1]);
  for (const char* part :
       {"peak allocated 100.0 MiB (104,857,600 bytes)", "peak reserved 380.0 MiB",
        "device total 880.0 MiB", "pinned pool 64 MiB"}) {
    EXPECT_TRUE(t.contains(QString::fromUtf8(part))) << part << " not in " << t.toStdString();
  }
}

TEST(MemoryFigures, TheParetoAxisIsAnyFigureAndTheBudgetLineOnlyOnItsOwn) {
  auto d = memory_sweep();
  pf::PointPrediction q;
  q.sweep = d->sweep.id;
  q.index = 2;
  q.step_ns = 12'000'000;
  q.peak_allocated = 200 * kMiB;
  d->predictions = {q};
  ParetoWidget w;
  w.resize(640, 480);
  w.setData(d);
  pf::Constraint c;
  c.memory = pf::MemoryFigure::Reserved;
  c.memory_budget = 350 * kMiB;
  const auto rec = pf::recommend(d->points, c);
  ASSERT_TRUE(rec.chosen);
  EXPECT_EQ(rec.chosen->index, 3);  // fastest under 350 MiB reserved (point 1 holds 380)
  w.setRecommendation(rec);
  // On peak allocated (the default): allocated orders the points, the budget on reserved has no
  // line, and the prediction of peak allocated is plotted.
  EXPECT_EQ(w.memoryMetric(), SweepMetric::PeakAllocated);
  EXPECT_LT(w.positionOf(1).x(), w.positionOf(3).x());
  EXPECT_FALSE(w.constraintMark());
  EXPECT_EQ(w.predictedCount(), 1);
  // On peak reserved: the order turns round, the budget's line is at 350 MiB, no prediction.
  w.setMemoryMetric(SweepMetric::PeakReserved);
  EXPECT_GT(w.positionOf(1).x(), w.positionOf(3).x());
  EXPECT_EQ(w.mapToPlot(380.0 * kMiB, 14.0), w.positionOf(1));
  const auto mark = w.constraintMark();
  ASSERT_TRUE(mark);
  EXPECT_NEAR(mark->line.x1(), w.mapToPlot(350.0 * kMiB, 12.0).x(), 0.5);
  EXPECT_EQ(w.predictedCount(), 0);
  // A host budget is drawn on host memory held; the baseline (no host figure) is not plotted.
  c = {};
  c.host_budget = 40 * kMiB;
  w.setRecommendation(pf::recommend(d->points, c));
  w.setMemoryMetric(SweepMetric::HostHeld);
  EXPECT_EQ(w.positionOf(0), QPointF(-1, -1));
  ASSERT_TRUE(w.constraintMark());
  EXPECT_NEAR(w.constraintMark()->line.x1(), w.mapToPlot(40.0 * kMiB, 12.0).x(), 0.5);
}

TEST(MemoryFigures, ThePanelChecksTheBudgetOnTheFigureItSaysAndAHostBudget) {
  RecommendPanel panel;
  panel.resize(400, 900);
  panel.setSweep(memory_sweep(), "");
  auto* figure = panel.findChild<QComboBox*>(QStringLiteral("budgetFigure"));
  auto* budget = panel.findChild<QLineEdit*>(QStringLiteral("budget"));
  auto* host = panel.findChild<QLineEdit*>(QStringLiteral("hostBudget"));
  ASSERT_TRUE(figure && budget && host);
  // The device total by default, as the CLI.
  EXPECT_EQ(panel.recommendation().constraint.memory, pf::MemoryFigure::Total);
  // Typed, applied at once (before: only on Enter); 850 MiB of device total leaves out point 1.
  QTest::keyClicks(budget, QStringLiteral("850MiB"));
  const auto& rec = panel.recommendation();
  ASSERT_TRUE(rec.constraint.memory_budget);
  EXPECT_EQ(*rec.constraint.memory_budget, 850 * kMiB);
  ASSERT_TRUE(rec.chosen);
  EXPECT_EQ(rec.chosen->index, 3);
  // The same budget on peak allocated: every point fits, and the baseline is the fastest.
  figure->setCurrentIndex(figure->findData(static_cast<int>(pf::MemoryFigure::Allocated)));
  ASSERT_TRUE(panel.recommendation().chosen);
  EXPECT_EQ(panel.recommendation().chosen->index, 0);
  EXPECT_EQ(panel.recommendation().constraint.memory, pf::MemoryFigure::Allocated);
  // The front table shows the figure it was judged on, and its title names it.
  EXPECT_EQ(panel.findChild<QLabel*>(QStringLiteral("frontLabel"))->text(),
            QStringLiteral("Pareto front (step time vs peak allocated):"));
  auto* front = panel.findChild<QTableView*>();
  ASSERT_NE(front, nullptr);
  EXPECT_FALSE(front->isColumnHidden(PointsTableModel::PeakAllocated));
  EXPECT_TRUE(front->isColumnHidden(PointsTableModel::PeakTotal));
  EXPECT_TRUE(front->isColumnHidden(PointsTableModel::HostHeld));
  // A host budget of 40 MiB leaves out point 1 (a 64 MiB pinned pool); its column shows.
  QTest::keyClicks(host, QStringLiteral("40MiB"));
  ASSERT_TRUE(panel.recommendation().constraint.host_budget);
  EXPECT_EQ(*panel.recommendation().constraint.host_budget, 40 * kMiB);
  for (const auto& p : panel.recommendation().front) EXPECT_NE(p.index, 1);
  EXPECT_FALSE(front->isColumnHidden(PointsTableModel::HostHeld));
  // A mistyped host budget says so, and a valid one clears it.
  host->clear();
  QTest::keyClicks(host, QStringLiteral("lots"));
  QString error;
  EXPECT_FALSE(panel.constraint(&error));
  EXPECT_TRUE(error.contains(QStringLiteral("host budget"))) << error.toStdString();
  host->clear();
  QTest::keyClicks(host, QStringLiteral("1GiB"));
  EXPECT_TRUE(panel.constraint());
}

TEST(MemoryFigures, TheParetoAxisFollowsTheFigureTheBudgetIsCheckedAgainst) {
  SweepView view;
  view.resize(1280, 800);
  view.setSweepData(memory_sweep(), "m.db");
  auto* figure = view.recommendPanel()->findChild<QComboBox*>(QStringLiteral("budgetFigure"));
  auto* axis = view.findChild<QComboBox*>(QStringLiteral("paretoAxis"));
  ASSERT_TRUE(figure && axis);
  EXPECT_EQ(view.pareto()->memoryMetric(), SweepMetric::PeakTotal);
  figure->setCurrentIndex(figure->findData(static_cast<int>(pf::MemoryFigure::Reserved)));
  EXPECT_EQ(view.pareto()->memoryMetric(), SweepMetric::PeakReserved);
  // The user's own axis stays while the figure does not change.
  view.setParetoAxis(SweepMetric::HostHeld);
  EXPECT_EQ(axis->currentData().toInt(), static_cast<int>(SweepMetric::HostHeld));
  view.setSweepData(memory_sweep(), "m.db");
  EXPECT_EQ(view.pareto()->memoryMetric(), SweepMetric::HostHeld);
  // Every memory figure colours the heatmap.
  for (const SweepMetric m : kMemoryMetrics) {
    view.setMetric(m);
    EXPECT_EQ(view.heatmap()->sweepMetric(), m);
  }
}

}  // namespace
}  // namespace offtune::gui
