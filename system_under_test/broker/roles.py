"""The role a broker plays in its broker set (the one table of role names)."""

from __future__ import annotations

import enum


class Role(enum.Enum):
    """NONE until the broker adopted a master epoch; then MASTER or SLAVE."""

    NONE = "NONE"
    MASTER = "MASTER"
    SLAVE = "SLAVE"
