# Locates the CUDA-enabled libtorch that scripts/setup.sh installed from the PyPI `torch` wheel, through
# `torch.utils.cmake_prefix_path`, and the CUDA toolkit parts the project builds with.
#
# Why the wheel and not Debian's libtorch: Debian ships 1.13, CPU-only; the engine's CUDA backend must
# compile and link on every build. Why one CUDA runtime: libtorch_cuda loads the wheel's libcudart.so.13;
# anything of ours that calls the runtime links that same file (CUDA::cudart is pointed at it below),
# never a second copy.

set(_offtune_default_python "$ENV{HOME}/.cache/offtune/venv/bin/python")
if(DEFINED ENV{OFFTUNE_CACHE})
  set(_offtune_default_python "$ENV{OFFTUNE_CACHE}/venv/bin/python")
endif()
# Under pip (scikit-build-core builds python/pyproject.toml), the Python that runs pip: the package
# is built against the torch of the environment it is installed into.
set(_offtune_python_flags "")
if(SKBUILD AND DEFINED Python_EXECUTABLE)
  set(_offtune_default_python "${Python_EXECUTABLE}")
  # pip's build isolation hides the environment's packages through PYTHONPATH; isolated mode (-I)
  # ignores it, so torch is the environment's own (with --no-build-isolation it is anyway).
  set(_offtune_python_flags "-I")
endif()
set(OFFTUNE_PYTHON "${_offtune_default_python}" CACHE FILEPATH
    "Python interpreter whose `torch` package provides libtorch (scripts/setup.sh makes one)")

if(NOT EXISTS "${OFFTUNE_PYTHON}")
  message(FATAL_ERROR "offtune: no Python with torch at '${OFFTUNE_PYTHON}'. "
                      "Run scripts/setup.sh, or pass -DOFFTUNE_PYTHON=/path/to/python of an environment "
                      "where a CUDA build of torch is installed.")
endif()

execute_process(
  COMMAND "${OFFTUNE_PYTHON}" ${_offtune_python_flags} -c
          "import os, torch, torch.utils; print(torch.utils.cmake_prefix_path); print(torch.__version__); print(torch.version.cuda or ''); print(os.path.dirname(torch.__file__))"
  OUTPUT_VARIABLE _offtune_torch_info
  RESULT_VARIABLE _offtune_torch_rc
  ERROR_VARIABLE _offtune_torch_err
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _offtune_torch_rc EQUAL 0)
  message(FATAL_ERROR "offtune: '${OFFTUNE_PYTHON}' cannot import torch: ${_offtune_torch_err}\n"
                      "Run scripts/setup.sh or point -DOFFTUNE_PYTHON at an environment with torch.")
endif()
string(REPLACE "\n" ";" _offtune_torch_info "${_offtune_torch_info}")
list(GET _offtune_torch_info 0 _offtune_torch_prefix)
list(GET _offtune_torch_info 1 OFFTUNE_TORCH_VERSION)
list(GET _offtune_torch_info 2 OFFTUNE_TORCH_CUDA_VERSION)
list(GET _offtune_torch_info 3 OFFTUNE_TORCH_DIR)
if(OFFTUNE_TORCH_CUDA_VERSION STREQUAL "")
  message(FATAL_ERROR "offtune: torch ${OFFTUNE_TORCH_VERSION} at ${OFFTUNE_TORCH_DIR} is a CPU-only build. "
                      "The CUDA backend must compile and link on every build: install the CUDA wheel "
                      "(scripts/setup.sh does).")
endif()
list(APPEND CMAKE_PREFIX_PATH "${_offtune_torch_prefix}")

