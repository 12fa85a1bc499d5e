#!/usr/bin/env bash
# Installs offtune from a build tree into a temporary prefix, builds tests/package/ against it with
# find_package(offtune), and runs its training loop.
#   run.sh BUILD_DIR TORCH_CMAKE_PREFIX VERSION [CMAKE_GENERATOR]
set -euo pipefail
build=$1 torch_prefix=$2 version=$3 generator=${4:-Ninja}
here=$(cd "$(dirname "$0")" && pwd)
work="$build/package-test"
rm -rf "$work/prefix" "$work/build"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
# Nothing from the source tree: only the prefix and torch.
config_dir=$(dirname "$(find "$work/prefix" -name offtuneConfig.cmake | head -1)")
test -f "$config_dir/offtuneConfig.cmake"
test -f "$config_dir/offtuneConfigVersion.cmake"
test -f "$work/prefix/include/offtune/offloader.hpp"
test -f "$work/prefix/include/offtune/version.hpp"
test -f "$work/prefix/include/offtune/profiler/store.hpp"
# Relocatable: the exported targets name no path of this machine's torch (the consumer's
# find_dependency(Torch) supplies it).
if grep -l "site-packages\|$torch_prefix" "$work"/prefix/lib*/cmake/offtune/offtuneTargets*.cmake; then
  echo "error: the installed targets hard-code this machine's torch" >&2
  exit 1
fi
launcher=()
if command -v ccache > /dev/null; then
  # Paths relative to the build tree, so that a fresh clone's consumer hits the cache.
  export CCACHE_BASEDIR="$build"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$here" -B "$work/build" -G "$generator" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
  -DCMAKE_PREFIX_PATH="$work/prefix;$torch_prefix" -DOFFTUNE_EXPECTED_VERSION="$version" \
  > "$work/configure.log" \
  || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
"$work/build/train_loop"
"$work/build/open_store"
