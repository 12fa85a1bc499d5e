// The dashboard's main window: the store's sweeps and runs in a tree on the left; the sweep view,
// the run view and the new-sweep form as tabs. Opening a store (dialog, recent files, command line)
// loads its index on a job thread. take_screenshots() renders each main view of a store to PNG
// files without a display, for docs and checks (`offtune-gui STORE --screenshot DIR`).
#pragma once

#include <QMainWindow>
#include <QSize>
#include <QString>
#include <QStringList>
#include <functional>
#include <string>

#include "offtune/gui/data.hpp"
#include "offtune/gui/jobs.hpp"

class QCloseEvent;
class QLabel;
class QMenu;
class QModelIndex;
class QSplitter;
class QTabWidget;
class QTimer;
class QTreeView;

namespace offtune::profiler {
class Store;
}  // namespace offtune::profiler

namespace offtune::gui {

class RunView;
class StoreTreeModel;
class SweepForm;
class SweepView;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);

  // Loads the store's index on a job thread; storeLoaded() or storeFailed() follows. The newest
  // sweep is shown once the index is in.
  void openStore(const QString& path);
  // F5: reads the store again, the tree and the sweep on screen (when it is of this store).
  void reloadStore();
  const QString& storePath() const { return path_; }
  // Whether the window follows the open store as another process writes it (on by default): the
  // store's file and its write-ahead log are looked at every second, and a change reloads as F5.
  void setStoreFollowing(bool on);

  // Shows a sweep or a run (switching tabs) and selects it in the tree.
  void showSweep(profiler::SweepId id);
  void showRun(profiler::RunId id);

  StoreTreeModel* storeModel() const { return tree_model_; }
  SweepView* sweepView() const { return sweep_view_; }
  RunView* runView() const { return run_view_; }
  SweepForm* sweepForm() const { return form_; }
  QTabWidget* tabs() const { return tabs_; }

  // Writes the run on show's memory history as a memory snapshot (File > Export run as memory
  // snapshot..., after its save dialog) on a job thread; the status bar says how it went (a run
  // recorded without --memory-history: how to record one). exportFinished() follows.
  void exportMemorySnapshot(const QString& path);

  // Whether opening a store adds it to Open recent (on by default; take_screenshots turns it off:
  // its store is not one the user opened).
  void setRemembersRecent(bool on) { remembers_recent_ = on; }

  // Recently opened stores, newest first (QSettings "recentStores", at most 10).
  static QStringList recentStores();

 Q_SIGNALS:
  void storeLoaded();
  void storeFailed(const QString& error);
  void exportFinished(bool ok, const QString& message);

 protected:
  // Quitting while a sweep runs asks first (the sweep resumes when run again).
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildMenus();
  void pollStore();
  // Widens the tree's pane to its names and status, up to a quarter of the window.
  void fitTree();
  void loadStore(const QString& candidate, bool switching);
  void rememberRecent(const QString& path);
  void rebuildRecentMenu();
  void onPointFinished(const profiler::PointRecord& point);
  void activateTreeItem(const QModelIndex& index);
  void exportRunTrace();
  void exportSweepCsv();
  void chooseMemorySnapshot();
  // The save dialog of an export of the run on show, named after it (empty: none on show, said in
  // the status bar, or cancelled).
  QString chooseRunExport(const char* title, const char* extension, const QString& filter);
  // Writes the run on show with `write` on a job thread; the status bar and exportFinished() say
  // how it went.
  void exportRun(const QString& path,
                 std::function<void(profiler::Store&, profiler::RunId, const std::string&)> write);

  JobTicket jobs_;
  QString path_;
  // The store the form's sweep writes (its points are merged into the views only when they show
  // this store), and the store the tree's index is of.
  QString sweep_store_;
  QString index_path_;
  // What the store's files looked like at the last load (size and modification time of the file
  // and its -wal), for following a store another process writes.
  QString file_state_;
  QTimer* poll_timer_ = nullptr;
  bool remembers_recent_ = true;
  bool show_newest_on_load_ = true;
  QSplitter* split_ = nullptr;
  QTreeView* tree_ = nullptr;
  StoreTreeModel* tree_model_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  SweepView* sweep_view_ = nullptr;
  RunView* run_view_ = nullptr;
  SweepForm* form_ = nullptr;
  QMenu* recent_menu_ = nullptr;
  QLabel* store_label_ = nullptr;
  bool following_ = true;
  QTimer* reload_timer_ = nullptr;  // coalesces index reloads while a sweep reports points
};

// Exit codes of offtune-gui's --screenshot mode (also documented in its --help and docs/gui.md).
enum ScreenshotExit { kShotOk = 0, kShotFailed = 1, kShotUsage = 2, kShotStore = 3 };

// The window's size when none is given (offtune-gui, --screenshot).
inline constexpr QSize kDefaultWindowSize{1500, 950};
// The smallest the window gets: below it labels would overlap and charts squash (issue 43).
inline constexpr QSize kMinimumWindowSize{960, 640};
// The size a window opens at on a screen with `available` room (its available geometry): the
// default, within the screen (never below the minimum). Before, 1500x950 on a 1280x800 screen.
QSize initial_window_size(QSize available);

// Opens `store` in `window` at `size`, shows the newest sweep and a run (the recommended point's,
// else the first measured one, else the newest run), and writes into `dir` (created if absent):
// dashboard.png (the whole window on the sweep tab), sweep.png, recommend.png, run.png and
// sweep-form.png. Returns a ScreenshotExit; on failure *error holds one line.
int take_screenshots(MainWindow& window, const QString& store, const QString& dir, QString* error,
                     int timeout_ms = 120000, QSize size = kDefaultWindowSize);

}  // namespace offtune::gui