if(NOT DEFINED CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
# One CUDA runtime (and NVRTC, CUPTI) per process: the wheel's. Point the toolkit's imported targets
# at the wheel's copies of the shared libraries (same sonames), so that neither libtorch's CMake
# config nor ours links the toolkit's second copy. Headers still come from the toolkit.
get_filename_component(_offtune_site "${OFFTUNE_TORCH_DIR}" DIRECTORY)
string(REGEX MATCH "^[0-9]+" _offtune_wheel_cuda_major "${OFFTUNE_TORCH_CUDA_VERSION}")
foreach(_lib cudart nvrtc cupti)
  file(GLOB _offtune_wheel_lib "${_offtune_site}/nvidia/cu${_offtune_wheel_cuda_major}/lib/lib${_lib}.so.*"
                               "${_offtune_site}/nvidia/cuda_runtime/lib/lib${_lib}.so.*"
                               "${_offtune_site}/nvidia/cuda_nvrtc/lib/lib${_lib}.so.*"
                               "${_offtune_site}/nvidia/cuda_cupti/lib/lib${_lib}.so.*")
  list(FILTER _offtune_wheel_lib INCLUDE REGEX "lib${_lib}\\.so\\.[0-9]+$")
  if(_offtune_wheel_lib AND NOT DEFINED CACHE{CUDA_${_lib}_LIBRARY})
    list(GET _offtune_wheel_lib 0 _offtune_wheel_lib)
    set(CUDA_${_lib}_LIBRARY "${_offtune_wheel_lib}" CACHE FILEPATH "${_lib} from the torch wheel")
  endif()
endforeach()
find_package(CUDAToolkit REQUIRED)
if(NOT CUDAToolkit_VERSION_MAJOR STREQUAL _offtune_wheel_cuda_major)
  message(FATAL_ERROR "offtune: torch is built for CUDA ${OFFTUNE_TORCH_CUDA_VERSION} but the toolkit at "
                      "${CUDAToolkit_LIBRARY_ROOT} is ${CUDAToolkit_VERSION}. Pin a torch built for CUDA "
                      "${CUDAToolkit_VERSION_MAJOR} or set CUDAToolkit_ROOT to a CUDA "
                      "${_offtune_wheel_cuda_major} toolkit.")
endif()

# The CUDA parts the project builds with: runtime headers (core's cuda backend), CUPTI and NVTX3 (the
# profiler). Fail here, naming the fix, rather than in the middle of a build.
foreach(_offtune_cuda_target CUDA::toolkit CUDA::cupti CUDA::nvtx3)
  if(NOT TARGET ${_offtune_cuda_target})
    message(FATAL_ERROR "offtune: the CUDA toolkit at ${CUDAToolkit_LIBRARY_ROOT} lacks "
                        "${_offtune_cuda_target}. Install its runtime, CUPTI and NVTX components "
                        "(e.g. cuda-cudart-dev, cuda-cupti-dev, cuda-nvtx) or set CUDAToolkit_ROOT.")
  endif()
endforeach()

# libtorch's config probes the GPU (a try_run with nvcc) to pick -gencode flags for CUDA extensions.
# We compile no CUDA kernels and this machine may have no GPU: name the architectures instead.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0" CACHE STRING "CUDA architectures for libtorch's extension flags")
endif()
find_package(Torch REQUIRED)
message(STATUS "offtune: torch ${OFFTUNE_TORCH_VERSION} (CUDA ${OFFTUNE_TORCH_CUDA_VERSION}) at ${OFFTUNE_TORCH_DIR}")
# core/src/seam.cpp uses internal autograd APIs; it is verified (tests/test_seam.cpp) on this version.
set(OFFTUNE_TORCH_PINNED "2.15.0")
if(NOT OFFTUNE_TORCH_VERSION MATCHES "^${OFFTUNE_TORCH_PINNED}")
  message(WARNING "offtune: verified on torch ${OFFTUNE_TORCH_PINNED}; building against "
                  "${OFFTUNE_TORCH_VERSION}. The engine seam compiles on torch >= 2.4; run the test "
                  "suite before relying on it.")
endif()

set(OFFTUNE_CUDART CUDA::cudart)  # the wheel's runtime (see above)

# One imported target for everything in the project that needs libtorch: torch's own flags (C++ ABI,
# include dirs) without leaking its whole variable soup into every target.
if(NOT TARGET offtune_torch)
  add_library(offtune_torch INTERFACE)
  target_link_libraries(offtune_torch INTERFACE ${TORCH_LIBRARIES})
  target_compile_options(offtune_torch INTERFACE ${TORCH_CXX_FLAGS})
  # libtorch_cuda finds NCCL, cuDNN, cuSPARSELt, NVSHMEM, ... at run time through its own RUNPATH into
  # the wheel's nvidia/ packages; the linker needs the same directories to check those references
  # (else it may pick older copies from the system toolkit and fail).
  file(GLOB _offtune_nvidia_libdirs LIST_DIRECTORIES true "${_offtune_site}/nvidia/*/lib")
  foreach(_dir IN LISTS _offtune_nvidia_libdirs)
    target_link_options(offtune_torch INTERFACE "LINKER:-rpath-link,${_dir}")
  endforeach()
  add_library(offtune::torch ALIAS offtune_torch)
endif()
