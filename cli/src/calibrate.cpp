// `offtune calibrate`: this machine's host<->device link measured through the engine's copy path
// (offtune/link_probe.hpp), and the --link value it amounts to, printed and optionally written to
// a file for the other commands (`--link "$(cat link.txt)"`).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "offtune/knobs.hpp"
#include "offtune/link_probe.hpp"
#include "offtune/profiler/units.hpp"

namespace offtune::cli {
namespace {

// The link in parse_link's words: "GBPS:LATENCY_US" (pageable is then half of pinned).
std::string link_text(const LinkModel& m) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3g:%.3g", m.pinned_gbps,
                static_cast<double>(m.latency_ns) / 1000.0);
  return text;
}

// Writes `text` to `path`, which must not exist: into a temporary file of its own beside it
// (O_EXCL), then linked into place, which fails rather than replace a file that appeared
// meanwhile; an interrupted write leaves nothing half written under `path`.
void write_new_file(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(path).parent_path();
  std::string tmp = ((dir.empty() ? fs::path(".") : dir) / ".offtune-link-XXXXXX").string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool closed = ::close(fd) == 0;
  const int linked = written && closed ? ::link(tmp.c_str(), path.c_str()) : -1;
  const int err = errno;
  ::unlink(tmp.c_str());
  if (linked != 0 && err == EEXIST) {
    throw UsageError("--output: " + path +
                     " exists; offtune does not write over a file (remove it or name another)");
  }
  if (linked != 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(err));
}

class CalibrateCommand final : public Command {
 public:
  explicit CalibrateCommand(CLI::App& parent) {
    app_ = parent.add_subcommand(
        "calibrate",
        "measure this machine's host<->device link each way, pinned and pageable, through the "
        "engine's copy path, and print the --link it amounts to");
    app_->add_option("--backend", backend_,
                     "where to measure: auto, cuda (the GPU's link) or "
                     "host-sim (the emulation's copy thread on this CPU)")
        ->capture_default_str();
    app_->add_option("--device-index", device_index_,
                     "cuda: the GPU to measure (-1: the current one)")
        ->capture_default_str();
    app_->add_option("--link", link_,
                     "host-sim: the link model its copies wait out while measured (none: this "
                     "CPU's copy path alone)")
        ->capture_default_str();
    app_->add_option("--sizes", sizes_, "copy sizes, a comma-separated list (64KiB,1MiB,...)")
        ->capture_default_str();
    app_->add_option("--repeats", repeats_,
                     "copies timed per size and direction (after one "
                     "warm-up)")
        ->capture_default_str();
    app_->add_option("--output,-o", output_,
                     "also write the --link value to this new file (never over an existing one)");
    app_->add_flag("--json", json_, "print the result as JSON");
    app_->add_flag("--quiet,-q", quiet_, "no text output");
  }

