# `cmake --install <build> --prefix P` (docs/embedding.md, "Install and link"): the public headers,
# libkiln_runtime.so, kiln-run (the runtime tools), libkiln_tensor_files.a (kiln/tensor_files.h),
# libkiln_compiler.so and the kiln tool (when built with KILN_BUILD_COMPILER), the CMake package
# (find_package(Kiln): Kiln::runtime, Kiln::tensor_files, Kiln::compiler) and pkg-config files
# (kiln-runtime, kiln-compiler). Nothing installed refers to the source or build tree: the CMake
# files and the .pc files locate the prefix from their own path, so the tree may also be moved.
include(CMakePackageConfigHelpers)

set(KILN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Kiln)
set(KILN_INSTALLED kiln_runtime_shared)
install(TARGETS kiln-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(KILN_BUILD_COMPILER)
  list(APPEND KILN_INSTALLED kiln_compiler_shared)
  install(TARGETS kiln RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
else()
  set(KILN_SKIP_HEADER PATTERN trace.h EXCLUDE PATTERN compile.h EXCLUDE)  # the compiler's API
endif()
if(KILN_SELECTED_OPS)
  list(APPEND KILN_SKIP_HEADER PATTERN kiln.h EXCLUDE)  # a selective runtime has no C API
endif()
# Component "runtime": the shared libraries alone (`cmake --install <build> --component runtime`),
# as scripts/selective.sh installs a selective runtime to measure it.
install(TARGETS ${KILN_INSTALLED} EXPORT KilnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)
# kiln/tensor_files.h's static library (no pkg-config file: it is for CMake users, as the samples).
install(TARGETS kiln_tensor_files EXPORT KilnTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/kiln DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} PATTERN *.in EXCLUDE ${KILN_SKIP_HEADER})
install(FILES ${KILN_GENERATED_INCLUDE}/kiln/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)

install(EXPORT KilnTargets NAMESPACE Kiln:: DESTINATION ${KILN_CMAKE_DIR})
configure_package_config_file(cmake/KilnConfig.cmake.in ${CMAKE_BINARY_DIR}/package/KilnConfig.cmake
  INSTALL_DESTINATION ${KILN_CMAKE_DIR})
# Before 1.0 a minor release may change the API and ABI (SOVERSION is major.minor).
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/KilnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/package/KilnConfig.cmake ${CMAKE_BINARY_DIR}/package/KilnConfigVersion.cmake
  DESTINATION ${KILN_CMAKE_DIR})

# pkg-config: prefix is found from the .pc file's own folder (${pcfiledir}).
file(RELATIVE_PATH KILN_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" KILN_PC_TO_PREFIX "${KILN_PC_TO_PREFIX}")
foreach(target IN LISTS KILN_INSTALLED)
  get_target_property(KILN_PC_COMPONENT ${target} EXPORT_NAME)
  get_target_property(KILN_PC_LIB ${target} OUTPUT_NAME)
  set(KILN_PC_REQUIRES "")
  if(KILN_PC_COMPONENT STREQUAL "compiler")
    set(KILN_PC_REQUIRES "kiln-runtime = ${PROJECT_VERSION}")
  endif()
  configure_file(cmake/kiln.pc.in ${CMAKE_BINARY_DIR}/package/kiln-${KILN_PC_COMPONENT}.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/package/kiln-${KILN_PC_COMPONENT}.pc
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
