"""Docker images for the docker/ssh backends and docker-compose, built with no registry.

``splitbrain images build [--force] [--rebuild-base] [--base IMAGE]`` produces two images:

1. **base** -- a Debian bookworm root filesystem.  If the engine already holds a usable one
   (:data:`BASE_CANDIDATES`, or ``--base``) it is used as is.  Otherwise ``docker/bootstrap-base.sh``
   runs ``debootstrap --variant=minbase bookworm`` from *this machine's* Debian mirror (read at
   run time from ``/etc/apt/sources.list.d/*.sources`` or ``/etc/apt/sources.list``) and
   ``docker import``\\ s the tree as :data:`BASE_TAG`.
2. **node** -- ``splitbrain/node:<version>`` FROM the base: the Debian packages of
   :data:`APT_PACKAGES`, a venv at ``/opt/splitbrain`` with the project's dependencies from the
   machine's pip index (index settings read from ``pip config list`` and ``PIP_*`` at run time
   and passed as build args) and the project itself from a wheel built on the host.

A third kind is built per system under test, on demand (``splitbrain test`` of a docker run whose system needs it,
or ``splitbrain images build --system NAME``): **system** -- ``splitbrain/node-<system>:<version>`` FROM the node
image with the Debian packages the adapter declares (``node_packages``: etcd's ``etcd-server``, Redis's
``redis-server`` and ``redis-sentinel``, RabbitMQ's ``rabbitmq-server``), from the same mirror; rebuilt when its
labels say it was built on another node image or with another package list (:func:`ensure_system_image`).  An
adapter may name the image it shares with another name (``image_name``: ``rabbitmq-mirrored`` runs in
``splitbrain/node-rabbitmq``).

The build context is a temporary directory holding only the rendered Dockerfile, the rendered
``sources.list``, the entrypoint script and the wheel (a few hundred KB).  Existing images are
reused unless ``--force`` (node image) or ``--rebuild-base`` -- except that a node image whose
``splitbrain.source-sha256`` label differs from the work tree's :func:`source_digest` is rebuilt,
so nodes never run stale code after an edit.  The pure parts (source parsing,
Dockerfile rendering, pip settings) are plain functions tested in ``tests/unit/harness_backends``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

if TYPE_CHECKING:
    from harness.revisions import SutBuild

__all__ = [
    "APT_PACKAGES", "BASE_CANDIDATES", "BUILD_PACKAGES", "BASE_TAG", "AptSource", "BuildReport", "NODE_EXCLUDED_DEPS",
    "ImageError", "SUT_DIR", "ensure_revision_image", "render_revision_dockerfile", "revision_image_tag",
    "configure", "ensure_images", "host_apt_sources", "node_image_tag", "node_requirements", "parse_deb822",
    "parse_one_line", "pick_mirror", "pip_build_args", "pip_cert_path", "project_version", "render_dockerfile",
    "render_sources_list", "render_system_dockerfile", "run", "SystemImageReport", "ensure_system_image",
    "image_for_system", "image_name", "node_packages", "system_image_tag",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCKER_DIR = REPO_ROOT / "docker"
SUITE = "bookworm"
BASE_TAG = f"splitbrain/base:{SUITE}"
BASE_CANDIDATES = (BASE_TAG, "python:3.11-slim-bookworm", "python:3.11-bookworm", "python:3.11-slim",
                   "debian:bookworm-slim", "debian:bookworm", "debian:12")
APT_PACKAGES = ("python3", "python3-venv", "iproute2", "iptables", "iputils-ping", "procps", "libfaketime",
                "openssh-server", "ca-certificates", "libnetfilter-queue1")
# Present only while pip installs the dependencies (sdists without wheels, e.g. NetfilterQueue), then purged.
BUILD_PACKAGES = ("gcc", "libc6-dev", "python3-dev", "libnetfilter-queue-dev")
# Dependencies the nodes never import (analysis runs on the host); reason shown by `describe`.
NODE_EXCLUDED_DEPS: Mapping[str, str] = {
    "pyspark": "Spark analysis runs on the host only (~300 MB)",
    "pyarrow": "Parquet files of the Spark analysis, host only (~170 MB)",
    "pyfuse3": "the lazyfs store file system runs on the local backend only (docker refuses store_fs: lazyfs); "
               "building it needs libfuse3-dev",
    "trio": "pyfuse3's event loop, for lazyfs only",
}
# pip settings passed into the build: (`pip config list` key suffix, build arg / env name).
_PIP_KEYS = (("index-url", "PIP_INDEX_URL"), ("extra-index-url", "PIP_EXTRA_INDEX_URL"),
             ("trusted-host", "PIP_TRUSTED_HOST"), ("default-timeout", "PIP_DEFAULT_TIMEOUT"),
             ("timeout", "PIP_DEFAULT_TIMEOUT"))


class ImageError(RuntimeError):
    """An image could not be found or built; the message says which step and why."""


# -- pure: apt sources ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AptSource:
    """One apt source: ``uri`` with ``suites`` and ``components`` (``types`` e.g. ``("deb",)``)."""

    types: tuple[str, ...]
    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]

    def __post_init__(self) -> None:
        if not re.match(r"^[a-z][a-z0-9+.-]*://\S+$", self.uri):
            raise ValueError(f"AptSource: uri must look like scheme://host/path, got {self.uri!r}")
        if not self.suites:
            raise ValueError(f"AptSource {self.uri}: expected at least one suite, got none")


def parse_deb822(text: str) -> list[AptSource]:
    """Parse a deb822 ``.sources`` file (stanzas separated by blank lines; ``Enabled: no`` skipped)."""
    out = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = ""
        for line in stanza.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0] in " \t" and key:
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if not fields.get("uris") or fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields["uris"].split():
            out.append(AptSource(tuple(fields.get("types", "deb").split()), uri.rstrip("/"),
                                 tuple(fields.get("suites", "").split()), tuple(fields.get("components", "").split())))
    return out


def parse_one_line(text: str) -> list[AptSource]:
    """Parse one-line-style ``sources.list`` text (``deb [opts] uri suite comp...``)."""
    out = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        line = re.sub(r"\[[^\]]*\]\s*", "", line)  # options such as [signed-by=...]
        parts = line.split()
        if len(parts) < 3 or parts[0] not in ("deb", "deb-src"):
            continue
        out.append(AptSource((parts[0],), parts[1].rstrip("/"), (parts[2],), tuple(parts[3:])))
    return out


def pick_mirror(sources: Iterable[AptSource], suite: str = SUITE) -> str:
    """The URI of the binary source carrying ``suite`` itself (not -updates/-security) with ``main``."""
    seen = []
    for s in sources:
        seen.append(f"{s.uri} {' '.join(s.suites)}")
        if "deb" in s.types and suite in s.suites and (not s.components or "main" in s.components):
            return s.uri
    raise ImageError(f"no apt source for suite {suite!r} with component main; found: {seen or 'no sources'} "
                     "(looked in /etc/apt/sources.list.d/*.sources and /etc/apt/sources.list)")


def render_sources_list(sources: Iterable[AptSource], suite: str = SUITE) -> str:
    """One-line ``sources.list`` with the binary sources of ``suite`` and its -updates/-security suites."""
    lines = []
    for s in sources:
        suites = [x for x in s.suites if x == suite or x.startswith(f"{suite}-") or x.startswith(f"{suite}/")]
        if "deb" in s.types and suites:
            lines += [f"deb {s.uri} {x} {' '.join(s.components or ('main',))}" for x in suites]
    if not lines:
        raise ImageError(f"no binary apt source for {suite}; cannot write the image's sources.list")
    return "\n".join(dict.fromkeys(lines)) + "\n"


# -- pure: pip settings, requirements, Dockerfile ---------------------------------------------------


def pip_build_args(config_list: str, env: Mapping[str, str]) -> dict[str, str]:
    """Index settings for pip inside the build: ``pip config list`` lines (``global.index-url='...'``)
    overridden by ``PIP_*`` environment variables.  Host-only settings (cert paths, find-links) are
    left out: those paths do not exist in the image."""
    out: dict[str, str] = {}
    for line in config_list.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        suffix = key.strip().rsplit(".", 1)[-1]
        for name, arg in _PIP_KEYS:
            if suffix == name:
                out[arg] = value.strip().strip("'\"")
    for _, arg in _PIP_KEYS:
        if env.get(arg):
            out[arg] = env[arg]
    return out


def pip_cert_path(config_list: str, env: Mapping[str, str]) -> str | None:
    """The CA bundle the host's pip is configured to trust (``cert``/``PIP_CERT``), if any; the build
    copies it in so pip inside the image trusts the same index (e.g. behind an intercepting proxy)."""
    found = None
    for line in config_list.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().rsplit(".", 1)[-1] == "cert":
            found = value.strip().strip("'\"")
    return env.get("PIP_CERT") or found


def node_requirements(pyproject_text: str, excluded: Mapping[str, str] = NODE_EXCLUDED_DEPS) -> list[str]:
    """The project's runtime dependencies minus those the nodes never use."""
    deps = tomllib.loads(pyproject_text)["project"]["dependencies"]
    return [d for d in deps if re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0].strip().lower() not in excluded]


