// GPU activity for the cuda backend's timeline: a collector that asks CUPTI for the memory copies
// and kernels that actually ran, with device timestamps, and turns them into TimelineEvents (copies
// with bytes, pinned-ness and stream; kernels as Compute with their names) on the engine's clock.
// The recorder's copy intervals on cuda are issue-to-completion as the host saw them; these are the
// intervals the copy engines and SMs were busy, which is what overlap is measured on.
//
// CUPTI is one per process and not always available, so the collector steps aside instead of
// failing a run: with no GPU or no driver, with another CUPTI client attached (Nsight Systems or
// Nsight Compute, torch's profiler), or when profiling is not permitted, start() leaves it inactive
// and status() says why. make_null_collector() is the same interface doing nothing, for
// `--collector nvtx-only` (profiling under Nsight, where NVTX carries offtune's side).
//
// This header includes no CUPTI header: the library links CUPTI privately.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "offtune/profiler/records.hpp"

namespace offtune::profiler {

struct CollectorOptions {
  // Size of each activity buffer handed to CUPTI, 1 MiB to 10 MiB. Larger buffers are delivered
  // less often; records that find no buffer are dropped (dropped_records()).
  int64_t buffer_bytes = int64_t{4} << 20;
  // CONCURRENT_KERNEL shows kernels as they overlapped; KERNEL serialises kernel execution (and
  // perturbs what is measured), so it is only the fallback when concurrent tracing is refused.
  bool concurrent_kernels = true;
};

// Throws std::invalid_argument naming the option and its valid range.
void validate(const CollectorOptions& options);

// A CUPTI call failed in a way that is not one of the step-aside conditions (a bug, or a CUPTI
// that misbehaves): what() names the call as written and the result.
class CuptiError : public std::runtime_error {
 public:
  CuptiError(const std::string& what, int result) : std::runtime_error(what), result_(result) {}
  int result() const noexcept { return result_; }

 private:
  int result_;
};

class ActivityCollector {
 public:
  virtual ~ActivityCollector() = default;

  // Starts collecting. Steps aside (active() stays false, status() says why, nothing thrown) when
  // CUPTI cannot collect here; throws CuptiError on any other CUPTI failure. No-op when active.
  virtual void start() = 0;
  // Stops collecting and forces out every buffer, incomplete records included: synchronise the
  // device first so that the last copies and kernels have their end times.
  virtual void stop() = 0;
  // Asks CUPTI for the buffers that are complete so far (records appear in take() afterwards).
  virtual void flush() = 0;
  // Events delivered so far, sorted by start time, and forgotten.
  virtual std::vector<TimelineEvent> take() = 0;
  // Records CUPTI dropped for want of buffer space since start().
  virtual int64_t dropped_records() const = 0;
  // One line: what it collects, or why it does not.
  virtual std::string status() const = 0;
  virtual bool active() const = 0;
};

// Throws std::invalid_argument for invalid options. Only one CUPTI collector can be active in a
// process (CUPTI's activity buffers are process-wide); a second one steps aside when started.
std::unique_ptr<ActivityCollector> make_cupti_collector(const CollectorOptions& options = {});

// Collects nothing; status() is "CUPTI collection off: <reason>".
std::unique_ptr<ActivityCollector> make_null_collector(std::string reason);

// ---- pieces, exposed for tests and offline use ----

struct ActivityParseStats {
  int64_t records = 0;        // records read
  int64_t events = 0;         // records turned into events
  int64_t skipped = 0;        // other copy directions (D2D, H2H, P2P) or no timestamps
  size_t unparsed_bytes = 0;  // left after a record of a kind this walk cannot size
};

// Turns a buffer of CUPTI activity records into events: MEMCPY records D2H/A2H as CopyD2H and
// H2D/H2A as CopyH2D (bytes, stream id, pinned when the host side is pinned memory, name "d2h" /
// "h2d"), KERNEL and CONCURRENT_KERNEL records as Compute (stream id, name the kernel's). Times are
// CUPTI's plus clock_offset_ns. Records without timestamps (start == end == 0) are skipped.
//
// Pure: it calls no CUPTI function, walking the buffer with the record sizes of the CUPTI headers
// offtune is built with (CUpti_ActivityMemcpy6, CUpti_ActivityKernel10). That is exact for buffers
// built against the same headers, such as the tests' synthetic ones, and why the live collector
// walks with cuptiActivityGetNextRecord instead: the CUPTI library at run time may be newer and
// write longer records (CUPTI 13.2 writes CUpti_ActivityKernel11, 8 bytes longer than 13.0's
// Kernel10, which it extends). cuptiActivityGetNextRecord itself cannot serve here: it needs the
// driver (without one, CUPTI 13.2 overflows its stack looking for libcuda.so.1).
std::vector<TimelineEvent> parse_activity_buffer(const uint8_t* buffer, size_t valid_bytes,
                                                 int64_t clock_offset_ns = 0,
                                                 ActivityParseStats* stats = nullptr);

// Why the collector steps aside for a CUPTI result code (a CUptiResult), or nullopt when that code
// is not a step-aside condition.
std::optional<std::string> cupti_step_aside_reason(int cupti_result);

// "CUPTI_ERROR_NOT_INITIALIZED" for 15, ... ("CUPTI_ERROR_<n>" for codes it does not know). Calls
// no CUPTI function, so it is safe where CUPTI cannot initialise.
std::string cupti_result_name(int cupti_result);

}  // namespace offtune::profiler
