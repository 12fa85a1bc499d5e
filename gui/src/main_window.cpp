#include "offtune/gui/main_window.hpp"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDateTime>
#include <QDir>
#include <QEventLoop>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QScrollBar>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTimer>
#include <QTreeView>
#include <algorithm>
#include <functional>

#include "offtune/gui/models.hpp"
#include "offtune/gui/recommend_panel.hpp"
#include "offtune/gui/run_view.hpp"
#include "offtune/gui/sweep_form.hpp"
#include "offtune/gui/sweep_view.hpp"
#include "offtune/gui/timeline.hpp"
#include "offtune/profiler/export.hpp"
#include "offtune/profiler/store.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;

namespace {
constexpr int kMaxRecent = 10;
const char* const kRecentKey = "recentStores";
// How often an open store is looked at for writes by another process (a CLI sweep): a stat of two
// files, no SQLite open, so the cost is nil; a second is as live as a sweep's points come.
constexpr int kPollMs = 1000;

bool same_store(const QString& a, const QString& b) {
  return !a.isEmpty() && !b.isEmpty() &&
         QFileInfo(a).absoluteFilePath() == QFileInfo(b).absoluteFilePath();
}
bool same_store(const std::string& a, const QString& b) {
  return same_store(QString::fromStdString(a), b);
}

// The size and modification time of the store and of its write-ahead log: a commit by any process
// changes one of them (the log while in WAL mode, the file after a checkpoint or without WAL).
// Reads change neither, so the dashboard's own loads do not trigger more.
QString file_state(const QString& path) {
  QString state;
  for (const QString& f : {path, path + QStringLiteral("-wal")}) {
    const QFileInfo info(f);
    state +=
        info.exists()
            ? QStringLiteral("%1@%2;").arg(info.size()).arg(info.lastModified().toMSecsSinceEpoch())
            : QStringLiteral("-;");
  }
  return state;
}
}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(QStringLiteral("offtune"));
  // Below this, labels overlap and charts lose their axes; the views are laid out for it
  // (docs/gui.md).
  setMinimumSize(kMinimumWindowSize);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split_ = split;
  tree_ = new QTreeView(split);
  tree_model_ = new StoreTreeModel(this);
  tree_->setModel(tree_model_);
  tree_->setUniformRowHeights(true);
  // The Status column always whole, at the pane's right edge: the item's name takes the rest, the
  // pane widens to the names (fitTree, up to a third of the window), and a name longer still is
  // elided with the whole of it in its tooltip. Before, names sized the first column and pushed
  // Status off the pane ("Sta", "33/"). Step and peak are in the sweep view's table (and the
  // items' tooltips), so the tree keeps to what and how far: item and status.
  tree_->header()->setStretchLastSection(false);
  tree_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  tree_->header()->setSectionResizeMode(StoreTreeModel::Name, QHeaderView::Stretch);
  tree_->setTextElideMode(Qt::ElideRight);
  // Points are three levels deep (group, sweep, point): a smaller step than the style's 20 px
  // leaves their names and status whole in a pane of a fifth of a 1280 window.
  tree_->setIndentation(14);
  tree_->setColumnHidden(StoreTreeModel::StepTime, true);
  tree_->setColumnHidden(StoreTreeModel::Peak, true);
  tree_->setMinimumWidth(150);
  tabs_ = new QTabWidget(split);
  sweep_view_ = new SweepView(tabs_);
  run_view_ = new RunView(tabs_);
  form_ = new SweepForm(tabs_);
  tabs_->addTab(sweep_view_, QStringLiteral("Sweep"));
  tabs_->addTab(run_view_, QStringLiteral("Run"));
  tabs_->addTab(form_, QStringLiteral("New sweep"));
  // The tree holds a few short rows: a sixth of the window at most, the rest for the views.
  split->setStretchFactor(0, 0);
  split->setStretchFactor(1, 1);
  split->setSizes({250, 1350});
  setCentralWidget(split);
  store_label_ = new QLabel(QStringLiteral("no store open"), this);
  statusBar()->addPermanentWidget(store_label_);
  reload_timer_ = new QTimer(this);
  reload_timer_->setSingleShot(true);
  reload_timer_->setInterval(400);
  poll_timer_ = new QTimer(this);
  poll_timer_->setInterval(kPollMs);
  connect(poll_timer_, &QTimer::timeout, this, &MainWindow::pollStore);
  poll_timer_->start();
  buildMenus();

  connect(tree_, &QTreeView::activated, this, &MainWindow::activateTreeItem);
  connect(tree_, &QTreeView::clicked, this, &MainWindow::activateTreeItem);
  // Fitted when rows come or open: after the event that brought them, when their sizes are known.
  const auto fit_later = [this] { QTimer::singleShot(0, this, &MainWindow::fitTree); };
  connect(tree_, &QTreeView::expanded, this, fit_later);
  connect(tree_model_, &QAbstractItemModel::modelReset, this, fit_later);
  connect(tree_model_, &QAbstractItemModel::rowsInserted, this, fit_later);
  connect(sweep_view_, &SweepView::runRequested, this,
          [this](qint64 id) { showRun(pf::RunId(id)); });
  connect(sweep_view_, &SweepView::loadFailed, this,
          [this](const QString& e) { statusBar()->showMessage(e, 10000); });
  connect(run_view_, &RunView::loadFailed, this,
          [this](const QString& e) { statusBar()->showMessage(e, 10000); });
  connect(reload_timer_, &QTimer::timeout, this, &MainWindow::reloadStore);
  connect(form_, &SweepForm::sweepStarted, this, [this](const QString& path) {
    sweep_store_ = path;
    if (!same_store(path, path_)) {
      // The index follows with the first point, once the file exists. Until then the tree shows
      // nothing rather than the other store's sweeps under this store's name; the views keep what
      // they show, each naming its store.
      path_ = path;
      store_label_->setText(path);
      tree_model_->setIndex(nullptr);
      index_path_.clear();
      file_state_.clear();
    }
    statusBar()->showMessage(QStringLiteral("Sweep started"), 5000);
  });
  connect(form_, &SweepForm::pointFinished, this, &MainWindow::onPointFinished);
  connect(form_, &SweepForm::sweepFinished, this, [this](bool, bool, const QString& message) {
    statusBar()->showMessage(message, 15000);
    if (!path_.isEmpty()) reloadStore();
  });
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(QStringLiteral("&File"));
  QAction* open = file->addAction(QStringLiteral("&Open store\u2026"));
  open->setShortcut(QKeySequence::Open);
  connect(open, &QAction::triggered, this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, QStringLiteral("Open offtune store"), QFileInfo(path_).absolutePath(),
        QStringLiteral("offtune store (*.db *.sqlite);;All files (*)"));
    if (!path.isEmpty()) openStore(path);
  });
  recent_menu_ = file->addMenu(QStringLiteral("Open &recent"));
  rebuildRecentMenu();
  QAction* reload = file->addAction(QStringLiteral("&Reload"));
  reload->setShortcut(QKeySequence::Refresh);
  connect(reload, &QAction::triggered, this, &MainWindow::reloadStore);
  file->addSeparator();
  connect(file->addAction(QStringLiteral("Export run as &Chrome trace\u2026")), &QAction::triggered,
          this, &MainWindow::exportRunTrace);
  connect(file->addAction(QStringLiteral("Export run as &memory snapshot\u2026")),
          &QAction::triggered, this, &MainWindow::chooseMemorySnapshot);
  connect(file->addAction(QStringLiteral("Export sweep points as C&SV\u2026")), &QAction::triggered,
          this, &MainWindow::exportSweepCsv);
  file->addSeparator();
  QAction* quit = file->addAction(QStringLiteral("&Quit"));
  quit->setShortcut(QKeySequence::Quit);
  connect(quit, &QAction::triggered, this, &QWidget::close);

  QMenu* view = menuBar()->addMenu(QStringLiteral("&View"));
  const char* names[] = {"&Sweep", "&Run", "&New sweep"};
  for (int i = 0; i < 3; ++i) {
    QAction* a = view->addAction(QString::fromLatin1(names[i]));
    a->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
    connect(a, &QAction::triggered, this, [this, i] { tabs_->setCurrentIndex(i); });
  }
}

