"""Creating the control backend a spec names (local network namespaces, docker containers, SSH hosts).

The docker and ssh backends are imported lazily, only when chosen, so a machine without the docker SDK or
paramiko can still run local tests.  Any failure to *create* a backend (module missing, not root, engine
unreachable, node unreachable) is a :class:`BackendUnavailable` -- an environment problem the user fixes, which
the commands report with exit code 2, never a crashed test.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

from harness.revisions import SutBuild, node_command
from harness.spec import SpecError, TestSpec

log = logging.getLogger("splitbrain.backend")

__all__ = ["BackendUnavailable", "backend_module", "open_remote", "ssh_targets", "sut_node_command"]

_MODULES = {"local": "harness.control.local", "docker": "harness.control.docker", "ssh": "harness.control.ssh"}


class BackendUnavailable(RuntimeError):
    """The chosen backend cannot be used here (names the backend, the reason and what to do)."""


def backend_module(backend: str) -> Any:
    """Import the backend's module.

    Raises:
        BackendUnavailable: the module (or one of its dependencies) is missing.
    """
    if backend not in _MODULES:
        raise BackendUnavailable(f"unknown backend {backend!r}; expected one of {sorted(_MODULES)}")
    try:
        return importlib.import_module(_MODULES[backend])
    except ImportError as exc:
        raise BackendUnavailable(f"backend {backend!r} not available yet ({_MODULES[backend]} cannot be imported: "
                                 f"{exc}); use `--backend local` or install its dependencies") from None


def ssh_targets(spec: TestSpec, nodes_file: str | None) -> dict[str, Any]:
    """The spec's nodes resolved from a nodes file (ssh backend).

    Raises:
        SpecError: no nodes file, or a node of the spec is missing from it.
    """
    if not nodes_file:
        raise SpecError(spec.source, "backend", "ssh", "a --nodes-file naming a host for every node (ssh backend)")
    mod = backend_module("ssh")
    try:
        targets = mod.load_nodes_file(nodes_file)
    except (OSError, ValueError) as exc:
        raise SpecError(nodes_file, "<file>", None, f"a readable nodes file ({' '.join(str(exc).split())})") from None
    missing = [n for n in spec.nodes.all if n not in targets]
    if missing:
        raise SpecError(nodes_file, "nodes", missing, f"a host for every node of the spec {list(spec.nodes.all)}")
    return {n: targets[n] for n in spec.nodes.all}


async def open_remote(spec: TestSpec, *, nodes_file: str | None = None, state_dir: Path | None = None,
                      results_dir: str | None = None, sut: SutBuild | None = None) -> Any:
    """Create the remote for ``spec.backend`` over ``spec.nodes.all``.  The caller must ``await remote.close()``.

    The run is owned by this process (:mod:`harness.control.owner`), recorded with ``results_dir``; the local
    and docker backends also start their supervisor (clean-up if this process is killed).  With ``sut`` (a build
    of another revision, :mod:`harness.revisions`) the docker backend's containers come from that revision's
    node image (built here first if missing); :func:`sut_node_command` then says how its nodes start.

    Raises:
        BackendUnavailable: the backend cannot be created here (message says why and what to do).
        SpecError: ssh backend without a usable nodes file.
    """
    mod = backend_module(spec.backend)
    from harness.control.base import ControlError

    try:
        from harness.control.owner import make_owner

        owner = make_owner(results_dir=str(Path(results_dir).resolve()) if results_dir else None)
        if spec.backend == "local":
            return await mod.LocalRemote.create(list(spec.nodes.all), state_dir=state_dir, owner=owner)
        if spec.backend == "docker":
            image = None
            if sut is not None:
                import asyncio

                from harness.images import ImageError, ensure_revision_image

                try:
                    image = await asyncio.to_thread(ensure_revision_image, sut)
                except ImageError as exc:
                    raise BackendUnavailable(f"backend 'docker': no node image for revision {sut.short}: "
                                             f"{exc}") from None
            else:
                image = await system_image(spec)
            return await mod.DockerRemote.create(list(spec.nodes.all), owner=owner, image=image)
        targets = ssh_targets(spec, nodes_file)
        try:
            settings = mod.load_nodes_settings(nodes_file)
        except ValueError as exc:  # NodesFileError: bad python / install value or an unknown key
            raise SpecError(str(nodes_file), "<file>", None, f"a valid nodes file ({exc})") from None
        remote = await mod.SshRemote.create(targets, python=settings.python)
        if settings.install:
            try:
                versions = await remote.install_project()
            except BaseException:
                await remote.close()
                raise
            log.info("installed splitbrain %s on %d ssh node(s)", sorted(set(versions.values())), len(versions))
        return remote
    except ControlError as exc:
        raise BackendUnavailable(f"backend {spec.backend!r} could not be created: {exc}") from None


async def system_image(spec: TestSpec) -> str | None:
    """The image of a docker run of ``spec.system``: None (the node image) for a system that needs no Debian
    packages beyond it, else its own image, built on demand (:func:`harness.images.ensure_system_image`).

    Raises:
        BackendUnavailable: that image could not be built (the message says which step failed and why).
    """
    import asyncio

    from harness.images import ImageError, image_for_system

    try:
        return await asyncio.to_thread(image_for_system, spec.system)
    except ImageError as exc:
        raise BackendUnavailable(f"backend 'docker': no node image for system {spec.system!r}: {exc}") from None


# Where a revision's interpreter sits inside its node image (:func:`harness.images.ensure_revision_image`).
DOCKER_SUT_PYTHON = "/opt/sut/venv/bin/python"


async def sut_node_command(remote: Any, spec: TestSpec, sut: SutBuild) -> list[str]:
    """The argv prefix with which ``remote``'s nodes start the node commands of ``sut``'s revision: the build's
    own interpreter on the local backend, the one baked into the revision's image on docker, and on ssh a copy of
    the build installed on every host now (:meth:`harness.control.ssh.SshRemote.install_revision`).

    Raises:
        BackendUnavailable: installing the build on an ssh host failed (names the host and why).
    """
    if spec.backend == "local":
        return node_command(str(sut.python))
    if spec.backend == "docker":
        return node_command(DOCKER_SUT_PYTHON)
    from harness.control.base import ControlError

    try:
        python = await remote.install_revision(sut)
    except ControlError as exc:
        raise BackendUnavailable(f"backend 'ssh': revision {sut.short} could not be installed: {exc}") from None
    return node_command(python)
