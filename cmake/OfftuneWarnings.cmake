# Project warning flags, applied per target with offtune_target_warnings(). libtorch's headers are
# included as SYSTEM (through the imported targets) so these flags judge only our code.
function(offtune_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wold-style-cast -Wcast-align -Woverloaded-virtual
                                           -Wno-unused-parameter)
  if(OFFTUNE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(OFFTUNE_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
