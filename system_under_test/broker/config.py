"""BrokerConfig: every option of one broker process, frozen and validated when built.

Each field says what it does, what it trades off and which other fields it constrains;
``__post_init__`` enforces those constraints and raises :class:`BrokerConfigError` (a ValueError)
naming the command-line flag, the value received and the allowed range.  ``splitbrain broker``
prints that message and exits 2.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

from system_under_test.lease_timing import DEFAULT_LEASE_TIMEOUT_MS, heartbeat_interval_for
from system_under_test.protocol.rpc import split_addr

_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")

#: Deliberately broken behaviours (``--bug NAME``), for checking that the harness catches them.
BUGS: dict[str, str] = {
    "ack-before-replication": "answer SEND_MESSAGE as soon as the master appended, before any slave acked",
    "non-atomic-meta": "write .broker.meta in place instead of temp + fsync + rename (a crash can tear it)",
}


class BrokerConfigError(ValueError):
    """A broker option is missing, malformed or out of range (names the flag)."""


class FlushMode(enum.Enum):
    """``sync``: fsync every append before acknowledging; ``async``: group-commit every flush interval."""

    SYNC = "sync"
    ASYNC = "async"


@dataclass(frozen=True)
class BrokerConfig:
    """Options of one broker.

    Attributes:
        cluster_name: cluster name; must equal the controllers' ``--cluster-name`` (``--cluster-name``).
        broker_name: the broker set this broker belongs to (``--broker-name``).
        listen: ``host:port`` to serve on; also the address registered with the controller, so clients
            and slaves must be able to reach it (``--listen``).  Port 0 is refused: the address is
            published.
        store_dir: the store directory (commit log, epoch file, ``.broker.meta``) (``--store-dir``).
        controllers: controller addresses (``--controllers a,b,c``).
        token: the cluster token (``--token-file``).
        all_ack_in_sync_state_set: a put is acknowledged only once every SyncStateSet member holds it
            (RIP-44 ``allAckInSyncStateSet``).  True: no acknowledged message is lost when any set member
            survives; False: ``in_sync_replicas`` copies suffice (faster, weaker).
        in_sync_replicas: copies (master included) needed when ``all_ack_in_sync_state_set`` is False.
            Must be >= 1 and >= ``min_in_sync_replicas``.
        min_in_sync_replicas: refuse puts (IN_SYNC_REPLICAS_NOT_ENOUGH) while the set is smaller.
        flush: ``sync`` or ``async`` (see :class:`FlushMode`).
        flush_interval_ms: background flusher period (async fsync, checkpoint with confirm offset).
        flush_slave_timeout_ms: how long a put waits for slave acks before FLUSH_SLAVE_TIMEOUT (outcome
            unknown).  Longer rides out slow slaves, shorter frees producers sooner.
        ha_max_time_slave_not_catchup_ms: a set member not caught up for longer is shrunk out of the set
            (RIP-44 ``haMaxTimeSlaveNotCatchup``).  Shorter = fewer stalled puts, more set churn.
        heartbeat_interval_ms: period of BROKER_HEARTBEAT to every controller.  Must be well below
            ``lease_timeout_ms`` (at most half) so one lost heartbeat does not fence the broker.
        lease_timeout_ms: lease asked for in heartbeats (KIP-631); the broker fences itself when it
            could not renew for this long.  Shorter = faster failover, more spurious fencing.
        replica_info_interval_ms: period of GetReplicaInfo polling (backs up lost role-change pushes).
        async_learner: replicate but never join the SyncStateSet (never elected).
        election_priority: sent in heartbeats; lower is preferred when epochs and offsets tie.
        segment_bytes: commit-log segment size.
        ha_transfer_batch_bytes: largest HA_TRANSFER body.
        bugs: names from :data:`BUGS` (``--bug``), off by default.
    """

    cluster_name: str
    broker_name: str
    listen: str
    store_dir: str
    controllers: tuple[str, ...]
    token: str
    all_ack_in_sync_state_set: bool = True
    in_sync_replicas: int = 1
    min_in_sync_replicas: int = 1
    flush: FlushMode = FlushMode.ASYNC
    flush_interval_ms: int = 200
    flush_slave_timeout_ms: int = 3000
    ha_max_time_slave_not_catchup_ms: int = 3000
    heartbeat_interval_ms: int = heartbeat_interval_for(DEFAULT_LEASE_TIMEOUT_MS)
    lease_timeout_ms: int = DEFAULT_LEASE_TIMEOUT_MS
    replica_info_interval_ms: int = 1000
    async_learner: bool = False
    election_priority: int = 0
    segment_bytes: int = 64 * 1024 * 1024
    ha_transfer_batch_bytes: int = 256 * 1024
    bugs: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        for name, flag in (("cluster_name", "--cluster-name"), ("broker_name", "--broker-name")):
            value = getattr(self, name)
            if not isinstance(value, str) or not _NAME_RE.match(value):
                raise BrokerConfigError(f"{flag} must be 1-64 chars of [A-Za-z0-9_.-], got {value!r}")
        _addr("--listen", self.listen)
        if not isinstance(self.store_dir, str) or not self.store_dir:
            raise BrokerConfigError(f"--store-dir must be a directory path, got {self.store_dir!r}")
        if not self.controllers:
            raise BrokerConfigError("--controllers must name at least one controller host:port")
        for addr in self.controllers:
            _addr("--controllers", addr)
        if not isinstance(self.token, str) or not self.token:
            raise BrokerConfigError("--token-file must hold a non-empty cluster token")
        if not isinstance(self.flush, FlushMode):
            raise BrokerConfigError(f"--flush must be sync or async, got {self.flush!r}")
        for name, lo, hi in (
            ("in_sync_replicas", 1, 16), ("min_in_sync_replicas", 1, 16), ("flush_interval_ms", 1, 60_000),
            ("flush_slave_timeout_ms", 10, 600_000), ("ha_max_time_slave_not_catchup_ms", 10, 600_000),
            ("heartbeat_interval_ms", 10, 60_000), ("lease_timeout_ms", 100, 600_000),
            ("replica_info_interval_ms", 10, 600_000), ("election_priority", 0, 1 << 30),
            ("segment_bytes", 4096, 1 << 34), ("ha_transfer_batch_bytes", 1024, 64 << 20),
        ):
            value = getattr(self, name)
            if type(value) is not int or not lo <= value <= hi:
                raise BrokerConfigError(f"{_flag(name)} must be an int in [{lo}, {hi}], got {value!r}")
        if self.min_in_sync_replicas > self.in_sync_replicas and not self.all_ack_in_sync_state_set:
            raise BrokerConfigError(
                f"--min-in-sync-replicas ({self.min_in_sync_replicas}) must be <= --in-sync-replicas "
                f"({self.in_sync_replicas}) when acks do not wait for the whole SyncStateSet"
            )
        if self.heartbeat_interval_ms * 2 > self.lease_timeout_ms:
            raise BrokerConfigError(
                f"--heartbeat-interval-ms ({self.heartbeat_interval_ms}) must be at most half of --lease-timeout-ms "
                f"({self.lease_timeout_ms}) so one lost heartbeat does not fence the broker"
            )
        unknown = sorted(set(self.bugs) - set(BUGS))
        if unknown:
            raise BrokerConfigError(f"--bug {unknown[0]!r} is unknown; known bugs: {sorted(BUGS)}")

    def has_bug(self, name: str) -> bool:
        return name in self.bugs

    def describe(self) -> str:
        return (
            f"broker {self.cluster_name}/{self.broker_name} at {self.listen} store={self.store_dir} "
            f"allAck={self.all_ack_in_sync_state_set} isr={self.in_sync_replicas}/min{self.min_in_sync_replicas} "
            f"flush={self.flush.value} lease={self.lease_timeout_ms}ms hb={self.heartbeat_interval_ms}ms"
            f"{' learner' if self.async_learner else ''}{' bugs=' + ','.join(sorted(self.bugs)) if self.bugs else ''}"
        )


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _addr(flag: str, value: object) -> None:
    if not isinstance(value, str):
        raise BrokerConfigError(f"{flag} must be host:port, got {value!r}")
    try:
        split_addr(value)
    except ValueError as exc:
        raise BrokerConfigError(f"{flag}: {exc}") from None
