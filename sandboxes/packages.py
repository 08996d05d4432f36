"""Third-party packages inside the sandbox: a declared set, read-only, from an environment the caller chooses.

    Sandbox(packages=("numpy", "sympy"))                      # from the interpreter running this code
    Sandbox(packages=("numpy", "networkx"), site="/opt/venvs/judge")   # a virtual environment, or its site-packages

`resolve` reads the environment's installed distributions (their RECORD files, through importlib.metadata), follows
each named one's requirements (those without an `extra` marker that are installed there) and returns the top-level
files and folders they own (`numpy/`, `numpy.libs/`, `numpy-2.x.dist-info/`, `sympy/`, `mpmath/`, ...). The zygote
binds exactly those, read-only, under `/pkgs` in the sandbox's root (`_isolate.build_root`), and runs put `/pkgs`
on `sys.path`: nothing else of the environment is visible (not torch, not the project), and no package can be
written to. At level "none" (no namespaces) `/pkgs` is a folder of links to the same entries, read-only by
permissions only, as everything at that level is.

The packages must be built for the sandbox's interpreter (same Python minor version): `Sandbox.start` imports each
one once inside the sandbox and refuses, naming the package and the error, if that fails; the time each import took
is in the start report (`report["packages"]`). Native libraries run single-threaded (OPENBLAS/OMP/MKL_NUM_THREADS=1),
so a BLAS does not start a thread per core against the run's process limit.

Not here: installing anything. A name that is not installed in the environment is an error, never a download.
Standard library only.
"""
from __future__ import annotations

import os
import re
import sysconfig
from dataclasses import dataclass
from importlib import metadata

DEFAULT = ("numpy", "sympy")  # what the project's code verifier and Python tool offer unless told otherwise
PKG_DIR = "/pkgs"  # where the entries appear inside the sandbox


@dataclass(frozen=True)
class Packages:
    site: str                    # the site-packages folder they come from
    entries: tuple[str, ...]     # its top-level files and folders that are bound
    versions: tuple[tuple[str, str], ...]  # (distribution, version), the named ones and their requirements
    modules: tuple[str, ...]     # the named distributions' importable top-level modules (imported once at start)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def site_packages(site: str | None) -> str:
    """The site-packages folder of `site` (a virtual environment or a site-packages folder); None = this
    interpreter's."""
    if not site:
        return sysconfig.get_paths()["purelib"]
    if not os.path.isdir(site):
        raise ValueError(f"Sandbox.site: no such folder {site!r}")
    for found in sorted(os.scandir(os.path.join(site, "lib")) if os.path.isdir(os.path.join(site, "lib")) else [],
                        key=lambda e: e.name):
        candidate = os.path.join(found.path, "site-packages")
        if found.name.startswith("python") and os.path.isdir(candidate):
            return candidate
    return site


def installed_defaults(site: str | None = None) -> tuple[str, ...]:
    """The DEFAULT packages that `site` has (an environment with neither gives a sandbox with none)."""
    where = site_packages(site)
    have = {_canonical(d.metadata["Name"]) for d in metadata.distributions(path=[where]) if d.metadata["Name"]}
    return tuple(n for n in DEFAULT if n in have)


def _requirements(dist: metadata.Distribution) -> list[str]:
    out = []
    for req in dist.requires or []:
        spec, _, marker = req.partition(";")
        if "extra" in marker:
            continue  # an optional feature's requirement: not needed to import the package
        out.append(re.split(r"[\s<>=!~\[(]", spec.strip(), maxsplit=1)[0])
    return out


def resolve(names, site: str | None = None) -> Packages:
    """The entries of the named distributions and their requirements in `site`; ValueError names a missing one."""
    where = site_packages(site)
    installed = {_canonical(d.metadata["Name"]): d for d in metadata.distributions(path=[where]) if d.metadata["Name"]}
    chosen: dict[str, metadata.Distribution] = {}
    todo = [(str(n), True) for n in names]
    while todo:
        name, asked = todo.pop()
        key = _canonical(name)
        if key in chosen:
            continue
        dist = installed.get(key)
        if dist is None:
            if asked:
                raise ValueError(f"Sandbox.packages: {name!r} is not installed in {where} (installed there: "
                                 f"{', '.join(sorted(installed)[:12])}{', ...' if len(installed) > 12 else ''})")
            continue  # a requirement this platform or Python version does not install
        chosen[key] = dist
        todo += [(r, False) for r in _requirements(dist)]
    entries, modules = set(), []
    for key, dist in chosen.items():
        tops = {f.parts[0] for f in dist.files or [] if f.parts and f.parts[0] not in ("..", "__pycache__")}
        entries |= tops
        if key in {_canonical(n) for n in names}:
            modules += sorted(t.removesuffix(".py") for t in tops if _importable(where, t))
    return Packages(where, tuple(sorted(entries)), tuple(sorted((k, d.version) for k, d in chosen.items())),
                    tuple(modules))


def _importable(where: str, top: str) -> bool:
    path = os.path.join(where, top)
    if top.endswith(".py"):
        return top[:-3].isidentifier()
    return top.isidentifier() and os.path.isfile(os.path.join(path, "__init__.py"))
