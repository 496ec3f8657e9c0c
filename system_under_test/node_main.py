"""The start-up both node commands share (``splitbrain broker`` and ``splitbrain controller``).

:func:`run_node` checks the process environment and the flags, runs the node's event loop, and
turns what ended it into an exit code with a one-line message: bad flags or environment exit 2
(``SPLITBRAIN_FAILPOINTS``, ``SPLITBRAIN_EVENT_LOOP`` and ``SPLITBRAIN_LINK`` are read here, so a
bad value is a config error too), each node's refusals their own code, an OSError 2.  Engineers:
``SPLITBRAIN_PROFILE=/tmp/x.prof`` writes cProfile stats to ``/tmp/x.prof.<node>`` on exit.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

import eventloop
from system_under_test import failpoints
from system_under_test.protocol import link_timeouts

T = TypeVar("T")

#: What ended a node: exception types, the exit code, and the words before the message.
Refusal = tuple[tuple[type[BaseException], ...], int, str]


def read_token(token_file: str | None) -> str:
    """The cluster token from ``--token-file`` (else env SPLITBRAIN_TOKEN).  Raises ValueError naming the flag."""
    if token_file:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as exc:
            raise ValueError(f"--token-file {token_file}: {exc.strerror}") from None
        if not token:
            raise ValueError(f"--token-file {token_file} is empty")
        return token
    token = os.environ.get("SPLITBRAIN_TOKEN", "").strip()
    if not token:
        raise ValueError("a cluster token is required: pass --token-file FILE or set SPLITBRAIN_TOKEN")
    return token


def run_node(
    command: str,
    build: Callable[[], T],
    serve: Callable[[T], Coroutine[Any, Any, int]],
    *,
    label: Callable[[T], str],
    profile_name: Callable[[T], str] | None = None,
    bad_input: tuple[type[Exception], ...],
    refusals: Sequence[Refusal],
    before_serve: Callable[[], None] = lambda: None,
) -> int:
    """Build the node's options, serve until it stops, and return the process's exit code.

    Args:
        command: ``broker`` or ``controller`` (messages start ``splitbrain <command>``).
        build: the validated options from the flags; raises one of ``bad_input`` (or ValueError).
        serve: runs the node; returns its exit code.
        label: the node's name in messages.
        profile_name: the node's name in the profile's file name (default: ``label``).
        bad_input: exceptions of ``build`` that mean bad flags (exit 2), besides ValueError.
        refusals: exceptions that end the node, each with its exit code and words.
        before_serve: process tuning after the flags were accepted.
    """
    try:
        failpoints.load_env()
        eventloop.chosen()  # a bad SPLITBRAIN_EVENT_LOOP is a config error (exit 2)
        link_timeouts()  # a bad SPLITBRAIN_LINK is a config error too (LinkSettingError is a ValueError)
        options = build()
    except Exception as exc:
        if not isinstance(exc, (*bad_input, ValueError, failpoints.FailpointSpecError)):
            raise
        print(f"splitbrain {command}: {exc}", file=sys.stderr)
        return 2
    before_serve()
    name = label(options)
    profile_as = (profile_name or label)(options)
    profile_path = os.environ.get("SPLITBRAIN_PROFILE")
    profiler = None
    if profile_path:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        return eventloop.run(serve(options))
    except Exception as exc:
        os_error: Refusal = ((OSError,), 2, "")
        for types, code, words in [*refusals, os_error]:
            if isinstance(exc, types):
                print(f"splitbrain {command} {name}: {words}{exc}", file=sys.stderr)
                return code
        raise
    finally:
        if profiler is not None and profile_path:
            profiler.disable()
            profiler.dump_stats(f"{profile_path}.{profile_as}")
