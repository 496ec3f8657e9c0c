"""The spec's ``cluster:`` map for a system with no options of its own: the keys every adapter may share.

Each adapter parses its spec's ``cluster:`` map itself (:meth:`systems.System.options`), so a key means what that
system says it means and a key it does not know is refused on ``cluster.<key>`` before anything starts.  What
generic harness code reads of any system's options is :class:`harness.protocols.SystemOptions`: a ``version``
label (recorded as the run's ``cluster_version``, :mod:`harness.provenance`) and a ``revision`` of this
repository that the nodes run (None here: only a system running this repository's node commands has one).

:class:`PlainOptions` is what etcd, Redis, RabbitMQ and the counter service accept: ``version`` and
``system_options``, a map the adapter reads and validates itself when it makes its DB (Redis's replication
settings, :mod:`systems.redis.config`; RabbitMQ's queue type and cluster settings, :mod:`systems.rabbitmq.config`;
the others take none and ignore it).  Our own cluster's options are
:class:`systems.splitbrain.options.ClusterOptions`, which shares :func:`check_version`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.errors import SpecError

__all__ = ["VERSION_WHAT", "PlainOptions", "check_version", "plain_options"]

_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
VERSION_WHAT = ("a version label string: 1-64 chars of [A-Za-z0-9_.+-] starting with a letter or digit "
                "(quote numbers in YAML: version: \"0.3\")")


def check_version(value: Any, *, file: str) -> str:
    """``value`` if it is a version label (:data:`VERSION_WHAT`).

    Raises:
        SpecError: on ``cluster.version``, naming the value and what a label looks like.
    """
    if not isinstance(value, str) or not _VERSION_RE.match(value):
        raise SpecError(file, "cluster.version", value, VERSION_WHAT)
    return value


@dataclass(frozen=True)
class PlainOptions:
    """The ``cluster:`` options of a system that has none of its own (see the module docstring).

    Attributes:
        version: a label only, never passed to the nodes; results.json records it as ``cluster_version``.
        system_options: the adapter's own map, validated by the adapter when it makes its DB (SpecError on
            ``cluster.system_options.<key>``).
    """

    version: str | None = None
    system_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def revision(self) -> None:
        """None: these systems do not run this repository's node commands, so no revision of it can be swapped
        in (``cluster.revision`` is refused by :func:`plain_options`)."""
        return None


_KEYS = {"version": VERSION_WHAT, "system_options": "a map of the system adapter's own options (docs/systems.md)"}


def plain_options(raw: Mapping[str, Any], *, file: str, system: str) -> PlainOptions:
    """Validate the ``cluster:`` map of ``system`` as :class:`PlainOptions`.

    Raises:
        SpecError: naming ``cluster.<key>``: a key other than ``version`` and ``system_options`` (which only our
            own cluster reads: its options are not this system's), a bad label, or ``system_options`` not a map.
    """
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in _KEYS:
            raise SpecError(file, f"cluster.{key}", value,
                            f"one of {sorted(_KEYS)}: system {system!r} has no option {key!r} (the other "
                            f"cluster: keys are our own cluster's, docs/systems.md)")
        if key == "version":
            values[key] = check_version(value, file=file)
        elif not isinstance(value, Mapping):
            raise SpecError(file, "cluster.system_options", value, _KEYS[key])
        else:
            values[key] = dict(value)
    return PlainOptions(**values)
