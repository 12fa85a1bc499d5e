// offtune-gui: the dashboard. `offtune-gui [STORE]` opens the window (on the store, if given);
// `offtune-gui STORE --screenshot DIR` renders each main view to PNG files and exits, without a
// display when run with QT_QPA_PLATFORM=offscreen.
//
// Exit codes: 0 ok; 1 a view could not be rendered or written; 2 usage (bad flags); 3 the store
// cannot be read (missing, not an offtune store, corrupt, newer schema).
#include <CLI/CLI.hpp>
#include <QApplication>
#include <QFileInfo>
#include <QGuiApplication>
#include <QScreen>
#include <cstdio>
#include <string>

#include "offtune/gui/main_window.hpp"
#include "offtune/profiler/store.hpp"

int main(int argc, char** argv) {
  using namespace offtune::gui;
  CLI::App cli{"offtune-gui: the offtune tuning dashboard over a store written by `offtune`"};
  std::string store, screenshot_dir, size_text;
  cli.add_option("store", store, "the store to open (an SQLite file written by offtune)");
  cli.add_option("--screenshot", screenshot_dir,
                 "render the sweep, recommendation, run and new-sweep views of STORE to PNG files "
                 "in this directory and exit (use QT_QPA_PLATFORM=offscreen without a display)");
  cli.add_option("--size", size_text,
                 "the window's size in pixels, WIDTHxHEIGHT (e.g. 1280x800, 1920x1080); default "
                 "1500x950, within the screen; at least 960x640");
  cli.footer(
      "Exit codes: 0 ok, 1 a view could not be rendered or written, 2 usage, 3 the store cannot "
      "be read.");
  // Qt takes its own flags (-platform, -style, ...) out of argv first.
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("offtune"));
  QApplication::setApplicationName(QStringLiteral("offtune-gui"));
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : kShotUsage;
  }
  QSize size = kDefaultWindowSize;
  if (size_text.empty() && screenshot_dir.empty()) {
    if (const QScreen* screen = QGuiApplication::primaryScreen()) {
      size = initial_window_size(screen->availableGeometry().size());
    }
  }
  if (!size_text.empty()) {
    // WIDTHxHEIGHT, each 200..16384: a screen's size, not a typo's.
    int w = 0, h = 0;
    char x = 0, tail = 0;
    const bool plain = size_text.find_first_not_of("0123456789x") == std::string::npos;
    if (!plain || std::sscanf(size_text.c_str(), "%d%c%d%c", &w, &x, &h, &tail) != 3 || x != 'x' ||
        w < 200 || h < 200 || w > 16384 || h > 16384) {
      std::fprintf(stderr,
                   "error: --size: '%s' is not WIDTHxHEIGHT\nhint: --size 1280x800 (each 200 to "
                   "16384 pixels)\n",
                   size_text.c_str());
      return kShotUsage;
    }
    size = QSize(w, h);
  }
  if (!screenshot_dir.empty() && store.empty()) {
    std::fprintf(stderr,
                 "error: --screenshot needs a STORE\nhint: offtune-gui s.db --screenshot DIR\n");
    return kShotUsage;
  }
  if (!store.empty()) {
    // Refuse a missing, foreign or newer store at once, with the store's own one-line reason, so
    // the window (or the screenshots) never start on something they cannot show. A read-only open
    // never modifies the file.
    if (!QFileInfo::exists(QString::fromStdString(store))) {
      std::fprintf(stderr, "error: %s: no such file\n", store.c_str());
      return kShotStore;
    }
    try {
      offtune::profiler::open_sqlite_store_readonly(store);
    } catch (const offtune::profiler::StoreError& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return kShotStore;
    }
  }
  MainWindow window;
  if (!screenshot_dir.empty()) {
    QString error;
    const int rc = take_screenshots(window, QString::fromStdString(store),
                                    QString::fromStdString(screenshot_dir), &error, 120000, size);
    if (rc != kShotOk) {
      std::fprintf(stderr, "error: %s\n", qPrintable(error));
    } else {
      std::printf("wrote screenshots to %s\n", screenshot_dir.c_str());
    }
    return rc;
  }
  window.resize(size);
  window.show();
  if (!store.empty()) window.openStore(QString::fromStdString(store));
  return QApplication::exec();
}
