# Project warning flags, applied per target with offtune_target_warnings(). libtorch's headers are
# included as SYSTEM (through the imported targets) so these flags judge only our code.
function(offtune_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wold-style-cast -Wcast-align -Woverloaded-virtual
                                           -Wno-unused-parameter)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 14)
    # GCC 12/13 at -O3 report std::string and std::fill code inlined from libstdc++ as overlapping
    # or overflowing (GCC bugs 105329, 105651, 107852): false positives that -Werror would turn into
    # build failures.
    target_compile_options(${target} PRIVATE -Wno-restrict -Wno-stringop-overflow)
    # They also report every member a C++20 designated initialiser leaves to its default member
    # initialiser ({.stream = 1} "misses" run, kind, ...), which is the point of writing one.
    target_compile_options(${target} PRIVATE -Wno-missing-field-initializers)
  endif()
  if(OFFTUNE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(OFFTUNE_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
