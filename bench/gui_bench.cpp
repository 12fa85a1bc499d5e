// offtune-gui-bench: how fast the run view's timeline paints a big run, offscreen.
//
// It synthesizes a run of --events timeline events shaped like a recorded one (steps of forward
// then backward, back-to-back kernels, offload copies under forward and reloads under backward on a
// copy stream, a pack per offload and an unpack per reload, waits, stash occupancy samples), times
// build_timeline_index on it, then paints frames into a QImage (ARGB32_Premultiplied) of --width x
// --height with render_timeline:
//
//   zoomed out   the whole run
//   10x, 1000x   a tenth and a thousandth of it, around the middle
//   pan          at 100x, 2 % of the view further each frame
//   zoom in      from the whole run in, 1.5x per frame, around the middle
//   charts       the occupancy and device-memory charts over the whole run
//
// For each: the median and the worst frame in ms, and the rects and lines drawn (median). It prints
// an aligned table, or one JSON object with --json; --save DIR writes each scenario's last frame as
// a PNG. It measures; it asserts nothing about speed.
//
// Exit status: 0 done; 1 an error (printed as `error: ...`); 2 bad command line.

#include <QApplication>
#include <QImage>
#include <QPainter>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "offtune/gui/data.hpp"
#include "offtune/gui/run_charts.hpp"
#include "offtune/gui/timeline.hpp"

