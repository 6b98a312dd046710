// kiln/export.h: which symbols the shared Kiln libraries export.
//
// libkiln_runtime.so and libkiln_compiler.so are built with -fvisibility=hidden: only
// declarations marked KILN_API (the public headers in include/kiln/) are visible to programs
// that link them, which keeps the libraries small and their ABI to what is documented.
// KILN_API expands to the default-visibility attribute on GCC and Clang, and to nothing on
// other compilers; using it in a program has no effect beyond that. In C++ it is in the
// standard attribute syntax, so that it may follow [[nodiscard]] in a class head; in C
// (kiln/kiln.h, valid C99) in GNU syntax, as C before C23 has no [[...]] attributes.
#pragma once

#if (defined(__GNUC__) || defined(__clang__)) && defined(__cplusplus)
#define KILN_API [[gnu::visibility("default")]]
#elif defined(__GNUC__) || defined(__clang__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif
