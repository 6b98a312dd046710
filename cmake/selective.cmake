# A selective runtime: the loader, the prologue, the executor, the CPU backend, the fused-program
# interpreter (its baseline build only) and the CPU kernels of the ops a file lists, nothing else:
# no compiler, no CUDA backend, no oneDNN, no OpenBLAS (Kiln's portable GEMM serves), no C API
# (include/kiln/kiln.h is not installed). For size-constrained and sandboxed deployments, as
# ExecuTorch's selective build. Included by CMakeLists.txt when KILN_SELECTED_OPS is set, before
# the runtime's sources are listed.
#
#   kiln inspect --ops vad.kiln cls.kiln > ops.txt     # any kiln or kiln-run with every kernel
#   cmake -S . -B build-selective -DKILN_SELECTED_OPS=$PWD/ops.txt -DCMAKE_BUILD_TYPE=MinSizeRel \
#     -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=ON
#   cmake --build build-selective --target kiln_runtime_shared
#   cmake --install build-selective --component runtime --prefix /opt/kiln
#
# KILN_SELECTED_OPS names a file of op types, one per line ('#' starts a comment). A selective
# runtime refuses, at Model::Load, an artifact with an instruction whose kernel it lacks
# (UNIMPLEMENTED: "entry 0 instruction 3 'name' op 'Pad' has no CPU kernel in this runtime",
# runtime/verify.cc). The file may also name kiln.LoopBegin and kiln.LoopEnd, a run-time Loop's
# control, which the executor runs (runtime/executor/loop.h): both, or neither, and then the runtime
# leaves that control out (about 8 KB) and refuses at load an artifact that has it. scripts/selective.sh
# builds and checks one in CI.
#
# It reads each kernel family's table (runtime/kernels/*.cc: `constexpr KernelDef kKernels[] =
# {{"Op", ...}, ...};` and the accessor that returns KeptKernels<kKernels>()) to find the family
# of each listed op, then:
#   - writes generated/selective/selected_ops.inc (the ops, and whether the loop control is kept,
#     for runtime/kernels/selective.h) and selected_families.inc (the accessors of the families that
#     hold them, for registry.cc);
#   - sets KILN_SELECTIVE_DROPPED_SOURCES: the family files that hold none of them, the
#     interpreter's AVX2 and AVX-512 builds, the C API and the CUDA backend's claims, which
#     CMakeLists.txt leaves out.
# An op that no family has fails the configuration, naming it.

if(NOT EXISTS "${KILN_SELECTED_OPS}")
  message(FATAL_ERROR "KILN_SELECTED_OPS: no file ${KILN_SELECTED_OPS} (one op type per line, as "
                      "`kiln inspect --ops ARTIFACT...` prints)")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${KILN_SELECTED_OPS}")
file(STRINGS "${KILN_SELECTED_OPS}" kiln_lines)
set(kiln_ops)
foreach(line IN LISTS kiln_lines)
  string(REGEX REPLACE "#.*" "" line "${line}")
  string(STRIP "${line}" line)
  if(line)
    list(APPEND kiln_ops "${line}")
  endif()
endforeach()
list(REMOVE_DUPLICATES kiln_ops)
list(SORT kiln_ops)
# A run-time Loop's control: the executor's, not a kernel's.
set(kiln_loop_control)
foreach(op kiln.LoopBegin kiln.LoopEnd)
  if(op IN_LIST kiln_ops)
    list(APPEND kiln_loop_control ${op})
    list(REMOVE_ITEM kiln_ops ${op})
  endif()
endforeach()
list(LENGTH kiln_loop_control kiln_loop_ops)
if(kiln_loop_ops EQUAL 1)
  message(FATAL_ERROR "KILN_SELECTED_OPS: ${KILN_SELECTED_OPS} lists ${kiln_loop_control} alone: a run-time Loop's "
                      "control is kiln.LoopBegin and kiln.LoopEnd, both or neither")
endif()
if(NOT kiln_ops)
  message(FATAL_ERROR "KILN_SELECTED_OPS: ${KILN_SELECTED_OPS} lists no op with a CPU kernel")
endif()

