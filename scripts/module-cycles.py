#!/usr/bin/env python3
"""Import cycles in a crate, at two levels:

- files: an edge A → B when A names a path of B (`crate::b::…`, `super::…` resolving to a
  sibling, or inside a brace import `use super::{b, c::D}`), ignoring a module's own
  descendants and ancestors (`mod child;` plus `pub use child::X`, and `use super::*` in
  tests);
- folders: the same edges between the crate's top-level modules (`run/…` → `tools/…` is an
  edge run → tools), so that two folders never import each other through any of their files.

Prints every cycle with its edges; exits 1 when there is one. scripts/test.sh's lint step
runs it.

Usage: scripts/module-cycles.py <crate src dir>...   (default: every crate's src)"""
import os
import re
import sys
from pathlib import Path


def modules(src: Path):
    """module path (tuple) → file"""
    out = {}
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        out[tuple(parts)] = f
    return out


PATH = re.compile(r"\b(crate|super)((?:::\w+)+)")
BRACES = re.compile(r"\b(crate|super)((?:::\w+)*)::\{")


def expand(text: str):
    """(kind, rest) for every path in the brace imports of `text`: `use super::{a, b::{c}}`
    gives ("super", "::a") and ("super", "::b::c")."""
    out = []
    for m in BRACES.finditer(text):
        depth, i, start = 0, m.end() - 1, m.end() - 1
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        for item in leaves(text[start + 1 : i]):
            out.append((m.group(1), m.group(2) + "::" + item))
    return out


def leaves(group: str):
    """`a, b::{c, d}, e as f` → a, b::c, b::d, e"""
    items, depth, cur = [], 0, ""
    for ch in group:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    items.append(cur)
    out = []
    for item in (i.strip() for i in items):
        item = re.sub(r"\s+as\s+\w+$", "", item)
        if not item or item == "self":
            continue
        if "{" in item:
            head, inner = item.split("{", 1)
            out += [head + x for x in leaves(inner.rsplit("}", 1)[0])]
        else:
            out.append(re.sub(r"::self$", "", item))
    return [o for o in out if o and o != "*"]


def code(text: str) -> str:
    text = re.sub(r"//[^\n]*", "", text)  # comments and doc comments (links in docs)
    return text


def resolve(mods, here, kind, rest):
    parts = rest.strip(":").split("::")
    if kind == "crate":
        base = []
    else:
        base = list(here[:-1]) if here else []
    path = base + parts
    while path and tuple(path) not in mods:
        path.pop()
    return tuple(path)


def graph(src: Path):
    mods = modules(src)
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        text = code(f.read_text())
        # a `use super::…` inside an inline `mod tests` refers to this file
        text = re.sub(r"#\[cfg\(test\)\]\s*mod \w+ \{.*", "", text, flags=re.S)
        for kind, rest in PATH.findall(text) + expand(text):
            target = resolve(mods, m, kind, rest)
            if target == m or target == () and m != ():
                continue
            # descendants and ancestors are one module family
            if target[: len(m)] == m or m[: len(target)] == target:
                continue
            edges[m].add(target)
    return mods, edges


def cycles(edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            strong(v)
    return out


def folders(edges):
    """The edges between top-level modules (folders and their files)."""
    out = {}
    for a, targets in edges.items():
        top = a[:1]
        out.setdefault(top, set())
        for b in targets:
            if b[:1] and b[:1] != top and top:
                out[top].add(b[:1])
                out.setdefault(b[:1], set())
    return out


def main():
    root = Path(__file__).resolve().parent.parent
    dirs = [Path(d) for d in sys.argv[1:]] or sorted(
        p.parent for p in root.glob("**/src/lib.rs") if "target" not in p.parts
    )
    found = False
    for src in dirs:
        _, files = graph(src)
        for level, edges in (("files", files), ("folders", folders(files))):
            for comp in cycles(edges):
                found = True
                names = sorted("::".join(c) or "crate" for c in comp)
                print(f"{src}: cycle between the {level} {', '.join(names)}")
                for a in comp:
                    for b in sorted(edges[a]):
                        if b in comp:
                            print(f"    {'::'.join(a) or 'crate'} -> {'::'.join(b) or 'crate'}")
                            for f in sorted(files):
                                if level == "folders" and f[:1] == a:
                                    hits = sorted(t for t in files[f] if t[:1] == b)
                                    for t in hits:
                                        print(f"        {'::'.join(f)} -> {'::'.join(t)}")
    if not found:
        print(f"no import cycle in {len(dirs)} crates")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
