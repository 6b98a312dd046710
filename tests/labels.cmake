# ctest labels of doctest cases. doctest_discover_tests finds the cases when ctest starts, so
# their properties are set here, in a file ctest includes after the discovered list
# (TEST_INCLUDE_FILES, tests/CMakeLists.txt). A name that matches no test is ignored by ctest.
#
# once: run once per test run, not again by scripts/test.sh's "other floating-point paths" tier
# (tests/README.md), because its result cannot depend on OpenBLAS's kernel or on Kiln's
# instruction-set-specific CPU kernels, and it is slow. Non-doctest tests get the label in
# tests/CMakeLists.txt.
set_tests_properties(
  # Generated kernels compiled for the host against the interpreted portable program and the
  # unfused elementwise CPU kernels: no GEMM, no convolution (about 140 s).
  "fused kernels of the real models and ONNX node cases: host-compiled CUDA == interpreted program == unfused ops"
  # NVRTC compiling CUDA source: no host arithmetic.
  "NVRTC: every test kernel compiles for the default archs, then comes from the cache"
  PROPERTIES LABELS once)

# The longest doctest cases start first (tests/CMakeLists.txt says why): their seconds in a CI run
# on 2026-12-03.
set_tests_properties(
  "fused kernels of the real models and ONNX node cases: host-compiled CUDA == interpreted program == unfused ops"
  PROPERTIES COST 77)
set_tests_properties("precision: every real model in fp16 and bf16 on the CPU backend agrees with its fp32 artifact"
  PROPERTIES COST 53)
set_tests_properties("oneDNN Conv: the direct reference and Kiln's kernel, every form, epilogue, order and thread count"
  "oneDNN Conv: float16 and bfloat16, against the reference and Kiln's kernel"
  "profiles on the PP-OCRv4 text detector: N=1, N=4 and a range, against the single-entry artifact"
  PROPERTIES COST 20)
