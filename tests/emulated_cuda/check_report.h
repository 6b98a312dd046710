// How the emulated libraries' self-tests (cublaslt_check.cc, cudnn_check.cc) report: one line
// per case, "PASS name" or "FAIL name: detail", then a summary line, and exit status 1 when any
// case failed (ctest reads the status).
//
//   Report("cudnnCreate", st == CUDNN_STATUS_SUCCESS, StatusStr(st));
//   ...
//   return ReportSummary();
#pragma once

#include <string>

// Prints the case's line (flushed, so that it survives a crash in the next case) and counts
// a failure.
void Report(const std::string& name, bool ok, const std::string& detail = "");

// Prints "PASSED: 0 failure(s)" or "FAILED: N failure(s)"; returns the exit status, 0 or 1.
int ReportSummary();
