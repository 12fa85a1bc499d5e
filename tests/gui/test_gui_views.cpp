// The dashboard's views over the fixture store, offscreen: loading on job threads (QSignalSpy),
// stale results dropped, rendering not blank, the recommendation panel's constraint (a typo in it
// changes nothing) and exports, the main window (quitting mid-sweep asks first), and the
// --screenshot renderer.
#include <gtest/gtest.h>

#include <algorithm>

#include <QApplication>
#include <QClipboard>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "gui_test_util.hpp"
#include "offtune/gui/jobs.hpp"
#include "offtune/gui/main_window.hpp"
#include "offtune/gui/models.hpp"
#include "offtune/gui/recommend_panel.hpp"
#include "offtune/gui/run_charts.hpp"
#include "offtune/gui/run_view.hpp"
#include "offtune/gui/sweep_charts.hpp"
#include "offtune/gui/sweep_form.hpp"
#include "offtune/gui/sweep_view.hpp"
#include "offtune/gui/timeline.hpp"
#include "offtune/profiler/export.hpp"
#include "offtune/profiler/store.hpp"

namespace offtune::gui {
namespace {

namespace pf = offtune::profiler;
constexpr int kWaitMs = 60000;
constexpr int kSweepWaitMs = 300000;

QImage render(QWidget& w, QSize size = {1200, 800}) {
  w.resize(size);
  w.show();
  QApplication::processEvents();
  return w.grab().toImage();
}

using Views = test::FixtureStore;

TEST_F(Views, SweepViewLoadsRendersAndRecommends) {
  SweepView view;
  QSignalSpy loaded(&view, &SweepView::loaded);
  view.showSweep(path_, pf::SweepId(1));
  ASSERT_TRUE(loaded.wait(kWaitMs));
  ASSERT_TRUE(view.sweepData());
  EXPECT_EQ(view.sweepData()->points.size(), 5u);
  EXPECT_EQ(view.pointsModel()->rowCount(), 5);
  const auto& rec = view.recommendPanel()->recommendation();
  ASSERT_TRUE(rec.chosen.has_value());
  EXPECT_EQ(rec.chosen->status, pf::PointStatus::Ok);
  EXPECT_FALSE(rec.front.empty());
  EXPECT_GT(test::distinct_colors(render(view)), 50);
  EXPECT_GT(test::distinct_colors(view.heatmap()->grab().toImage()), 20);
  EXPECT_GT(test::distinct_colors(view.pareto()->grab().toImage()), 20);

  // Clicking a point asks for its run.
  QSignalSpy run_requested(&view, &SweepView::runRequested);
  Q_EMIT view.heatmap()->pointActivated(3);
  ASSERT_EQ(run_requested.size(), 1);
  EXPECT_EQ(run_requested[0][0].toLongLong(), view.sweepData()->points[3].run.value);
  view.setMetric(SweepMetric::PeakAllocated);  // no crash; the heatmap recolours
}

TEST_F(Views, SweepViewDropsAStaleJobAndReportsAMissingSweep) {
  SweepView view;
  QSignalSpy loaded(&view, &SweepView::loaded), failed(&view, &SweepView::loadFailed);
  view.showSweep(path_, pf::SweepId(99));  // superseded before it ends: its failure is dropped
  view.showSweep(path_, pf::SweepId(1));
  ASSERT_TRUE(loaded.wait(kWaitMs));
  QApplication::processEvents();
  EXPECT_EQ(failed.size(), 0);
  view.showSweep(path_, pf::SweepId(99));
  ASSERT_TRUE(failed.wait(kWaitMs));
  EXPECT_TRUE(failed[0][0].toString().contains("no sweep 99"));
}

TEST_F(Views, SweepViewMergesLivePoints) {
  auto sweep = std::make_shared<SweepData>(load_sweep(path_, pf::SweepId(1)));
  auto partial = std::make_shared<SweepData>(*sweep);
  partial->points.resize(2);
  SweepView view;
  view.setSweepData(partial, path_);
  EXPECT_EQ(view.pointsModel()->rowCount(), 2);
  auto oom = sweep->points[4];
  oom.status = pf::PointStatus::OutOfMemory;
  oom.error = "out of memory";
  view.applyPoint(oom);
  view.applyPoint(sweep->points[3]);
  ASSERT_EQ(view.sweepData()->points.size(), 4u);
  EXPECT_EQ(view.sweepData()->points[2].index, 3);  // kept in index order
  EXPECT_EQ(view.sweepData()->points[3].status, pf::PointStatus::OutOfMemory);
  EXPECT_EQ(partial->points.size(), 2u);  // the old snapshot is untouched (copy on write)
  auto other = sweep->points[1];
  other.sweep = pf::SweepId(7);
  view.applyPoint(other);  // another sweep's point is ignored
  EXPECT_EQ(view.sweepData()->points.size(), 4u);
}

TEST_F(Views, RecommendPanelFollowsTheConstraintAndExports) {
  auto sweep = std::make_shared<const SweepData>(load_sweep(path_, pf::SweepId(1)));
  RecommendPanel panel;
  panel.setSweep(sweep, path_);
  ASSERT_TRUE(panel.recommendation().chosen.has_value());
  EXPECT_TRUE(panel.snippet(0).contains("min_offload_size") ||
              panel.snippet(0).contains("offload"));
  // The budget that only the lowest-peak point meets picks it.
  int64_t lowest = INT64_MAX;
  for (const auto& p : sweep->points) lowest = std::min(lowest, p.summary.peak_allocated);
  pf::Constraint budget;
  budget.memory_budget = lowest;
  panel.setConstraint(budget);
  ASSERT_TRUE(panel.recommendation().chosen.has_value());
  EXPECT_EQ(panel.recommendation().chosen->summary.peak_allocated, lowest);
  EXPECT_TRUE(panel.snippet(1).contains("min_offload_size"));  // TRL
  EXPECT_TRUE(panel.snippet(2).contains("max_fwd_stash_size") ||
              panel.snippet(2).contains("offload"));  // Axolotl YAML
  budget.memory_budget = lowest - 1;
  panel.setConstraint(budget);
  EXPECT_FALSE(panel.recommendation().chosen.has_value());
  EXPECT_TRUE(panel.snippet(0).isEmpty());
  const auto c = panel.constraint();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->memory_budget, lowest - 1);

