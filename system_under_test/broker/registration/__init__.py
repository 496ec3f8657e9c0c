"""Broker registration: how a broker obtains and keeps its persistent broker id.

Pure core: :mod:`.state_machine` (the table of phases/events, :func:`next_action`), :mod:`.meta_record`
(file content and CRC) and :mod:`.errors`.  Shells: :mod:`.meta_files` (atomic files in the store
dir) and :mod:`.driver` (the async loop against the controller, with failpoints).
"""

from system_under_test.broker.registration.driver import (
    FAILPOINTS,
    FIRST_REGISTRATION_POINTS,
    RESTART_ERRORS,
    ControllerApi,
    RegistrationConfig,
    RegistrationOutcome,
    is_transient,
    register_broker,
)
from system_under_test.broker.registration.errors import (
    IllegalTransition,
    MetaCorruptError,
    RegistrationError,
    RegistrationRefused,
    RegistrationRetriesExhausted,
)
from system_under_test.broker.registration.meta_files import META_NAME, TEMP_NAME, MetaFiles, atomic_write
from system_under_test.broker.registration.meta_record import MetaRecord, TempMetaRecord
from system_under_test.broker.registration.state_machine import (
    INITIAL_STATE,
    TRANSITIONS,
    EventKind,
    Phase,
    RegistrationState,
    apply_event,
    make_register_code,
    next_action,
    restart_event,
)

__all__ = [
    "FAILPOINTS",
    "FIRST_REGISTRATION_POINTS",
    "RESTART_ERRORS",
    "ControllerApi",
    "RegistrationConfig",
    "RegistrationOutcome",
    "is_transient",
    "register_broker",
    "IllegalTransition",
    "MetaCorruptError",
    "RegistrationError",
    "RegistrationRefused",
    "RegistrationRetriesExhausted",
    "META_NAME",
    "TEMP_NAME",
    "MetaFiles",
    "atomic_write",
    "MetaRecord",
    "TempMetaRecord",
    "INITIAL_STATE",
    "TRANSITIONS",
    "EventKind",
    "Phase",
    "RegistrationState",
    "apply_event",
    "make_register_code",
    "next_action",
    "restart_event",
]
