"""Kiln from Python: compile ONNX models into .kiln artifacts, run them, and look inside them.

    import kiln
    path = kiln.compile("model.onnx", "model.kiln", profiles=["x:N=1..64"], archs="none")
    model = kiln.load(path)
    y = model(x)                                  # a NumPy array (or DLPack tensor) in, NumPy out
    print(kiln.compile_stats(model).cache_hits)   # Thunder's inspection API, by name
    print(kiln.last_traces(model)[-1])            # the last stage's trace of the entry that ran

The work is done by Kiln's C++ libraries (libkiln_runtime and libkiln_compiler, in this package
beside the extension module kiln._kiln); the GIL is released while they compile or run. Every
error is a kiln.Error, whose .code is the kiln::Status code's name.

Thunder's names (thunder.compile_stats, last_traces, last_prologue_traces, cache_hits,
cache_misses) mean here what they mean there, for an artifact compiled ahead of time; the
python/README.md ("Thunder's inspection API") maps CompileStats field by field.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _kiln
from ._kiln import Error

__all__ = [
    "Error", "TensorSpec", "DimCheck", "Entry", "Trace", "TraceOp", "CompileEvent", "CompileReport", "CompileStats",
    "Model", "Context", "compile", "load", "last_compile_report", "compile_stats", "last_traces",
    "last_prologue_traces", "cache_hits", "cache_misses", "__version__",
]

__version__: str = _kiln.version

Dim = Union[int, str]
ArrayLike = Any  # a NumPy array, or any object with __dlpack__ (PyTorch, CuPy, JAX)
Inputs = Union[Sequence[ArrayLike], Mapping[str, ArrayLike]]


# --- model description --------------------------------------------------------------------------

@dataclass(frozen=True)
class TensorSpec:
    """A model input or output: its name, Kiln dtype name ("float32", "int64", ...) and shape,
    each dim a size or a symbol ("N", or an expression over symbols for an output)."""

    name: str
    dtype: str
    shape: Tuple[Dim, ...]


@dataclass(frozen=True)
class DimCheck:
    """One dim of an entry's input as its prologue checks it: `value` (a constant), or `symbol`
    within min..max, a multiple of divisor."""

    value: Optional[int] = None
    symbol: str = ""
    min: int = 1
    max: int = 2**63 - 1
    divisor: int = 1

    def accepts(self, size: int) -> bool:
        """Whether the check passes a dim of `size`."""
        if self.value is not None:
            return size == self.value
        return self.min <= size <= self.max and size % self.divisor == 0


@dataclass(frozen=True)
class TraceOp:
    """One op of a printed trace: its outputs, its op name and the whole line."""

    outputs: Tuple[str, ...]
    op: str
    text: str


_OP_LINE = re.compile(r"^(?:\[if (?:not )?[^\]]*\] )*(?P<outs>[^=#][^=]*?) = (?P<op>[\w.]+)\(")


@dataclass(frozen=True)
class Trace:
    """A compiler stage's printed trace (or an entry's prologue): str() prints it as
    `kiln inspect` does; `ops` are its op lines."""

    name: str
    text: str
    num_ops: int = -1

    @property
    def ops(self) -> List[TraceOp]:
        """The trace's ops in order, parsed from its lines ("y = Relu(x) # ...")."""
        ops = []
        for line in self.text.splitlines():
            m = _OP_LINE.match(line)
            if m:
                outs = tuple(o.strip() for o in m.group("outs").split(","))
                ops.append(TraceOp(outs, m.group("op"), line))
        return ops

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Entry:
    """One entry of an artifact: a shape specialisation with its prologue, its stage traces
    (Thunder's last_traces), its run-time dims, its inputs' dim checks (per input, per dim) and
    its instructions as (name, op, placements, kernel), placements as (backend, library) pairs:
    what runs the instruction on each backend ("cuda", "cpu"), the library named as the artifact
    records it ("cpu" for a CPU kernel, "generated", "onednn", "cublaslt", "cudnn", "control").
    `backend` is the backend whose plan it is ("cuda", "cpu"), or "" for every backend: an
    artifact compiled for GPU archs holds, where the CPU runs best with more activations folded
    into Conv, MatMul and Gemm epilogues, a "cuda" and a "cpu" entry with the same prologue."""

    index: int
    name: str
    backend: str
    prologue: Trace
    traces: Tuple[Trace, ...]
    runtime_dims: Tuple[str, ...]
    input_dims: Tuple[Tuple[DimCheck, ...], ...]
    instructions: Tuple[Tuple[str, str, Tuple[Tuple[str, str], ...], str], ...]
    arena_bytes: str


