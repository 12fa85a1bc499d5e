// Issue 34 (forty minutes of real use on eleven stores): what a view shows is one sweep of one
// store, named, and stays so while stores change; the views fit 1280x800 and shrink below it; the
// details that went stale or were cut off.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QComboBox>
#include <QElapsedTimer>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QTreeView>

#include "gui_test_util.hpp"
#include "offtune/gui/main_window.hpp"
#include "offtune/gui/models.hpp"
#include "offtune/gui/recommend_panel.hpp"
#include "offtune/gui/run_view.hpp"
#include "offtune/gui/sweep_charts.hpp"
#include "offtune/gui/sweep_form.hpp"
#include "offtune/gui/sweep_view.hpp"
#include "offtune/profiler/store.hpp"

namespace offtune::gui {
namespace {

namespace pf = offtune::profiler;
constexpr int kWaitMs = 60000;
constexpr int kSweepWaitMs = 300000;

using test::tiny_request;

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

class Issue34 : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    path_ = test::fixture_copy(dir_, "p.db");
    ASSERT_FALSE(path_.empty());
  }
  // Opens the fixture in `window` and waits for its newest sweep on screen.
  void open(MainWindow& window) {
    QSignalSpy loaded(&window, &MainWindow::storeLoaded);
    QSignalSpy sweep_loaded(window.sweepView(), &SweepView::loaded);
    window.openStore(QString::fromStdString(path_));
    ASSERT_TRUE(loaded.wait(kWaitMs));
    ASSERT_TRUE(sweep_loaded.count() > 0 || sweep_loaded.wait(kWaitMs));
  }
  QTemporaryDir dir_;
  std::string path_;
};

// Item 1: a sweep started from the form into a new store is that store's sweep on screen, named,
// never merged into the sweep of the store shown before (both are "sweep 1"); a run on screen
// still says which store it is of.
TEST_F(Issue34, ASweepStartedIntoANewStoreIsShownAloneAndNamed) {
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
  window.sweepForm()->setRequest(tiny_request(g.toStdString(), "1KiB", "1,2"));
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

// Item 2: F5 reads the store again, the sweep on screen included; and a store that another process
// writes is followed without F5.
TEST_F(Issue34, F5RefreshesTheSweepOnScreenAndAStoreWrittenElsewhereIsFollowed) {
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

// Item 9: a budget that does not parse keeps the last valid recommendation, front, snippets and
// exports, and says what is wrong beside the field.
TEST_F(Issue34, ABudgetTypoKeepsTheLastValidViewAndSaysWhyBesideTheField) {
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

// Item 10: a re-measured point's first run (labelled as the point) and its re-measured runs show
// under their point, not loose under "Runs".
TEST(Issue34Tree, RemeasuredPointsRunsAreUnderTheirPoints) {
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

// Item 11: with a sweep expanded, the tree's Status column shows whole in its pane; item 13: the
// sweep's tooltip gives its grid as text, not JSON.
TEST_F(Issue34, TheTreesStatusColumnIsWholeWithASweepExpanded) {
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

// Item 3 and 13: every view fits 1280x800 with a variant sweep on screen (the export buttons and
// the status bar inside the window), and below 1000x700 the charts shrink instead of being cropped.
TEST_F(Issue34, EveryViewFitsAt1280x800AndShrinksBelow) {
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

// Item 13: quitting while a sweep runs asks first, and says that the sweep resumes.
TEST_F(Issue34, QuittingMidSweepAsksAndSaysTheSweepResumes) {
  MainWindow window;
  window.show();
  const QString g = dir_.filePath(QStringLiteral("q.db"));
  window.sweepForm()->setRequest(tiny_request(g.toStdString(), "1KiB,2KiB,4KiB,8KiB", "1,2,3,4"));
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

// Item 13: the run summary's values are whole in their column at 1280x800.
TEST_F(Issue34, RunSummaryValuesAreNotCutOff) {
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

// Item 13: a form error about a field the user has fixed goes, even while another field is still
// wrong (that one's error shows instead).
TEST(Issue34Form, AnErrorForAFieldAlreadyFixedGoes) {
  SweepForm form;
  auto r = tiny_request("x.db", "1KiB,zzz", "0");
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

// Item 14: every engine knob is an axis in the form as in the CLI. Streams, pinned memory, the byte
// window and the link each take a list that the request layer parses (the form never does): the
// point count follows it, the request carries it, and a bad list is refused naming the flag. The
// form had no field for the first three, and the link took one.
TEST(Issue34Form, StreamsPinMemoryByteWindowAndLinkTakeListsAsTheCliDoes) {
  SweepForm form;
  form.setRequest(tiny_request("x.db", "1KiB", "1"));
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
  auto r = tiny_request("x.db", "1KiB", "1");
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

}  // namespace
}  // namespace offtune::gui