QStringList MainWindow::recentStores() {
  return QSettings().value(QString::fromLatin1(kRecentKey)).toStringList();
}

void MainWindow::rememberRecent(const QString& path) {
  const QString abs = QFileInfo(path).absoluteFilePath();
  QStringList list = recentStores();
  list.removeAll(abs);
  list.prepend(abs);
  while (list.size() > kMaxRecent) list.removeLast();
  QSettings().setValue(QString::fromLatin1(kRecentKey), list);
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  recent_menu_->clear();
  const QStringList list = recentStores();
  for (const QString& path : list) {
    connect(recent_menu_->addAction(path), &QAction::triggered, this,
            [this, path] { openStore(path); });
  }
  recent_menu_->setEnabled(!list.isEmpty());
}

void MainWindow::setStoreFollowing(bool on) { following_ = on; }

void MainWindow::fitTree() {
  if (!isVisible()) return;
  const auto* view = static_cast<const QAbstractItemView*>(tree_);
  int needed = 2 * tree_->frameWidth() + tree_->verticalScrollBar()->sizeHint().width() + 4;
  for (int c = 0; c < StoreTreeModel::ColumnCount; ++c) {
    if (!tree_->isColumnHidden(c)) {
      needed += std::max(view->sizeHintForColumn(c), tree_->header()->sectionSizeHint(c));
    }
  }
  QList<int> sizes = split_->sizes();
  const int total = sizes.value(0) + sizes.value(1);
  const int width = std::min(needed, total / 4);
  if (sizes.size() != 2 || width <= sizes[0]) return;  // only ever wider: the user's drag stays
  split_->setSizes({width, total - width});
}