  int run() override {
    OffloadOptions o;
    try {
      o.backend = parse_backend(backend_);
    } catch (const std::exception& e) {
      throw UsageError("--backend: " + std::string(e.what()));
    }
    if (device_index_ < -1 || device_index_ > 1023) {
      throw UsageError("--device-index must be between -1 and 1023, got " +
                       std::to_string(device_index_));
    }
    o.device_index = static_cast<int>(device_index_);
    try {
      o.link = parse_link(link_).model;
    } catch (const std::exception& e) {
      throw UsageError("--link: " + std::string(e.what()));
    }
    LinkProbeOptions probe;
    probe.sizes.clear();
    for (std::string::size_type at = 0; at <= sizes_.size();) {
      const auto comma = sizes_.find(',', at);
      const std::string item =
          sizes_.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      int64_t bytes = 0;
      try {
        bytes = pf::parse_size(item);
      } catch (const std::exception& e) {
        throw UsageError("--sizes: " + std::string(e.what()));
      }
      if (bytes <= 0 || bytes > (int64_t{4} << 30)) {
        throw UsageError("--sizes: each size must be between 1 B and 4 GiB, got '" + item + "'");
      }
      probe.sizes.push_back(bytes);
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    if (repeats_ < 1 || repeats_ > 1000) {
      throw UsageError("--repeats must be between 1 and 1000, got " + std::to_string(repeats_));
    }
    probe.repeats = repeats_;
    if (!output_.empty() && std::filesystem::exists(output_)) {
      throw UsageError("--output: " + output_ +
                       " exists; offtune does not write over a file (remove it or name another)");
    }

    const LinkCalibration cal = calibrate_link(o, probe);
    const LinkModel link = cal.link();
    const std::string value = link_text(link);
    if (!output_.empty()) write_new_file(output_, value + "\n");

    const auto gbps_of = [](const LinkSample& s) {
      return s.median_ns > 0 ? static_cast<double>(s.bytes) / static_cast<double>(s.median_ns)
                             : 0.0;
    };
    if (json_) {
      json samples = json::array();
      for (const LinkSample& s : cal.samples) {
        samples.push_back({{"direction", std::string(to_string(s.direction))},
                           {"pinned", s.pinned},
                           {"bytes", s.bytes},
                           {"median_ns", s.median_ns},
                           {"min_ns", s.min_ns},
                           {"gbps", gbps_of(s)}});
      }
      json fits = json::array();
      for (const CopyDirection d : {CopyDirection::DeviceToHost, CopyDirection::HostToDevice}) {
        for (const bool pinned : {true, false}) {
          const LinkFit f = cal.fit(d, pinned);
          if (!f.measured()) continue;
          fits.push_back({{"direction", std::string(to_string(d))},
                          {"pinned", pinned},
                          {"gbps", f.gbps},
                          {"latency_us", static_cast<double>(f.latency_ns) / 1000.0}});
        }
      }
      json out{{"backend", std::string(to_string(cal.backend))},
               {"device", cal.device},
               {"samples", samples},
               {"fits", fits},
               {"skipped", cal.skipped},
               {"link", value},
               {"pageable_gbps", link.pageable_gbps}};
      if (cal.backend == BackendKind::HostSim) out["link_in_use"] = link_;
      if (!output_.empty()) out["output"] = output_;
      std::cout << out.dump(2) << "\n";
      return kOk;
    }
    if (quiet_) return kOk;
    std::printf(
        "link of %s (%s), %lld copies per size after a warm-up, each timed from its "
        "issue until the waiter saw it complete:\n",
        cal.device.c_str(), std::string(to_string(cal.backend)).c_str(),
        static_cast<long long>(probe.repeats));
    std::printf("%-4s %-9s %10s %12s %12s %9s\n", "dir", "host", "size", "median us", "min us",
                "GB/s");
    for (const LinkSample& s : cal.samples) {
      std::printf("%-4s %-9s %10s %12.1f %12.1f %9.2f\n",
                  std::string(to_string(s.direction)).c_str(), s.pinned ? "pinned" : "pageable",
                  pf::format_size(s.bytes).c_str(), static_cast<double>(s.median_ns) / 1e3,
                  static_cast<double>(s.min_ns) / 1e3, gbps_of(s));
    }
    for (const std::string& s : cal.skipped) std::printf("not measured: %s\n", s.c_str());
    std::printf("fitted (time = latency + bytes / bandwidth, least squares over the sizes):\n");
    for (const CopyDirection d : {CopyDirection::DeviceToHost, CopyDirection::HostToDevice}) {
      for (const bool pinned : {true, false}) {
        const LinkFit f = cal.fit(d, pinned);
        if (!f.measured()) continue;
        std::printf("  %s %-8s %8.2f GB/s, %7.1f us\n", std::string(to_string(d)).c_str(),
                    pinned ? "pinned" : "pageable", f.gbps,
                    static_cast<double>(f.latency_ns) / 1000.0);
      }
    }
    std::printf(
        "--link %s  (the slower direction's pinned bandwidth and the larger latency; "
        "--link takes pageable as half of pinned, measured %.2f GB/s)\n",
        value.c_str(), link.pageable_gbps);
    if (cal.backend == BackendKind::HostSim) {
      std::printf(
          "host-sim: measured with link model %s; a host-sim run waits out its --link "
          "(default pcie4) and copies no faster than the above\n",
          link_.c_str());
    }
    if (!output_.empty()) {
      std::printf("written to %s: use it as --link \"$(cat %s)\"\n", output_.c_str(),
                  output_.c_str());
    }
    return kOk;
  }

 private:
  std::string backend_ = "auto";
  int64_t device_index_ = -1;
  std::string link_ = "none";
  std::string sizes_ = "64KiB,1MiB,16MiB,64MiB";
  int64_t repeats_ = 5;
  std::string output_;
  bool json_ = false;
  bool quiet_ = false;
};

}  // namespace

std::unique_ptr<Command> add_calibrate_command(CLI::App& app) {
  return std::make_unique<CalibrateCommand>(app);
}

}  // namespace offtune::cli
