// Host RAM checks: the reference warns when system memory use passes a percentage; offtune checks
// whenever the host pool grows (rare), and warns once per crossing.
#pragma once

#include <cstdint>

namespace offtune::detail {

struct HostRam {
  int64_t total = 0;
  int64_t available = 0;
  double used_percent() const {
    return total > 0 ? 100.0 * static_cast<double>(total - available) / static_cast<double>(total)
                     : 0.0;
  }
};
HostRam read_host_ram();  // from /proc/meminfo; zeros if unreadable
void set_host_ram_warn_percent(double percent);
// Warns when reserving `bytes` more would exceed the threshold or what is available.
void check_host_ram(int64_t bytes);

}  // namespace offtune::detail