void MainWindow::pollStore() {
  if (!following_ || path_.isEmpty() || file_state_.isEmpty()) return;
  if (file_state(path_) != file_state_) reloadStore();
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (form_->runner()->running()) {
    QMessageBox box(QMessageBox::Question, QStringLiteral("Quit offtune"),
                    QStringLiteral("A sweep is running into %1. Quit now?").arg(sweep_store_),
                    QMessageBox::NoButton, this);
    box.setInformativeText(QStringLiteral(
        "The point in progress is stopped and not recorded; every finished point is in the "
        "store. The sweep resumes where it stopped when you run the same sweep again (same "
        "store, workload and grid), from this form or with offtune sweep."));
    QPushButton* quit = box.addButton(QStringLiteral("Quit"), QMessageBox::AcceptRole);
    QPushButton* stay = box.addButton(QStringLiteral("Keep sweeping"), QMessageBox::RejectRole);
    box.setDefaultButton(stay);
    box.setEscapeButton(stay);
    box.exec();
    if (box.clickedButton() != quit) {
      event->ignore();
      return;
    }
    form_->cancelSweep();
  }
  QMainWindow::closeEvent(event);
}

void MainWindow::openStore(const QString& path) { loadStore(path, /*switching=*/true); }

void MainWindow::reloadStore() {
  if (!path_.isEmpty()) loadStore(path_, /*switching=*/false);
}

