// compiler/onnx/op_versions.h: which ONNX op versions Kiln runs as their spec says.
//
// An ONNX model names one opset per domain; each op then runs as its newest version whose
// since_version is <= that opset. The importer accepts opsets kMinOpset..kMaxOpset, but an
// op's version inside that range may still differ from the form Kiln's kernels implement
// (a new attribute, new semantics, a legacy form). One table (op_versions.cc) lists those
// versions, with what Kiln does about each, and CheckOpVersion refuses a node whose version
// Kiln does not implement, naming the node, the op, the version and what is missing:
//
//   KILN_RETURN_IF_ERROR(CheckOpVersion("Attention", 25, node.attrs, where));
//   // node 'att' (Attention): Attention-25 (opset 25) with attribute 'left_window_size' = 2:
//   //   sliding-window masks are not implemented
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kiln/status.h"
#include "runtime/attrs.h"

namespace kiln::onnx_import {

enum class VersionSupport : uint8_t {
  kSame,       // the version's changes do not reach Kiln (e.g. only dtypes Kiln rejects anyway)
  kRewritten,  // the importer rewrites this form to the one the kernels implement
  kRefused,    // not implemented: every node of this version is refused
  kRefusedIfAttr,  // refused only when the node sets `attr` (to a value other than `allowed`)
};

struct OpVersion {
  std::string_view op;
  int64_t since;  // the ONNX since_version; the row holds until the op's next row
  VersionSupport support;
  // kSame/kRewritten: why Kiln is right to accept it. kRefused*: what Kiln lacks (in the error).
  std::string_view note;
  std::string_view attr = {};
  std::optional<int64_t> allowed = std::nullopt;  // kRefusedIfAttr: the one accepted value
};

// The table, sorted by op then since. Exposed for tests.
std::span<const OpVersion> OpVersionTable();

// The rows in effect for `op` at `opset`: those with the greatest since <= opset (an op may
// have one row per guarded attribute). Empty when the table says nothing about the op there.
std::span<const OpVersion> OpVersionRows(std::string_view op, int64_t opset);

// kUnimplemented ("<where>: <op>-<since> (opset N) ...: <note>") when the op's version at
// `opset` is refused for this node's attributes; Ok otherwise.
Status CheckOpVersion(std::string_view op, int64_t opset, const AttrMap& attrs, const std::string& where);

}  // namespace kiln::onnx_import
