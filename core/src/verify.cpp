#include "verify.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>

#include "disk_tier.hpp"

namespace offtune::detail {

Checksum checksum_of(const c10::Storage& storage, int64_t offset, int64_t bytes) {
  Checksum sum;
  if (storage.device().is_cpu()) {
    sum.value = checksum(static_cast<const char*>(storage.data()) + offset, bytes);
    return sum;
  }
  // No autograd (nothing here is saved for backward, so the saved-tensor hooks are not re-entered).
  c10::AutoGradMode no_grad(false);
  const auto opts = at::TensorOptions().device(storage.device());
  at::Tensor all = at::empty({0}, opts.dtype(at::kByte));
  all.set_(storage, offset, {bytes}, {1});
  // 4 Mi bytes a piece: two int64 temporaries of 32 MiB each.
  constexpr int64_t kPiece = int64_t{4} << 20;
  // Weights 2 * (i * golden) + 1 for byte i: odd, and spread over 64 bits.
  constexpr int64_t kGolden = static_cast<int64_t>(0x9E3779B97F4A7C15ULL);
  at::Tensor total = at::zeros({}, opts.dtype(at::kLong));
  for (int64_t from = 0; from < bytes; from += kPiece) {
    const int64_t n = std::min(kPiece, bytes - from);
    at::Tensor weights = at::arange(from, from + n, opts.dtype(at::kLong));
    weights.mul_(kGolden).mul_(2).add_(1);
    total.add_(all.narrow(0, from, n).to(at::kLong).mul_(weights).sum());
  }
  sum.device = std::move(total);
  return sum;
}

uint64_t value_of(const Checksum& sum) {
  if (!sum.device.defined()) return sum.value;
  return static_cast<uint64_t>(sum.device.item<int64_t>());
}

}  // namespace offtune::detail
