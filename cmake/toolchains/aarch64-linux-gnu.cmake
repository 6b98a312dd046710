# Cross-compiling for 64-bit Arm Linux (edge boards: Jetson, Raspberry Pi 4/5, Graviton) with
# Debian's cross toolchain (apt install g++-aarch64-linux-gnu), e.g. the runtime alone:
#
#   cmake -S . -B build/aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
#     -DKILN_BUILD_COMPILER=OFF -DKILN_WITH_BLAS=OFF -DKILN_WITH_ONEDNN=OFF
#
# scripts/aarch64.sh does this and runs the test programs under qemu-user. Target libraries come
# from the toolchain's sysroot (/usr/aarch64-linux-gnu) and Debian's multiarch folders
# (/usr/lib/aarch64-linux-gnu, for packages installed as PKG:arm64); header-only and
# architecture-independent headers (flatbuffers, xxhash.h) and host programs (flatc) come from
# the host. CUDA is off: the host's toolkit is x86-64 (build the CUDA backend on the board
# itself: docs/edge.md, "Jetson").
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)

set(CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit ON)
# try_run and add_test run target programs through qemu-user (apt install qemu-user).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
