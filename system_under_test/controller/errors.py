"""Exceptions of the controller's pure core.

Tree::

    ControllerError                 base of everything raised by system_under_test.controller
    ├── ConfigError (ValueError)    a ControllerConfig field is out of range (names field, value, range)
    ├── EventError (ValueError)     an event cannot be built or decoded (names event, field, value)
    └── InvariantViolation          a core invariant broke; the state is no longer trustworthy (a bug)

Request-level refusals (unknown broker, stale epoch...) are *not* exceptions: they are
:class:`~system_under_test.protocol.codes.ResponseCode` values inside a ``Decision`` or an
``ApplyResult``.  Seeing ``InvariantViolation`` always means a bug in this package or a corrupt log.
"""

from __future__ import annotations


class ControllerError(Exception):
    """Base class of every exception raised by the controller core."""


class ConfigError(ControllerError, ValueError):
    """A ControllerConfig value is invalid; the message names the field, the value and the allowed range."""


class EventError(ControllerError, ValueError):
    """An event field is invalid or an encoded event batch cannot be decoded."""


class InvariantViolation(ControllerError):
    """A state-machine invariant broke (e.g. apply indices went backwards).  Always a bug: stop the node."""
