// Running sweeps from the dashboard: the request check, the form's fields and its errors, a tiny
// sweep end to end through the form (points reported as they finish, the store written as by
// `offtune sweep`), resuming, cancelling (a cancelled sweep counted as such everywhere), and live
// points in the main window.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <set>

#include "gui_test_util.hpp"
#include "offtune/gui/main_window.hpp"
#include "offtune/gui/models.hpp"
#include "offtune/gui/sweep_charts.hpp"
#include "offtune/gui/sweep_form.hpp"
#include "offtune/gui/sweep_view.hpp"
#include "offtune/profiler/store.hpp"

namespace offtune::gui {
namespace {

namespace pf = offtune::profiler;
constexpr int kWaitMs = 60000;
constexpr int kSweepWaitMs = 300000;

// Waits for the form's sweepFinished; returns its arguments.
QList<QVariant> wait_finished(SweepForm& form, QSignalSpy& spy) {
  if (spy.isEmpty() && !spy.wait(kSweepWaitMs)) return {};
  return spy.takeFirst();
}

TEST(SweepRequestCheck, CountsPointsAndRefusesBadInput) {
  auto r = test::tiny_request("s.db", "1KiB,1MiB", "1:3");
  EXPECT_EQ(validate_sweep_request(r), 1 + 2 * 3);
  r.knobs["min_offload_size"] = "1KiB:64KiB:x4";
  EXPECT_EQ(validate_sweep_request(r), 1 + 4 * 3);
  const auto refused = [](SweepRequest bad) {
    EXPECT_THROW(validate_sweep_request(bad), std::invalid_argument)
        << bad.knob_text("min_offload_size");
  };
  auto bad = r;
  bad.knobs["min_offload_size"] = "12 parsecs";
  refused(bad);
  bad = r;
  bad.knobs["max_fwd_stash_size"] = "0,1";
  refused(bad);
  bad = r;
  bad.workload.dtype = "fp8";
  refused(bad);
  bad = r;
  bad.knobs["link"] = "fast";
  refused(bad);
  bad = r;
  bad.backend.backend = "tpu";
  refused(bad);
  bad = r;
  bad.db.clear();
  refused(bad);
  bad = r;
  bad.workload.batch = 0;
  refused(bad);
}

TEST(SweepFormTest, RunsATinySweepEndToEndThenResumes) {
  QTemporaryDir dir;
  const std::string db = dir.filePath("gui-sweep.db").toStdString();
  SweepForm form;
  form.setRequest(test::tiny_request(db, "1KiB", "1,2"));
  EXPECT_EQ(form.request().knob_text("min_offload_size"), "1KiB");
  EXPECT_EQ(form.request().workload.seq, 16);
  QSignalSpy points(&form, &SweepForm::pointFinished);
  QSignalSpy finished(&form, &SweepForm::sweepFinished);
  ASSERT_TRUE(form.startSweep());
  EXPECT_FALSE(form.startSweep());  // one at a time
  const auto args = wait_finished(form, finished);
  ASSERT_EQ(args.size(), 3);
  EXPECT_TRUE(args[0].toBool()) << args[2].toString().toStdString();
  EXPECT_FALSE(args[1].toBool());
  ASSERT_EQ(points.size(), 3);  // the baseline and two offload points, as they finished
  std::set<int64_t> indices;
  for (const auto& p : points) {
    const auto point = test::point_of(p[0]);
    EXPECT_EQ(point.status, pf::PointStatus::Ok) << point.error;
    EXPECT_TRUE(point.run.valid());
    indices.insert(point.index);
  }
  EXPECT_EQ(indices, (std::set<int64_t>{0, 1, 2}));

  auto store = pf::open_sqlite_store_readonly(db);
  ASSERT_EQ(store->sweeps().size(), 1u);
  const auto stored = store->points(store->sweeps()[0].id);
  ASSERT_EQ(stored.size(), 3u);
  for (const auto& p : stored) EXPECT_EQ(p.status, pf::PointStatus::Ok);
  EXPECT_FALSE(store->events(stored[1].run).empty());
  store.reset();

  // The same request again resumes the finished sweep: nothing new runs.
  points.clear();
  ASSERT_TRUE(form.startSweep());
  const auto again = wait_finished(form, finished);
  ASSERT_EQ(again.size(), 3);
  EXPECT_TRUE(again[0].toBool());
  EXPECT_EQ(points.size(), 0);
  EXPECT_TRUE(again[2].toString().contains("ran 0, skipped 3"))
      << again[2].toString().toStdString();
}

TEST(SweepFormTest, CancelStopsBetweenPointsAndTheSweepResumes) {
  QTemporaryDir dir;
  const std::string db = dir.filePath("cancel.db").toStdString();
  SweepForm form;
  form.setRequest(test::tiny_request(db, "1KiB,4KiB", "1,2"));  // 5 points
  QSignalSpy points(&form, &SweepForm::pointFinished);
  QSignalSpy finished(&form, &SweepForm::sweepFinished);
  // Cancel as soon as the first point is in: the sweep stops after the point in progress.
  auto* status = form.findChild<QProgressBar*>();
  ASSERT_NE(status, nullptr);
  QObject::connect(&form, &SweepForm::pointFinished, &form, [&form] { form.cancelSweep(); });
  ASSERT_TRUE(form.startSweep());
  const auto args = wait_finished(form, finished);
  ASSERT_EQ(args.size(), 3);
  EXPECT_FALSE(args[0].toBool());
  EXPECT_TRUE(args[1].toBool());  // interrupted
  const qsizetype done = points.size();
  EXPECT_GE(done, 1);
  EXPECT_LT(done, 5);

  auto store = pf::open_sqlite_store_readonly(db);
  const auto stored = store->points(store->sweeps().at(0).id);
  int64_t ok = 0;
  for (const auto& p : stored) ok += p.status == pf::PointStatus::Ok;
  EXPECT_EQ(ok, done);  // every reported point is in the store, and no other
  store.reset();

  QObject::disconnect(&form, &SweepForm::pointFinished, &form, nullptr);
  points.clear();
  ASSERT_TRUE(form.startSweep());
  const auto rest = wait_finished(form, finished);
  ASSERT_EQ(rest.size(), 3);
  EXPECT_TRUE(rest[0].toBool()) << rest[2].toString().toStdString();
  EXPECT_EQ(points.size(), 5 - done);  // only the points not measured before
  // Its outcome stays until the request changes; then the bar is empty and the outcome is named
  // as the last sweep's (before: it read as if about the request on screen).
  EXPECT_EQ(status->value(), status->maximum());
  form.setRequest(test::tiny_request(db, "1KiB,4KiB,16KiB", "1,2"));
  EXPECT_EQ(status->value(), 0);
  bool named = false;
  for (auto* label : form.findChildren<QLabel*>()) {
    named = named || label->text().startsWith(QStringLiteral("Last sweep: 5/5 measured."));
  }
  EXPECT_TRUE(named);
}

TEST(SweepFormTest, ACapacityAppliesToItsOwnSweepOnly) {
  QTemporaryDir dir;
  SweepForm form;
  QSignalSpy points(&form, &SweepForm::pointFinished);
  QSignalSpy finished(&form, &SweepForm::sweepFinished);
  // 8 MiB of device memory, as the modelled caching allocator reserves it: the model and the
  // offloading point's step fit (b4 s128: 6 MiB reserved), the baseline's does not (10 MiB).
  auto small = test::tiny_request(dir.filePath("small.db").toStdString(), "1KiB", "1");
  small.workload.batch = 4;
  small.workload.seq = 128;
  small.backend.device_capacity = "8MiB";
  form.setRequest(small);
  ASSERT_TRUE(form.startSweep());
  ASSERT_EQ(wait_finished(form, finished).size(), 3);
  ASSERT_EQ(points.size(), 2);
  EXPECT_EQ(test::point_of(points[0][0]).status, pf::PointStatus::OutOfMemory);
  // The next sweep in the same process, with no capacity, is unlimited again.
  points.clear();
  form.setRequest(test::tiny_request(dir.filePath("free.db").toStdString(), "1KiB", "1"));
  ASSERT_TRUE(form.startSweep());
  ASSERT_EQ(wait_finished(form, finished).size(), 3);
  ASSERT_EQ(points.size(), 2);
  for (const auto& p : points) {
    EXPECT_EQ(test::point_of(p[0]).status, pf::PointStatus::Ok);
  }
}

TEST(SweepFormTest, AnInvalidFormShowsTheErrorAndStartsNothing) {
  SweepForm form;
  auto r = test::tiny_request("x.db", "1KiB", "0");
  form.setRequest(r);
  QSignalSpy started(&form, &SweepForm::sweepStarted);
  EXPECT_FALSE(form.startSweep());
  EXPECT_EQ(started.size(), 0);
  const auto* status = form.findChild<QLabel*>(QStringLiteral("status"));
  ASSERT_NE(status, nullptr);
  EXPECT_TRUE(status->text().startsWith("error:")) << status->text().toStdString();
  EXPECT_FALSE(form.runner()->running());
}

// An error about a long value wraps rather than widening the form, and goes once the value is
// fixed.
TEST(SweepFormTest, ALongFormErrorWrapsAndGoesOnceFixed) {
  SweepForm form;
  form.resize(900, 700);
  auto r = test::tiny_request("x.db", "1KiB", "0");
  r.knobs["min_offload_size"] = "1KiB," + std::string(300, 'z');
  form.setRequest(r);
  test::settle(form);
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

// A form error about a field the user has fixed goes, even while another field is still wrong
// (that one's error shows instead).
TEST(SweepFormTest, AnErrorForAFieldAlreadyFixedGoes) {
  SweepForm form;
  auto r = test::tiny_request("x.db", "1KiB,zzz", "0");
  form.setRequest(r);
  EXPECT_FALSE(form.startSweep());
  const auto* status = form.findChild<QLabel*>(QStringLiteral("status"));
  ASSERT_NE(status, nullptr);
  ASSERT_TRUE(status->text().contains(QStringLiteral("zzz"))) << status->text().toStdString();
  r.knobs["min_offload_size"] = "1KiB";  // fixed; the stash sizes are still wrong
  form.setRequest(r);
  EXPECT_FALSE(status->text().contains(QStringLiteral("zzz"))) << status->text().toStdString();
  EXPECT_TRUE(status->text().contains(QStringLiteral("max-fwd-stash-size")))
      << status->text().toStdString();
}

// Every knob of the request layer is in the form, and round-trips; predicting first on a GPU is
// the CLI's refusal (host-sim predicts with a device model or on this CPU's clock).
TEST(SweepFormTest, PrefetchRepeatAndPredictFirstRoundTripAndAreChecked) {
  SweepForm form;
  auto r = test::tiny_request("x.db", "1KiB", "1");
  r.knobs["prefetch"] = "3";
  r.repeat = 4;
  r.predict_first = true;
  r.backend.device_model = "h100-sxm";
  form.setRequest(r);
  const auto back = form.request();
  EXPECT_EQ(back.knob_text("prefetch"), "3");
  // Prefetch is an axis in the form as in the CLI: a list crosses the grid with each depth.
  auto axis = test::tiny_request("x.db", "1KiB", "1,2");
  axis.knobs["prefetch"] = "0,1,2";
  form.setRequest(axis);
  EXPECT_EQ(form.request().knob_text("prefetch"), "0,1,2");
  EXPECT_EQ(validate_sweep_request(form.request()), 1 + 2 * 3);
  const auto* count = form.findChild<QLabel*>(QStringLiteral("points"));
  ASSERT_NE(count, nullptr);
  EXPECT_TRUE(count->text().startsWith(QStringLiteral("7 "))) << count->text().toStdString();
  EXPECT_EQ(back.repeat, 4);
  EXPECT_TRUE(back.predict_first);
  const auto* points = form.findChild<QLabel*>(QStringLiteral("points"));
  ASSERT_NE(points, nullptr);
  EXPECT_TRUE(points->text().contains("baseline included")) << points->text().toStdString();
  r.backend.device_model.clear();
  form.setRequest(r);
  EXPECT_TRUE(points->text().contains("baseline included")) << points->text().toStdString();
  r.backend.backend = "cuda";
  form.setRequest(r);
  EXPECT_TRUE(points->text().contains("--predict-first")) << points->text().toStdString();
  EXPECT_FALSE(form.startSweep());
}

// Every engine knob is an axis in the form as in the CLI. Streams, pinned memory, the byte window
// and the link each take a list that the request layer parses (the form never does): the point
// count follows it, the request carries it, and a bad list is refused naming the flag. The form
// had no field for the first three, and the link took one.
TEST(SweepFormTest, StreamsPinMemoryByteWindowAndLinkTakeListsAsTheCliDoes) {
  SweepForm form;
  form.setRequest(test::tiny_request("x.db", "1KiB", "1"));
  const auto* points = form.findChild<QLabel*>(QStringLiteral("points"));
  ASSERT_NE(points, nullptr);
  const struct {
    const char* name;  // the field's object name
    const char* flag;
    const char* list;
    const char* bad;
    std::string (*given)(const SweepRequest&);
  } knobs[] = {
      {"use_streams", "--streams", "on,off", "on,maybe",
       [](const SweepRequest& r) { return r.knob_text("use_streams"); }},
      {"use_pin_memory", "--pin-memory", "off,on", "on,on",
       [](const SweepRequest& r) { return r.knob_text("use_pin_memory"); }},
      {"max_fwd_stash_bytes", "--max-fwd-stash-bytes", "0,64MiB", "0,12 parsecs",
       [](const SweepRequest& r) { return r.knob_text("max_fwd_stash_bytes"); }},
      {"link", "--link", "none,pcie5", "pcie4,fast",
       [](const SweepRequest& r) { return r.knob_text("link"); }},
  };
  for (const auto& knob : knobs) {
    SCOPED_TRACE(knob.name);
    auto* field = form.findChild<QComboBox*>(QString::fromLatin1(knob.name));
    ASSERT_NE(field, nullptr) << "no field " << knob.name;
    EXPECT_EQ(field->property("flag").toString().toStdString(), knob.flag);
    const QString before = field->currentText();
    field->setCurrentText(QString::fromLatin1(knob.list));
    EXPECT_EQ(knob.given(form.request()), knob.list);
    EXPECT_TRUE(points->text().startsWith(QStringLiteral("3 "))) << points->text().toStdString();
    field->setCurrentText(QString::fromLatin1(knob.bad));
    EXPECT_TRUE(points->text().contains(QString::fromLatin1(knob.flag)))
        << points->text().toStdString();
    field->setCurrentText(before);
    EXPECT_TRUE(points->text().startsWith(QStringLiteral("2 "))) << points->text().toStdString();
  }
  // A request round-trips through the form.
  auto r = test::tiny_request("x.db", "1KiB", "1");
  r.knobs["use_streams"] = "off";
  r.knobs["use_pin_memory"] = "on,off";
  r.knobs["max_fwd_stash_bytes"] = "1MiB";
  r.knobs["link"] = "pcie4,pcie5";
  form.setRequest(r);
  const auto back = form.request();
  EXPECT_EQ(back.knob_text("use_streams"), "off");
  EXPECT_EQ(back.knob_text("use_pin_memory"), "on,off");
  EXPECT_EQ(back.knob_text("max_fwd_stash_bytes"), "1MiB");
  EXPECT_EQ(back.knob_text("link"), "pcie4,pcie5");
  EXPECT_TRUE(points->text().startsWith(QStringLiteral("5 "))) << points->text().toStdString();
}

// The input spec field is for a TorchScript model's file, not for a built-in model.
TEST(SweepFormTest, TheInputSpecIsForTorchScriptModelsOnly) {
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

// Issue 11: a model that passes the checks but cannot be loaded fails the sweep before its store is
// created, as from the CLI.
TEST(SweepFormTest, AModelThatDoesNotLoadLeavesNoStore) {
  QTemporaryDir dir;
  SweepForm form;
  QSignalSpy finished(&form, &SweepForm::sweepFinished);
  auto r = test::tiny_request(dir.filePath("new.db").toStdString(), "1KiB", "1");
  r.workload.model = dir.filePath("missing.pt").toStdString();
  form.setRequest(r);
  ASSERT_TRUE(form.startSweep());
  const auto args = wait_finished(form, finished);
  ASSERT_EQ(args.size(), 3);
  EXPECT_FALSE(args[0].toBool());
  EXPECT_TRUE(args[2].toString().contains("cannot load")) << args[2].toString().toStdString();
  EXPECT_FALSE(QFile::exists(dir.filePath("new.db")));
}

TEST(SweepFormTest, MainWindowShowsPointsAsTheyFinish) {
  QTemporaryDir dir;
  const QString db = dir.filePath("live.db");
  MainWindow window;
  window.sweepForm()->setRequest(test::tiny_request(db.toStdString(), "1KiB", "1,2"));
  QSignalSpy finished(window.sweepForm(), &SweepForm::sweepFinished);
  QSignalSpy store_loaded(&window, &MainWindow::storeLoaded);
  ASSERT_TRUE(window.sweepForm()->startSweep());
  const auto args = wait_finished(*window.sweepForm(), finished);
  ASSERT_EQ(args.size(), 3);
  ASSERT_TRUE(args[0].toBool()) << args[2].toString().toStdString();
  // The sweep view follows the new sweep (loaded from the store at its first point, then merged).
  test::wait_for_points(*window.sweepView(), 3);
  ASSERT_TRUE(window.sweepView()->sweepData());
  ASSERT_EQ(window.sweepView()->sweepData()->points.size(), 3u);
  for (const auto& p : window.sweepView()->sweepData()->points) {
    EXPECT_EQ(p.status, pf::PointStatus::Ok);
  }
  if (store_loaded.isEmpty()) {
    ASSERT_TRUE(store_loaded.wait(30000));  // the tree follows too
  }
  EXPECT_EQ(window.storePath(), db);
  EXPECT_EQ(window.storeModel()->rowCount(), 2);
}

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
TEST(SweepFormTest, ACancelledSweepCountsItsGridInTreeHeadingAndForm) {
  QTemporaryDir dir;
  const QString db = dir.filePath("cancel.db");
  MainWindow window;
  window.resize(1280, 800);
  test::settle(window);
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
  test::settle(window);
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

}  // namespace
}  // namespace offtune::gui
