#!/usr/bin/env python3
"""The crates' layers, from their Cargo.toml files (normal dependencies only; tests may use
anything):

  proto  <  libs/*  <  services (admin, ingest, chat, agent, scheduler), gateway  <  server

A crate may depend only on crates of a lower layer: `libs/` on proto and other libs, the
gateway library on no service, and only the top-level `server` (the `gateway` executable)
on every service. Prints each dependency that breaks this; exits 1 when there is one.
scripts/test.sh's lint step runs it."""
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICES = {"admin-service", "ingest-service", "chat-service", "agent-service", "scheduler-service"}


def layer(path: Path) -> int:
    rel = path.relative_to(ROOT).as_posix()
    if rel == "proto":
        return 0
    if rel.startswith("libs/"):
        return 1
    if rel in SERVICES or rel == "gateway":
        return 2
    return 3  # server, test-stack: above everything


def main() -> int:
    workspace = tomllib.loads((ROOT / "Cargo.toml").read_text())
    paths = {}
    for name, spec in workspace["workspace"]["dependencies"].items():
        if isinstance(spec, dict) and "path" in spec:
            paths[name] = (ROOT / spec["path"]).resolve()
    bad = []
    for member in workspace["workspace"]["members"]:
        here = (ROOT / member).resolve()
        manifest = tomllib.loads((here / "Cargo.toml").read_text())
        for dep in manifest.get("dependencies", {}):
            there = paths.get(dep)
            if there is None:
                continue
            same_libs = layer(there) == layer(here) == 1  # libs use libs (cargo forbids cycles)
            if layer(there) >= layer(here) and layer(here) < 3 and not same_libs:
                bad.append(f"{member} depends on {dep} ({there.relative_to(ROOT)}): a crate may use only lower layers")
    for line in bad:
        print(line)
    if not bad:
        print(f"layers hold in {len(workspace['workspace']['members'])} crates")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
