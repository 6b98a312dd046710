// kiln/export.h: which symbols the shared Kiln libraries export.
//
// libkiln_runtime.so and libkiln_compiler.so are built with -fvisibility=hidden: only
// declarations marked KILN_API (the public headers in include/kiln/) are visible to programs
// that link them, which keeps the libraries small and their ABI to what is documented.
// KILN_API expands to the default-visibility attribute on GCC and Clang and to nothing on
// other compilers; using it in a program has no effect beyond that.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif
