# `cmake --install`: offtune::core and offtune::profiler as a CMake package. A C++ training loop
# links the engine with
#   find_package(offtune 0.1 REQUIRED)       # with CMAKE_PREFIX_PATH naming the prefix and torch's
#   target_link_libraries(train PRIVATE offtune::core)
# tests/package/ is such a consumer, built and run against a temporary prefix by the suite.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(OFFTUNE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/offtune" CACHE STRING
    "Where offtuneConfig.cmake is installed, relative to the prefix")

# Static libraries linked into a consumer's shared objects as well as its executables.
set_target_properties(offtune_core offtune_profiler PROPERTIES POSITION_INDEPENDENT_CODE ON)
set_target_properties(offtune_core PROPERTIES EXPORT_NAME core)
set_target_properties(offtune_profiler PROPERTIES EXPORT_NAME profiler)

# offtune::torch is not installed: offtuneConfig.cmake defines offtune::libtorch from the
# consumer's torch, and the installed targets link that.
install(TARGETS offtune_core offtune_profiler
        EXPORT offtuneTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/include/ ${PROJECT_SOURCE_DIR}/profiler/include/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
install(FILES ${PROJECT_BINARY_DIR}/core/include/offtune/version.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/offtune)
install(EXPORT offtuneTargets NAMESPACE offtune:: DESTINATION ${OFFTUNE_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/offtuneConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/offtuneConfig.cmake
                              INSTALL_DESTINATION ${OFFTUNE_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/offtuneConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/offtuneConfig.cmake
              ${PROJECT_BINARY_DIR}/offtuneConfigVersion.cmake
        DESTINATION ${OFFTUNE_INSTALL_CMAKEDIR})