// The app switches to `candidate` (window title, form's store, F5's target) only once its index
// loaded: a store that cannot be read leaves everything on the store the app had.
void MainWindow::loadStore(const QString& candidate, bool switching) {
  const uint64_t job = jobs_.next();
  const std::string path = candidate.toStdString();
  // Taken before the read: a write during it shows as a change at the next poll.
  const QString state = file_state(candidate);
  statusBar()->showMessage(QStringLiteral("Loading %1\u2026").arg(candidate));
  run_job<StoreIndex>(
      this, [path] { return load_store_index(path); },
      [this, job, path, switching, state](const JobResult<StoreIndex>& r) {
        if (!jobs_.is_current(job)) return;
        const QString qpath = QString::fromStdString(path);
        if (!r.value) {
          QString msg = QStringLiteral("Could not open %1: %2").arg(qpath, r.error);
          if (switching && !path_.isEmpty() && path_ != qpath) {
            msg += QStringLiteral(" (still showing %1)").arg(path_);
          }
          statusBar()->showMessage(msg);
          Q_EMIT storeFailed(r.error);
          return;
        }
        if (switching) {
          path_ = qpath;
          show_newest_on_load_ = true;
          form_->setStorePath(qpath);
        }
        store_label_->setText(path_);
        // The store's name first: a taskbar or window list shows the start of a title.
        setWindowTitle(QStringLiteral("%1 \u2014 offtune").arg(QFileInfo(path_).fileName()));
        setWindowFilePath(path_);
        if (remembers_recent_) rememberRecent(qpath);
        file_state_ = state;
        index_path_ = qpath;
        tree_model_->setIndex(r.value);
        tree_->expand(tree_model_->index(0, 0));
        tree_->expand(tree_model_->index(1, 0));
        fitTree();
        const auto count = [](size_t n, const char* one, const char* many) {
          return QStringLiteral("%1 %2").arg(n).arg(QLatin1String(n == 1 ? one : many));
        };
        statusBar()->showMessage(count(r.value->sweeps.size(), "sweep", "sweeps") +
                                     QStringLiteral(", ") +
                                     count(r.value->runs.size(), "run", "runs"),
                                 5000);
        if (show_newest_on_load_) {
          show_newest_on_load_ = false;
          if (!r.value->sweeps.empty()) {
            showSweep(r.value->sweeps.back().sweep.id);
          } else if (!r.value->runs.empty()) {
            showRun(r.value->runs.back().id);
          }
        } else if (const auto& shown = sweep_view_->sweepData();
                   shown && same_store(sweep_view_->storePath(), qpath)) {
          // F5 (or a write followed) reads the sweep on screen again too, where it stays.
          sweep_view_->showSweep(sweep_view_->storePath(), shown->sweep.id);
        }
        Q_EMIT storeLoaded();
      });
}

void MainWindow::showSweep(pf::SweepId id) {
  sweep_view_->showSweep(path_.toStdString(), id);
  tabs_->setCurrentWidget(sweep_view_);
  if (const QModelIndex idx = tree_model_->sweepIndex(id); idx.isValid())
    tree_->setCurrentIndex(idx);
}

void MainWindow::showRun(pf::RunId id) {
  run_view_->showRun(path_.toStdString(), id);
  tabs_->setCurrentWidget(run_view_);
  if (const QModelIndex idx = tree_model_->runIndex(id); idx.isValid()) tree_->setCurrentIndex(idx);
}

void MainWindow::activateTreeItem(const QModelIndex& index) {
  const QModelIndex first = index.siblingAtColumn(0);
  if (const QVariant run = first.data(StoreTreeModel::RunIdRole);
      run.isValid() && run.toLongLong() >= 0) {
    showRun(pf::RunId(run.toLongLong()));
    return;
  }
  if (const QVariant sweep = first.data(StoreTreeModel::SweepIdRole); sweep.isValid()) {
    showSweep(pf::SweepId(sweep.toLongLong()));
  }
}

void MainWindow::onPointFinished(const pf::PointRecord& point) {
  // A point is of the form's store: sweep ids are per store (two stores each have a sweep 1), so a
  // point is merged only into a view and a tree of that store.
  const auto& shown = sweep_view_->sweepData();
  if (shown && shown->sweep.id == point.sweep &&
      same_store(sweep_view_->storePath(), sweep_store_)) {
    sweep_view_->applyPoint(point);
  } else {
    // The first point of a new sweep: the store has it now; load the sweep from there.
    sweep_view_->showSweep(sweep_store_.toStdString(), point.sweep);
    tabs_->setCurrentWidget(sweep_view_);
  }
  // The tree's row and count now, in place, as the heading's and the form's; the reload (new
  // runs, the next point in progress) once the points stop coming for a moment.
  if (same_store(index_path_, sweep_store_)) tree_model_->applyPoint(point);
  reload_timer_->start();
}

QString MainWindow::chooseRunExport(const char* title, const char* extension,
                                    const QString& filter) {
  const auto& run = run_view_->runData();
  if (!run) {
    statusBar()->showMessage(QStringLiteral("Open a run first (the Run tab)"), 5000);
    return {};
  }
  // Named after the run and the sweep point it measured, when the store says.
  std::string name = pf::default_trace_name({run->run.id}, nullptr, extension);
  try {
    auto store = pf::open_sqlite_store_readonly(run_view_->storePath());
    name = pf::default_trace_name(*store, {run->run.id}, extension);
  } catch (const std::exception&) {
  }
  return QFileDialog::getSaveFileName(this, QString::fromLatin1(title),
                                      QString::fromStdString(name), filter);
}