def project_version(pyproject_text: str) -> str:
    return str(tomllib.loads(pyproject_text)["project"]["version"])


def node_image_tag(version: str) -> str:
    return f"splitbrain/node:{version}"


def render_dockerfile(
    *, base_image: str, requirements: Sequence[str], pip_args: Iterable[str],
    apt_packages: Sequence[str] = APT_PACKAGES, template: str | None = None, pip_cert: bool = False,
    labels: Mapping[str, str] | None = None,
) -> str:
    """Render ``docker/Dockerfile.node.j2``.  ``pip_args`` are build-arg names (values go to the build)."""
    if not re.match(r"^[a-z0-9][a-z0-9._/:@-]*$", base_image):
        raise ImageError(f"base image must be a docker reference like debian:bookworm, got {base_image!r}")
    for k, v in (labels or {}).items():  # one LABEL step (each step costs seconds on overlay file systems)
        if not re.match(r"^[a-z0-9][a-z0-9._-]*$", k) or not re.match(r"^[A-Za-z0-9._:/+-]*$", v):
            raise ImageError(f"label {k}={v!r}: expected a lowercase dotted key and a plain value")
    for r in requirements:  # shell-quoted when rendered; a line break would still end the RUN line
        if not r.strip() or any(c in r for c in "\r\n\\"):
            raise ImageError(f"requirement {r!r} is empty or has a line break/backslash (unsafe in a Dockerfile)")
    text = template if template is not None else (DOCKER_DIR / "Dockerfile.node.j2").read_text(encoding="utf-8")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    env.filters["shquote"] = shlex.quote
    return env.from_string(text).render(
        base_image=base_image, requirements=list(requirements), pip_args=sorted(set(pip_args)),
        apt_packages=list(apt_packages), build_packages=list(BUILD_PACKAGES), pip_cert=pip_cert,
        labels=dict(labels or {}),
    )