  panel.setConstraint({});
  // Copy snippet copies the shown snippet and says so.
  auto* copy = panel.findChild<QPushButton*>(QStringLiteral("copySnippet"));
  ASSERT_NE(copy, nullptr);
  copy->click();
  EXPECT_EQ(QApplication::clipboard()->text(), panel.snippet(0));
  EXPECT_TRUE(copy->text().startsWith(QStringLiteral("Copied")));
  EXPECT_TRUE(
      QTest::qWaitFor([&] { return copy->text() == QStringLiteral("Copy snippet"); }, 5000));

  QSignalSpy done(&panel, &RecommendPanel::exportFinished);
  const QString csv = dir_.filePath("points.csv");
  panel.exportCsv(csv);
  ASSERT_TRUE(done.wait(kWaitMs));
  EXPECT_TRUE(done[0][0].toBool()) << done[0][1].toString().toStdString();
  QFile f(csv);
  ASSERT_TRUE(f.open(QIODevice::ReadOnly));
  const QList<QByteArray> lines = f.readAll().split('\n');
  EXPECT_EQ(lines[0].trimmed().toStdString(), pf::points_csv_header());
  EXPECT_EQ(lines.size(), 7);  // header, 5 points, and the empty tail after the last CRLF

  const QString trace = dir_.filePath("trace.json");
  panel.exportChromeTrace(trace);
  ASSERT_TRUE(done.wait(kWaitMs));
  EXPECT_TRUE(done[1][0].toBool()) << done[1][1].toString().toStdString();
  QFile t(trace);
  ASSERT_TRUE(t.open(QIODevice::ReadOnly));
  const auto json = nlohmann::json::parse(t.readAll().toStdString());
  EXPECT_FALSE(json.at("traceEvents").empty());