def _entry(index: int, d: Dict[str, Any]) -> Entry:
    def check(c: Any) -> DimCheck:
        if isinstance(c, int):
            return DimCheck(value=c)
        symbol, lo, hi, step = c
        return DimCheck(symbol=symbol, min=lo, max=hi, divisor=step)

    return Entry(
        index=index,
        name=d["name"],
        backend=d["backend"],
        prologue=Trace("prologue", d["prologue"]),
        traces=tuple(Trace(n, t, ops) for n, t, ops in d["stages"]),
        runtime_dims=tuple(d["runtime_dims"]),
        input_dims=tuple(tuple(check(c) for c in dims) for dims in d["input_dims"]),
        instructions=tuple((n, op, tuple(tuple(p) for p in placements), kernel)
                           for n, op, placements, kernel in d["instructions"]),
        arena_bytes=d["arena_bytes"],
    )


# --- statistics (Thunder's CompileStats) --------------------------------------------------------

@dataclass(frozen=True)
class CompileStats:
    """Thunder's CompileStats for a Kiln context, the fields that apply ahead of time (times are
    steady-clock nanoseconds; a phase the last call did not reach reads 0 for both ends):

    calls, cache_hits, cache_misses       every Run, the ones an entry's prologue passed, the others
    last_compile_reasons                  per entry name, why the last miss failed its prologue
    last_trace_host_start/stop            the whole last call
    last_trace_cache_start/stop           finding the entry (the prologues tried)
    last_prologue_execution_start/stop    the prologue that passed
    last_computation_execution_start/stop executing (CPU) or enqueueing (CUDA) the instructions
    and Kiln's own: last_gpu_ns (CUDA, -1 otherwise), entry_hits (per entry), last_entry,
    total_computation_ns, graph_hits/graph_misses, runtime_dim_binds, room_growths,
    last_host_to_device_bytes/last_device_to_host_bytes, last_control_transfers and
    last_cpu_region_ns (CUDA: what crossed between host and device, 0 on the CPU), last_fallbacks, last_instruction_ns and, on the CPU, last_instruction_bytes (with
    profile=True: the bytes each instruction read and wrote)."""

    calls: int
    cache_hits: int
    cache_misses: int
    last_compile_reasons: Dict[str, List[str]]
    last_trace_host_start: int
    last_trace_host_stop: int
    last_trace_cache_start: int
    last_trace_cache_stop: int
    last_prologue_execution_start: int
    last_prologue_execution_stop: int
    last_computation_execution_start: int
    last_computation_execution_stop: int
    last_gpu_ns: int
    entry_hits: Tuple[int, ...]
    last_entry: int
    total_computation_ns: int
    graph_hits: int
    graph_misses: int
    runtime_dim_binds: int
    room_growths: int
    last_host_to_device_bytes: int = 0
    last_device_to_host_bytes: int = 0
    last_control_transfers: int = 0
    last_cpu_region_ns: int = 0
    last_fallbacks: Tuple[Tuple[int, str], ...] = field(default=())
    last_instruction_ns: Tuple[int, ...] = field(default=())
    last_instruction_bytes: Tuple[int, ...] = field(default=())

    def last_trace_host_time(self) -> int:
        """ns of the whole last call."""
        return self.last_trace_host_stop - self.last_trace_host_start

    def last_trace_cache_time(self) -> int:
        """ns spent finding the entry (Thunder's last_cache_lookup_time)."""
        return self.last_trace_cache_stop - self.last_trace_cache_start

    last_cache_lookup_time = last_trace_cache_time

    def last_prologue_execution_time(self) -> int:
        """ns of the prologue that passed."""
        return self.last_prologue_execution_stop - self.last_prologue_execution_start

    def last_computation_execution_time(self) -> int:
        """ns executing (CPU) or enqueueing (CUDA) the instructions."""
        return self.last_computation_execution_stop - self.last_computation_execution_start