# -- shell ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildReport:
    base_image: str
    node_image: str
    base_built: bool
    node_built: bool
    base_s: float
    node_s: float

    def describe(self) -> str:
        def part(img: str, built: bool, s: float) -> str:
            return f"{img} ({'built in ' + format(s, '.1f') + ' s' if built else 'reused'})"
        total = self.base_s + self.node_s
        return (f"base {part(self.base_image, self.base_built, self.base_s)}; "
                f"node {part(self.node_image, self.node_built, self.node_s)}; total {total:.1f} s")


def docker_client() -> Any:
    """A docker SDK client, or ImageError saying how to reach the engine."""
    try:
        docker = importlib.import_module("docker")  # the SDK (mypy would see the repo's docker/ dir)
        # a build step can be silent for long (pip installing the node's requirements on a busy machine
        # took over 10 minutes once, and the SDK's read timeout then failed a build that was working)
        client = docker.from_env(timeout=1800)
        client.ping()
        return client
    except Exception as exc:
        raise ImageError(f"cannot reach the docker engine ({exc}); is dockerd running and DOCKER_HOST right?") from None


def host_apt_sources(etc: Path = Path("/etc/apt")) -> list[AptSource]:
    """Every enabled apt source of this machine, deb822 files first."""
    out: list[AptSource] = []
    for f in sorted((etc / "sources.list.d").glob("*.sources")):
        out += parse_deb822(f.read_text(encoding="utf-8", errors="replace"))
    for f in [etc / "sources.list", *sorted((etc / "sources.list.d").glob("*.list"))]:
        if f.is_file():
            out += parse_one_line(f.read_text(encoding="utf-8", errors="replace"))
    return out


def _has_image(client: Any, ref: str) -> bool:
    try:
        client.images.get(ref)
        return True
    except Exception:
        return False


