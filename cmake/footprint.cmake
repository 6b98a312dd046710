# The runtime's footprint (docs/edge.md, "Footprint"): which of its sources are built for size, the
# linker map of libkiln_runtime.so (scripts/runtime_size.py reads it: the size per part), and the
# size budget that every optimised build checks. Included by CMakeLists.txt before the runtime's
# libraries are made (the source properties must be set first).

# Built with -Os (Debug builds keep -O0, MinSizeRel builds build everything for size already;
# Makefiles do not rebuild an object when only these flags change: delete it), code whose speed is
# not a model's:
# - code that runs once per model, context, input shape or process: loading and verifying
#   artifacts (their signatures and encrypted weights too: libcrypto does the hashing and the
#   cipher), their fused programs and their native CPU code, memory plans, the op table,
#   statuses, binding KV caches, host memory allocation, the CPU's features, and the C API's
#   wrappers;
# - the CUDA backend (runtime/cuda/): host code that plans and launches, while the GPU, cuBLASLt
#   and cuDNN do the work and a launch costs what the driver takes;
# - the oneDNN glue (runtime/cpu/onednn/onednn.cc): it plans primitives at context creation and
#   calls them, while oneDNN does the work;
# - the standalone CPU kernels of the ops that the fusion stage turns into fused programs
#   (elementwise, unary, casts, reductions, softmax, normalisation, data movement, Resize and shape
#   ops: a fused artifact runs none of them; its regions run in fused/interpreter.cc, built for
#   speed), and of the rare, index and bookkeeping ops: bit ops, matrix ops (Det, Trilu, EyeLike),
#   legacy feature normalisations (LRN, LpNormalization, MVN), cumulative sums, scatters and
#   gathers by index, data-dependent selections (NonZero, Compress, Unique), the Einsum equation's
#   parser, and the signal ops (DFT, STFT, the windows, MelWeightMatrix: feature front-ends that
#   exports rarely carry; -Os made them 24 KB smaller);
# - the quantization ops' kernels (runtime/kernels/quantize.cc): in a fused artifact
#   QuantizeLinear and DequantizeLinear run in fused programs, and the CPU backend runs
#   QLinearConv and QLinearMatMul on oneDNN's int8 kernels; these loops are their fallbacks.
# Hot code stays at -O2: the prologue, the context and the CPU backend's run loop, the fused-program
# interpreter, xxHash, and the kernels a fused plan runs: GEMM, Conv, pooling, MatMul/Gemm,
# LSTM/GRU/RNN, attention, signal ops, TopK, vision ops, GridSample, Einsum.
file(GLOB KILN_CUDA_BACKEND_SRC CONFIGURE_DEPENDS runtime/cuda/*.cc)
set(KILN_RUNTIME_FOR_SIZE
  runtime/model.cc runtime/verify.cc runtime/fused/program.cc runtime/arena_plan.cc runtime/op_table.cc
  runtime/signature.cc runtime/weights_cipher.cc
  runtime/status.cc runtime/executor/loop_pairs.cc runtime/attrs.cc runtime/tensor.cc runtime/c_api.cc runtime/bound_cache.cc
  runtime/cpu/native/load.cc runtime/cpu/native/image.cc runtime/cpu/native/target.cc runtime/cpu/host_memory.cc
  runtime/cpu/arch/x86/cpu_isa.cc runtime/preflight.cc
  ${KILN_CUDA_BACKEND_SRC}
  runtime/cpu/onednn/onednn.cc
  runtime/kernels/elementwise.cc runtime/kernels/unary.cc runtime/kernels/cast.cc runtime/kernels/bitcast.cc
  runtime/kernels/reduce.cc runtime/kernels/softmax.cc runtime/kernels/normalization.cc
  runtime/kernels/data_movement.cc runtime/kernels/resize.cc runtime/kernels/center_crop_pad.cc
  runtime/kernels/reverse_sequence.cc runtime/kernels/shape_ops.cc
  runtime/kernels/math.cc runtime/kernels/matrix.cc runtime/kernels/feature_norm.cc runtime/kernels/cumulative.cc
  runtime/kernels/scatter.cc runtime/kernels/tensor_scatter.cc runtime/kernels/selection.cc
  runtime/kernels/einsum_equation.cc runtime/kernels/signal.cc runtime/kernels/quantize.cc)
set_source_files_properties(${KILN_RUNTIME_FOR_SIZE} PROPERTIES COMPILE_OPTIONS $<$<NOT:$<CONFIG:Debug,MinSizeRel>>:-Os>)

# kiln_runtime_footprint(): after kiln_add_libraries(kiln_runtime ...). The map of the shared
# library's link (none with link-time optimisation, whose map names only its own partitions), and
# the budget check after it: the library stripped (strip --strip-unneeded, as `cmake --install`
# then strip would leave it: installing copies it unchanged) must not pass
# KILN_RUNTIME_SIZE_BUDGET bytes. Only optimised builds without sanitizers are held to it.
# 2 MiB until issue 46, whose deployment checks (the preflight, kiln/check.h: about 19 KB) the
# runtime must carry for a service to ask it; 2 MiB + 64 KiB since. The selective runtime, the
# edge build, keeps its 300,000 bytes.
set(KILN_RUNTIME_SIZE_BUDGET 2162688 CACHE STRING
  "Most bytes the stripped libkiln_runtime.so may take; the build fails past it (0: no check)")
function(kiln_runtime_footprint)
  set(map "")
  if(NOT CMAKE_INTERPROCEDURAL_OPTIMIZATION)
    set(map ${CMAKE_BINARY_DIR}/libkiln_runtime.map)
    target_link_options(kiln_runtime_shared PRIVATE -Wl,-Map=${map})
  endif()
  if(NOT KILN_RUNTIME_SIZE_BUDGET OR KILN_SANITIZE OR KILN_BUILD_FUZZERS
     OR NOT CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo|MinSizeRel)$")
    return()
  endif()
  if(NOT CMAKE_STRIP)
    message(WARNING "Kiln: no strip program found: the size of libkiln_runtime.so is not checked")
    return()
  endif()
  add_custom_command(TARGET kiln_runtime_shared POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:kiln_runtime_shared> -DSTRIP=${CMAKE_STRIP}
      -DBUDGET=${KILN_RUNTIME_SIZE_BUDGET} -DMAP=${map} -P ${CMAKE_SOURCE_DIR}/cmake/check_runtime_size.cmake
    VERBATIM)
endfunction()