def _error(code: str, message: str) -> Error:
    """A kiln.Error raised by the Python layer, like those of the C++ libraries."""
    e = Error(f"{code}: {message}")
    e.code = code
    e.message = message
    return e


_MISS = re.compile(r"^entry (\d+) ")


def _stats(d: Dict[str, Any], entries: Sequence[Entry]) -> CompileStats:
    reasons: Dict[str, List[str]] = {}
    for line in d["last_miss_reasons"]:
        m = _MISS.match(line)
        k = int(m.group(1)) if m else -1
        name = entries[k].name if 0 <= k < len(entries) else ""
        reasons.setdefault(name, []).append(line)
    return CompileStats(
        calls=d["calls"], cache_hits=d["cache_hits"], cache_misses=d["cache_misses"], last_compile_reasons=reasons,
        last_trace_host_start=d["last_host_start"], last_trace_host_stop=d["last_host_stop"],
        last_trace_cache_start=d["last_cache_lookup_start"], last_trace_cache_stop=d["last_cache_lookup_stop"],
        last_prologue_execution_start=d["last_prologue_start"], last_prologue_execution_stop=d["last_prologue_stop"],
        last_computation_execution_start=d["last_computation_start"],
        last_computation_execution_stop=d["last_computation_stop"],
        last_gpu_ns=d["last_gpu_ns"], entry_hits=tuple(d["entry_hits"]), last_entry=d["last_entry"],
        total_computation_ns=d["total_computation_ns"], graph_hits=d["graph_hits"], graph_misses=d["graph_misses"],
        runtime_dim_binds=d["runtime_dim_binds"], room_growths=d["room_growths"],
        last_host_to_device_bytes=d["last_host_to_device_bytes"], last_device_to_host_bytes=d["last_device_to_host_bytes"],
        last_control_transfers=d["last_control_transfers"], last_cpu_region_ns=d["last_cpu_region_ns"],
        last_fallbacks=tuple(tuple(f) for f in d["last_fallbacks"]),
        last_instruction_ns=tuple(d["last_instruction_ns"]),
        last_instruction_bytes=tuple(d["last_instruction_bytes"]),
    )


# --- running ------------------------------------------------------------------------------------

