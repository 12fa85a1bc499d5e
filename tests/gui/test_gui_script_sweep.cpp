// Sweeping the user's own training script from the dashboard: the form's script mode (the fields a
// script sweep refuses disabled, the request it builds, the request layer's messages), real sweeps
// of small `sh` scripts through the worker to their end (points failed with one line, the script's
// output kept out of the dashboard's stderr), cancel stopping the script's process group, and the
// form's picture in script mode.
#include <gtest/gtest.h>

#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include "gui_test_util.hpp"
#include "offtune/gui/main_window.hpp"
#include "offtune/gui/models.hpp"
#include "offtune/gui/sweep_form.hpp"
#include "offtune/gui/sweep_view.hpp"
#include "offtune/profiler/store.hpp"

namespace offtune::gui {
namespace {

namespace pf = offtune::profiler;
constexpr int kSweepWaitMs = 120000;

// A script sweep of two points (the baseline and one offload point) on host-sim.
SweepRequest script_request(const std::string& db, const std::string& command) {
  SweepRequest r;
  r.db = db;
  r.script = command;
  r.knobs["min_offload_size"] = "1KiB";
  r.knobs["max_fwd_stash_size"] = "1";
  r.backend.backend = "host-sim";
  return r;
}

QList<QVariant> wait_finished(QSignalSpy& spy) {
  if (spy.isEmpty() && !spy.wait(kSweepWaitMs)) return {};
  return spy.takeFirst();
}

// The form's fields by the flag each stands for (the property "flag"), enabled or not.
std::map<std::string, bool> fields_enabled(const SweepForm& form) {
  std::map<std::string, bool> out;
  for (const QWidget* w : form.findChildren<QWidget*>()) {
    const QVariant flag = w->property("flag");
    if (!flag.isValid()) continue;
    const std::string name = flag.toString().toStdString();
    // A flag with two widgets (a field and its chooser button) is enabled when both are.
    const auto it = out.find(name);
    out[name] = (it == out.end() ? true : it->second) && w->isEnabled();
  }
  return out;
}

// Copies what this process writes to fd 2 into a file while it lives, and gives it back.
class CaptureStderr {
 public:
  explicit CaptureStderr(const QString& path) : path_(path.toStdString()) {
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
  ~CaptureStderr() { restore(); }
  std::string restore() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      ::dup2(saved_, STDERR_FILENO);
      ::close(saved_);
      saved_ = -1;
    }
    std::ifstream in(path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string path_;
  int saved_ = -1;
};

// A script sweep's heading names its command, as `offtune report` does (issue 43 item 13; before:
// "script, batch 0, seq 0,  —").
TEST(ScriptSweepView, TheHeadingNamesTheScriptNotShapesItDoesNotKnow) {
  auto d = std::make_shared<SweepData>();
  d->sweep.id = pf::SweepId(4);
  d->sweep.name = "sweep";
  d->sweep.workload.model = "script";
  d->sweep.key = R"({"script": "python train.py --lr 1e-4"})";
  SweepView view;
  view.setSweepData(d, "s.db");
  const QString title = view.findChild<QLabel*>(QStringLiteral("sweepTitle"))->text();
  EXPECT_TRUE(title.contains(QStringLiteral("script 'python train.py --lr 1e-4'")))
      << title.toStdString();
  EXPECT_FALSE(title.contains(QStringLiteral("batch"))) << title.toStdString();
  // A built-in workload keeps its shapes.
  d->sweep.key = "{}";
  d->sweep.workload = {.model = "tiny", .batch = 2, .seq = 64, .dtype = "fp32"};
  view.setSweepData(d, "s.db");
  EXPECT_TRUE(view.findChild<QLabel*>(QStringLiteral("sweepTitle"))
                  ->text()
                  .contains(QStringLiteral("tiny, batch 2, seq 64, fp32")));
}

TEST(ScriptSweepForm, ChoosingAScriptDisablesTheFieldsTheRequestRefusesForIt) {
  SweepForm form;
  auto* use_script = form.findChild<QRadioButton*>(QStringLiteral("useScript"));
  auto* use_model = form.findChild<QRadioButton*>(QStringLiteral("useModel"));
  auto* script = form.findChild<QLineEdit*>(QStringLiteral("script"));
  auto* timeout = form.findChild<QLineEdit*>(QStringLiteral("timeoutPerPoint"));
  auto* lora = form.findChild<QSpinBox*>(QStringLiteral("loraRank"));
  ASSERT_TRUE(use_script && use_model && script && timeout && lora);
  EXPECT_FALSE(form.scriptMode());  // a model, as before
  EXPECT_FALSE(script->isEnabled());
  EXPECT_FALSE(timeout->isEnabled());
  lora->setValue(8);  // a model's field set before the switch

  use_script->click();
  ASSERT_TRUE(form.scriptMode());
  const auto refused = requests::script_refused_flags();
  const std::set<std::string> refused_set(refused.begin(), refused.end());
  const auto enabled = fields_enabled(form);
  std::set<std::string> disabled;
  for (const auto& [flag, on] : enabled) {
    if (!on) disabled.insert(flag);
    // Every field the form has for a flag the request refuses with a script is disabled, and no
    // other.
    EXPECT_EQ(on, !refused_set.contains(flag)) << flag;
  }
  // The form has a field for each refused flag but those it never offers (--blocks, --optimizer).
  std::set<std::string> offered = refused_set;
  offered.erase("--blocks");
  offered.erase("--optimizer");
  EXPECT_EQ(disabled, offered);
  EXPECT_TRUE(enabled.at("--script"));
  EXPECT_TRUE(enabled.at("--timeout-per-point"));
  EXPECT_TRUE(enabled.at("--warmup"));  // the first W steps the script records are dropped

  // The request: the command and the timeout, and the refused fields at their defaults, whatever
  // the disabled widgets hold; the request layer accepts it.
  script->setText(QStringLiteral("  python3 train.py --max-steps 8 "));
  timeout->setText(QStringLiteral("90"));
  auto r = form.request();
  r.db = "s.db";
  EXPECT_EQ(r.script, "python3 train.py --max-steps 8");
  EXPECT_EQ(r.timeout_per_point, "90");
  EXPECT_EQ(r.workload.lora_rank, 0);
  EXPECT_EQ(r.workload.model, requests::WorkloadFields{}.model);
  EXPECT_EQ(r.knob_text("checkpoint"), SweepRequest{}.knob_text("checkpoint"));
  EXPECT_TRUE(requests::check(r).ok()) << requests::check(r).errors.front().message;
  EXPECT_EQ(validate_sweep_request(r), 1 + 6 * 3);  // the default grid (1KiB:64MiB:x8 x 1,2,5)

  // Back to the model: its fields as they were, no script sent.
  use_model->click();
  EXPECT_FALSE(form.scriptMode());
  EXPECT_TRUE(lora->isEnabled());
  EXPECT_FALSE(script->isEnabled());
  const auto m = form.request();
  EXPECT_EQ(m.workload.lora_rank, 8);
  EXPECT_TRUE(m.script.empty());
  EXPECT_TRUE(m.timeout_per_point.empty());
}

TEST(ScriptSweepForm, ABadFieldShowsTheRequestLayersOneLineMessage) {
  SweepForm form;
  const auto* points = form.findChild<QLabel*>(QStringLiteral("points"));
  const auto* status = form.findChild<QLabel*>(QStringLiteral("status"));
  ASSERT_TRUE(points && status);
  auto r = script_request("x.db", "sh run.sh");
  r.timeout_per_point = "soon";
  form.setRequest(r);
  EXPECT_TRUE(form.scriptMode());  // a request with a script chooses script mode
  EXPECT_EQ(form.request().script, "sh run.sh");
  EXPECT_TRUE(points->text().startsWith("invalid: --timeout-per-point takes seconds"))
      << points->text().toStdString();
  QSignalSpy started(&form, &SweepForm::sweepStarted);
  EXPECT_FALSE(form.startSweep());
  EXPECT_EQ(started.size(), 0);
  EXPECT_TRUE(status->text().startsWith("error: --timeout-per-point takes seconds"))
      << status->text().toStdString();
  EXPECT_FALSE(status->text().contains('\n'));

  // No command: the request layer says what it takes.
  r.timeout_per_point.clear();
  r.script.clear();
  form.setRequest(r);
  form.setScriptMode(true);
  EXPECT_TRUE(points->text().startsWith("invalid: --script takes the command"))
      << points->text().toStdString();
  EXPECT_FALSE(form.startSweep());
}

// A script that fails: every point is recorded failed with the script's exit status and its last
// line of stderr, the sweep runs to its end, the main window shows the points with that error,
// and the script's output never reaches the dashboard's own stderr.
TEST(ScriptSweepWorker, AFailingScriptsPointsAreShownFailedWithItsLastLine) {
  QTemporaryDir dir;
  const QString db = dir.filePath("fails.db");
  const std::string command =
      "echo 'loading the model' >&2; echo 'RuntimeError: no such dataset: wiki' >&2; exit 3";
  MainWindow window;
  SweepForm* form = window.sweepForm();
  form->setRequest(script_request(db.toStdString(), command));
  QSignalSpy points(form, &SweepForm::pointFinished);
  QSignalSpy finished(form, &SweepForm::sweepFinished);
  CaptureStderr capture(dir.filePath("stderr.txt"));
  ASSERT_TRUE(form->startSweep());
  const auto args = wait_finished(finished);
  const std::string stderr_text = capture.restore();
  ASSERT_EQ(args.size(), 3);
  EXPECT_TRUE(args[0].toBool()) << args[2].toString().toStdString();  // ended, points in band
  EXPECT_TRUE(args[2].toString().contains("ok 0, failed 2")) << args[2].toString().toStdString();
  EXPECT_EQ(stderr_text.find("no such dataset"), std::string::npos) << stderr_text;
  const std::string error = "script exited with status 3: RuntimeError: no such dataset: wiki";
  ASSERT_EQ(points.size(), 2);
  for (const auto& p : points) {
    const auto point = test::point_of(p[0]);
    EXPECT_EQ(point.status, pf::PointStatus::Failed);
    EXPECT_EQ(point.error, error);
  }

  // The Sweep tab follows the new sweep: both points failed, the error in the points table.
  test::wait_for_points(*window.sweepView(), 2);
  ASSERT_TRUE(window.sweepView()->sweepData());
  ASSERT_EQ(window.sweepView()->sweepData()->points.size(), 2u);
  const PointsTableModel* table = window.sweepView()->pointsModel();
  ASSERT_EQ(table->rowCount(), 2);
  for (int row = 0; row < 2; ++row) {
    EXPECT_EQ(table->data(table->index(row, PointsTableModel::Status)).toString(), "failed");
    EXPECT_EQ(table->data(table->index(row, PointsTableModel::Error)).toString().toStdString(),
              error);
  }
}

// A script that runs and exits 0 without offtune recording a step: the points fail with the hint
// naming what was expected, and the form says the command names no script file.
TEST(ScriptSweepWorker, AScriptThatRecordsNothingFailsEveryPointSayingWhatWasExpected) {
  QTemporaryDir dir;
  SweepForm form;
  QSignalSpy points(&form, &SweepForm::pointFinished);
  QSignalSpy finished(&form, &SweepForm::sweepFinished);
  QSignalSpy notices(form.runner(), &SweepRunner::notice);
  form.setRequest(script_request(dir.filePath("nothing.db").toStdString(), "true"));
  ASSERT_TRUE(form.startSweep());
  const auto args = wait_finished(finished);
  ASSERT_EQ(args.size(), 3);
  EXPECT_TRUE(args[0].toBool()) << args[2].toString().toStdString();
  ASSERT_EQ(points.size(), 2);
  for (const auto& p : points) {
    const auto point = test::point_of(p[0]);
    EXPECT_EQ(point.status, pf::PointStatus::Failed);
    EXPECT_TRUE(point.error.starts_with("the script recorded no step")) << point.error;
    EXPECT_NE(point.error.find("get_act_offloading_ctx_manager"), std::string::npos);
  }
  ASSERT_EQ(notices.size(), 1);
  EXPECT_TRUE(notices[0][0].toString().contains("names no script file"));
  EXPECT_TRUE(args[2].toString().contains("names no script file"));
}

// Cancel stops the script's point at once with its whole process group (not after the point's
// end): a child the script started is gone too, and the point stays pending for a resume.
TEST(ScriptSweepWorker, CancelStopsTheScriptsProcessGroup) {
  QTemporaryDir dir;
  const QString pid_file = dir.filePath("sleeper.pid");
  SweepForm form;
  QSignalSpy finished(&form, &SweepForm::sweepFinished);
  const std::string command = "sleep 300 & echo $! > '" + pid_file.toStdString() + "'; wait";
  const std::string db = dir.filePath("cancel.db").toStdString();
  form.setRequest(script_request(db, command));
  ASSERT_TRUE(form.startSweep());
  QElapsedTimer clock;
  clock.start();
  for (int i = 0; i < 300 && !QFile::exists(pid_file); ++i) QTest::qWait(50);
  QTest::qWait(100);  // the pid written whole
  QFile f(pid_file);
  ASSERT_TRUE(f.open(QIODevice::ReadOnly));
  const qint64 sleeper = f.readAll().trimmed().toLongLong();
  ASSERT_GT(sleeper, 0);
  form.cancelSweep();
  const auto args = wait_finished(finished);
  ASSERT_EQ(args.size(), 3);
  EXPECT_FALSE(args[0].toBool());
  EXPECT_TRUE(args[1].toBool());      // interrupted
  EXPECT_LT(clock.elapsed(), 60000);  // not the script's 300 s
  // The script's child is gone (or a zombie waiting for its reaper), not sleeping on.
  const auto state = [&] {
    QFile stat(QStringLiteral("/proc/%1/stat").arg(sleeper));
    if (!stat.open(QIODevice::ReadOnly)) return QByteArray("gone");
    const QByteArray text = stat.readAll();
    return text.mid(text.lastIndexOf(')') + 2, 1);
  };
  for (int i = 0; i < 100 && state() != "gone" && state() != "Z"; ++i) QTest::qWait(50);
  EXPECT_TRUE(state() == "gone" || state() == "Z") << state().toStdString();
  auto store = pf::open_sqlite_store_readonly(db);
  const auto stored = store->points(store->sweeps().at(0).id);
  EXPECT_FALSE(stored.empty());
  for (const auto& p : stored) EXPECT_EQ(p.status, pf::PointStatus::Pending);
}

// The form in script mode, in a 1280x800 window, as docs/gui.md shows it; with
// OFFTUNE_GUI_DOCS_IMAGES set to a folder (docs/images) the picture is written there.
// Issue 43 defect 16: a script point that runs for minutes showed nothing moving. The status says
// how long the point in progress has run, each second, and stops saying it once cancelled.
TEST(ScriptSweepForm, ARunningPointShowsItsElapsedTime) {
  QTemporaryDir dir;
  SweepForm form;
  QSignalSpy finished(&form, &SweepForm::sweepFinished);
  form.setRequest(script_request(dir.filePath("slow.db").toStdString(), "sleep 300"));
  ASSERT_TRUE(form.startSweep());
  const auto* status = form.findChild<QLabel*>(QStringLiteral("status"));
  ASSERT_NE(status, nullptr);
  const auto says = [&](const char* text) { return status->text().contains(QLatin1String(text)); };
  ASSERT_TRUE(QTest::qWaitFor([&] { return says("point in progress for 0:01"); }, 20000))
      << status->text().toStdString();
  ASSERT_TRUE(QTest::qWaitFor([&] { return says("point in progress for 0:02"); }, 5000))
      << status->text().toStdString();
  form.cancelSweep();
  EXPECT_FALSE(says("point in progress")) << status->text().toStdString();
  ASSERT_EQ(wait_finished(finished).size(), 3);
  QTest::qWait(1200);  // a second more: no tick writes over the outcome
  EXPECT_FALSE(says("point in progress")) << status->text().toStdString();
}

TEST(ScriptSweepForm, RendersInScriptModeAt1280x800) {
  QTemporaryDir dir;
  MainWindow window;
  auto r = script_request("tune.db", "python3 train.py --max-steps 8");
  r.knobs["min_offload_size"] = "1KiB:64MiB:x4";
  r.knobs["max_fwd_stash_size"] = "1,2,5";
  r.timeout_per_point = "600";
  r.backend.backend = "auto";
  window.sweepForm()->setRequest(r);
  window.resize(1280, 800);
  window.show();
  window.tabs()->setCurrentWidget(window.sweepForm());
  QApplication::processEvents();
  // The form fits the window (it scrolls), rather than pushing the window past the screen.
  EXPECT_EQ(window.width(), 1280);
  EXPECT_EQ(window.height(), 800);
  EXPECT_LE(window.sweepForm()->height(), 800);
  const QImage img = window.sweepForm()->grab().toImage();
  EXPECT_GT(test::distinct_colors(img), 20);
  const auto* points = window.sweepForm()->findChild<QLabel*>(QStringLiteral("points"));
  ASSERT_NE(points, nullptr);
  EXPECT_EQ(points->text(), "28 (baseline included)");
  const QByteArray out = qgetenv("OFFTUNE_GUI_DOCS_IMAGES");
  if (!out.isEmpty()) {
    EXPECT_TRUE(img.save(QDir(QString::fromLocal8Bit(out))
                             .filePath(QStringLiteral("gui-1280x800-sweep-form-script.png")),
                         "PNG"));
  }
}

}  // namespace
}  // namespace offtune::gui