def find_base(client: Any) -> str | None:
    return next((c for c in BASE_CANDIDATES if _has_image(client, c)), None)


def bootstrap_base(sources: Sequence[AptSource], tag: str = BASE_TAG) -> None:
    """debootstrap + docker import (``docker/bootstrap-base.sh``); needs root and debootstrap."""
    if shutil.which("debootstrap") is None:
        raise ImageError("no Debian base image in the engine and debootstrap is not installed; "
                         "run scripts/setup.sh (or apt-get install debootstrap), or pass --base IMAGE")
    if os.geteuid() != 0:
        raise ImageError("building the base image with debootstrap needs root; or pass --base IMAGE")
    with tempfile.NamedTemporaryFile("w", suffix=".list", delete=False) as f:
        f.write(render_sources_list(sources))
    try:
        # The node's packages go in with debootstrap: dpkg on the host's file system is much faster than
        # inside a build step on an overlay file system; the node build's apt step then finds them installed.
        res = subprocess.run(["sh", str(DOCKER_DIR / "bootstrap-base.sh"), pick_mirror(sources), SUITE, tag, f.name,
                              ",".join(APT_PACKAGES)], capture_output=True, text=True, timeout=1200)
    finally:
        os.unlink(f.name)
    if res.returncode != 0:
        raise ImageError(f"bootstrap-base.sh failed (exit {res.returncode}): {res.stderr.strip()[-2000:]}")


def _package_dirs() -> list[str]:
    """The project's top-level packages (pyproject's setuptools ``include`` patterns without the ``*``)."""
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    includes = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({p.rstrip("*") for p in includes})


def source_digest(root: Path = REPO_ROOT) -> str:
    """sha256 over what goes into the node image: the packages' files, pyproject.toml and the docker/ files."""
    h = hashlib.sha256()
    files = [root / "pyproject.toml", *sorted((root / "docker").glob("*"))]
    for pkg in _package_dirs():
        files += sorted(p for p in (root / pkg).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _docker_build(client: Any, ctx: Path, tag: str, *, network_mode: str, log: Any = None,
                  buildargs: Mapping[str, str] | None = None) -> None:
    """``docker build`` of the context ``ctx`` as ``tag``, each output line to ``log``.

    Raises:
        ImageError: the build failed; the message ends with its last 40 lines of output.
    """
    tail: list[str] = []
    for chunk in client.api.build(path=str(ctx), tag=tag, buildargs=dict(buildargs or {}), rm=True, forcerm=True,
                                  decode=True, network_mode=network_mode):
        line = str(chunk.get("stream", "")).rstrip()
        if line:
            tail = (tail + [line])[-40:]
            if log is not None:
                log(line)
        if "error" in chunk:
            raise ImageError(f"docker build of {tag} failed: {chunk['error'].strip()}\n" + "\n".join(tail))


def _image_label(client: Any, ref: str, key: str) -> str | None:
    try:
        labels = client.images.get(ref).labels or {}
    except Exception:
        return None
    value = labels.get(key)
    return str(value) if value is not None else None


def build_wheel(out_dir: Path) -> Path:
    """``pip wheel --no-deps`` of a copy of the project (so the work tree gets no build/ litter)."""
    src = out_dir / "src"
    src.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        if (REPO_ROOT / name).exists():
            shutil.copy2(REPO_ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for pkg in _package_dirs():
        if (REPO_ROOT / pkg).is_dir():
            shutil.copytree(REPO_ROOT / pkg, src / pkg, ignore=ignore)
    wheels = out_dir / "wheels"
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(src)],
                         capture_output=True, text=True, timeout=600)
    found = sorted(wheels.glob("*.whl"))
    if res.returncode != 0 or len(found) != 1:
        raise ImageError(f"pip wheel of the project failed (exit {res.returncode}, wheels {found}): "
                         f"{res.stderr.strip()[-2000:]}")
    return found[0]


def _pip_config_list() -> str:
    res = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60)
    return res.stdout if res.returncode == 0 else ""


