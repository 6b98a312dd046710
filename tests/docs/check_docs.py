#!/usr/bin/env python3
"""Keeps the documentation true to the tree: every repository path, CLI flag and API name that the
README, docs/*.md, python/README.md, serving/triton/README.md or benchmarks/README.md quotes in
backticks must exist.

  - paths (`runtime/backend.h`, `compiler/ops/meta_*.cc`, `samples/<name>/`) in the source tree;
    a bare file name (`context.cc`) somewhere in it; relative links ([x](../schema/VERSIONS.md)) too;
  - flags of `kiln <sub>` and `kiln-run <sub>` in that subcommand's --help output (the built tools
    are run); flags after a repository script (`scripts/test.sh --no-sanitizers`) in that script;
    a bare flag (`--keep-fp32`) in some --help output or some script of the tree;
  - C++ names (`CpuOptions::threads`, `Stats::last_fallbacks`): the type in the public
    headers include/kiln/*.h (else in the sources) and the member inside its body;
  - `KILN_*` and `kiln_*` names (macros, environment variables, CMake options, C API) somewhere in
    the tree; `kiln.<name>` (the Python package, Kiln's internal ops) in python/kiln or the sources.

It also keeps the README a front page (at most 200 lines, none over 200 characters) and the pages
free of dates and commit hashes (those belong in benchmarks/results/, which pages may link to).

usage: check_docs.py --root SRC --kiln BUILD/kiln [--kiln-run BUILD/kiln-run]
Standard library only. Exit status: 0 all true, 1 a problem (each printed), 2 bad command line.
"""
import argparse
import fnmatch
import glob
import os
import re
import subprocess
import sys

PAGES = ["README.md", "docs/*.md", "python/README.md", "serving/triton/README.md", "benchmarks/README.md"]
README_MAX_LINES = 200
README_MAX_CHARS = 200
# Extensions of files whose bare name (no folder) is checked to exist somewhere in the tree.
SOURCE_EXT = (".h", ".cc", ".c", ".cu", ".cuh", ".inc", ".py", ".pyi", ".sh", ".fbs", ".cmake", ".in")
# Where a span names no repository path: build outputs, the install tree, other machines.
NOT_TREE = ("build/", "~/", "/", "$", "../shared", "<prefix>", "lib/", "bin/", "kiln-gpu/", "models/")
# Flags of programs that are not Kiln's (cmake, tritonserver, pip, mypy, ctest): not checked.
FOREIGN = {"cmake", "ctest", "tritonserver", "pip", "python", "python3", "mypy", "g++", "curl", "tar",
           "perf_analyzer", "sudo", "apt", "apt-get", "pkg-config", "nvidia-smi", "git", "env", "sh",
           "numpy.allclose", "np.allclose", "qemu-aarch64", "gdb"}
# Tokens that run the next token (`bash scripts/test.sh`, `nice -n 19 ...`).
LAUNCHERS = {"bash", "nice", "exec", "time", "build/venv/bin/python", "python3", "python"}
SKIP_DIRS = {".git", "__pycache__", "node_modules"}
# Files the pages name that belong to other projects (Triton's C API header, its Python backend's
# model file).
EXTERNAL_FILES = {"tritonbackend.h", "model.py"}


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


class Tree:
    """The source tree: its files (build folders excluded) and their text, read once."""

    def __init__(self, root):
        self.root = root
        self.files = []  # relative paths
        for dirpath, dirnames, filenames in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not (rel == "." and d.startswith("build"))]
            for f in filenames:
                self.files.append(os.path.normpath(os.path.join(rel, f)))
        self.basenames = {os.path.basename(f) for f in self.files}
        self.top = {f.split(os.sep)[0] for f in self.files}
        self._text = None

    def text(self):
        """Every source file's content, joined: where names and flags are looked up."""
        if self._text is None:
            parts = []
            for f in self.files:
                # Not the pages themselves (a name must exist outside the prose that quotes it),
                # nor this checker.
                if f.endswith((".md", ".onnx", ".pb", ".npy", ".kiln", ".png", ".so", ".a", ".o")) or \
                        f.startswith(os.path.join("tests", "docs")):
                    continue
                try:
                    parts.append(read(os.path.join(self.root, f)))
                except OSError:
                    pass
            self._text = "\n".join(parts)
        return self._text

    def exists(self, rel):
        return os.path.exists(os.path.join(self.root, rel))

    def glob(self, pattern):
        return glob.glob(os.path.join(self.root, pattern))