  // An unwritable target fails in band, with the reason.
  panel.exportCsv(dir_.filePath("no/such/dir/points.csv"));
  ASSERT_TRUE(done.wait(kWaitMs));
  EXPECT_FALSE(done[2][0].toBool());
  EXPECT_TRUE(done[2][1].toString().startsWith("Export failed"));
}

// A budget that does not parse keeps the last valid recommendation, front, snippets and exports,
// and says what is wrong beside the field.
TEST_F(Views, ABudgetTypoKeepsTheLastValidViewAndSaysWhyBesideTheField) {
  auto sweep = std::make_shared<const SweepData>(load_sweep(path_, pf::SweepId(1)));
  RecommendPanel panel;
  panel.resize(400, 800);
  panel.show();
  panel.setSweep(sweep, path_);
  pf::Constraint c;
  c.memory_budget = int64_t{1} << 30;
  panel.setConstraint(c);
  ASSERT_TRUE(panel.recommendation().chosen);
  const int64_t chosen = panel.recommendation().chosen->index;
  const int front_rows = panel.frontModel()->rowCount();
  ASSERT_GT(front_rows, 0);
  const QString snippet = panel.snippet(0);
  ASSERT_FALSE(snippet.isEmpty());
  auto* budget = panel.findChild<QLineEdit*>(QStringLiteral("budget"));
  auto* error = panel.findChild<QLabel*>(QStringLiteral("budgetError"));
  ASSERT_NE(budget, nullptr);
  ASSERT_NE(error, nullptr) << "no error label beside the budget field";
  EXPECT_FALSE(error->isVisible());

  budget->setText(QStringLiteral("1GiBx"));
  Q_EMIT budget->editingFinished();
  EXPECT_EQ(panel.frontModel()->rowCount(), front_rows);
  EXPECT_EQ(panel.snippet(0), snippet);
  ASSERT_TRUE(panel.recommendation().chosen);
  EXPECT_EQ(panel.recommendation().chosen->index, chosen);
  for (auto* b : panel.findChildren<QPushButton*>()) {
    if (b->text().startsWith(QStringLiteral("Export"))) {
      EXPECT_TRUE(b->isEnabled()) << "export off";
    }
  }
  EXPECT_TRUE(error->isVisible());
  EXPECT_TRUE(error->text().contains(QStringLiteral("memory budget")))
      << error->text().toStdString();
  // Fixed: the error goes and the new budget applies.
  budget->setText(QStringLiteral("1GiB"));
  Q_EMIT budget->editingFinished();
  EXPECT_FALSE(error->isVisible());
}

// Issue 43 defect 9: the budget's error text is whole (before: clipped to the field's column, one
// line high), and a host budget that does not parse says so beside the host budget field, not
// under the memory budget's.
TEST_F(Views, ABudgetsErrorIsWholeAndBesideItsOwnField) {
  // In the window at 1280x800, where the panel sits in the sweep view's scrolled side pane.
  MainWindow window;
  window.resize(1280, 800);
  window.show();
  QSignalSpy loaded(window.sweepView(), &SweepView::loaded);
  window.openStore(QString::fromStdString(path_));
  ASSERT_TRUE(loaded.wait(kWaitMs));
  RecommendPanel& panel = *window.sweepView()->recommendPanel();
  pf::Constraint c;
  c.memory_budget = int64_t{1} << 30;
  panel.setConstraint(c);
  test::settle(window);
  auto* budget = panel.findChild<QLineEdit*>(QStringLiteral("budget"));
  auto* host = panel.findChild<QLineEdit*>(QStringLiteral("hostBudget"));
  auto* error = panel.findChild<QLabel*>(QStringLiteral("budgetError"));
  auto* host_error = panel.findChild<QLabel*>(QStringLiteral("hostBudgetError"));
  ASSERT_NE(budget, nullptr);
  ASSERT_NE(host, nullptr);
  ASSERT_NE(error, nullptr);
  ASSERT_NE(host_error, nullptr) << "no error label beside the host budget field";
  const auto whole = [](const QLabel* label) {
    const QRect needed = label->fontMetrics().boundingRect(
        QRect(0, 0, label->contentsRect().width(), 100000), Qt::TextWordWrap, label->text());
    return needed.height() <= label->contentsRect().height() &&
           needed.width() <= label->contentsRect().width();
  };
  budget->setText(QStringLiteral("twelve gigabytes, more or less"));
  test::settle(window);
  ASSERT_TRUE(error->isVisible());
  EXPECT_FALSE(host_error->isVisible());
  EXPECT_TRUE(whole(error)) << error->text().toStdString() << " in " << error->width() << "x"
                            << error->height();
  budget->setText(QStringLiteral("1GiB"));
  host->setText(QStringLiteral("lots of host memory please"));
  test::settle(window);
  EXPECT_FALSE(error->isVisible());
  ASSERT_TRUE(host_error->isVisible());
  EXPECT_TRUE(host_error->text().contains(QStringLiteral("host budget")))
      << host_error->text().toStdString();
  EXPECT_TRUE(whole(host_error)) << host_error->text().toStdString();
  EXPECT_GT(host_error->mapTo(&panel, QPoint(0, 0)).y(), host->mapTo(&panel, QPoint(0, 0)).y());
  host->clear();
  test::settle(window);
  EXPECT_FALSE(host_error->isVisible());
}

TEST_F(Views, RunViewLoadsAndRendersTimelineAndCharts) {
  RunView view;
  QSignalSpy loaded(&view, &RunView::loaded);
  view.showRun(path_, pf::RunId(2));
  ASSERT_TRUE(loaded.wait(kWaitMs));
  ASSERT_TRUE(view.runData());
  EXPECT_EQ(view.runData()->run.id, pf::RunId(2));
  EXPECT_FALSE(view.runData()->events.empty());
  EXPECT_GT(view.summaryModel()->rowCount(), 10);
  // The axis spans the run's events.
  EXPECT_LT(view.axis()->viewBegin(), view.axis()->viewEnd());
  EXPECT_GT(test::distinct_colors(render(view)), 50);
  EXPECT_GT(test::distinct_colors(view.timeline()->grab().toImage()), 10);
  EXPECT_GT(test::distinct_colors(view.occupancyChart()->grab().toImage()), 5);
  // Zooming the shared axis moves every chart with it.
  const int64_t span = view.axis()->viewEnd() - view.axis()->viewBegin();
  view.axis()->zoomAt(0.5, 4.0);
  EXPECT_LT(view.axis()->viewEnd() - view.axis()->viewBegin(), span);

  QSignalSpy failed(&view, &RunView::loadFailed);
  view.showRun(path_, pf::RunId(404));
  ASSERT_TRUE(failed.wait(kWaitMs));
  EXPECT_TRUE(failed[0][0].toString().contains("no run 404"));
}

// The Run heading names the sweep point the run measured, by its label (issue 43 item 17; before:
// the run's id, model and settings only).
TEST(RunHeading, NamesThePointTheRunMeasured) {
  auto run = std::make_shared<RunData>();
  run->run.id = pf::RunId(7);
  run->run.workload.model = "tiny";
  run->run.label = "grid point 5 (sweep 2, repeat 2 of 3)";
  RunView view;
  view.setRunData(run, build_timeline_index(*run));
  const QString title = view.findChild<QLabel*>(QStringLiteral("runTitle"))->text();
  EXPECT_TRUE(title.startsWith(QStringLiteral("run 7: tiny"))) << title.toStdString();
  EXPECT_TRUE(title.contains(QStringLiteral("grid point 5 (sweep 2, repeat 2 of 3)")))
      << title.toStdString();
}

// File > Export run as memory snapshot: the run on show's history as the pickle PyTorch's memory
// visualiser opens; a run recorded without one is refused in the status bar, saying how to record
// one, and writes nothing.
TEST_F(Views, TheRunOnShowExportsItsMemorySnapshot) {
  {
    auto store = pf::open_sqlite_store(path_);
    store->add_memory_history(
        pf::RunId(2),
        {{.seq = 0, .time_ns = 10, .action = "segment_alloc", .addr = 4 << 20, .size = 2 << 20},
         {.seq = 1, .time_ns = 11, .action = "alloc", .addr = 4 << 20, .size = 4096}},
        {{.segment_addr = 4 << 20,
          .segment_size = 2 << 20,
          .addr = 4 << 20,
          .size = 4096,
          .requested = 4096,
          .state = "active_allocated"}});
  }
  MainWindow window;
  QSignalSpy loaded(&window, &MainWindow::storeLoaded);
  window.openStore(QString::fromStdString(path_));
  ASSERT_TRUE(loaded.wait(kWaitMs));
  QSignalSpy run_loaded(window.runView(), &RunView::loaded);
  window.showRun(pf::RunId(2));
  ASSERT_TRUE(run_loaded.wait(kWaitMs));
  QSignalSpy finished(&window, &MainWindow::exportFinished);
  const QString snap = dir_.filePath("run2.pickle");
  window.exportMemorySnapshot(snap);
  ASSERT_TRUE(finished.wait(kWaitMs));
  EXPECT_TRUE(finished[0][0].toBool()) << finished[0][1].toString().toStdString();
  QFile file(snap);
  ASSERT_TRUE(file.open(QIODevice::ReadOnly));
  EXPECT_TRUE(file.read(2) == QByteArray("\x80\x02", 2)) << "a pickle, protocol 2";

  window.showRun(pf::RunId(1));
  ASSERT_TRUE(run_loaded.wait(kWaitMs));
  const QString none = dir_.filePath("run1.pickle");
  window.exportMemorySnapshot(none);
  ASSERT_TRUE(finished.wait(kWaitMs));
  EXPECT_FALSE(finished[1][0].toBool());
  EXPECT_TRUE(finished[1][1].toString().contains(QStringLiteral("--memory-history")))
      << finished[1][1].toString().toStdString();
  EXPECT_FALSE(QFile::exists(none));
}

TEST_F(Views, MainWindowOpensAStoreAndShowsTheNewestSweep) {
  MainWindow window;
  QSignalSpy loaded(&window, &MainWindow::storeLoaded);
  QSignalSpy sweep_loaded(window.sweepView(), &SweepView::loaded);
  window.openStore(QString::fromStdString(path_));
  ASSERT_TRUE(loaded.wait(kWaitMs));
  EXPECT_EQ(window.storeModel()->rowCount(), 2);
  ASSERT_TRUE(sweep_loaded.wait(kWaitMs));
  EXPECT_EQ(window.tabs()->currentWidget(), window.sweepView());
  EXPECT_TRUE(MainWindow::recentStores().contains(QString::fromStdString(path_)));

  QSignalSpy run_loaded(window.runView(), &RunView::loaded);
  Q_EMIT window.sweepView()->runRequested(6);
  ASSERT_TRUE(run_loaded.wait(kWaitMs));
  EXPECT_EQ(window.tabs()->currentWidget(), window.runView());
  EXPECT_EQ(window.runView()->runData()->run.workload.model, "mlp");
}

TEST_F(Views, MainWindowReportsAStoreItCannotRead) {
  const QString junk = dir_.filePath("junk.db");
  QFile f(junk);
  ASSERT_TRUE(f.open(QIODevice::WriteOnly));
  f.write(QByteArray(4096, 'x'));
  f.close();
  MainWindow window;
  QSignalSpy failed(&window, &MainWindow::storeFailed);
  window.openStore(junk);
  ASSERT_TRUE(failed.wait(kWaitMs));
  EXPECT_FALSE(failed[0][0].toString().isEmpty());
  EXPECT_EQ(window.storeModel()->rowCount(), 0);
  QFile again(junk);
  ASSERT_TRUE(again.open(QIODevice::ReadOnly));
  EXPECT_EQ(again.readAll(), QByteArray(4096, 'x'));  // never modified
}

// Issue 14, item 7: a File > Open that fails leaves the app on the store it had: the window's
// store, the form's store field (what Run sweep writes to) and the tree stay as they were.
TEST_F(Views, AFailedOpenLeavesTheAppOnTheStoreItHad) {
  MainWindow window;
  QSignalSpy loaded(&window, &MainWindow::storeLoaded);
  window.openStore(QString::fromStdString(path_));
  ASSERT_TRUE(loaded.wait(kWaitMs));
  ASSERT_EQ(window.storePath().toStdString(), path_);

  const QString junk = dir_.filePath("junk2.db");
  QFile f(junk);
  ASSERT_TRUE(f.open(QIODevice::WriteOnly));
  f.write(QByteArray(4096, 'x'));
  f.close();
  QSignalSpy failed(&window, &MainWindow::storeFailed);
  window.openStore(junk);
  ASSERT_TRUE(failed.wait(kWaitMs));
  EXPECT_EQ(window.storePath().toStdString(), path_);
  EXPECT_EQ(window.sweepForm()->request().db, path_);
  EXPECT_EQ(window.storeModel()->rowCount(), 2);  // the good store's tree is still there
  // F5 reloads the good store, not the bad one.
  window.reloadStore();
  ASSERT_TRUE(loaded.wait(kWaitMs));
  EXPECT_EQ(window.storePath().toStdString(), path_);
}

// Quitting while a sweep runs asks first, and says that the sweep resumes.
TEST_F(Views, QuittingMidSweepAsksAndSaysTheSweepResumes) {
  MainWindow window;
  window.show();
  const QString g = dir_.filePath(QStringLiteral("q.db"));
  window.sweepForm()->setRequest(
      test::tiny_request(g.toStdString(), "1KiB,2KiB,4KiB,8KiB", "1,2,3,4"));
  QSignalSpy finished(window.sweepForm(), &SweepForm::sweepFinished);
  ASSERT_TRUE(window.sweepForm()->startSweep());
  QString asked;
  QTimer::singleShot(200, [&] {
    if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
      asked = box->text() + QLatin1Char(' ') + box->informativeText();
      box->reject();
    }
  });
  EXPECT_FALSE(window.close()) << "closed mid-sweep without asking";
  EXPECT_TRUE(asked.contains(QStringLiteral("resume"))) << asked.toStdString();
  window.sweepForm()->cancelSweep();
  ASSERT_TRUE(finished.count() > 0 || finished.wait(kSweepWaitMs));
  EXPECT_TRUE(window.close());  // nothing running: no question
}

