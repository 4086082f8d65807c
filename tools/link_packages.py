"""Hardlink installed distributions, and everything they require, from one venv into another.

Usage: .venv/bin/python tools/link_packages.py --into .venv-export torch==2.14.1 torchvision==0.29.1

The OpenVINO exporter's venv needs the same torch pair as the workbench's: several GB each, most of it
CUDA libraries that a CPU never loads. Linking the installed files instead of installing them again keeps
one copy on disk (and a small CI disk from filling up); pip in the second venv then finds the pair
installed and leaves it. A later pip that replaces one of them there unlinks only that venv's names.
A distribution the second venv already has is left to pip. Only site-packages is linked: console scripts
name their own interpreter, and bytecode names its source's path, so both are left for the second venv
to make. Each distribution's metadata is linked after its files, so an interrupted run never shows pip a
distribution that is not all there.
Run it with the venv that holds the packages (the one whose `packaging` it imports).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import sysconfig
from importlib.metadata import Distribution, distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def site_packages(venv: Path) -> Path:
    """The venv's pure-Python library folder, laid out as this interpreter lays out its own."""
    return Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))


def _named(site: Path) -> list[tuple[str, Distribution]]:
    """The distributions in site with their names; a .dist-info without metadata is not installed."""
    return [(d.metadata["Name"], d) for d in distributions(path=[str(site)]) if d.metadata["Name"]]


def required_closure(site: Path, roots: list[str]) -> list[Distribution]:
    """The distributions installed in site that roots name, and all they require on this platform.

    A requirement's extras are followed (torch asks for `cuda-toolkit[cublas,...]`, whose parts are
    extras), and its markers are evaluated for this interpreter. A pinned root installed at another
    version is an error: linking it would not give the second venv what it asked for.
    """
    installed = {canonicalize_name(name): d for name, d in _named(site)}
    found: dict[str, Distribution] = {}
    visited: set[tuple[str, frozenset[str]]] = set()
    queue = [(Requirement(r), True) for r in roots]
    while queue:
        req, is_root = queue.pop()
        name = canonicalize_name(req.name)
        dist = installed.get(name)
        if dist is None:
            raise SystemExit(f"{site}: {req} is not installed there")
        if is_root and req.specifier and not req.specifier.contains(dist.version, prereleases=True):
            raise SystemExit(f"{site}: {req} is wanted but {dist.version} is installed")
        found[name] = dist
        if (name, frozenset(req.extras)) in visited:
            continue
        visited.add((name, frozenset(req.extras)))
        for line in dist.requires or ():
            dep = Requirement(line)
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in ("", *req.extras)):
                queue.append((dep, False))
    return sorted(found.values(), key=lambda d: canonicalize_name(d.metadata["Name"]))


def link_distribution(dist: Distribution, site: Path, into: Path) -> int:
    """Link dist's files under site to the same places under into; returns how many were linked."""
    linked, root = 0, site.resolve()
    files = [f for f in dist.files or () if "__pycache__" not in f.parts]
    # Metadata last: pip counts a distribution as installed once its .dist-info is there.
    files.sort(key=lambda f: f.parts[0].endswith(".dist-info"))
    for rel in files:
        source = (root / rel).resolve()
        if not source.is_relative_to(root) or not source.is_file():
            continue  # console scripts under bin/, or a file the package removed itself
        target = into / source.relative_to(root)
        if target.exists():
            if target.samefile(source):
                continue
            raise SystemExit(f"{target}: exists and is not {source}; remove the venv and install again")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)
        except OSError:  # another file system: a copy costs the disk the link saves, but works
            shutil.copy2(source, target)
        linked += 1
    return linked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("requirements", nargs="+", help="distributions to link, e.g. torch==2.14.1")
    parser.add_argument("--into", type=Path, required=True, help="the venv to link them into (it must exist)")
    parser.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=Path(sys.prefix),
        help="the venv that holds them (default: this interpreter's own)",
    )
    args = parser.parse_args(argv)
    site, into = site_packages(args.source), site_packages(args.into)
    if not into.is_dir():
        raise SystemExit(f"{into}: no such folder; create the venv first ({sys.executable} -m venv {args.into})")
    present = {canonicalize_name(name) for name, _ in _named(into)}
    # A distribution the venv already has (the setuptools a new venv starts with) is pip's to upgrade.
    dists = [
        d for d in required_closure(site, args.requirements) if canonicalize_name(d.metadata["Name"]) not in present
    ]
    linked = sum(link_distribution(d, site, into) for d in dists)
    print(f"linked {linked} files of {len(dists)} distributions from {site} into {into}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
