"""Node roles: the one table of what a spec's ``nodes:`` map may hold.

A *node role* is a kind of node a system under test has, and the key of ``nodes:`` that gives its nodes.  Each
role is one row (:class:`NodeRole`): its name, its shape, the prefix of the node names a count makes, its default
and its bounds.  Three rows are built in (:data:`BUILT_IN`):

* ``controllers`` -- our cluster's controllers (a count, named ``c1``.., or a list of names);
* ``broker_sets`` -- our cluster's broker sets, each a set of replicas (the one *sets* shape: a list of lists of
  names, or ``{count, replicas}``, named ``b<i>-<j>``);
* ``members`` -- the peers of a system whose nodes are all alike (etcd, Redis, RabbitMQ: ``m1``..).

An adapter (:class:`systems.System`) declares the roles it reads by name, and may add *flat* roles of its own as
rows (``NodeRole("voters", prefix="v")``): a system with ``nodes: {voters: 3, witnesses: 2}``.  :func:`role_table`
is the vocabulary for one system: the built-in rows, then the adapter's rows, in that order -- the order
``--nodes`` assigns names in and the order of :attr:`nemesis.targets.Topology.all` (so random subsets draw from
the same list they always did).  Every flat role a system declares is a selector pool of its own
(:mod:`nemesis.targets`).

Pure: the table is data, checked when it is built (:class:`RoleTableError`, a ``ValueError``, naming the row).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BUILT_IN", "NodeRole", "RoleTableError", "declared_names", "own_rows", "role_table"]

_ROLE_RE = re.compile(r"^[a-z][a-z_]{1,31}$")
_PREFIX_RE = re.compile(r"^[a-z][a-z-]{0,5}$")


@dataclass(frozen=True)
class NodeRole:
    """One node role.

    Attributes:
        name: the key of ``nodes:`` (lowercase letters and ``_``).
        prefix: node names of a count are ``<prefix>1`` .. ``<prefix>N`` (sets: ``<prefix><i>-<j>``).
        default: how many nodes when the spec leaves the role out (sets: how many sets).
        lo, hi: the bounds of a count or of the length of a list of names.
        noun: one node of the role, for the role a node had when a fault hit it (``member-leader``); empty: the
            name without its final ``s``.
        sets: the shape of ``broker_sets`` (sets of replicas); only the built-in row has it.
    """

    name: str
    prefix: str
    default: int = 3
    lo: int = 1
    hi: int = 9
    noun: str = ""
    sets: bool = False

    @property
    def one(self) -> str:
        """What one node of the role is called (``member`` for ``members``)."""
        return self.noun or self.name.removesuffix("s")


BUILT_IN: tuple[NodeRole, ...] = (
    NodeRole("controllers", "c", noun="controller"),
    NodeRole("broker_sets", "b", default=1, lo=0, hi=16, noun="broker", sets=True),
    NodeRole("members", "m", noun="member"),
)
"""The built-in rows, in ``--nodes`` order: controllers, then broker replicas, then members."""
_BUILT_IN_OF = {r.name: r for r in BUILT_IN}


class RoleTableError(ValueError):
    """An adapter's role declaration that cannot be a table: a name twice, an unknown built-in name, a bad row."""


def _check_row(row: NodeRole) -> None:
    if not _ROLE_RE.match(row.name):
        raise RoleTableError(f"role {row.name!r}: a name of 2-32 lowercase letters or '_'")
    if row.sets:
        raise RoleTableError(f"role {row.name!r}: only the built-in broker_sets has the sets shape")
    if not _PREFIX_RE.match(row.prefix):
        raise RoleTableError(f"role {row.name!r}: prefix {row.prefix!r} is not 1-6 lowercase letters or '-'")
    if not 1 <= row.lo <= row.default <= row.hi <= 9:
        raise RoleTableError(f"role {row.name!r}: needs 1 <= lo <= default <= hi <= 9; got lo={row.lo}, "
                             f"default={row.default}, hi={row.hi}")


def own_rows(declared: Sequence[str | NodeRole]) -> tuple[NodeRole, ...]:
    """The rows an adapter adds (its declared :class:`NodeRole` entries), checked.

    Raises:
        RoleTableError: a row is malformed or takes a built-in name.
    """
    rows = tuple(r for r in declared if isinstance(r, NodeRole))
    for row in rows:
        if row.name in _BUILT_IN_OF:
            raise RoleTableError(f"role {row.name!r} is built in; declare it by name")
        _check_row(row)
    return rows


def declared_names(declared: Sequence[str | NodeRole]) -> tuple[str, ...]:
    """The names of the roles an adapter declares, as it lists them."""
    return tuple(r.name if isinstance(r, NodeRole) else r for r in declared)


def role_table(declared: Sequence[str | NodeRole]) -> tuple[NodeRole, ...]:
    """The rows of the roles an adapter declares (names of built-in rows, or rows of its own), in table order:
    built-in rows first (controllers, broker_sets, members), then its own in the order it lists them.

    Raises:
        RoleTableError: empty; a name twice; a name that is no built-in row; a malformed row of its own.
    """
    if not declared:
        raise RoleTableError("a system declares at least one node role")
    names = declared_names(declared)
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise RoleTableError(f"roles declared twice: {twice}")
    unknown = [r for r in declared if isinstance(r, str) and r not in _BUILT_IN_OF]
    if unknown:
        raise RoleTableError(f"unknown roles {unknown}: name a built-in role ({', '.join(_BUILT_IN_OF)}) or "
                             f"declare a row of your own (harness.roles.NodeRole)")
    if not all(isinstance(r, str | NodeRole) for r in declared):
        raise RoleTableError(f"roles are names or harness.roles.NodeRole rows; got {list(declared)!r}")
    own = own_rows(declared)
    return (*(r for r in BUILT_IN if r.name in names), *own)