def build_node(client: Any, base_image: str, tag: str, log: Any = None, *, digest: str | None = None) -> None:
    """Stage the context in a temp dir and build ``tag`` FROM ``base_image`` (``digest``: the work tree's
    :func:`source_digest`, if the caller has it already)."""
    pyproject_text = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    config_list = _pip_config_list()
    pip_args = pip_build_args(config_list, os.environ)
    cert = pip_cert_path(config_list, os.environ)
    if cert and not Path(cert).is_file():
        raise ImageError(f"pip is configured with cert {cert!r} but that file does not exist")
    with tempfile.TemporaryDirectory(prefix="splitbrain-image-") as tmp:
        ctx = Path(tmp) / "ctx"
        ctx.mkdir()
        wheel = build_wheel(Path(tmp) / "wheel")
        (ctx / "wheels").mkdir()
        shutil.copy2(wheel, ctx / "wheels" / wheel.name)
        (ctx / "build").mkdir()
        shutil.copy2(DOCKER_DIR / "node-entrypoint.sh", ctx / "build" / "node-entrypoint.sh")
        shutil.copy2(DOCKER_DIR / ".dockerignore", ctx / ".dockerignore")
        if cert:
            shutil.copy2(cert, ctx / "build" / "pip-ca.crt")
        (ctx / "build" / "sources.list").write_text(render_sources_list(host_apt_sources()), encoding="utf-8")
        labels = {"splitbrain.image": "node", "splitbrain.version": project_version(pyproject_text),
                  "splitbrain.wheel-sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
                  "splitbrain.source-sha256": digest or source_digest()}
        (ctx / "Dockerfile").write_text(render_dockerfile(
            base_image=base_image, requirements=node_requirements(pyproject_text), pip_args=pip_args,
            pip_cert=bool(cert), labels=labels,
        ), encoding="utf-8")
        _docker_build(client, ctx, tag, network_mode="bridge", log=log, buildargs=pip_args)


