"""What the broker's request handlers and role changes see of a running broker (a Protocol).

:class:`~.lifecycle.Broker` owns this state; :mod:`.server` (the request handlers) and
:mod:`.role_change` (the role-change executor) read and change it through :class:`BrokerState`, so
neither imports the life cycle and the life cycle imports both without an import circle.
"""

from __future__ import annotations

from typing import Any, Protocol

from system_under_test.broker.config import BrokerConfig
from system_under_test.broker.consumer_offsets import ConsumerOffsets
from system_under_test.broker.ha_master import HaMaster
from system_under_test.broker.ha_slave import HaSlave
from system_under_test.broker.roles import Role
from system_under_test.broker.store import MessageStore


class BrokerState(Protocol):
    """One broker process's state.  ``store``, ``offsets`` and ``ha_master`` are None until the store is open."""

    cfg: BrokerConfig
    store: MessageStore | None
    offsets: ConsumerOffsets | None
    ha_master: HaMaster | None
    ha_slave: HaSlave | None
    role: Role
    broker_id: int
    routing_broker_id: int
    master_epoch: int
    master_id: int | None
    master_addr: str | None

    @property
    def shutting_down(self) -> bool:
        """A controlled shutdown has begun (``broker/shutdown.py``): refuse writes."""
        ...

    def lease_valid(self) -> bool:
        """Unfenced with a live lease (fences the broker when the lease expired)."""
        ...

    def runtime_info(self) -> dict[str, Any]:
        """GET_BROKER_RUNTIME_INFO / ADMIN_STATUS."""
        ...

    def request_shutdown(self) -> None:
        """Start a controlled shutdown in the background."""
        ...
