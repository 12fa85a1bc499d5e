// The link measured through the backend's copy path (offtune/link_probe.hpp).
#include "offtune/link_probe.hpp"

#include <c10/core/Storage.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

#include "backend.hpp"

namespace offtune {
namespace {

// A host buffer from the backend's source, given back on scope exit.
class HostBuffer {
 public:
  HostBuffer(detail::HostMemorySource& source, int64_t bytes, bool pinned)
      : source_(source), bytes_(bytes), pinned_(pinned), ptr_(source.allocate(bytes, pinned)) {}
  ~HostBuffer() {
    if (ptr_ != nullptr) source_.release(ptr_, bytes_, pinned_);
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  detail::HostMemorySource& source_;
  int64_t bytes_;
  bool pinned_;
  void* ptr_;
};

LinkFit fit_of(const std::vector<std::pair<double, double>>& points) {  // (bytes, ns)
  LinkFit f;
  if (points.empty()) return f;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const auto n = static_cast<double>(points.size());
  const double den = n * sxx - sx * sx;
  double slope = 0, intercept = 0;  // ns per byte, ns
  if (points.size() >= 2 && den > 0) {
    slope = (n * sxy - sx * sy) / den;
    intercept = (sy - slope * sx) / n;
  }
  if (slope <= 0 || intercept < 0) {  // through the origin
    intercept = 0;
    slope = sxx > 0 ? sxy / sxx : 0;
  }
  if (slope > 0) f.gbps = 1.0 / slope;
  f.latency_ns = static_cast<int64_t>(intercept);
  return f;
}

int64_t median_of(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

LinkFit LinkCalibration::fit(CopyDirection direction, bool pinned) const {
  std::vector<std::pair<double, double>> points;
  for (const LinkSample& s : samples) {
    if (s.direction == direction && s.pinned == pinned) {
      points.emplace_back(static_cast<double>(s.bytes), static_cast<double>(s.median_ns));
    }
  }
  return fit_of(points);
}

LinkModel LinkCalibration::link() const {
  LinkModel m;
  const LinkFit d2h = fit(CopyDirection::DeviceToHost, true);
  const LinkFit h2d = fit(CopyDirection::HostToDevice, true);
  const auto slower = [](const LinkFit& a, const LinkFit& b) {
    if (!a.measured()) return b.gbps;
    if (!b.measured()) return a.gbps;
    return std::min(a.gbps, b.gbps);
  };
  m.pinned_gbps = slower(d2h, h2d);
  m.latency_ns = std::max(d2h.latency_ns, h2d.latency_ns);
  m.pageable_gbps =
      slower(fit(CopyDirection::DeviceToHost, false), fit(CopyDirection::HostToDevice, false));
  return m;
}

LinkCalibration calibrate_link(const OffloadOptions& options, const LinkProbeOptions& probe) {
  if (probe.sizes.empty()) throw std::invalid_argument("calibrate_link: no sizes to measure");
  for (const int64_t bytes : probe.sizes) {
    if (bytes <= 0) {
      throw std::invalid_argument("calibrate_link: a size must be positive, got " +
                                  std::to_string(bytes));
    }
  }
  if (probe.repeats < 1) {
    throw std::invalid_argument("calibrate_link: repeats must be at least 1, got " +
                                std::to_string(probe.repeats));
  }
  BackendKind kind = options.backend;
  if (kind == BackendKind::Auto) {
    kind = detail::cuda_available() ? BackendKind::Cuda : BackendKind::HostSim;
  }
  auto backend = kind == BackendKind::Cuda ? detail::make_cuda_backend(options)
                                           : detail::make_host_sim_backend(options);
  LinkCalibration out;
  out.backend = kind;
  out.device = backend->device_name();
  if (kind == BackendKind::HostSim) out.link_in_use = options.link;
  const int64_t largest = *std::max_element(probe.sizes.begin(), probe.sizes.end());
  const c10::Storage device = backend->allocate_device(largest, backend->current_stream());
  for (const CopyDirection direction : {CopyDirection::DeviceToHost, CopyDirection::HostToDevice}) {
    for (const bool pinned : {true, false}) {
      HostBuffer host(backend->host_memory(), largest, pinned);
      if (host.get() == nullptr) {
        out.skipped.push_back(std::string(pinned ? "pinned" : "pageable") + " " +
                              std::string(to_string(direction)) +
                              ": the host memory could not be had");
        continue;
      }
      for (const int64_t bytes : probe.sizes) {
        detail::CopyRequest r;
        r.direction = direction;
        r.device = &device;
        r.host = host.get();
        r.bytes = bytes;
        r.side_stream = true;
        r.pinned = pinned;
        std::vector<int64_t> times;
        for (int64_t i = 0; i <= probe.repeats; ++i) {  // the first is a warm-up
          backend->synchronize();
          const auto begin = std::chrono::steady_clock::now();
          backend->copy(r)->synchronize();
          const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now() - begin)
                                 .count();
          if (i > 0) times.push_back(ns);
        }
        LinkSample s;
        s.direction = direction;
        s.pinned = pinned;
        s.bytes = bytes;
        s.median_ns = median_of(times);
        s.min_ns = *std::min_element(times.begin(), times.end());
        out.samples.push_back(s);
      }
    }
  }
  backend->synchronize();
  return out;
}

}  // namespace offtune
