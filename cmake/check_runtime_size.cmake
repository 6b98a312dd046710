# Fails the build when the stripped runtime library passes its size budget (cmake/footprint.cmake).
#   cmake -DLIB=<libkiln_runtime.so> -DSTRIP=<strip> -DBUDGET=<bytes> [-DMAP=<link map>] -P check_runtime_size.cmake
# It strips a copy with `strip --strip-unneeded` (what a package's install step does to a shared
# library) and prints the size against the budget on every link.
get_filename_component(name "${LIB}" NAME)
string(REGEX REPLACE "\\.so\\..*$" ".so" name "${name}")  # libkiln_runtime.so.0.1.0 -> libkiln_runtime.so
set(stripped "${LIB}.stripped")
execute_process(COMMAND "${STRIP}" --strip-unneeded -o "${stripped}" "${LIB}" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${STRIP} --strip-unneeded ${LIB} failed: ${err}")
endif()
file(SIZE "${stripped}" size)
math(EXPR left "${BUDGET} - ${size}")
if(left LESS 0)
  math(EXPR over "-${left}")
  set(parts "")
  if(MAP)
    set(parts " Its size per part: python3 scripts/runtime_size.py ${MAP} ${stripped} --objects")
  endif()
  message(FATAL_ERROR "${name}: ${size} bytes stripped (strip --strip-unneeded), ${over} bytes over its budget of "
                      "${BUDGET} (KILN_RUNTIME_SIZE_BUDGET).${parts}")
endif()
message(STATUS "${name}: ${size} bytes stripped (strip --strip-unneeded), budget ${BUDGET}: ${left} bytes left")