void MainWindow::exportRun(const QString& path,
                           std::function<void(pf::Store&, pf::RunId, const std::string&)> write) {
  const auto& run = run_view_->runData();
  if (!run) {
    const QString msg = QStringLiteral("Open a run first (the Run tab)");
    statusBar()->showMessage(msg, 5000);
    Q_EMIT exportFinished(false, msg);
    return;
  }
  run_task(
      this,
      [db = run_view_->storePath(), id = run->run.id, out = path.toStdString(),
       write = std::move(write)] {
        auto store = pf::open_sqlite_store_readonly(db);
        write(*store, id, out);
      },
      [this, path](const QString& error) {
        const QString msg = error.isEmpty() ? QStringLiteral("Wrote %1").arg(path)
                                            : QStringLiteral("Export failed: %1").arg(error);
        statusBar()->showMessage(msg, 10000);
        Q_EMIT exportFinished(error.isEmpty(), msg);
      });
}

void MainWindow::exportRunTrace() {
  const QString out = chooseRunExport("Export Chrome trace", ".json",
                                      QStringLiteral("Chrome trace (*.json *.json.gz)"));
  if (out.isEmpty()) return;
  exportRun(out, [](pf::Store& store, pf::RunId id, const std::string& path) {
    pf::export_chrome_trace(store, {id}, path);
  });
}

void MainWindow::chooseMemorySnapshot() {
  const QString out =
      chooseRunExport("Export memory snapshot", ".pickle",
                      QStringLiteral("Memory snapshot for pytorch.org/memory_viz (*.pickle)"));
  if (!out.isEmpty()) exportMemorySnapshot(out);
}

void MainWindow::exportMemorySnapshot(const QString& path) {
  exportRun(path, [](pf::Store& store, pf::RunId id, const std::string& out) {
    pf::export_memory_snapshot(store, id, out);
  });
}

void MainWindow::exportSweepCsv() {
  if (!sweep_view_->sweepData()) {
    statusBar()->showMessage(QStringLiteral("Open a sweep first"), 5000);
    return;
  }
  tabs_->setCurrentWidget(sweep_view_);
  const QString out = QFileDialog::getSaveFileName(
      this, QStringLiteral("Export sweep points"),
      QString::fromStdString(pf::default_points_name(sweep_view_->sweepData()->sweep.id)),
      QStringLiteral("CSV (*.csv)"));
  if (!out.isEmpty()) sweep_view_->recommendPanel()->exportCsv(out);
}

// ---------------------------------------------------------------------------------------------
// Screenshots

namespace {

// Runs the event loop until `ok` or `fail` is emitted by `sender` after `trigger()`, or until the
// timeout. Connecting before triggering means a job that ends at once is not missed.
template <typename Sender, typename OkSignal, typename FailSignal>
bool wait_for(Sender* sender, OkSignal ok, FailSignal fail, const std::function<void()>& trigger,
              int timeout_ms, QString* error) {
  QEventLoop loop;
  bool success = false;
  QTimer timer;
  timer.setSingleShot(true);
  QObject::connect(sender, ok, &loop, [&] {
    success = true;
    loop.quit();
  });
  QObject::connect(sender, fail, &loop, [&](const QString& e) {
    *error = e;
    loop.quit();
  });
  QObject::connect(&timer, &QTimer::timeout, &loop, [&] {
    *error = QStringLiteral("timed out after %1 s").arg(timeout_ms / 1000);
    loop.quit();
  });
  timer.start(timeout_ms);
  trigger();
  loop.exec();
  return success;
}

bool save(QWidget* w, const QString& path, QString* error) {
  QApplication::processEvents();
  if (w->grab().save(path, "PNG")) return true;
  *error = QStringLiteral("cannot write %1").arg(path);
  return false;
}

}  // namespace

QSize initial_window_size(QSize available) {
  if (!available.isValid() || available.isEmpty()) return kDefaultWindowSize;
  return kDefaultWindowSize.boundedTo(available).expandedTo(kMinimumWindowSize);
}

