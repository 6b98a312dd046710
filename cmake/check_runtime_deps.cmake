# Fails the build if the runtime library references ONNX, protobuf, NVRTC or compiler symbols,
# or links the CUDA driver, cuBLASLt or cuDNN (the CUDA backend opens them with dlopen).
execute_process(COMMAND nm -C --undefined-only ${LIB} OUTPUT_VARIABLE undefined RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIB}")
endif()
foreach(pattern "onnx::" "google::protobuf" "nvrtc" "kiln::compiler")
  string(FIND "${undefined}" "${pattern}" pos)
  if(NOT pos EQUAL -1)
    message(FATAL_ERROR "kiln_runtime must not depend on '${pattern}' (found in ${LIB})")
  endif()
endforeach()
# CUDA libraries are dlopen'ed: none of their C entry points may be an undefined symbol.
foreach(symbol cuInit cuLaunchKernel cuMemAlloc_v2 cublasLtCreate cublasLtMatmul cudnnCreate cudnnConvolutionForward)
  string(FIND "${undefined}" " U ${symbol}\n" pos)
  if(NOT pos EQUAL -1)
    message(FATAL_ERROR "kiln_runtime must not link '${symbol}' (found in ${LIB}); open the library with dlopen")
  endif()
endforeach()