// Args: PATH. Records a run as running, labelled "killed", closes the store (the run stays
// running; the close folds the -wal into the file, so that the test compares whole files) and
// reports; then the parent kills it.
OFFTUNE_CHILD_ROLE(begin_killed_run)
(const std::vector<std::string>& args, offtune::test::ChildControl&) {
  auto store = pf::open_sqlite_store(args.at(0));
  pf::RunRecord r;
  r.status = pf::RunStatus::Running;
  r.label = "killed";
  store->begin_run(r);
  return 0;
}

// Issue 11: the dashboard shares the store's and the exporters' rules, and is held to them too.
TEST_F(Views, TheDashboardLeavesNoSideFilesShowsInterruptedRunsAndNeverExportsOverTheStore) {
  // A run whose process was killed: a child process records it as running and is killed with
  // SIGKILL before it finishes (a real process: a fork of this threaded one could deadlock).
  {
    offtune::test::ChildProcess child("begin_killed_run", {path_},
                                      offtune::test::ChildProcess::After::Linger);
    child.kill_now();
  }
  const QByteArray before = [&] {
    QFile f(QString::fromStdString(path_));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  }();

  MainWindow window;
  QSignalSpy loaded(&window, &MainWindow::storeLoaded);
  window.openStore(QString::fromStdString(path_));
  ASSERT_TRUE(loaded.wait(kWaitMs));
  const StoreIndex index = load_store_index(path_);
  const auto killed = std::find_if(index.runs.begin(), index.runs.end(),
                                   [](const pf::RunRecord& r) { return r.label == "killed"; });
  ASSERT_NE(killed, index.runs.end());
  EXPECT_EQ(killed->status, pf::RunStatus::Interrupted) << killed->error;
  EXPECT_NE(killed->error.find("pid"), std::string::npos) << killed->error;

  // An export onto the store itself fails in band; the store is as it was.
  auto sweep = std::make_shared<const SweepData>(load_sweep(path_, pf::SweepId(1)));
  RecommendPanel panel;
  panel.setSweep(sweep, path_);
  QSignalSpy done(&panel, &RecommendPanel::exportFinished);
  panel.exportCsv(QString::fromStdString(path_));
  ASSERT_TRUE(done.wait(kWaitMs));
  EXPECT_FALSE(done[0][0].toBool());
  EXPECT_TRUE(done[0][1].toString().contains("store being exported"))
      << done[0][1].toString().toStdString();
  panel.exportChromeTrace(QString::fromStdString(path_ + "-wal"));
  ASSERT_TRUE(done.wait(kWaitMs));
  EXPECT_FALSE(done[1][0].toBool());

  // Every read the dashboard made was read-only: the file is unchanged and nothing is left beside
  // it (before: -wal and -shm stayed after every read-only open).
  QFile after(QString::fromStdString(path_));
  ASSERT_TRUE(after.open(QIODevice::ReadOnly));
  EXPECT_EQ(after.readAll(), before);
  EXPECT_FALSE(QFile::exists(QString::fromStdString(path_ + "-wal")));
  EXPECT_FALSE(QFile::exists(QString::fromStdString(path_ + "-shm")));
}

TEST_F(Views, ScreenshotsWriteEveryMainViewAndAreNotBlank) {
  MainWindow window;
  const QString out = dir_.filePath("shots");
  QString error;
  ASSERT_EQ(take_screenshots(window, QString::fromStdString(path_), out, &error), kShotOk)
      << error.toStdString();
  for (const char* name : {"dashboard.png", "sweep.png", "recommend.png", "run.png",
                           "run-selection.png", "sweep-form.png"}) {
    QImage image(QDir(out).filePath(QString::fromLatin1(name)));
    ASSERT_FALSE(image.isNull()) << name;
    EXPECT_GT(image.width(), 300) << name;
    EXPECT_GT(test::distinct_colors(image), 30) << name;
  }
  // A screenshot's store is not one the user opened: Open recent does not list it (issue 43 item
  // 17; before, every --screenshot run added its store).
  EXPECT_FALSE(MainWindow::recentStores().contains(
      QFileInfo(QString::fromStdString(path_)).absoluteFilePath()));
  MainWindow second;
  EXPECT_EQ(take_screenshots(second, dir_.filePath("missing.db"), out, &error), kShotStore);
}

}  // namespace
}  // namespace offtune::gui
