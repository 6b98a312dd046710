#!/usr/bin/env python3
"""kiln_tests is a unity build (tests/CMakeLists.txt): CMake pastes its test files, a batch at a
time, into one translation unit, and which files share a batch changes whenever a file is added
or removed. This check fails, naming the files and the name, when some batching would not
compile (or would quietly mean another entity):

  1. two test files declare one name at file scope in one namespace. An anonymous namespace
     counts as its enclosing one (in one translation unit all anonymous namespaces of one
     namespace are one, and their names are found in it), and so does `static`. A test file's
     `using namespace N` at global scope reaches every later file of its batch, so the global
     namespace and every such N count as one. A macro (a #define never #undef'd) collides with
     any name of another file;
  2. a test file declares a name that a project header its batch may include (one any batched
     file includes, directly or not: test helpers and the library's own headers) declares in a
     namespace that meets its own, as in 1, unless the file includes that header itself and
     compiles beside it on its own;
  3. a test file's name in namespace N is declared by a project header in a namespace enclosing
     N: it hides the header's for all the code in N after it (a kiln::testing Model hid
     kiln::Model from tests/cpu_reference.h, which is in kiln::testing);
  4. a test file writes `M::` (or `using namespace M`) unqualified inside namespace P, where a
     P'::M more inner than the one it means (P' enclosing or equal to P) is declared by another
     test file or header: in a batch with it, `testing::` inside kiln::cpu names
     kiln::cpu::testing instead of kiln::testing.
Declarations of one entity are not collisions: using-declarations of it (`using kiln::DType;` in
two files), one namespace alias, one file's own overloads and redeclarations.

It is a lexical scan, not a compiler: it reads the declarations these files write, follows
#include "..." (root-relative, include/, or the including file's folder), and takes no
preprocessor branch (a name under #if counts as declared). A name two files must both declare
goes in ALLOWED below, with the reason.

usage: check_names.py --root SRC [--skip FILE]... [--everywhere HEADER]... [--list]
  --skip FILE        a tests/..._test.cc the unity build leaves out of its batches
  --everywhere H     a header every batched file sees (the precompiled headers), as #include names it
  (ctest runs it as unity_build_names, with both taken from tests/CMakeLists.txt)
Standard library only; well under a second. Exit status: 0 clean, 1 problems (each printed), 2 bad
command line.
"""
import argparse
import os
import re
import sys
from collections import defaultdict

# (namespace, name) -> why two test files may both declare it. Empty: every duplicate was shared
# or renamed.
ALLOWED = {}

GLOBAL = "(global)"
SPECIFIERS = {"static", "inline", "constexpr", "consteval", "constinit", "const", "volatile", "thread_local",
              "mutable", "typename", "register", "virtual", "explicit", "friend", "unsigned", "signed"}
PAREN_WORDS = {"decltype", "alignas", "__attribute__", "noexcept", "requires", "sizeof", "alignof", "typeof",
               "__declspec"}
CLOSE = {"(": ")", "[": "]", "{": "}"}

TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"")
  | (?P<num>\.?\d(?:[eEpP][+-]|[\w.'])*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op>::|->|\.\.\.|<=>|<<=|>>=|[<>=!+\-*/%&|^]=|&&|\|\||\+\+|--|<<|>>|[{}()\[\];,<>=:.?~!+\-*/%&|^#])
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)


def strip(text):
    """The code with comments removed and string and character literals emptied, and the
    preprocessor directives (continuation lines joined), which are blanked out of the code."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "#" and text[text.rfind("\n", 0, i) + 1:i].strip() == "":
            # a directive, kept whole (its #include "file" names a file); continuation lines joined
            j = i
            while True:
                j = text.find("\n", j)
                if j < 0 or text[j - 1] != "\\":
                    break
                j += 1
            j = n if j < 0 else j
            line = text[i:j]
            cut = line.find("//")
            out.append((line[:cut] if cut >= 0 else line).replace("\\\n", " ") + "\n" * line.count("\n"))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(" " + "\n" * text.count("\n", i, j))
            i = j
        elif c == "R" and text.startswith('R"', i) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s\\]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i + m.end())
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"' or (c == "'" and not (i and text[i - 1].isalnum())):  # not a digit separator: 1'000
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        else:
            out.append(c)
            i += 1
    lines = "".join(out).replace("\\\n", " ").split("\n")
    code, directives = [], []
    for line in lines:
        if line.lstrip().startswith("#"):
            directives.append(line.strip())
            code.append("")
        else:
            code.append(line)
    return "\n".join(code), directives


def tokenize(code):
    return [m.group(0) for m in TOKEN_RE.finditer(code) if m.lastgroup != "ws"]


def is_ident(t):
    return bool(t) and (t[0].isalpha() or t[0] == "_")


def skip_group(s, i):
    """s[i] opens a (, [ or {: the index after its match."""
    depth = 0
    while i < len(s):
        if s[i] in CLOSE:
            depth += 1
        elif s[i] in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def skip_angles(s, i):
    """s[i] == '<' opens template arguments: the index after the matching '>' ('>>' closes two)."""
    depth = 0
    while i < len(s):
        t = s[i]
        if t in CLOSE:
            i = skip_group(s, i)
            continue
        if t == "<":
            depth += 1
        elif t == ">":
            depth -= 1
        elif t == ">>":
            depth -= 2
        elif t in (";", "{}"):
            return i
        i += 1
        if depth <= 0:
            return i
    return i


def skip_prefix(s):
    """The index after `template <...>`, attributes and specifiers."""
    i = 0
    while i < len(s):
        t = s[i]
        if t == "template" and i + 1 < len(s) and s[i + 1] == "<":
            i = skip_angles(s, i + 1)
        elif t == "[" and i + 1 < len(s) and s[i + 1] == "[":
            i = skip_group(s, i)
        elif t in ("__attribute__", "alignas") and i + 1 < len(s) and s[i + 1] == "(":
            i = skip_group(s, i + 1)
        elif t in SPECIFIERS or t == "extern" and i + 1 < len(s) and s[i + 1] == '""':
            i += 2 if t == "extern" else 1
        else:
            break
    return i


def declarator_end(s, start):
    """Index of the first top-level '(', '=', '{}', '[', ';' or ',' after a declaration's type,
    or len(s)."""
    j = start
    while j < len(s):
        t = s[j]
        if t in PAREN_WORDS and j + 1 < len(s) and s[j + 1] == "(":
            j = skip_group(s, j + 1)
            continue
        if t == "<" and j > start and (is_ident(s[j - 1]) or s[j - 1] == ">"):
            if j >= 1 and s[j - 1] == "operator":
                j += 1
                continue
            j = skip_angles(s, j)
            continue
        if t == "[" and j + 1 < len(s) and s[j + 1] == "[":
            j = skip_group(s, j)
            continue
        if t == "operator":  # operator()(...), operator<<(...): the parameters come after the symbol
            k = j + 1
            if k < len(s) and s[k] == "(":
                k += 2
            while k < len(s) and s[k] != "(":
                k += 1
            return k
        if t in ("(", "=", "{}", "[", ";", ","):
            return j
        j += 1
    return j


class Decl:
    def __init__(self, name, kind, target=None):
        self.name, self.kind, self.target = name, kind, target  # target: what a using/alias names


def function_like(s):
    """(name index, '(' index) when the declaration s (prefix skipped) declares a function or
    calls a macro, else None."""
    j = declarator_end(s, 0)
    if j < len(s) and s[j] == "(" and j >= 1:
        k = j - 1
        if is_ident(s[k]) or s[k] in (">",) or "operator" in s[max(0, k - 3):j]:
            return k, j
    return None


def declaration(stmt, has_body, header=False):
    """The names a namespace-scope declaration declares (a body's braces are '{}' in stmt), as
    Decls, or ('directive', N) for `using namespace N`."""
    p = skip_prefix(stmt)
    s = stmt[p:]
    extern = "extern" in stmt[:p + 1] or (s[:1] == ["extern"])
    if s[:1] == ["extern"]:
        s = s[1:]
    if not s:
        return []
    if s[0] == "using":
        if len(s) > 2 and s[1] == "namespace":
            return ("directive", "".join(t for t in s[2:] if t != ";").lstrip(":"))
        if len(s) > 2 and is_ident(s[1]) and s[2] == "=":
            return [Decl(s[1], "alias", " ".join(s[3:]))]
        parts = [t for t in s[1:] if t not in (";", "typename")]
        if len(parts) >= 3 and parts[-2] == "::" and is_ident(parts[-1]):
            return [Decl(parts[-1], "using", "".join(parts).lstrip(":"))]
        return []
    if s[0] == "namespace":  # namespace fs = std::filesystem;
        if len(s) > 3 and s[2] == "=":
            return [Decl(s[1], "nsalias", "".join(t for t in s[3:] if t != ";").lstrip(":"))]
        return []
    if s[0] == "typedef":
        for j in range(len(s) - 2):
            if s[j] == "(" and s[j + 1] == "*" and is_ident(s[j + 2]):
                return [Decl(s[j + 2], "alias", " ".join(s))]
        idents = [t for t in s if is_ident(t)]
        return [Decl(idents[-1], "alias", " ".join(s[1:-1]))] if idents else []
    if s[0] in ("struct", "class", "union", "enum"):
        j = 1
        if s[0] == "enum" and j < len(s) and s[j] in ("class", "struct"):
            j += 1
        while j < len(s) and (s[j] == "[" or s[j] in ("alignas", "__attribute__")):
            j = skip_group(s, j) if s[j] == "[" else skip_group(s, j + 1)
        while j + 1 < len(s) and is_ident(s[j]) and is_ident(s[j + 1]) and s[j + 1] != "final":
            j += 1  # class KILN_API Model: an export macro before the name
        name = s[j] if j < len(s) and is_ident(s[j]) and s[j] != "final" else None
        after = s[j + 1] if j + 1 < len(s) else None
        if name and after in ("::", "<"):
            return []  # struct Outer::Inner {...}, a specialization
        if "{}" not in s:
            rest = [t for t in s[j + 1:] if t != ";"]
            if not rest:
                return []  # struct X;  a forward declaration
            # struct X x;  a variable of an elaborated type
            return [] if extern else [Decl(n, "variable") for n in declarators(s, j + 1)]
        decls = [Decl(name, "type")] if name else []
        k = s.index("{}") + 1
        return decls + [Decl(n, "variable") for n in declarators(s, k - 1, after_body=True)]
    fn = function_like(s)
    if fn:
        k, open_ = fn
        if k == 0:
            return []  # MACRO(...) or static_assert(...): nothing declared
        if "operator" in s[max(0, k - 3):open_]:
            o = s.index("operator", max(0, k - 3))
            if o >= 1 and s[o - 1] == "::":
                return []
            close = skip_group(s, open_)
            return [Decl("operator" + "".join(s[o + 1:open_]), "operator",
                         " ".join(s[open_ + 1:close - 1]))]
        if not is_ident(s[k]) or (k >= 1 and s[k - 1] in ("::", "~")):
            return []  # a qualified definition (a member, a name declared elsewhere)
        if not has_body and not looks_like_arguments(s, open_):
            # a prototype: in a test file, counted where it is defined; a header's functions are
            # mostly defined elsewhere
            return [Decl(s[k], "function")] if header else []
        if extern and not header:
            return []
        return [Decl(s[k], "function" if has_body else "variable")]
    if extern and not header:
        return []
    return [Decl(n, "variable") for n in declarators(s, 0)]


def looks_like_arguments(s, open_):
    """s[open_] == '(' after a name, in a declaration with no body: constructor arguments
    (`Foo x(1, 2);`, a variable) rather than parameters (`int f(int);`, a prototype)?"""
    close = skip_group(s, open_)
    inner = s[open_ + 1:close - 1]
    if not inner:
        return False
    first = inner[0]
    return not is_ident(first) or first in ("true", "false", "nullptr", "this") or (
        len(inner) > 1 and inner[1] in ("(", ".", "->", "+", "-", "*", "/", ",") and inner[1] != "*")


def declarators(s, start, after_body=False):
    """Names of a variable declaration's declarators (int a = 1, b;)."""
    names = []
    j = start
    if after_body:  # struct X {...} a, b;
        j = s.index("{}") + 1
        while j < len(s) and s[j] not in (";",):
            if is_ident(s[j]) and (j + 1 >= len(s) or s[j + 1] in (",", ";", "=", "[", "{}")):
                names.append(s[j])
            j += 1
        return names
    while j < len(s):
        e = declarator_end(s, j)
        k = e - 1
        if k >= start and is_ident(s[k]) and k > start and s[k - 1] not in ("::", "~", "."):
            names.append(s[k])
        # skip to the next top-level ','
        while e < len(s) and s[e] != ",":
            e = skip_group(s, e) if s[e] in CLOSE else skip_angles(s, e) if s[e] == "<" else e + 1
        j = e + 1
        # later declarators have no type: `int a, b`
        while j < len(s) and s[j] in ("*", "&", "&&", "const"):
            j += 1
        if j < len(s) and is_ident(s[j]):
            start = j - 1
    return names


class Scan:
    def __init__(self, path):
        self.path = path
        self.decls = defaultdict(list)  # namespace -> [Decl]
        self.directives = []  # using namespace N at global scope
        self.macros = []
        self.includes = set()
        self.namespaces = set()  # namespaces this file declares (and its namespace aliases), "a::b"
        self.ns_uses = set()  # (namespace path, M): an unqualified `M::` (or `using namespace M`) there


def scan(path, rel, debug=False, header=False):
    with open(path, encoding="utf-8", errors="replace") as f:
        code, directives = strip(f.read())
    out = Scan(rel)
    macros = []
    for d in directives:
        m = re.match(r"#\s*(define|undef)\s+([A-Za-z_]\w*)", d)
        if m and m.group(1) == "define":
            macros.append(m.group(2))
        elif m:
            macros = [x for x in macros if x != m.group(2)]
        m = re.match(r'#\s*include\s*[<"]([^>"]+)[>"]', d)
        if m:
            out.includes.add(m.group(1))
    out.macros = sorted(set(macros))
    tokens = tokenize(code)
    scopes = []  # a namespace name ('' anonymous; 'a::b' for namespace a::b) or None (extern "C")

    def namespace():
        return "::".join(x for x in scopes if x) or GLOBAL

    def finish(stmt, has_body):
        if debug:
            print(f"  [{namespace()}] {' '.join(stmt)[:160]}")
        if not stmt:
            return
        result = declaration(stmt, has_body, header)
        if isinstance(result, tuple):
            if all(x == "" for x in scopes):
                out.directives.append(result[1])
            return
        for d in result:
            if debug:
                print(f"    -> {d.kind} {d.name} {d.target or ''}")
            out.decls[namespace()].append(d)

    where = [()] * len(tokens)  # the namespace path (anonymous ones left out) each token is in

    def mark(a, b):
        path = tuple(p for x in scopes if x for p in x.split("::"))
        for k in range(a, b):
            where[k] = path

    stmt = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        mark(i, i + 1)
        if t == ";":
            finish(stmt + [";"], False)
            stmt = []
            i += 1
        elif t == "}":
            finish(stmt, False)
            stmt = []
            if scopes:
                scopes.pop()
            i += 1
        elif t == "{":
            head = [x for x in stmt if x != "inline"]
            if head[:1] == ["namespace"] and all(is_ident(x) or x == "::" for x in head[1:]):
                scopes.append("::".join(x for x in head[1:] if x != "::"))
                path = [p for x in scopes if x for p in x.split("::")]
                out.namespaces.update("::".join(path[:k]) for k in range(1, len(path) + 1))
                stmt = []
                i += 1
                continue
            if head == ["extern", '""']:
                scopes.append(None)
                stmt = []
                i += 1
                continue
            end = skip_group(tokens, i)
            mark(i, end)
            body = tokens[i + 1:end - 1]
            p = skip_prefix(stmt)
            s = stmt[p:]
            is_type = s[:1] and s[0] in ("struct", "class", "union", "enum")
            if is_type and s[0] == "enum" and (len(s) < 2 or s[1] not in ("class", "struct")):
                # unscoped enumerators live in the enclosing namespace
                j = 0
                while j < len(body):
                    if is_ident(body[j]):
                        out.decls[namespace()].append(Decl(body[j], "enumerator"))
                    while j < len(body) and body[j] != ",":
                        j = skip_group(body, j) if body[j] in CLOSE else j + 1
                    j += 1
            stmt = stmt + ["{}"]
            i = end
            if not is_type and "=" not in s[:declarator_end(s, 0) + 1] and function_like(s):
                finish(stmt, True)  # a function's body ends its declaration
                stmt = []
                if i < len(tokens) and tokens[i] == ";":
                    i += 1
        elif t in ("(", "["):  # a group: braces inside it are expressions (`= {}` defaults, lambdas)
            end = skip_group(tokens, i)
            mark(i, end)
            stmt.extend(tokens[i:end])
            i = end
        else:
            stmt.append(t)
            i += 1
    # Unqualified `M::...` and `using namespace M...`: which namespace M names depends on the
    # namespaces the translation unit declares (tests/unity/check_names.py, check_namespace_uses).
    for k, t in enumerate(tokens):
        if not is_ident(t) or k + 1 >= len(tokens) or (k and tokens[k - 1] in ("::", ".", "->")):
            continue
        if tokens[k + 1] == "::" or (k >= 2 and tokens[k - 2:k] == ["using", "namespace"]):
            out.ns_uses.add((where[k], t))
    for ns, decls in out.decls.items():
        for d in decls:
            if d.kind == "nsalias":
                out.namespaces.add(d.name if ns == GLOBAL else ns + "::" + d.name)
    return out


def full_name(ns, name):
    return name if ns == GLOBAL else ns + "::" + name


def same_entity(a_ns, a, b_ns, b):
    """Do declarations a (in namespace a_ns) and b (in b_ns), of one name, name one entity?"""
    def names(target, ns, d):  # a using-declaration's target is d
        f = full_name(ns, d.name)
        return f == target or f.endswith("::" + target) or target.endswith("::" + f)
    aliases = ("using", "alias", "nsalias")
    if a.kind in aliases and b.kind in aliases:
        return a.kind == b.kind and (a.target == b.target or a.target.endswith("::" + b.target) or
                                     b.target.endswith("::" + a.target))
    if a.kind == "using":
        return names(a.target, b_ns, b)
    if b.kind == "using":
        return names(b.target, a_ns, a)
    return a.kind == "operator" and b.kind == "operator" and a.target != b.target  # overloads


def check_names(files, headers, sees):
    """Names declared by two files, or by a file and a header of the batch it does not see."""
    # A test file's global `using namespace N` reaches every later file of its batch: the global
    # namespace and each such N are one for those files' global code.
    merged = {d for f in files for d in f.directives}

    def meet(a, b):
        """Do names of namespaces a and b meet in one lookup? In one namespace; and in the code at
        global scope after those directives, the global namespace and each namespace a global
        `using namespace` nominates are one (nan_test.cc's global code, with `using namespace
        kiln::cpu::testing`, finds kiln::cpu::testing::kNaN and, after corner_cases_test.cc's
        `using namespace kiln::testing`, a kiln::testing::kNaN too)."""
        return a == b or ((a == GLOBAL or a in merged) and (b == GLOBAL or b in merged))

    problems = []
    by_name = defaultdict(list)  # name -> [(file, namespace, Decl)]
    for f in files:
        for ns, decls in f.decls.items():
            for d in decls:
                by_name[d.name].append((f.path, ns, d))
    for name, entries in sorted(by_name.items()):
        clash = defaultdict(set)  # namespace -> files
        for i, (pa, nsa, a) in enumerate(entries):
            for pb, nsb, b in entries[i + 1:]:
                if pa != pb and meet(nsa, nsb) and not same_entity(nsa, a, nsb, b) and \
                        (nsa, name) not in ALLOWED and (nsb, name) not in ALLOWED:
                    clash[nsa].add(pa)
                    clash[nsb].add(pb)
        if clash:
            spots = "; ".join(f"{'the global namespace' if ns == GLOBAL else 'namespace ' + ns}: "
                              f"{', '.join(sorted(paths))}" for ns, paths in sorted(clash.items()))
            n = len(set().union(*clash.values()))
            problems.append(f"'{name}' is declared at file scope by {n} test files, in {spots}")
    # Macros against every other file's names.
    names_in = defaultdict(set)
    for f in files:
        for decls in f.decls.values():
            for d in decls:
                names_in[d.name].add(f.path)
        for m in f.macros:
            names_in[m].add(f.path)
    for f in files:
        for m in f.macros:
            others = sorted(names_in[m] - {f.path})
            if others:
                problems.append(f"macro '{m}' (#define in {f.path}, never #undef'd) is also declared by: "
                                f"{', '.join(others)}")
    # Against the headers of the batches: any header some batched file includes may be in the
    # translation unit of any other.
    in_batches = set().union(*sees.values())
    by_header_name = defaultdict(list)  # name -> [(header, namespace, Decl)]
    for h in in_batches:
        for hns, hdecls in headers[h].decls.items():
            for hd in hdecls:
                by_header_name[hd.name].append((h, hns, hd))
    for f in files:
        for ns, decls in f.decls.items():
            for d in decls:
                for h, hns, hd in by_header_name.get(d.name, ()):
                    if not meet(ns, hns) or same_entity(ns, d, hns, hd) or (ns, d.name) in ALLOWED:
                        continue
                    # A file that sees the header compiles beside it on its own, so the two agree
                    # (or overload) where its own code meets them: in one namespace, or one its own
                    # global `using namespace` merges; a global one meets another file's directive
                    # only in a batch.
                    if h in sees[f.path] and (ns == hns or hns in f.directives or ns in f.directives):
                        continue
                    why = ("which it does not include: a batch that includes the header has both"
                           if h not in sees[f.path] else "which a global `using namespace` of another file in "
                           "its batch makes one namespace with its own")
                    problems.append(f"'{d.name}' is declared at file scope by {f.path} "
                                    f"({'global' if ns == GLOBAL else ns}) and by {h} "
                                    f"({'global' if hns == GLOBAL else hns}), {why}")
                    break
    return problems


def check_hiding(files, headers, sees):
    """A test file's name in namespace N hides the same name of every namespace enclosing N, for
    all the code in N: a header's (kiln::testing::Model hides kiln::Model from
    tests/cpu_reference.h, which is in kiln::testing and means kiln::Model) in a batch where the
    file comes first. A test file may not declare a name a project header declares in an
    enclosing namespace."""
    outer = defaultdict(set)  # (namespace, name) -> headers
    for h in set().union(*sees.values()):
        for ns, decls in headers[h].decls.items():
            for d in decls:
                outer[(ns, d.name)].add(h)
    problems = []
    for f in files:
        for ns, decls in f.decls.items():
            if ns == GLOBAL:
                continue
            parts = ns.split("::")
            for d in decls:
                if d.kind in ("using", "operator") or (ns, d.name) in ALLOWED:
                    continue
                for k in range(len(parts) - 1, -1, -1):
                    o = "::".join(parts[:k]) or GLOBAL
                    if (o, d.name) in outer:
                        problems.append(f"'{d.name}' declared at file scope by {f.path} in {ns} hides "
                                        f"{full_name(o, d.name)} ({', '.join(sorted(outer[(o, d.name)]))}) from "
                                        f"the code in {ns} of the files and headers in its batch")
                        break
    return problems


def check_namespace_uses(files, headers, sees):
    """An unqualified `M::` inside namespace P names the innermost P'::M that the translation unit
    declares (P' a prefix of P): `testing::` in namespace kiln::cpu is kiln::testing in a file
    alone, and kiln::cpu::testing in a batch where another file declares that. Such a use must
    name a namespace the file itself declares or includes."""
    declared = defaultdict(set)  # namespace -> files and headers that declare it
    for f in files:
        for n in f.namespaces:
            declared[n].add(f.path)
    for h in set().union(*sees.values()):
        for n in headers[h].namespaces:
            declared[n].add(h)
    problems = []
    for f in files:
        own = set(f.namespaces).union(*(headers[h].namespaces for h in sees[f.path]))
        for path, m in sorted(f.ns_uses):
            for k in range(len(path), -1, -1):
                candidate = "::".join(path[:k] + (m,))
                if candidate in own:
                    break
                if candidate in declared:
                    where = "::".join(path) or "the global namespace"
                    problems.append(f"{f.path}: `{m}::` in {where} names {candidate} in a batch with "
                                    f"{', '.join(sorted(declared[candidate]))}, and another namespace on its own "
                                    f"(qualify it: `kiln::{m}::` or `::{m}::`)")
                    break
    return problems


def resolve(root, including, name):
    """The file an #include names, as a path relative to root, or None (a system header)."""
    for base in (os.path.dirname(including), "", "include"):
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, p)):
            return p
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="the source tree")
    ap.add_argument("--skip", action="append", default=[], help="a test file the unity build leaves out of its batches")
    ap.add_argument("--everywhere", action="append", default=[],
                    help="a header every batched file sees (kiln_tests' precompiled headers), as #include names it")
    ap.add_argument("--list", action="store_true", help="print what each test file declares, then check")
    ap.add_argument("--debug", metavar="FILE",
                    help="print each namespace-scope declaration of FILE and what it declares")
    args = ap.parse_args()
    if args.debug:
        scan(args.debug, args.debug, debug=True)
        return 0
    root = os.path.abspath(args.root)
    tests_dir = os.path.join(root, "tests")
    if not os.path.isdir(tests_dir):
        print(f"check_names.py: no {tests_dir}", file=sys.stderr)
        return 2
    skip = {os.path.normpath(s) for s in args.skip}
    batched = []
    for dirpath, dirnames, filenames in os.walk(tests_dir):
        dirnames.sort()
        for fn in sorted(filenames):
            rel = os.path.relpath(os.path.join(dirpath, fn), root)
            if fn.endswith("_test.cc") and rel not in skip:
                batched.append(rel)
    files = [scan(os.path.join(root, p), p) for p in batched]
    # Every header of the project the batched files include, directly or not (the test helpers and
    # the library's own), scanned once.
    headers = {}

    def header(rel):
        if rel not in headers:
            headers[rel] = None
            headers[rel] = scan(os.path.join(root, rel), rel, header=True)
        return headers[rel]

    def closure(including, names):
        seen, todo = set(), [(including, n) for n in names]
        while todo:
            inc, n = todo.pop()
            h = resolve(root, inc, n)
            if h and h.endswith(".h") and h not in seen:
                seen.add(h)
                todo += [(h, m) for m in header(h).includes]
        return seen

    everywhere = closure("", args.everywhere)
    sees = {f.path: closure(f.path, f.includes) | everywhere for f in files}
    if args.list:
        for f in files:
            for ns in sorted(f.decls):
                print(f"{f.path}: {ns}: {' '.join(sorted({d.name for d in f.decls[ns]}))}")
            if f.macros:
                print(f"{f.path}: #define {' '.join(f.macros)}")
            if f.directives:
                print(f"{f.path}: using namespace {' '.join(f.directives)}")
    problems = (check_names(files, headers, sees) + check_hiding(files, headers, sees) +
                check_namespace_uses(files, headers, sees))
    for p in problems:
        print(f"check_names.py: {p}")
    if problems:
        print(f"check_names.py: {len(problems)} problems among {len(files)} batched test files: share the "
              f"helper in a test header, rename it, or qualify the name (docs/testing.md, 'Unity build')")
        return 1
    print(f"check_names.py: {len(files)} batched test files ({sum(len(v) for f in files for v in f.decls.values())} "
          f"file-scope declarations; {len(headers)} project headers they include), no name declared by two in "
          f"one namespace, no namespace name that another file's namespaces would change")
    return 0


if __name__ == "__main__":
    sys.exit(main())