# --- the tools' --help --------------------------------------------------------------------------

def help_text(tool, *args):
    out = subprocess.run([tool, *args, "--help"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        sys.exit(f"check_docs: {tool} {' '.join(args)} --help exited {out.returncode}: {out.stderr.strip()}")
    return out.stdout


def option_flags(help_out):
    """The flags an --help output's option lines declare (`-o,--output`, `--onednn,--no-onednn{false}`)."""
    flags = set()
    for line in help_out.splitlines():
        m = re.match(r"\s+(-[^\s]+)", line)
        if not m:
            continue
        for f in m.group(1).split(","):
            f = re.sub(r"\{.*", "", f)
            if f.startswith("-"):
                flags.add(f)
    return flags


def subcommands(help_out):
    subs, inside = [], False
    for line in help_out.splitlines():
        if line.startswith("Subcommands:"):
            inside = True
        elif inside and re.match(r"\s+[a-z]", line):
            subs.append(line.split()[0])
        elif inside and line.strip() == "":
            break
    return subs


def tool_flags(tool):
    """{subcommand or '': its flags} for a CLI11 tool."""
    top = help_text(tool)
    flags = {"": option_flags(top)}
    for sub in subcommands(top):
        flags[sub] = option_flags(help_text(tool, sub))
    return flags


# --- markdown ----------------------------------------------------------------------------------

def split_markdown(text):
    """(line number, inline code span) pairs and (line number, fenced code line) pairs, and the
    prose lines with code removed (for links and the date rule)."""
    spans, fenced, prose = [], [], []
    in_fence = False
    for n, line in enumerate(text.splitlines(), 1):
        if re.match(r"\s*```", line):
            in_fence = not in_fence
            continue
        if in_fence:
            fenced.append((n, line))
            continue
        for m in re.finditer(r"(`+)(.+?)\1", line):
            spans.append((n, m.group(2).strip()))
        prose.append((n, re.sub(r"(`+)(.+?)\1", " ", line)))
    return spans, fenced, prose


def heading_anchors(text):
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as '-'."""
    anchors = set()
    in_fence = False
    for line in text.splitlines():
        if re.match(r"\s*```", line):
            in_fence = not in_fence
        m = None if in_fence else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            anchors.add(re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-"))
    return anchors


# --- the checks --------------------------------------------------------------------------------

class Checker:
    def __init__(self, tree, kiln_flags, kiln_run_flags):
        self.tree = tree
        self.kiln = kiln_flags
        self.kiln_run = kiln_run_flags
        self.all_help_flags = set().union(*kiln_flags.values(), *kiln_run_flags.values())
        self.problems = []
        self.checked = 0
        self._bodies = {}

    def fail(self, page, line, what):
        self.problems.append(f"{page}:{line}: {what}")

    # paths

    def path_exists(self, page, p):
        """Whether `p`, a path as a page quotes it, is in the tree: from the root, from the page's
        folder, `kiln/x.h` as include/kiln/x.h, with {a,b} alternatives and <name>/* wildcards."""
        alternatives = [p]
        m = re.search(r"\{([^}]*)\}", p)
        if m:
            alternatives = [p[:m.start()] + alt + p[m.end():] for alt in m.group(1).split(",")]
        for alt in alternatives:
            pattern = re.sub(r"<[^>]*>", "*", alt).rstrip("/") or "."
            bases = ["", os.path.dirname(page)]
            if alt.startswith("kiln/"):
                bases.append("include")
            if not any(self.tree.glob(os.path.join(b, pattern)) or self.tree.glob(os.path.join(b, pattern + ".in"))
                       for b in bases):
                return False
        return True

    def check_path(self, page, line, p):
        p = p.rstrip(".,;:")
        if p.startswith(NOT_TREE) or "://" in p or p in (".", "..") or re.fullmatch(r"\.[\w.]+", p):
            return
        first = p.split("/")[0]
        page_dir = os.path.dirname(page)
        local = page_dir and self.tree.exists(os.path.join(page_dir, first))
        if "/" in p and (first in self.tree.top or first == "kiln" or local):
            self.checked += 1
            if not self.path_exists(page, p):
                self.fail(page, line, f"path `{p}` is not in the tree")
        elif "/" not in p and p.endswith(SOURCE_EXT) and p not in EXTERNAL_FILES:
            self.checked += 1
            pattern = re.sub(r"<[^>]*>", "*", p)
            if not any(fnmatch.fnmatch(b, pattern) or fnmatch.fnmatch(b, pattern + ".in") for b in self.tree.basenames):
                self.fail(page, line, f"file `{p}` is nowhere in the tree")
        elif "/" in p and p.endswith(SOURCE_EXT) and re.fullmatch(r"[\w./*<>{},-]+", p):
            self.checked += 1
            self.fail(page, line, f"path `{p}` is not in the tree")

    # commands and flags

    @staticmethod
    def flags_of(tokens):
        out = []
        for t in tokens:
            t = t.strip("[]()'\",;|")
            m = re.match(r"(--?[A-Za-z][\w-]*)", t)
            if m and not re.match(r"-\d", t):
                out.append(m.group(1))
        return out

    def check_command(self, page, line, text):
        """A command line (`kiln compile --precision fp16`, `scripts/gpu-check --emulated`)."""
        tokens = text.split()
        while tokens and (re.match(r"[A-Z_][A-Z0-9_]*=", tokens[0]) or tokens[0] in LAUNCHERS or
                          tokens[0] in ("-n", "19")):
            if re.match(r"KILN_\w+=", tokens[0]):
                self.check_name(page, line, tokens[0].split("=")[0])
            tokens = tokens[1:]
        if not tokens:
            return False
        prog = tokens[0]
        name = os.path.basename(prog)
        if name in ("kiln", "kiln-run") and prog in ("kiln", "kiln-run", "build/kiln", "build/kiln-run", "bin/kiln",
                                                       "bin/kiln-run", "kiln-gpu/build/kiln"):
            table = self.kiln if name == "kiln" else self.kiln_run
            rest = tokens[1:]
            subs = [""]
            if rest and re.fullmatch(r"[a-z]+([|/][a-z]+)*", rest[0]):
                subs = re.split(r"[|/]", rest[0])
                rest = rest[1:]
            for sub in subs:
                self.checked += 1
                if sub not in table:
                    self.fail(page, line, f"`{name} {sub}`: no such subcommand ({name} --help)")
                    continue
                for flag in self.flags_of(rest):
                    self.checked += 1
                    if flag not in table[sub]:
                        self.fail(page, line, f"`{name} {sub} {flag}`: not in `{name} {sub} --help`")
            return True
        if "/" in prog and not prog.startswith(NOT_TREE) and prog.split("/")[0] in self.tree.top:
            self.check_path(page, line, prog)
            if self.tree.exists(prog) and os.path.isfile(os.path.join(self.tree.root, prog)):
                script = read(os.path.join(self.tree.root, prog))
                for flag in self.flags_of(tokens[1:]):
                    self.checked += 1
                    if not re.search(re.escape(flag) + r"(?![\w-])", script):
                        self.fail(page, line, f"`{prog} {flag}`: {prog} has no such option")
            return True
        if name in FOREIGN or name in ("scripts", "tests"):
            for t in tokens[1:]:
                if re.match(r"-D(KILN_\w+)", t):
                    self.check_cmake_option(page, line, t)
                for part in re.split(r"[=,]", t):
                    if "/" in part and part.split("/")[0] in self.tree.top:
                        self.check_path(page, line, part)
            return True
        return False

    def check_cmake_option(self, page, line, token):
        name = re.match(r"-D(\w+)", token).group(1)
        if not name.startswith("KILN_"):
            return
        self.checked += 1
        cmake_text = ""
        for f in self.tree.glob("cmake/*.cmake") + self.tree.glob("*/CMakeLists.txt") + [
                os.path.join(self.tree.root, "CMakeLists.txt")]:
            cmake_text += read(f)
        if not re.search(r"\b" + name + r"\b", cmake_text):
            self.fail(page, line, f"CMake option `{name}` is not in a CMakeLists.txt or cmake/")

    def check_bare_flag(self, page, line, span):
        if re.match(r"-D\w", span):
            self.check_cmake_option(page, line, span)
            return
        for flag in self.flags_of(span.split()[:1]):
            self.checked += 1
            if flag in self.all_help_flags:
                continue
            if not re.search(re.escape(flag) + r"(?![\w-])", self.tree.text()):
                self.fail(page, line, f"flag `{flag}` is in no --help output and no file of the tree")

    # C++ and Python names

    def body_of(self, type_name):
        """The text inside the braces of `struct|class|enum [class] type_name`: the public headers
        first, then the sources. None when it is declared nowhere."""
        if type_name in self._bodies:
            return self._bodies[type_name]
        decl = re.compile(r"\b(?:struct|class|union|enum(?:\s+class)?)\s+(?:KILN_API\s+)?" + re.escape(type_name) +
                          r"\b[^;{()]*\{")
        headers = sorted(self.tree.glob("include/kiln/*.h")) + sorted(self.tree.glob("include/kiln/*.h.in"))
        sources = [os.path.join(self.tree.root, f) for f in self.tree.files
                   if f.endswith((".h", ".cc", ".inc")) and not f.startswith("include")]
        body = None
        for path in headers + sources:
            text = read(path)
            m = decl.search(text)
            if not m:
                continue
            depth, i = 1, m.end()
            while i < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            body = text[m.end():i - 1]
            break
        self._bodies[type_name] = body
        return body

    def check_qualified(self, page, line, name):
        parts = [p for p in name.split("::") if p]
        while parts and re.fullmatch(r"[a-z_]+", parts[0]) and len(parts) > 1:
            parts = parts[1:]  # namespaces: kiln::, kiln::cpu::
        if parts and parts[0] in ("std", "flatbuffers", "onnx", "nb"):
            return
        self.checked += 1
        if len(parts) == 1:
            if not re.search(r"\b" + re.escape(parts[0]) + r"\b", self.tree.text()):
                self.fail(page, line, f"`{name}`: `{parts[0]}` is declared nowhere")
            return
        for owner, member in zip(parts, parts[1:]):
            body = self.body_of(owner)
            if body is None:
                self.fail(page, line, f"`{name}`: no struct, class or enum `{owner}` in include/kiln/*.h or the sources")
                return
            pattern = r"\b" + re.escape(member).replace(r"\*", r"\w*") + r"\b"
            if not re.search(pattern, body):
                self.fail(page, line, f"`{name}`: `{owner}` has no member `{member}`")
                return

    def check_name(self, page, line, name):
        self.checked += 1
        if not re.search(r"(?<![\w])" + re.escape(name) + r"(?![\w])", self.tree.text()):
            self.fail(page, line, f"`{name}` appears nowhere in the tree")

    def check_python(self, page, line, span):
        m = re.match(r"kiln\.(\w+)(\((.*)\))?", span)
        pkg = "".join(read(f) for f in self.tree.glob("python/kiln/*.py*"))
        self.checked += 1
        attr = m.group(1)
        if not re.search(r"\b" + attr + r"\b", pkg) and f"kiln.{attr}" not in self.tree.text():
            self.fail(page, line, f"`kiln.{attr}`: not in python/kiln and no Kiln op of that name")
            return
        for kw in re.findall(r"(\w+)=", m.group(3) or ""):
            self.checked += 1
            if not re.search(r"\b" + kw + r"\b", pkg):
                self.fail(page, line, f"`kiln.{attr}`: no argument `{kw}` in python/kiln")

    # one span

    def check_span(self, page, line, span):
        if not span or span.startswith("<!--"):
            return
        if self.check_command(page, line, span):
            return
        if span.startswith("-"):
            self.check_bare_flag(page, line, span)
            return
        m = re.match(r"Kiln::\w+", span)
        if m:  # a CMake target of the installed package
            self.check_name(page, line, m.group(0))
            return
        m = re.match(r"((?:kiln::)?(?:[A-Za-z_]\w*::)+[A-Za-z_*][\w*]*)", span)
        if m and not span.startswith(("std::", "flatbuffers::")):
            self.check_qualified(page, line, m.group(1))
            return
        m = re.fullmatch(r"(KILN_[A-Z0-9_]+|kiln_[a-z0-9_]+)(=\S*)?", span)
        if m:
            self.check_name(page, line, m.group(1))
            return
        if re.match(r"kiln\.[A-Za-z_]\w*", span) and not span.endswith((".h", ".so", ".pc", ".kiln", ".onnx")):
            self.check_python(page, line, span)
            return
        for token in span.split():
            self.check_path(page, line, token.strip("()[]'\","))

    def check_links(self, page, line, text):
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path, _, anchor = target.partition("#")
            full = os.path.join(self.tree.root, os.path.dirname(page), path)
            self.checked += 1
            if not os.path.exists(full):
                self.fail(page, line, f"link target `{target}` does not exist")
            elif anchor and full.endswith(".md") and anchor not in heading_anchors(read(full)):
                self.fail(page, line, f"link target `{target}`: no heading with that anchor")

    def check_undated(self, page, line, text):
        text = re.sub(r"\]\([^)]*\)", "]", text)  # links to dated results files are fine
        text = re.sub(r"benchmarks/results/[\w.-]+", "", text)
        for m in re.finditer(r"\b20\d\d-[01]\d-[0-3]\d\b", text):
            self.fail(page, line, f"a date ({m.group(0)}): dated figures belong in benchmarks/results/")
        for m in re.finditer(r"(?<![\w-])[0-9a-f]{7,40}(?![\w-])", text):
            if re.search(r"[a-f]", m.group(0)) and re.search(r"\d", m.group(0)):
                self.fail(page, line, f"a commit hash ({m.group(0)}): results name their commit in benchmarks/results/")

    def check_page(self, page):
        text = read(os.path.join(self.tree.root, page))
        spans, fenced, prose = split_markdown(text)
        for n, span in spans:
            self.check_span(page, n, span)
        program = None  # the `kiln <sub>` a wrapped synopsis line continues
        for n, code in fenced:
            code = code.split("#")[0] if not code.lstrip().startswith("#include") else ""
            if program and re.match(r"\s+[\[(-]", code):
                self.check_command(page, n, program + " " + code.strip().replace("|", " "))
                continue
            m = re.match(r"((?:build/)?kiln(?:-run)? [a-z]+)\b", code)
            program = m.group(1) if m else None
            # A synopsis line's '|' separates alternatives; elsewhere it is a pipe.
            separators = r"&&|;" if program else r"&&|;|\|"
            for command in re.split(separators, code):
                self.check_command(page, n, command.strip().replace("|", " "))
        for n, line in prose:
            self.check_links(page, n, line)
        for n, line in enumerate(text.splitlines(), 1):
            self.check_undated(page, n, line)
        if page == "README.md":
            lines = text.splitlines()
            if len(lines) > README_MAX_LINES:
                self.fail(page, len(lines), f"{len(lines)} lines: the README is a front page of at most "
                                            f"{README_MAX_LINES}; move the rest to docs/")
            for n, line in enumerate(lines, 1):
                if len(line) > README_MAX_CHARS:
                    self.fail(page, n, f"{len(line)} characters: wrap at about 100, never past {README_MAX_CHARS}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="the source tree")
    ap.add_argument("--kiln", required=True, help="the built kiln tool")
    ap.add_argument("--kiln-run", help="the built kiln-run tool (default: kiln's run, bench and inspect)")
    args = ap.parse_args()
    tree = Tree(os.path.abspath(args.root))
    kiln_flags = tool_flags(args.kiln)
    if args.kiln_run:
        kiln_run_flags = tool_flags(args.kiln_run)
    else:
        kiln_run_flags = {k: v for k, v in kiln_flags.items() if k in ("", "run", "bench", "inspect")}
    checker = Checker(tree, kiln_flags, kiln_run_flags)
    pages = []
    for pattern in PAGES:
        pages += sorted(os.path.relpath(p, tree.root) for p in tree.glob(pattern))
    for page in pages:
        checker.check_page(page)
    for p in checker.problems:
        print(p)
    print(f"check_docs: {len(pages)} pages, {checker.checked} names checked, {len(checker.problems)} problems")
    return 1 if checker.problems else 0


if __name__ == "__main__":
    sys.exit(main())
