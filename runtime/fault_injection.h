// Fault injection (docs/testing.md, "Fault injection"): each place where the runtime acquires a
// resource that can be refused (memory, a file, its mapping, a thread, a shared library, a
// library call) asks Inject(site) first, and acts as if refused when it says so. A build with
// -DKILN_FAULT_INJECTION=ON (the sanitizer tier's) can make the Nth request of the process fail,
// so that a test runs every failure path in turn and checks its Status; every other build
// compiles the question to `false`.
//
//   fault::FailAt(n);                 // the request numbered n from now fails
//   Status st = ...Load, Create, Run...;
//   fault::FailAt(-1);                // none fails
//   fault::Stop();                    // and none is counted: the test is done
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::fault {

#if KILN_FAULT_INJECTION
// Counts a request at `site` (a static string naming the resource: "host memory", "open") and
// returns true when it is the one FailAt chose. Thread-safe. Counts nothing (and allocates
// nothing) until the process first calls FailAt.
bool Inject(const char* site);
// From now: fail request number `n` (0 is the next one), or none with -1; the count restarts.
void FailAt(int64_t n);
// From now: count nothing again (until the next FailAt).
void Stop();
// Requests since the last FailAt, and the site of each, in order (for the test's report).
int64_t Requests();
std::vector<std::string> RequestSites();
#else
constexpr bool Inject(const char*) { return false; }
#endif

}  // namespace kiln::fault

// A library's entry point held in a table of function pointers (the CUDA driver's, cuBLASLt's,
// cuDNN's: runtime/cuda/), made refusable: in a fault-injection build `table.field` becomes a
// function that asks Inject(site) and returns `error` when told to, else calls the library's.
// Once per table field in a process (the tables are loaded once). Nothing in other builds.
#if KILN_FAULT_INJECTION
#define KILN_FAULT_REFUSABLE(table, field, site, error)                                             \
  do {                                                                                              \
    static decltype((table).field) kiln_fault_real = nullptr;                                       \
    kiln_fault_real = (table).field;                                                                \
    (table).field = [](auto... a) { return ::kiln::fault::Inject(site) ? (error) : kiln_fault_real(a...); }; \
  } while (0)
#else
#define KILN_FAULT_REFUSABLE(table, field, site, error) \
  do {                                                  \
  } while (0)
#endif

namespace kiln::fault {

}  // namespace kiln::fault