int take_screenshots(MainWindow& window, const QString& store, const QString& dir, QString* error,
                     int timeout_ms, QSize size) {
  if (!QDir().mkpath(dir)) {
    *error = QStringLiteral("cannot create %1").arg(dir);
    return kShotFailed;
  }
  const QDir out(dir);
  window.setRemembersRecent(false);
  window.resize(size);
  window.show();
  QString e;
  if (!wait_for(
          &window, &MainWindow::storeLoaded, &MainWindow::storeFailed,
          [&] { window.openStore(store); }, timeout_ms, &e)) {
    *error = QStringLiteral("%1: %2").arg(store, e);
    return kShotStore;
  }
  const auto index = window.storeModel()->storeIndex();
  if (index->sweeps.empty() && index->runs.empty()) {
    *error = QStringLiteral("%1 holds no sweeps and no runs").arg(store);
    return kShotFailed;
  }
  pf::RunId run;
  if (!index->sweeps.empty()) {
    SweepView* view = window.sweepView();
    if (!wait_for(
            view, &SweepView::loaded, &SweepView::loadFailed,
            [&] { window.showSweep(index->sweeps.back().sweep.id); }, timeout_ms, &e)) {
      *error = QStringLiteral("sweep view: %1").arg(e);
      return kShotFailed;
    }
    if (!save(&window, out.filePath(QStringLiteral("dashboard.png")), error) ||
        !save(view, out.filePath(QStringLiteral("sweep.png")), error) ||
        !save(view->recommendPanel(), out.filePath(QStringLiteral("recommend.png")), error)) {
      return kShotFailed;
    }
    // A sweep of several variants: its heatmaps side by side too.
    if (!sweep_variants(*view->sweepData()).empty()) {
      view->setSideBySide(true);
      QApplication::processEvents();
      const bool saved = save(view, out.filePath(QStringLiteral("sweep-side-by-side.png")), error);
      view->setSideBySide(false);
      if (!saved) return kShotFailed;
    }
    // The run to show: the recommended point's, else the first measured point's.
    const auto& rec = view->recommendPanel()->recommendation();
    if (rec.chosen && rec.chosen->run.valid()) run = rec.chosen->run;
    for (const auto& p : view->sweepData()->points) {
      if (!run.valid() && p.status == pf::PointStatus::Ok && p.run.valid()) run = p.run;
    }
  }
  if (!run.valid() && !index->runs.empty()) run = index->runs.back().id;
  if (run.valid()) {
    RunView* view = window.runView();
    if (!wait_for(
            view, &RunView::loaded, &RunView::loadFailed, [&] { window.showRun(run); }, timeout_ms,
            &e)) {
      *error = QStringLiteral("run view: %1").arg(e);
      return kShotFailed;
    }
    if (!save(view, out.filePath(QStringLiteral("run.png")), error)) return kShotFailed;
    // The same with a stretch selected (as shift+drag does) and measured: a fifth of the run from
    // a third in, which falls inside a step of a run of several.
    const auto [lo, hi] = view->axis()->bounds();
    const int64_t span = hi - lo;
    const int64_t from = lo + span / 3, to = from + span / 5;
    view->timeline()->setSelection(std::pair{from, to});
    // And a tensor followed: the first one copied out inside the stretch.
    if (const auto& lanes_of = view->timeline()->index()) {
      for (const auto& lane : lanes_of->lanes) {
        if (lane.kind != LaneKind::CopyD2H) continue;
        for (size_t i = 0; i < lane.spans.size(); ++i) {
          if (lane.spans.start[i] >= from && lane.spans.start[i] < to &&
              lane.spans.info[i].tensor >= 0) {
            view->timeline()->setFollowedTensor(lane.spans.info[i].tensor);
            break;
          }
        }
      }
    }
    QApplication::processEvents();
    const bool selected = save(view, out.filePath(QStringLiteral("run-selection.png")), error);
    view->timeline()->setSelection(std::nullopt);
    view->timeline()->setFollowedTensor(-1);
    if (!selected) return kShotFailed;
    if (index->sweeps.empty() &&
        !save(&window, out.filePath(QStringLiteral("dashboard.png")), error)) {
      return kShotFailed;
    }
  }
  window.tabs()->setCurrentWidget(window.sweepForm());
  if (!save(window.sweepForm(), out.filePath(QStringLiteral("sweep-form.png")), error)) {
    return kShotFailed;
  }
  return kShotOk;
}

}  // namespace offtune::gui