class Context:
    """One execution context of a Model: its memory, its statistics, its device. Not for two
    threads at once (a call while another thread's runs raises kiln.Error FAILED_PRECONDITION):
    make one per thread. close() (or leaving a `with` block) frees it; later calls raise
    kiln.Error FAILED_PRECONDITION."""

    def __init__(self, model: "Model", device: str = "auto", cpu_threads: int = 0, cuda_graphs: bool = False,
                 profile: bool = False, device_ordinal: int = 0, max_loop_iterations: int = 10_000_000,
                 onednn: bool = True, warm_runs: int = 5) -> None:
        self.model = model
        self._ctx = _kiln.Context(model._model, device, device_ordinal, cpu_threads, cuda_graphs, profile,
                                  max_loop_iterations, onednn, warm_runs)

    def run(self, inputs: Inputs, out: Optional[Sequence[ArrayLike]] = None) -> List[Any]:
        """Runs the model: `inputs` in the model's input order or by name, NumPy arrays or any
        DLPack tensor (read in place: C-contiguous, on the CPU, or on the GPU for a CUDA
        context). Returns the outputs as new NumPy arrays, in the model's output order; or,
        given `out` (one writable C-contiguous array per output, of its dtype and shape: NumPy,
        or a CUDA tensor such as torch.empty(..., device="cuda") for a CUDA context), writes
        the outputs there, waits for them, and returns `out`'s arrays.
        Raises kiln.Error: INVALID_ARGUMENT for inputs no entry accepts (one line per entry),
        a wrong count, name or dtype, a non-contiguous array, an `out` array that does not fit."""
        if isinstance(inputs, Mapping) and not isinstance(inputs, dict):
            inputs = dict(inputs)  # any Mapping is by name (the extension reads dicts)
        return self._ctx.run(inputs, None if out is None else list(out))

    def warm(self, inputs: Inputs) -> None:
        """Prepares the context for inputs like `inputs` (as run() takes them) as their first run
        would (ExecutionContext::Warm in kiln/runtime.h), and on the CPU runs the model on them a
        few times: the next run with inputs of those dtypes and shapes then costs what every run
        does. Creating the context already warmed the entries whose input shapes are fixed; call
        this once per shape to serve for a model with symbolic shapes. It ends the last run's
        outputs (arrays run() returned are copies and stay valid). It counts no call in stats().
        Raises kiln.Error as run() does for inputs no entry accepts, and RESOURCE_EXHAUSTED over
        max_context_bytes."""
        if isinstance(inputs, Mapping) and not isinstance(inputs, dict):
            inputs = dict(inputs)
        self._ctx.warm(inputs)

    def bind_cache(self, caches: Mapping[str, str], capacity: int) -> None:
        """Keeps a decoder's KV cache in the caller's buffers from run to run, each run appending
        its rows in place (ExecutionContext::BindCache in kiln/runtime.h; onnxruntime-genai's
        past_present_share_buffer). `caches` maps each past input's name to its present output's
        name ({"past_key_values.0.key": "present.0.key", ...}); each buffer is a C-contiguous
        float32 array [batch, heads, capacity, head_dim]. Then run() takes, for each pair,
        buffer[:, :, :past] as the input and buffer[:, :, :past + seq] in `out` (`out` is then
        required), reads the past rows where they are and writes only the new ones. An empty
        mapping unbinds. Raises kiln.Error: INVALID_ARGUMENT for a name the model lacks, a capacity
        below 1, or a model whose presents are not computed by an Attention that reads the past
        (the message says what computes them); FAILED_PRECONDITION on a CUDA context."""
        self._ctx.bind_cache(dict(caches), capacity)

    def stats(self) -> CompileStats:
        """Thunder's CompileStats of this context's calls so far."""
        return _stats(self._ctx.stats(), self.model.entries)

    @property
    def device(self) -> str:
        """"cpu" or "cuda": the backend this context runs on."""
        return self._ctx.device

    @property
    def device_note(self) -> str:
        """The device in words, and why CUDA was not used where it was not."""
        return self._ctx.device_note

    @property
    def closed(self) -> bool:
        return self._ctx.closed

    def close(self) -> None:
        """Frees the context's memory now."""
        self._ctx.close()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Model:
    """A loaded artifact (kiln.load). Thread-safe; calling it runs on a context of its own per
    calling thread (CPU backend unless CUDA is present: device "auto")."""

    def __init__(self, model: _kiln.Model) -> None:
        self._model = model
        self._local = threading.local()
        self._entries: Optional[List[Entry]] = None

    @property
    def inputs(self) -> List[TensorSpec]:
        return [TensorSpec(n, d, tuple(s)) for n, d, s in self._model.inputs]

    @property
    def outputs(self) -> List[TensorSpec]:
        return [TensorSpec(n, d, tuple(s)) for n, d, s in self._model.outputs]

    @property
    def entries(self) -> List[Entry]:
        """The artifact's entries, in the order a call tries them."""
        if self._entries is None:
            self._entries = [_entry(i, d) for i, d in enumerate(self._model.entries)]
        return self._entries

    @property
    def precision(self) -> str:
        """"fp32", "fp16" or "bf16": kiln compile's --precision."""
        return self._model.precision

    @property
    def format_version(self) -> int:
        return self._model.format_version

    @property
    def provenance(self) -> Dict[str, Any]:
        """Where the artifact came from (docs/reproducibility.md): "kiln_version", "flags" (the
        options that shaped its bytes, in kiln compile syntax), "model_sha256" (the ONNX file's;
        "" for a traced model) and "libraries" ({name: version} the compiler was built against).
        Every field empty for an artifact written before Kiln recorded it."""
        p: Dict[str, Any] = self._model.provenance
        return p

    @property
    def weights_bytes(self) -> int:
        return self._model.weights_bytes

    def context(self, device: str = "auto", cpu_threads: int = 0, cuda_graphs: bool = False,
                profile: bool = False, onednn: bool = True, warm_runs: int = 5) -> Context:
        """A new execution context: device "auto" (CUDA when usable, else the CPU), "cpu" or
        "cuda"; cpu_threads 0 is one per core; onednn False runs every CPU op on Kiln's own
        kernels (CpuOptions::onednn: Conv, MaxPool, AveragePool, MatMul, Gemm, LSTM, GRU and RNN run on
        oneDNN by default where the runtime has it); warm_runs (ContextOptions::warm_runs, 0..100)
        caps the CPU warm-up's runs, 0 for a context that runs once. Raises kiln.Error
        (FAILED_PRECONDITION when "cuda" has no driver or device)."""
        return Context(self, device, cpu_threads, cuda_graphs, profile, onednn=onednn, warm_runs=warm_runs)

    def default_context(self) -> Context:
        """The calling thread's context, which calling the model uses (made at the first call)."""
        ctx: Optional[Context] = getattr(self._local, "ctx", None)
        if ctx is None:
            ctx = self.context()
            self._local.ctx = ctx
        return ctx

    def __call__(self, *args: ArrayLike, **kwargs: ArrayLike) -> Union[np.ndarray, List[np.ndarray]]:
        """Runs on the calling thread's default context: inputs positionally, or by name. One
        output comes back as an array, several as a list."""
        if args and kwargs:
            raise _error("INVALID_ARGUMENT", "pass the inputs either positionally or by name, not both")
        out = self.default_context().run(dict(kwargs) if kwargs else list(args))
        return out[0] if len(out) == 1 else out


