#include "sysmem.hpp"

#include <c10/util/Exception.h>

#include <atomic>
#include <fstream>
#include <string>

namespace offtune::detail {
namespace {
std::atomic<double> g_warn_percent{60.0};
std::atomic<bool> g_above{false};
}  // namespace

HostRam read_host_ram() {
  HostRam ram;
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t value = 0;
  std::string unit;
  while (in >> key >> value >> unit) {
    if (key == "MemTotal:") ram.total = value * 1024;
    if (key == "MemAvailable:") ram.available = value * 1024;
  }
  return ram;
}

void set_host_ram_warn_percent(double percent) { g_warn_percent = percent; }

void check_host_ram(int64_t bytes) {
  HostRam ram = read_host_ram();
  if (ram.total <= 0) return;
  ram.available -= bytes;
  const bool above = ram.available < 0 || ram.used_percent() > g_warn_percent.load();
  if (above && !g_above.exchange(true)) {
    TORCH_WARN("offtune: host RAM ", static_cast<int>(ram.used_percent()), "% used (threshold ",
               g_warn_percent.load(), "%) while reserving ", bytes,
               " bytes for offloaded activations; the system may start swapping");
  } else if (!above) {
    g_above = false;
  }
}

}  // namespace offtune::detail