def ensure_images(
    *, force: bool = False, rebuild_base: bool = False, base: str | None = None, log: Any = None,
    node_tag: str | None = None, base_tag: str = BASE_TAG,
) -> BuildReport:
    """Make sure the node image exists, building what is missing.

    ``force`` rebuilds the node image (the base is reused: it does not depend on the project, and the
    cached apt/pip layers make this quick); ``rebuild_base`` also debootstraps a fresh base (unless
    ``base`` names one).  ``node_tag``/``base_tag`` build under other names (the benchmark's
    from-scratch build uses them, so it never removes images that running tests use)."""
    client = docker_client()
    tag = node_tag or node_image_tag(project_version((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")))
    base_built = node_built = False
    base_s = node_s = 0.0
    digest = source_digest()
    stale = _has_image(client, tag) and _image_label(client, tag, "splitbrain.source-sha256") != digest
    if stale:
        print(f"images: {tag} was built from other sources than this work tree; rebuilding it", file=sys.stderr)
    if base is None and not (force or rebuild_base or stale) and _has_image(client, tag):
        return BuildReport(find_base(client) or "(unknown)", tag, False, False, 0.0, 0.0)
    if base is None:
        base = None if rebuild_base else find_base(client)
        if base is None:
            t0 = time.monotonic()
            bootstrap_base(host_apt_sources(), base_tag)
            base, base_built, base_s = base_tag, True, time.monotonic() - t0
    elif not _has_image(client, base):
        raise ImageError(f"--base {base}: the engine has no such image (and no registry can be assumed); "
                         f"images present: {[t for i in client.images.list() for t in i.tags][:20]}")
    if force or rebuild_base or base_built or stale or not _has_image(client, tag):
        t0 = time.monotonic()
        build_node(client, base, tag, log, digest=digest)
        node_built, node_s = True, time.monotonic() - t0
    return BuildReport(base, tag, base_built, node_built, base_s, node_s)


# -- a node image per revision of the cluster ----------------------------------------------------------

# The revision's tree and its venv inside the image (harness.commands._backend.DOCKER_SUT_PYTHON names the python).
SUT_DIR = "/opt/sut"
REVISION_LABEL = "splitbrain.sut-revision"
REVISION_BASE_LABEL = "splitbrain.sut-base-id"


def revision_image_tag(revision: str) -> str:
    """``splitbrain/node:sut-<sha12>``: the node image of one revision of the cluster."""
    if not re.match(r"^[0-9a-f]{40}$", revision):
        raise ImageError(f"revision image: expected a full commit sha, got {revision!r}")
    return f"splitbrain/node:sut-{revision[:12]}"


def render_revision_dockerfile(*, node_image: str, packages: Sequence[str], labels: Mapping[str, str],
                               system_package: str) -> str:
    """The revision image: the harness's node image plus the revision's packages in ``/opt/sut/src`` and a venv
    whose one ``.pth`` puts that tree first and the node image's own site-packages (the dependencies) after it --
    the same layout as a local build (:mod:`harness.revisions`), checked by importing the revision in isolated
    mode: ``system_package`` (the build's :attr:`~harness.revisions.SutBuild.package`, one of ``packages``) must
    come from ``/opt/sut/src``.  No network is needed: nothing is installed from an index."""
    for k, v in labels.items():
        if not re.match(r"^[a-z0-9][a-z0-9._-]*$", k) or not re.match(r"^[A-Za-z0-9._:/+-]*$", v):
            raise ImageError(f"label {k}={v!r}: expected a lowercase dotted key and a plain value")
    if not re.match(r"^[a-z0-9][a-z0-9._/:@-]*$", node_image):
        raise ImageError(f"node image must be a docker reference, got {node_image!r}")
    for pkg in packages:
        if not re.match(r"^[a-z_][a-z0-9_]*$", pkg):
            raise ImageError(f"package directory {pkg!r} is not a Python package name")
    if system_package not in packages:
        raise ImageError(f"the system's package {system_package!r} is not among the revision's packages "
                         f"{list(packages)}")
    copies = f"COPY src/ {SUT_DIR}/src/\n"  # one step: the context holds exactly these packages
    check = (f"import {system_package}, harness.cli; "
             f"assert {system_package}.__file__.startswith('{SUT_DIR}/src/'), {system_package}.__file__")
    label_line = "LABEL" + "".join(f' {k}="{v}"' for k, v in labels.items()) + "\n"
    return (f"FROM {node_image}\n{copies}"
            f"RUN /usr/bin/python3 -m venv --without-pip {SUT_DIR}/venv \\\n"
            f" && pth=$({SUT_DIR}/venv/bin/python -I -c \"import sysconfig; print(sysconfig.get_paths()['purelib'])\")"
            f" \\\n && printf '%s\\n' {SUT_DIR}/src $(/opt/splitbrain/bin/python -I -c \"import site; "
            f"print(' '.join(site.getsitepackages()))\") > \"$pth/_splitbrain_sut.pth\" \\\n"
            f" && {SUT_DIR}/venv/bin/python -I -m compileall -q {SUT_DIR}/src >/dev/null \\\n"
            f" && {SUT_DIR}/venv/bin/python -I -c {shlex.quote(check)}\n"
            f"{label_line}")


def ensure_revision_image(build: SutBuild, *, log: Any = None) -> str:
    """The node image of ``build``'s revision (a :class:`harness.revisions.SutBuild`), built from the build's
    exported tree on top of the current node image (itself built or refreshed first) if the engine lacks it or it
    was built on another node image.  Returns its tag.

    Raises:
        ImageError: the engine is unreachable or a build step failed (the step's output tail in the message).
    """
    node = ensure_images(log=log).node_image
    client = docker_client()
    tag = revision_image_tag(build.revision)
    base_id = str(client.images.get(node).id)
    if (_image_label(client, tag, REVISION_LABEL) == build.revision
            and _image_label(client, tag, REVISION_BASE_LABEL) == base_id.replace("sha256:", "")):
        return tag
    packages = sorted(p.name for p in Path(build.source).iterdir()
                      if p.is_dir() and (p / "__init__.py").is_file())
    with tempfile.TemporaryDirectory(prefix="splitbrain-sut-image-") as tmp:
        ctx = Path(tmp)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        for pkg in packages:
            shutil.copytree(Path(build.source) / pkg, ctx / "src" / pkg, ignore=ignore)
        (ctx / "Dockerfile").write_text(render_revision_dockerfile(
            node_image=node, packages=packages, system_package=build.package,
            labels={REVISION_LABEL: build.revision, REVISION_BASE_LABEL: base_id.replace("sha256:", ""),
                    "splitbrain.image": "node-sut"}), encoding="utf-8")
        _docker_build(client, ctx, tag, network_mode="none", log=log)
    return tag


# -- a node image per system under test ----------------------------------------------------------------

SYSTEM_LABEL = "splitbrain.system"
SYSTEM_PACKAGES_LABEL = "splitbrain.system-packages"
SYSTEM_BASE_LABEL = "splitbrain.system-base-id"
_DEB_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")  # Debian policy 5.6.7: a package name


def node_packages(system: object) -> tuple[str, ...]:
    """The Debian packages ``system`` (a :class:`systems.System`) needs on its nodes beyond the node image's
    :data:`APT_PACKAGES`: its ``node_packages`` attribute, ``()`` without one (our own cluster, the counter).

    The registry's Protocol does not carry the member yet, so it is read here, once, with its type checked.

    Raises:
        ImageError: the attribute is not a tuple of Debian package names (the message names the system).
    """
    raw = getattr(system, "node_packages", ())
    name = getattr(system, "name", type(system).__name__)
    if not isinstance(raw, tuple) or not all(isinstance(p, str) and _DEB_NAME.match(p) for p in raw):
        raise ImageError(f"system {name!r}: node_packages must be a tuple of Debian package names, got {raw!r}")
    return raw


def image_name(system: object) -> str:
    """The name ``system``'s node image is built under (``splitbrain/node-<name>``): its ``image_name`` attribute,
    else its own name.  Two adapters, or two names of one adapter, that install the same packages and differ only
    in settings share one image by giving the same ``image_name`` (``rabbitmq`` and ``rabbitmq-mirrored``).

    Raises:
        ImageError: the attribute is not a string (the message names the system); :func:`system_image_tag` checks
            what a docker name may hold.
    """
    name = getattr(system, "name", type(system).__name__)
    raw = getattr(system, "image_name", name)
    if not isinstance(raw, str):
        raise ImageError(f"system {name!r}: image_name must be a string, got {raw!r}")
    return raw


def system_image_tag(system: str, version: str) -> str:
    """``splitbrain/node-<system>:<version>``: the node image plus the Debian packages ``system`` needs.

    Raises:
        ImageError: ``system`` cannot be part of a docker repository name (lowercase letters, digits, ``.-_``).
    """
    if not re.match(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$", system):
        raise ImageError(f"system image: {system!r} cannot be part of an image name (lowercase a-z, 0-9, '.', "
                         "'_', '-' between them)")
    return f"splitbrain/node-{system}:{version}"


def render_system_dockerfile(*, node_image: str, packages: Sequence[str], labels: Mapping[str, str]) -> str:
    """The system image: ``node_image`` plus ``packages`` from the build machine's Debian mirror (the context's
    ``sources.list``, rendered by :func:`render_sources_list` as for the node image).  Debian's maintainer scripts
    would start each daemon as a service (there is no init to start it in a container, and the harness starts its
    own): a ``policy-rc.d`` forbids that during the install and is removed after it."""
    if not re.match(r"^[a-z0-9][a-z0-9._/:@-]*$", node_image):
        raise ImageError(f"node image must be a docker reference, got {node_image!r}")
    if not packages:
        raise ImageError("system image: no packages to install (a system without node_packages uses the node image)")
    for pkg in packages:
        if not _DEB_NAME.match(pkg):
            raise ImageError(f"system image: {pkg!r} is not a Debian package name")
    for k, v in labels.items():
        if not re.match(r"^[a-z0-9][a-z0-9._-]*$", k) or not re.match(r"^[A-Za-z0-9._:/+,-]*$", v):
            raise ImageError(f"label {k}={v!r}: expected a lowercase dotted key and a plain value")
    label_line = "LABEL" + "".join(f' {k}="{v}"' for k, v in labels.items()) + "\n"
    return (f"FROM {node_image}\n"
            "COPY sources.list /etc/apt/sources.list\n"
            "RUN printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d \\\n"
            " && apt-get update -qq \\\n"
            f" && apt-get install -y -qq --no-install-recommends {' '.join(packages)} >/dev/null \\\n"
            " && rm -f /usr/sbin/policy-rc.d \\\n"
            " && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb\n"
            f"{label_line}")


@dataclass(frozen=True)
class SystemImageReport:
    """What :func:`ensure_system_image` did: the node image's report, the system image and whether it was built."""

    node: BuildReport
    image: str
    packages: tuple[str, ...]
    built: bool
    seconds: float

    def describe_system(self) -> str:
        how = f"built in {self.seconds:.1f} s" if self.built else "reused"
        return f"{self.image} [{' '.join(self.packages)}] ({how})"

    def describe(self) -> str:
        return f"{self.node.describe()}; system {self.describe_system()}"


def ensure_system_image(system: str, *, force: bool = False, log: Any = None) -> SystemImageReport | None:
    """The node image for a run of ``system`` (a name in :mod:`systems`): None when the system needs no packages
    beyond the node image (its runs use the node image itself), else :func:`system_image_tag` of its
    :func:`image_name` (names that share an image share its build), built FROM the
    current node image (itself built or refreshed first) if the engine lacks it, ``force``, or it was built on
    another node image or with another package list (its labels say which).

    Raises:
        ImageError: unknown or broken system (message lists the known ones), engine unreachable, or a build step
            failed (the step's output tail in the message).
    """
    import systems

    try:
        adapter = systems.get(system)
    except systems.RegistryError as exc:
        raise ImageError(f"--system {system}: {exc}") from None
    packages = node_packages(adapter)
    if not packages:
        return None
    node = ensure_images(log=log)
    client = docker_client()
    version = project_version((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    tag = system_image_tag(image_name(adapter), version)
    base_id = str(client.images.get(node.node_image).id).replace("sha256:", "")
    wanted = ",".join(packages)
    if (not force and _image_label(client, tag, SYSTEM_BASE_LABEL) == base_id
            and _image_label(client, tag, SYSTEM_PACKAGES_LABEL) == wanted):
        return SystemImageReport(node, tag, packages, False, 0.0)
    t0 = time.monotonic()
    old = _image_id(client, tag)
    with tempfile.TemporaryDirectory(prefix="splitbrain-system-image-") as tmp:
        ctx = Path(tmp)
        (ctx / "sources.list").write_text(render_sources_list(host_apt_sources()), encoding="utf-8")
        (ctx / "Dockerfile").write_text(render_system_dockerfile(
            node_image=node.node_image, packages=packages,
            labels={"splitbrain.image": "node-system", SYSTEM_LABEL: image_name(adapter),
                    SYSTEM_PACKAGES_LABEL: wanted,
                    SYSTEM_BASE_LABEL: base_id}), encoding="utf-8")
        _docker_build(client, ctx, tag, network_mode="bridge", log=log)
    if old is not None and old != _image_id(client, tag):
        # the replaced image, now untagged, would keep its ~100 MB package layer after every node-image rebuild;
        # the engine refuses (and we leave it) while a container still uses it
        with contextlib.suppress(Exception):
            client.images.remove(old)
    return SystemImageReport(node, tag, packages, True, time.monotonic() - t0)


def _image_id(client: Any, ref: str) -> str | None:
    try:
        return str(client.images.get(ref).id)
    except Exception:
        return None


def image_for_system(system: str, *, log: Any = None) -> str | None:
    """The image a docker run of ``system`` starts its containers from, built on demand; None: the node image
    (:func:`harness.control.docker.default_image`), for a system that needs no packages beyond it."""
    report = ensure_system_image(system, log=log)
    return None if report is None else report.image


# -- CLI: `splitbrain images build` -----------------------------------------------------------------


def configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="images_cmd", metavar="ACTION", required=True)
    b = sub.add_parser("build", help="build splitbrain/base (if needed) and splitbrain/node offline")
    b.add_argument("--force", action="store_true", help="rebuild the node image even if it exists (base reused)")
    b.add_argument("--rebuild-base", action="store_true", help="also debootstrap a fresh base image")
    b.add_argument("--base", help="use this engine image as the base (no debootstrap)")
    b.add_argument("--verbose", action="store_true", help="stream the docker build output")
    b.add_argument("--system", metavar="NAME",
                   help="also build the node image of this system under test (its Debian packages on top of the "
                        "node image; with --force rebuilt too)")


def run(args: argparse.Namespace) -> int:
    log = print if args.verbose else None
    system = getattr(args, "system", None)
    try:
        if system is not None:
            import systems

            try:  # an unknown name is refused before anything is built
                systems.get(system)
            except systems.RegistryError as exc:
                raise ImageError(f"--system {system}: {exc}") from None
        report = ensure_images(force=args.force, rebuild_base=args.rebuild_base, base=args.base, log=log)
        sys_report = ensure_system_image(system, force=args.force, log=log) if system is not None else None
    except ImageError as exc:
        print(f"images: {exc}", file=sys.stderr)
        return 2
    print(f"images: {report.describe()}")
    if system is not None:
        print(f"images: system {system}: {sys_report.describe_system() if sys_report else 'needs no packages'}")
    return 0