def load(artifact: Union[str, "os.PathLike[str]", bytes], *, max_artifact_bytes: Optional[int] = None,
         max_context_bytes: Optional[int] = None, trusted_public_keys: Sequence[str] = (),
         weights_key: Union[None, bytes, Callable[[str], bytes]] = None) -> Model:
    """Loads a .kiln artifact from a path or from bytes (copied), checking both checksums and
    every field before trusting it. Raises kiln.Error: DATA_LOSS for a corrupt or truncated
    artifact (naming the offset), INCOMPATIBLE for a newer format, NOT_FOUND for a missing file,
    RESOURCE_EXHAUSTED over a limit.

    trusted_public_keys: Ed25519 public keys (PEM text, `openssl pkey -pubout`); when given, the
    artifact must carry a valid signature by one of them (`kiln sign`), checked before anything
    else (FAILED_PRECONDITION: unsigned or another signer; DATA_LOSS: changed after signing).
    weights_key: for encrypted weights (`kiln sign --encrypt-weights`), the 32-byte AES-256 key,
    or a callable that takes the artifact's key id (str) and returns it (docs/security.md)."""
    keys = [str(k) for k in trusted_public_keys]
    if isinstance(artifact, (bytes, bytearray, memoryview)):
        return Model(_kiln.Model.load_bytes(bytes(artifact), max_artifact_bytes, max_context_bytes, keys, weights_key))
    return Model(_kiln.Model.load_file(_path(artifact, "artifact"), max_artifact_bytes, max_context_bytes, keys,
                                       weights_key))


def _path(path: Union[str, "os.PathLike[str]"], what: str) -> str:
    """A file path for the C++ libraries, which would stop at a NUL."""
    p = os.fspath(path)
    if not isinstance(p, str) or "\0" in p:
        raise _error("INVALID_ARGUMENT", f"{what}: {p!r} is not a file path (a str without NUL)")
    return p


# --- compiling ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class CompileEvent:
    """One structured line of the compile log: the entry it is about ("" for the whole
    compile), its kind ("region", "cut", "unfused", "epilogue", "dropped", "fusion", "other")
    and the line itself."""

    entry: str
    kind: str
    text: str


_ENTRY_LINE = re.compile(r"^entry '(?P<entry>[^']*)'(?P<dropped> dropped)?:? ?(?P<rest>.*)$")


def _event(line: str) -> CompileEvent:
    m = _ENTRY_LINE.match(line)
    if not m:
        return CompileEvent("", "other", line)
    rest = m.group("rest")
    if m.group("dropped"):
        return CompileEvent(m.group("entry"), "dropped", rest)
    if rest.startswith("fusion: "):
        body = rest[len("fusion: "):]
        kind = ("region" if body.startswith("region ") else "cut" if body.startswith("cut ")
                else "unfused" if body.startswith("unfused ") else "epilogue" if " into the epilogue" in body
                else "fusion")
        return CompileEvent(m.group("entry"), kind, body)
    return CompileEvent(m.group("entry"), "other", rest)


