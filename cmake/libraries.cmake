# kiln_add_libraries(<name> <export name>): the two libraries made from the OBJECT library
# <name>_objects, whose sources are compiled once, with hidden visibility:
#   <name>         static, every internal symbol reachable: the kiln tool, the tests, the
#                  benchmarks and the fuzzers, which use the internal headers.
#   <name>_shared  lib<name>.so, the installed library, also Kiln::<export name> in this build:
#                  it exports only what the public headers mark KILN_API (kiln/export.h) in
#                  namespace kiln, and C functions named kiln_* (cmake/exports.map).
# <name>_objects' PUBLIC usage requirements reach the static library's users only; the shared
# library's users get include/ and nothing else.
include(GNUInstallDirs)

function(kiln_add_libraries name export_name)
  # One section per function and datum: the shared library's link drops what nothing reaches.
  target_compile_options(${name}_objects PRIVATE -ffunction-sections -fdata-sections)
  set_target_properties(${name}_objects PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)

  add_library(${name} STATIC)
  target_link_libraries(${name} PUBLIC ${name}_objects)

  add_library(${name}_shared SHARED)
  add_library(Kiln::${export_name} ALIAS ${name}_shared)
  target_link_libraries(${name}_shared PRIVATE ${name}_objects)
  target_compile_features(${name}_shared PUBLIC cxx_std_20)
  target_include_directories(${name}_shared PUBLIC
    $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<BUILD_INTERFACE:${KILN_GENERATED_INCLUDE}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  set(map ${CMAKE_SOURCE_DIR}/cmake/exports.map)
  target_link_options(${name}_shared PRIVATE -Wl,--gc-sections -Wl,--version-script=${map})
  # SOVERSION major.minor: before 1.0 a minor release may change the ABI.
  set_target_properties(${name}_shared PROPERTIES OUTPUT_NAME ${name} EXPORT_NAME ${export_name}
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
    LINK_DEPENDS ${map})
endfunction()
