"""Errors of broker registration (pure: no I/O).

    RegistrationError                 base: registration cannot continue
    ├── IllegalTransition             a (state, event) pair the transition table does not allow (a bug)
    ├── MetaCorruptError              .broker.meta / .broker.meta.temp is torn or fails its CRC
    ├── RegistrationRefused           names in the meta file differ from the config (terminal REFUSED)
    └── RegistrationRetriesExhausted  transient controller errors outlasted the retry budget
"""

from __future__ import annotations


class RegistrationError(Exception):
    """Broker registration cannot continue; the message says why and what to do."""


class IllegalTransition(RegistrationError):
    """The registration table has no row for (state, event).  Seeing one is a bug in the caller.

    Attributes:
        phase: the phase the machine was in (unchanged).
        event: the event kind that was refused.
    """

    def __init__(self, phase: str, event: str, detail: str = "") -> None:
        self.phase = phase
        self.event = event
        extra = f": {detail}" if detail else ""
        super().__init__(
            f"broker registration: illegal transition from state {phase} on event {event}{extra}; state unchanged"
        )


class MetaCorruptError(RegistrationError):
    """A meta file exists but cannot be decoded; the broker must not invent a new id."""


class RegistrationRefused(RegistrationError):
    """The store belongs to another cluster/broker name than the config says."""


class RegistrationRetriesExhausted(RegistrationError):
    """A step kept failing with transient errors for longer than the retry budget."""