@dataclass(frozen=True)
class CompileReport:
    """What kiln.compile made besides the artifact: its entries as (name, instructions, arena
    bytes, lower bound), times (ns), op and kernel counts, and the log, as lines and as events."""

    entries: Tuple[Tuple[str, int, str, int], ...]
    total_ns: int
    ops_before_fusion: int
    ops_after_fusion: int
    kernels: int
    compile_jobs: int
    cached_jobs: int
    nvrtc_ns: int
    log: Tuple[str, ...]

    @property
    def events(self) -> List[CompileEvent]:
        return [_event(line) for line in self.log]

    def of_kind(self, kind: str) -> List[CompileEvent]:
        """The events of one kind: "region", "cut", "unfused", "epilogue", "dropped", ..."""
        return [e for e in self.events if e.kind == kind]


_last_report = threading.local()


def last_compile_report() -> Optional[CompileReport]:
    """The report of the calling thread's last successful kiln.compile (None before one)."""
    return getattr(_last_report, "report", None)


def _archs(archs: Union[None, str, Sequence[str]]) -> Optional[List[str]]:
    if archs is None:
        return None
    names = [a for a in (archs.split(",") if isinstance(archs, str) else archs) if a]
    if names == ["none"] or not names:
        return []
    if not any(a.startswith("compute_") for a in names):  # PTX of the newest, as kiln compile --arch
        newest = max((int(a[3:]) for a in names if a.startswith("sm_") and a[3:].isdigit()), default=None)
        if newest is not None:
            names.append(f"compute_{newest}")
    return names


def compile(model: Any, output: Union[None, str, "os.PathLike[str]"] = None, *,
            shapes: Optional[Mapping[str, Sequence[Optional[int]]]] = None, profiles: Sequence[str] = (),
            precision: str = "fp32", archs: Union[None, str, Sequence[str]] = None,
            constant_inputs: Optional[Mapping[str, ArrayLike]] = None, fuse: bool = True, progress: bool = True,
            keep_fp32: Sequence[str] = (), io_precision: str = "declared", loop_scan_bound: int = 0,
            cpu_targets: Union[str, Sequence[str]] = "host", cpu_layout: str = "nhwc",
            log: Optional[Callable[[str], None]] = None) -> Union[str, bytes]:
    """Compiles an ONNX model (a path, its bytes, or an onnx.ModelProto) into a .kiln artifact,
    as `kiln compile` does: shapes fixes input dims ({"x": [1, 3, None, None]}, None or -1 keeping
    one symbolic), profiles adds one entry per specialisation ("x:N=1..64", "sr=16000"),
    precision "fp32" | "fp16" | "bf16", archs the NVRTC targets (None: Kiln's default, sm_80 to
    sm_90 and PTX, which need NVRTC: `pip install kiln[cuda]`, else kiln.Error FAILED_PRECONDITION
    saying so; "none" or []: a CPU-only artifact), constant_inputs binds inputs to arrays,
    cpu_targets the native CPU code ("host": this machine's family; "x86-64", "x86-64-v3",
    "x86-64-v4", "aarch64", several as a list or comma-separated; "none": the portable programs
    alone), cpu_layout the CPU plan's layout of 2-D Convs ("nhwc" for oneDNN's convolutions;
    "nchw" for a runtime without oneDNN, such as a selective one).
    progress prints the log to stderr as it goes; log receives each line. Returns the path
    written (output given) or the artifact's bytes; the structured log is
    kiln.last_compile_report(). Raises kiln.Error naming the option, node or file."""
    consts = {k: np.require(np.asarray(v), requirements="C") for k, v in (constant_inputs or {}).items()}  # 0-d stays 0-d
    dims: Dict[str, List[int]] = {}
    for name, shape in (shapes or {}).items():
        if isinstance(shape, (str, bytes)) or not all(d is None or (isinstance(d, (int, np.integer)) and
                                                                    not isinstance(d, bool)) for d in shape):
            raise _error("INVALID_ARGUMENT", f"shapes[{name!r}]: expected a list of ints (None or -1 keeps a dim "
                                             f"symbolic), got {shape!r}")
        dims[name] = [-1 if d is None else int(d) for d in shape]
    profile_list = [profiles] if isinstance(profiles, str) else list(profiles)  # one profile as a str
    keep_list = [keep_fp32] if isinstance(keep_fp32, str) else list(keep_fp32)
    start = time.monotonic()

    def on_line(line: str) -> None:
        if progress:
            print(f"[{time.monotonic() - start:7.3f}s] {line}", file=sys.stderr, flush=True)
        if log is not None:
            log(line)

    def on_kernels(done: int, total: int, cached: int) -> None:
        if progress and (done == total or done % 16 == 0):
            print(f"[{time.monotonic() - start:7.3f}s] NVRTC: {done}/{total} kernels ({cached} cached)", file=sys.stderr,
                  flush=True)

    def run(path: str) -> Tuple[bytes, Dict[str, Any]]:
        return _kiln.compile_onnx_file(path, dims, profile_list, consts, precision, keep_list, io_precision,
                                       _archs(archs), fuse, loop_scan_bound,
                                       cpu_targets if isinstance(cpu_targets, str) else ",".join(cpu_targets),
                                       cpu_layout, on_line, on_kernels)

    out = None if output is None else _path(output, "output")
    if out is not None and os.path.isdir(out):
        raise _error("INVALID_ARGUMENT", f"output: {out!r} is a directory; name the .kiln file to write")
    if isinstance(model, (str, os.PathLike)):
        artifact, report = run(_path(model, "model"))
    else:
        data = model.SerializeToString() if hasattr(model, "SerializeToString") else model
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise _error("INVALID_ARGUMENT",
                         f"model: expected a path, ONNX bytes or an onnx.ModelProto, got {type(model).__name__}")
        with tempfile.TemporaryDirectory(prefix="kiln-compile-") as tmp:
            path = os.path.join(tmp, "model.onnx")
            with open(path, "wb") as f:
                f.write(bytes(data))
            artifact, report = run(path)
    _last_report.report = CompileReport(
        entries=tuple(tuple(e) for e in report["entries"]),
        total_ns=report["total_ns"], ops_before_fusion=report["ops_before_fusion"],
        ops_after_fusion=report["ops_after_fusion"], kernels=report["kernels"], compile_jobs=report["compile_jobs"],
        cached_jobs=report["cached_jobs"], nvrtc_ns=report["nvrtc_ns"], log=tuple(report["log"]))
    if out is None:
        return artifact
    tmp_out = out + ".tmp"
    try:
        with open(tmp_out, "wb") as f:
            f.write(artifact)
        os.replace(tmp_out, out)  # readers never see a half-written artifact
    finally:
        if os.path.exists(tmp_out):
            os.remove(tmp_out)
    return out


