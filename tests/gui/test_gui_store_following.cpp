// What the views show follows the store they name: F5 reads the store again, the sweep on screen
// included; a store another process writes is followed without F5; a sweep started from the form
// into another store is that store's sweep on screen, alone and named, and opening a store leaves
// nothing of the sweep before in the form.
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QLabel>
#include <QProgressBar>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTest>
#include <algorithm>
#include <functional>

#include "gui_test_util.hpp"
#include "offtune/gui/main_window.hpp"
#include "offtune/gui/run_view.hpp"
#include "offtune/gui/sweep_form.hpp"
#include "offtune/gui/sweep_view.hpp"
#include "offtune/profiler/store.hpp"

namespace offtune::gui {
namespace {

namespace pf = offtune::profiler;
constexpr int kWaitMs = 60000;
constexpr int kSweepWaitMs = 300000;

using StoreFollowing = test::StoreInWindow;

// Runs the event loop until `done()` or the timeout; returns done().
bool wait_until(const std::function<bool()>& done, int timeout_ms = kWaitMs) {
  QElapsedTimer t;
  t.start();
  while (!done() && t.elapsed() < timeout_ms) {
    QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
    QTest::qWait(20);
  }
  return done();
}

// A sweep started from the form into a new store is that store's sweep on screen, named, never
// merged into the sweep of the store shown before (both are "sweep 1"); a run on screen still
// says which store it is of.
TEST_F(StoreFollowing, ASweepStartedIntoANewStoreIsShownAloneAndNamed) {
  MainWindow window;
  open(window);
  ASSERT_EQ(window.sweepView()->sweepData()->points.size(), 5u);
  QSignalSpy run_loaded(window.runView(), &RunView::loaded);
  window.showRun(pf::RunId(1));
  ASSERT_TRUE(run_loaded.wait(kWaitMs));
  auto* run_title = window.runView()->findChild<QLabel*>(QStringLiteral("runTitle"));
  ASSERT_NE(run_title, nullptr);
  EXPECT_TRUE(run_title->text().contains(QStringLiteral("p.db")))
      << run_title->text().toStdString();

  const QString g = dir_.filePath(QStringLiteral("g.db"));
  window.sweepForm()->setRequest(test::tiny_request(g.toStdString(), "1KiB", "1,2"));
  QSignalSpy finished(window.sweepForm(), &SweepForm::sweepFinished);
  ASSERT_TRUE(window.sweepForm()->startSweep());
  ASSERT_TRUE(finished.wait(kSweepWaitMs));
  ASSERT_TRUE(finished[0][0].toBool()) << finished[0][2].toString().toStdString();
  // The view holds g.db's sweep (3 points of tiny b1 s16), not p.db's (5 points of tiny b2 s64)
  // with g.db's points merged in.
  SweepView* view = window.sweepView();
  wait_until([&] { return view->sweepData() && view->storePath() == g.toStdString(); });
  ASSERT_TRUE(view->sweepData());
  EXPECT_EQ(view->storePath(), g.toStdString());
  EXPECT_EQ(view->sweepData()->sweep.workload.batch, 1);
  EXPECT_EQ(view->sweepData()->points.size(), 3u);
  auto* title = view->findChild<QLabel*>(QStringLiteral("sweepTitle"));
  ASSERT_NE(title, nullptr);
  EXPECT_TRUE(title->text().contains(QStringLiteral("g.db"))) << title->text().toStdString();
  EXPECT_TRUE(title->text().contains(QStringLiteral("3/3"))) << title->text().toStdString();
  // The run on screen is still p.db's, and says so (its export reads p.db: RunView::storePath).
  EXPECT_EQ(window.runView()->storePath(), path_);
  EXPECT_TRUE(run_title->text().contains(QStringLiteral("p.db")))
      << run_title->text().toStdString();

  // Item 13: opening another store leaves nothing of the sweep before in the form: no "3/3"
  // progress, no "measured" status.
  QSignalSpy loaded(&window, &MainWindow::storeLoaded);
  window.openStore(QString::fromStdString(path_));
  ASSERT_TRUE(loaded.wait(kWaitMs));
  auto* progress = window.sweepForm()->findChild<QProgressBar*>();
  ASSERT_NE(progress, nullptr);
  EXPECT_EQ(progress->value(), progress->minimum()) << progress->text().toStdString();
  auto* status = window.sweepForm()->findChild<QLabel*>(QStringLiteral("status"));
  ASSERT_NE(status, nullptr);
  EXPECT_FALSE(status->text().contains(QStringLiteral("measured"))) << status->text().toStdString();
}

// F5 reads the store again, the sweep on screen included; and a store that another process writes
// is followed without F5.
TEST_F(StoreFollowing, F5RefreshesTheSweepOnScreenAndAStoreWrittenElsewhereIsFollowed) {
  MainWindow window;
  open(window);
  SweepView* view = window.sweepView();
  const auto rewrite = [&](int64_t index, double ms) {
    auto store = pf::open_sqlite_store(path_);
    auto points = store->points(pf::SweepId(1));
    auto it = std::find_if(points.begin(), points.end(),
                           [&](const pf::PointRecord& p) { return p.index == index; });
    ASSERT_NE(it, points.end());
    it->summary.step_ms_median = ms;
    store->put_point(*it);
  };
  const auto step_of = [&](int64_t index) {
    for (const auto& p : view->sweepData()->points) {
      if (p.index == index) return p.summary.step_ms_median;
    }
    return -1.0;
  };
  {
    // Following reads only on a change: the dashboard's own reads change nothing, so no reload
    // follows another.
    QSignalSpy reloaded(&window, &MainWindow::storeLoaded);
    QTest::qWait(2500);
    EXPECT_EQ(reloaded.count(), 0);
  }
  window.setStoreFollowing(false);  // F5 alone first
  rewrite(2, 999.0);
  QSignalSpy sweep_loaded(view, &SweepView::loaded);
  window.reloadStore();
  ASSERT_TRUE(sweep_loaded.wait(kWaitMs)) << "F5 did not read the sweep on screen again";
  EXPECT_EQ(step_of(2), 999.0);
  EXPECT_EQ(window.tabs()->currentWidget(), view);

  window.setStoreFollowing(true);
  rewrite(3, 777.0);
  EXPECT_TRUE(wait_until([&] { return step_of(3) == 777.0; }, 15000))
      << "the view did not follow a write by another process: step " << step_of(3);
}

}  // namespace
}  // namespace offtune::gui
