#!/usr/bin/env python3
"""Import cycles between the files of a crate: an edge A → B when A names a path of B
(`crate::b::…`, or `super::…` resolving to a sibling), ignoring a module's own
descendants and ancestors (`mod child;` plus `pub use child::X`, and `use super::*` in
tests). Prints every cycle's files; exits 1 when there is one.

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
        for kind, rest in PATH.findall(text):
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


def main():
    root = Path(__file__).resolve().parent.parent
    dirs = [Path(d) for d in sys.argv[1:]] or sorted(
        p.parent for p in root.glob("**/src/lib.rs") if "target" not in p.parts
    )
    found = False
    for src in dirs:
        _, edges = graph(src)
        for comp in cycles(edges):
            found = True
            names = sorted("::".join(c) or "crate" for c in comp)
            print(f"{src}: cycle between {', '.join(names)}")
            for a in comp:
                for b in sorted(edges[a]):
                    if b in comp:
                        print(f"    {'::'.join(a) or 'crate'} -> {'::'.join(b) or 'crate'}")
    if not found:
        print(f"no import cycle in {len(dirs)} crates")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