# --- Thunder's inspection API -------------------------------------------------------------------

def _context(x: Union[Model, Context]) -> Context:
    if isinstance(x, Context):
        return x
    if isinstance(x, Model):
        return x.default_context()
    raise _error("INVALID_ARGUMENT", f"expected a kiln.Model or kiln.Context, got {type(x).__name__}")


def compile_stats(x: Union[Model, Context]) -> CompileStats:
    """Thunder's compile_stats: a context's CompileStats; for a Model, its calling thread's
    default context (the one model(...) uses)."""
    return _context(x).stats()


def cache_hits(x: Union[Model, Context]) -> int:
    """Thunder's cache_hits: calls an entry's prologue accepted."""
    return compile_stats(x).cache_hits


def cache_misses(x: Union[Model, Context]) -> int:
    """Thunder's cache_misses: calls no entry's prologue accepted."""
    return compile_stats(x).cache_misses


def _entry_of(x: Union[Model, Context], entry: Optional[int]) -> Entry:
    model = x if isinstance(x, Model) else _context(x).model
    if entry is None:  # the entry the last call ran, as Thunder's last_traces
        last = _context(x).stats().last_entry if isinstance(x, Context) or hasattr(x._local, "ctx") else -1
        entry = max(last, 0)
    if not 0 <= entry < len(model.entries):
        raise _error("INVALID_ARGUMENT", f"entry {entry}: the artifact has {len(model.entries)} entries")
    return model.entries[entry]


def last_traces(x: Union[Model, Context], entry: Optional[int] = None) -> List[Trace]:
    """Thunder's last_traces: the stage traces (import, canonical, ..., plan) of an entry: by
    default the one the last call ran (entry 0 before any call)."""
    return list(_entry_of(x, entry).traces)


def last_prologue_traces(x: Union[Model, Context], entry: Optional[int] = None) -> List[Trace]:
    """Thunder's last_prologue_traces: the entry's prologue, one check per line."""
    return [_entry_of(x, entry).prologue]
