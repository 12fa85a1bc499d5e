// The profiler from the installed package: an SQLite store written and read back, and a Chrome
// trace exported from it. Exits non-zero on any mismatch.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "offtune/profiler/export.hpp"
#include "offtune/profiler/store.hpp"

int main() {
  namespace fs = std::filesystem;
  namespace pf = offtune::profiler;
  const fs::path dir =
      fs::temp_directory_path() / ("offtune-package-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int status = 1;
  {
    auto store = pf::open_sqlite_store((dir / "s.db").string());
    pf::RunRecord run;
    run.status = pf::RunStatus::Ok;
    run.workload.model = "package";
    const pf::RunId id = store->begin_run(run);
    store->add_events({pf::event_span(pf::EventKind::Compute, 0, 1000, {.run = id, .name = "c"})});
    pf::export_chrome_trace(*store, {id}, (dir / "t.json").string());
    const auto back = store->run(id);
    if (back && back->workload.model == "package" && fs::file_size(dir / "t.json") > 0) status = 0;
  }
  fs::remove_all(dir);
  std::printf("profiler from the package: %s\n", status == 0 ? "ok" : "FAILED");
  return status;
}