namespace {

namespace gui = offtune::gui;
namespace pf = offtune::profiler;
using pf::EventKind;
using Clock = std::chrono::steady_clock;

struct Args {
  int64_t events = 1'000'000;
  int width = 1600;
  int height = 0;  // 0: the timeline's own height
  int frames = 30;
  bool quick = false;
  bool json = false;
  uint64_t seed = 1;
  std::string save_dir;  // empty: save nothing
};

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

template <typename T>
T median(std::vector<T> v) {
  if (v.empty()) return T{};
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// About `n` events over 10 steps. Kernels of 3-60 µs with 0.3-3 µs gaps on stream 0; every third
// kernel of the forward pass offloads its activation (pack, then a D2H copy on stream 1 that
// overlaps the next kernels); backward reloads them in reverse (H2D, most of them prefetched, then
// an unpack), and now and then waits for a copy. One occupancy sample per pack and unpack.
gui::RunData synthesize(int64_t n, uint64_t seed) {
  gui::RunData run;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> kernel_ns(3'000, 60'000);
  std::uniform_int_distribution<int64_t> gap_ns(300, 3'000);
  std::uniform_int_distribution<int64_t> size_kib(64, 2'048);
  const char* kernels[] = {"gemm_bf16_128x128", "flash_attn_fwd", "layer_norm", "gelu",
                           "elementwise_add",   "softmax"};
  const int64_t steps = 10;
  // Every third kernel adds a pack and a copy (forward) or a copy and an unpack (backward), every
  // twelfth a wait: 7 events per 4 kernels.
  const int64_t kernels_per_phase = std::max<int64_t>(4, n * 4 / 7 / (2 * steps));
  auto& events = run.events;
  events.reserve(static_cast<size_t>(n + n / 8 + 64));
  int64_t t = 5'000'000'000;  // a monotonic clock far from zero, as recorded ones are
  int64_t fwd = 0, fwd_bytes = 0, bwd = 0, bwd_bytes = 0;
  int64_t device = int64_t{3} << 30;  // weights and optimizer state
  int64_t peak = device;
  const auto sample = [&](int64_t at) {
    pf::OccupancySample o;
    o.time_ns = at;
    o.fwd_count = fwd;
    o.fwd_bytes = fwd_bytes;
    o.bwd_count = bwd;
    o.bwd_bytes = bwd_bytes;
    o.device_bytes = device;
    run.occupancy.push_back(o);
    peak = std::max(peak, device);
  };
  int64_t tensor = 0;
  for (int64_t s = 0; s < steps; ++s) {
    const size_t step_at = events.size();
    events.push_back(pf::event_span(EventKind::Step, t, t));
    std::vector<std::pair<int64_t, int64_t>> stash;  // tensor, bytes
    for (int phase = 0; phase < 2; ++phase) {
      const bool forward = phase == 0;
      const size_t phase_at = events.size();
      events.push_back(pf::event_span(forward ? EventKind::Forward : EventKind::Backward, t, t));
      int64_t copy_free = t;  // the copy stream runs one copy at a time
      for (int64_t k = 0; k < kernels_per_phase; ++k) {
        const int64_t d = kernel_ns(rng);
        events.push_back(pf::event_span(EventKind::Compute, t, t + d));
        events.back().name = kernels[static_cast<size_t>(k) % 6];
        if (k % 3 == 0) {
          if (forward) {
            const int64_t bytes = size_kib(rng) * 1024;
            const int64_t copy_start = std::max(copy_free, t + d);
            const int64_t copy_end = copy_start + bytes / 24;  // ~24 GB/s
            events.push_back(pf::event_span(EventKind::Pack, t + d, t + d, {.bytes = bytes}));
            events.back().tensor = tensor;
            events.back().name = "offload";
            events.push_back(pf::event_span(EventKind::CopyD2H, copy_start, copy_end,
                                            {.stream = 1, .bytes = bytes}));
            events.back().tensor = tensor;
            events.back().pinned = (tensor % 50) != 7;
            copy_free = copy_end;
            stash.emplace_back(tensor++, bytes);
            ++fwd;
            fwd_bytes += bytes;
            device += 2 * bytes;  // the two activations of the kernels that were kept
            sample(t + d);
          } else if (!stash.empty()) {
            const auto [id, bytes] = stash.back();
            stash.pop_back();
            const int64_t copy_start = std::max(copy_free, t);
            const int64_t copy_end = copy_start + bytes / 24;
            events.push_back(pf::event_span(EventKind::CopyH2D, copy_start, copy_end,
                                            {.stream = 1, .bytes = bytes}));
            events.back().tensor = id;
            events.back().prefetch = (id % 4) != 0;
            copy_free = copy_end;
            const int64_t use = std::max(copy_end, t + d);
            events.push_back(pf::event_span(EventKind::Unpack, use, use, {.bytes = bytes}));
            events.back().tensor = id;
            events.back().name = "host";
            --fwd;
            fwd_bytes -= bytes;
            ++bwd;
            bwd_bytes += bytes;
            device -= 2 * bytes;
            sample(use);
            --bwd;
            bwd_bytes -= bytes;
            sample(use + d / 2);
          }
          if (k % 12 == 0) {
            events.push_back(pf::event_span(EventKind::Wait, t + d, t + d + 2'000));
            events.back().name = forward ? "stash_full" : "reload";
            t += 2'000;
          }
        }
        t += d + gap_ns(rng);
      }
      events[phase_at].end_ns = t;
      t += 20'000;
      bwd = 0;
      bwd_bytes = 0;
    }
    events[step_at].end_ns = t;
    t += 200'000;
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  std::stable_sort(run.occupancy.begin(), run.occupancy.end(),
                   [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
  run.run.summary.peak_allocated = peak;
  return run;
}

template <typename T>
size_t bytes_of(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

// What the index holds, roughly: its arrays, not the allocator's slack.
size_t index_bytes(const gui::TimelineIndex& index) {
  size_t total = 0;
  const auto intervals = [&total](const gui::TimelineIntervals& s) {
    total += bytes_of(s.start) + bytes_of(s.end) + bytes_of(s.info);
    for (const auto& l : s.levels) {
      total += bytes_of(l.start) + bytes_of(l.end) + bytes_of(l.cum_count) + bytes_of(l.cum_bytes) +
               bytes_of(l.cum_busy) + bytes_of(l.cum_pageable) + bytes_of(l.cum_prefetch) +
               bytes_of(l.cum_forward);
    }
  };
  for (const auto& lane : index.lanes) {
    intervals(lane.spans);
    intervals(lane.steps);
    for (const auto* i : {&lane.packs, &lane.unpacks}) {
      total += bytes_of(i->time) + bytes_of(i->info) + bytes_of(i->cum_bytes);
    }
  }
  return total;
}

struct Scenario {
  std::string name;
  double median_ms = 0.0;
  double max_ms = 0.0;
  int primitives = 0;
  int64_t visited = 0;
  int frames = 0;
};

// Paints one frame per view, each into the same image (as a widget's backing store is reused).
Scenario run_frames(
    const Args& args, const std::string& name, QImage& image,
    const std::vector<std::pair<int64_t, int64_t>>& views,
    const std::function<void(QPainter&, int64_t, int64_t, gui::RenderStats*)>& draw) {
  Scenario s;
  s.name = name;
  std::vector<double> ms;
  std::vector<int> primitives;
  std::vector<int64_t> visited;
  for (const auto& [b, e] : views) {
    gui::RenderStats stats;
    const auto start = Clock::now();
    {
      QPainter p(&image);
      draw(p, b, e, &stats);
    }
    ms.push_back(ms_since(start));
    primitives.push_back(stats.primitives);
    visited.push_back(stats.visited);
  }
  s.frames = static_cast<int>(views.size());
  s.median_ms = median(ms);
  s.max_ms = ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end());
  s.primitives = median(primitives);
  s.visited = median(visited);
  if (!args.save_dir.empty()) {
    std::string file = name;
    std::replace_if(
        file.begin(), file.end(), [](char c) { return !std::isalnum(c); }, '_');
    const std::string path = args.save_dir + "/" + file + ".png";
    if (!image.save(QString::fromStdString(path))) throw std::runtime_error("cannot write " + path);
  }
  return s;
}

int run(const Args& args) {
  const auto synth_start = Clock::now();
  const gui::RunData data = synthesize(args.events, args.seed);
  const double synth_ms = ms_since(synth_start);

  const int builds = args.quick ? 1 : 3;
  std::vector<double> build_ms;
  std::shared_ptr<const gui::TimelineIndex> index;
  for (int i = 0; i < builds; ++i) {
    index.reset();
    const auto start = Clock::now();
    index = gui::build_timeline_index(data);
    build_ms.push_back(ms_since(start));
  }

  const int height = args.height > 0 ? args.height : gui::timeline_height(index.get());
  QImage image(args.width, height, QImage::Format_ARGB32_Premultiplied);
  const QRect area = image.rect();
  const auto timeline = [&](QPainter& p, int64_t b, int64_t e, gui::RenderStats* stats) {
    gui::render_timeline(p, area, *index, b, e, stats);
  };

  gui::TimeAxis axis;
  axis.setBounds(index->begin_ns, index->end_ns);
  const auto repeat = [&](std::pair<int64_t, int64_t> view) {
    return std::vector<std::pair<int64_t, int64_t>>(static_cast<size_t>(args.frames), view);
  };
  const auto zoomed = [&](double factor) {
    axis.resetView();
    axis.zoomAt(0.5, factor);
    return std::make_pair(axis.viewBegin(), axis.viewEnd());
  };

  std::vector<Scenario> scenarios;
  scenarios.push_back(
      run_frames(args, "zoomed out", image, repeat({index->begin_ns, index->end_ns}), timeline));
  scenarios.push_back(run_frames(args, "10x", image, repeat(zoomed(10.0)), timeline));
  scenarios.push_back(run_frames(args, "1000x", image, repeat(zoomed(1000.0)), timeline));
  {
    zoomed(100.0);
    axis.setView(index->begin_ns, index->begin_ns + axis.viewSpan());
    std::vector<std::pair<int64_t, int64_t>> views;
    for (int i = 0; i < args.frames; ++i) {
      views.emplace_back(axis.viewBegin(), axis.viewEnd());
      axis.panBy(0.02);
    }
    scenarios.push_back(run_frames(args, "pan at 100x", image, views, timeline));
  }
  {
    axis.resetView();
    std::vector<std::pair<int64_t, int64_t>> views;
    for (int i = 0; i < std::max(args.frames, 2); ++i) {
      views.emplace_back(axis.viewBegin(), axis.viewEnd());
      axis.zoomAt(0.5, 1.5);
    }
    scenarios.push_back(run_frames(args, "zoom in 1.5x/frame", image, views, timeline));
  }
  {
    // The charts beneath the timeline, each its own widget of the timeline's width.
    gui::RunChart occupancy(gui::RunChart::Occupancy);
    gui::RunChart memory(gui::RunChart::DeviceMemory);
    // The charts take the run by shared pointer and read only its occupancy and summary.
    auto charts_run = std::make_shared<gui::RunData>();
    charts_run->occupancy = data.occupancy;
    charts_run->run = data.run;
    occupancy.setRun(charts_run);
    memory.setRun(charts_run);
    QImage chart_image(args.width, 260, QImage::Format_ARGB32_Premultiplied);
    const QRect top(0, 0, args.width, 130);
    const QRect bottom(0, 130, args.width, 130);
    const auto charts = [&](QPainter& p, int64_t b, int64_t e, gui::RenderStats* stats) {
      gui::RenderStats a;
      gui::RenderStats m;
      occupancy.paintChart(p, top, b, e, &a);
      memory.paintChart(p, bottom, b, e, &m);
      stats->primitives = a.primitives + m.primitives;
      stats->visited = a.visited + m.visited;
    };
    scenarios.push_back(run_frames(args, "charts zoomed out", chart_image,
                                   repeat({index->begin_ns, index->end_ns}), charts));
  }

  const double index_mib = static_cast<double>(index_bytes(*index)) / (1024.0 * 1024.0);
  if (args.json) {
    std::printf(
        "{\"events\": %lld, \"occupancy_samples\": %zu, \"width\": %d, \"height\": %d, "
        "\"frames\": %d, \"synthesize_ms\": %.3f, \"build_index_ms\": %.3f, "
        "\"build_index_ms_max\": %.3f, \"index_mib\": %.2f, \"scenarios\": [",
        static_cast<long long>(index->event_count), data.occupancy.size(), args.width, height,
        args.frames, synth_ms, median(build_ms),
        *std::max_element(build_ms.begin(), build_ms.end()), index_mib);
    for (size_t i = 0; i < scenarios.size(); ++i) {
      const Scenario& s = scenarios[i];
      std::printf(
          "%s{\"name\": \"%s\", \"frames\": %d, \"median_ms\": %.3f, \"max_ms\": %.3f, "
          "\"primitives\": %d, \"visited\": %lld}",
          i == 0 ? "" : ", ", s.name.c_str(), s.frames, s.median_ms, s.max_ms, s.primitives,
          static_cast<long long>(s.visited));
    }
    std::printf("]}\n");
    return 0;
  }
  std::printf("timeline: %lld events, %zu occupancy samples, %d x %d px, %d frames per scenario\n",
              static_cast<long long>(index->event_count), data.occupancy.size(), args.width, height,
              args.frames);
  std::printf("build_timeline_index: %.1f ms (median of %d), index %.1f MiB\n\n", median(build_ms),
              builds, index_mib);
  std::printf("%-20s %10s %10s %11s %10s\n", "scenario", "median ms", "max ms", "primitives",
              "visited");
  std::printf("%s\n", std::string(65, '-').c_str());
  for (const Scenario& s : scenarios) {
    std::printf("%-20s %10.2f %10.2f %11d %10lld\n", s.name.c_str(), s.median_ms, s.max_ms,
                s.primitives, static_cast<long long>(s.visited));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Offscreen unless told otherwise: the benchmark paints into images, never on a screen.
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");

  Args args;
  CLI::App cli{"offtune-gui-bench: frame times of the run view's timeline on a synthetic run"};
  cli.add_option("--events", args.events, "timeline events to synthesize (about)")
      ->check(CLI::Range(int64_t{16}, int64_t{100'000'000}));
  cli.add_option("--width", args.width, "image width in px")->check(CLI::Range(200, 16384));
  cli.add_option("--height", args.height, "image height in px (0: the timeline's own height)")
      ->check(CLI::Range(0, 16384));
  cli.add_option("--frames", args.frames, "frames per scenario")->check(CLI::Range(1, 100'000));
  cli.add_option("--seed", args.seed, "random seed of the synthetic run");
  cli.add_flag("--quick", args.quick, "20k events and 3 frames per scenario (a smoke run)");
  cli.add_flag("--json", args.json, "print one JSON object instead of a table");
  cli.add_option("--save", args.save_dir,
                 "write each scenario's last frame to DIR/<scenario>.png (to look at them)")
      ->check(CLI::ExistingDirectory);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : 2;
  }
  if (args.quick) {
    if (cli.count("--events") == 0) args.events = 20'000;
    if (cli.count("--frames") == 0) args.frames = 3;
  }

  QApplication app(argc, argv);
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