# Each family's ops and accessor, from its source.
file(GLOB kiln_family_files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/runtime/kernels/*.cc)
# Not in a selective runtime whatever the ops: the interpreter's AVX2 and AVX-512 builds, the C API
# (its users link the default runtime), and the CUDA backend's claims (runtime/backend_registry.cc).
# Nor libcrypto (CMakeLists.txt, KILN_WITH_CRYPTO): it verifies no signature and decrypts no weights.
set(KILN_SELECTIVE_DROPPED_SOURCES
  ${CMAKE_SOURCE_DIR}/runtime/fused/interpreter_avx2.cc ${CMAKE_SOURCE_DIR}/runtime/fused/interpreter_avx512.cc
  ${CMAKE_SOURCE_DIR}/runtime/c_api.cc ${CMAKE_SOURCE_DIR}/runtime/cuda/claims.cc)
set(kiln_accessors)
set(kiln_found)
foreach(file IN LISTS kiln_family_files)
  file(READ "${file}" text)
  string(REGEX MATCH "std::span<const KernelDef> ([A-Za-z0-9_]+)\\(\\) { return KeptKernels<kKernels>\\(\\); }"
    accessor "${text}")
  if(NOT accessor)
    continue()  # not a family: a helper (GEMM, thread pool, widening), kept whole, dropped by the linker if unused
  endif()
  set(accessor "${CMAKE_MATCH_1}")
  string(FIND "${text}" "constexpr KernelDef kKernels[] = {" begin)
  if(begin EQUAL -1)
    message(FATAL_ERROR "${file}: ${accessor} returns KeptKernels<kKernels>() but no `constexpr KernelDef kKernels[] = {` was found")
  endif()
  string(SUBSTRING "${text}" ${begin} -1 table)
  string(FIND "${table}" "};" end)
  string(SUBSTRING "${table}" 0 ${end} table)
  string(REGEX MATCHALL "{\"[A-Za-z0-9_.]+\"," rows "${table}")
  set(kept FALSE)
  foreach(row IN LISTS rows)
    string(REGEX REPLACE "{\"(.*)\"," "\\1" op "${row}")
    if(op IN_LIST kiln_ops)
      set(kept TRUE)
      list(APPEND kiln_found "${op}")
    endif()
  endforeach()
  if(kept)
    list(APPEND kiln_accessors "${accessor}")
  else()
    list(APPEND KILN_SELECTIVE_DROPPED_SOURCES "${file}")
  endif()
endforeach()

# Compiled without exceptions, unwind tables or RTTI (docs/edge.md, "A selective runtime", says
# what a failure does then): the runtime reports every error as a Status, catches no exception
# (runtime/kernels/thread_pool.cc starts its threads with pthread_create, which returns an error
# code) and uses no dynamic_cast or typeid outside the oneDNN glue, which a selective runtime leaves out.
# -fno-plt calls libc and libstdc++ through the GOT, with no PLT stubs (1.7 KB): their symbols are
# then bound when the library loads rather than at their first call. A MinSizeRel build, as
# scripts/selective.sh makes, is -Oz rather than -Os: GCC's -Oz saves 1.7 KB of code, and the
# models ran as fast (kiln-run bench, 2026-12-04).
set(KILN_SELECTIVE_COMPILE_OPTIONS -fno-exceptions -fno-asynchronous-unwind-tables -fno-unwind-tables -fno-rtti -fno-plt
  $<$<CONFIG:MinSizeRel>:-Oz>)

set(kiln_missing ${kiln_ops})
list(REMOVE_ITEM kiln_missing ${kiln_found})
if(kiln_missing)
  list(JOIN kiln_missing ", " kiln_missing)
  message(FATAL_ERROR "KILN_SELECTED_OPS (${KILN_SELECTED_OPS}): no CPU kernel in runtime/kernels/ for ${kiln_missing}")
endif()

set(kiln_ops_inc "constexpr std::string_view kSelectedOps[] = {\n")
foreach(op IN LISTS kiln_ops)
  string(APPEND kiln_ops_inc "    \"${op}\",\n")
endforeach()
string(APPEND kiln_ops_inc "};\n")
# ExecutionContext::BindCache needs the Attention kernel: without it the runtime leaves BindCache
# out (runtime/kernels/selective.h, KILN_KEEPS_BOUND_CACHE), as it leaves out the C API.
if("Attention" IN_LIST kiln_ops)
  string(APPEND kiln_ops_inc "#define KILN_SELECTED_ATTENTION 1\n")
else()
  string(APPEND kiln_ops_inc "#define KILN_SELECTED_ATTENTION 0\n")
endif()
if(kiln_loop_control)
  string(APPEND kiln_ops_inc "constexpr bool kSelectedLoopControl = true;\n")
else()
  string(APPEND kiln_ops_inc "constexpr bool kSelectedLoopControl = false;\n")
endif()
list(JOIN kiln_accessors "(), " kiln_families_inc)
# file(CONFIGURE) writes only when the text changes, so a reconfigure rebuilds nothing.
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/generated/selective/selected_ops.inc
  CONTENT "// Generated by cmake/selective.cmake from ${KILN_SELECTED_OPS}.\n${kiln_ops_inc}" @ONLY)
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/generated/selective/selected_families.inc
  CONTENT "// Generated by cmake/selective.cmake from ${KILN_SELECTED_OPS}.\n${kiln_families_inc}(),\n" @ONLY)
list(LENGTH kiln_ops kiln_num_ops)
list(JOIN kiln_ops " " kiln_ops_text)
list(JOIN kiln_accessors " " kiln_accessors_text)
if(kiln_loop_control)
  set(kiln_loop_text "with")
else()
  set(kiln_loop_text "without")
endif()
message(STATUS "Kiln: selective runtime: ${kiln_num_ops} ops (${kiln_ops_text}) from the families ${kiln_accessors_text}, "
               "${kiln_loop_text} a run-time Loop's control")
