// Every CUDA runtime call in offtune goes through one of these macros: OFFTUNE_CUDA_CHECK throws an
// EngineError naming the call, OFFTUNE_CUDA_WARN logs it and continues (for cleanup paths).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace offtune::detail {
[[noreturn]] void throw_cuda_error(const char* call, cudaError_t err, const char* file, int line);
void warn_cuda_error(const char* call, cudaError_t err, const char* file, int line);
}  // namespace offtune::detail

#define OFFTUNE_CUDA_CHECK(call)                                                    \
  do {                                                                              \
    const cudaError_t offtune_err_ = (call);                                        \
    if (offtune_err_ != cudaSuccess)                                                \
      ::offtune::detail::throw_cuda_error(#call, offtune_err_, __FILE__, __LINE__); \
  } while (0)

#define OFFTUNE_CUDA_WARN(call)                                                    \
  do {                                                                             \
    const cudaError_t offtune_err_ = (call);                                       \
    if (offtune_err_ != cudaSuccess)                                               \
      ::offtune::detail::warn_cuda_error(#call, offtune_err_, __FILE__, __LINE__); \
  } while (0)
