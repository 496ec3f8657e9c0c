"""asyncio shell around the framing: symmetric connections, a server and a client.

A :class:`Connection` wraps one TCP stream.  Either side may send requests, responses and
one-way messages on it: the reader loop hands incoming requests and one-ways to a handler and
completes the futures of outgoing requests when their responses arrive.  This symmetry lets the
controller push NOTIFY_BROKER_ROLE_CHANGED on a broker's own connection and lets the HA master
stream batches on the connection the slave opened.

Duties and guarantees:

1. A malformed or oversized frame closes *that* connection with a logged reason; the server keeps
   serving every other connection.
2. A request whose header fails its schema gets MALFORMED_REQUEST naming the field.
3. A handler exception becomes SYSTEM_ERROR with the exception text; it never kills the server.
4. When a connection closes, every request still waiting on it fails with ConnectionLost
   (outcome unknown).
5. Liveness (issue 17, :mod:`~system_under_test.protocol.liveness`): unless switched off, every
   connection -- dialed or accepted -- sends a PING after ``ping_interval_s`` without hearing from
   its peer, answers the peer's PINGs itself before any handler, and closes itself after
   ``dead_after_s`` of silence or when its backlog passes ``max_backlog_bytes``; its owner then
   redials.  Sockets get TCP_USER_TIMEOUT and keepalive to match.  :func:`connect` retries a
   connect that got no answer every ``connect_attempt_s`` within its timeout.  The process
   default comes from the ``SPLITBRAIN_LINK`` environment variable (``off`` restores the old
   transport, for baselines); see docs/operations.md.
6. Reachability hints (issue 17): when a server accepts a connection from a host, every dial to
   that host in this process that is waiting -- on a connect attempt whose SYN a partition
   dropped, or in a redial backoff (:func:`sleep_unless_reached`) -- starts afresh at once.  A
   completed handshake proves the path works both ways, so after a heal the first of the two
   ends to redial brings the other end's link back too, instead of each waiting out its own
   attempt and backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import itertools
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from system_under_test.protocol.codes import RequestCode, ResponseCode
from system_under_test.protocol.errors import ConnectionLost, RemoteProtocolError, RequestTimeout, RpcError
from system_under_test.protocol.frame import DEFAULT_MAX_FRAME_BYTES, Frame, FrameDecoder, Kind, encode_frame
from system_under_test.protocol.liveness import (
    LINK_ENV,
    LinkTimeouts,
    LinkVerdict,
    LinkWatch,
    link_timeouts_from_setting,
    next_link_watch,
)
from system_under_test.protocol.schemas import SchemaError, validate_header

log = logging.getLogger("splitbrain.rpc")

# Enum members as module globals for the per-frame paths: ``Kind.X`` goes through EnumType's
# ``__getattr__`` hook on Python 3.11, about 0.2 us a lookup, several per request.
_REQUEST, _RESPONSE, _ONEWAY = Kind.REQUEST, Kind.RESPONSE, Kind.ONEWAY
_SUCCESS = ResponseCode.SUCCESS
_PING = int(RequestCode.PING)


class ProcessDefault:
    """Sentinel: use the process's link timeouts (:func:`link_timeouts`)."""


PROCESS_DEFAULT = ProcessDefault()
_process_link: list[LinkTimeouts | None] = []


def link_timeouts() -> LinkTimeouts | None:
    """This process's link timeouts, read once from ``SPLITBRAIN_LINK`` (None: liveness off).

    Node mains call it at start so a bad value stops the process with a clear message.

    Raises:
        LinkSettingError: the variable's value is invalid (names the key and value).
    """
    if not _process_link:
        _process_link.append(link_timeouts_from_setting(os.environ.get(LINK_ENV)))
    return _process_link[0]


def _resolve(liveness: LinkTimeouts | ProcessDefault | None) -> LinkTimeouts | None:
    return link_timeouts() if isinstance(liveness, ProcessDefault) else liveness


def _tune_socket(writer: asyncio.StreamWriter, timeouts: LinkTimeouts | None) -> None:
    """TCP_USER_TIMEOUT and keepalive for a link: a backstop, well above ``dead_after_s``, that
    lets the kernel abort a dead connection even when this process is too busy to notice.  Best
    effort: options a platform lacks are skipped."""
    sock = writer.get_extra_info("socket")
    if timeouts is None or sock is None:
        return
    opts = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (("TCP_USER_TIMEOUT", timeouts.tcp_user_timeout_ms), ("TCP_KEEPIDLE", timeouts.keepalive_idle_s),
                        ("TCP_KEEPINTVL", 1), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, name):
            opts.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    for level, opt, value in opts:
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(level, opt, value)

# -- reachability hints (duty 6) -----------------------------------------------------------------

_reach_waiters: dict[str, set[asyncio.Future[None]]] = {}


def note_reached_by(host: str) -> None:
    """``host`` just completed a TCP handshake with us: wake every dial to it waiting in this process."""
    for fut in _reach_waiters.pop(host, ()):
        if not fut.done() and not fut.get_loop().is_closed():  # a test's loop may be gone
            fut.set_result(None)


def _reach_future(host: str) -> asyncio.Future[None]:
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    _reach_waiters.setdefault(host, set()).add(fut)
    return fut


def _forget_reach_future(host: str, fut: asyncio.Future[None]) -> None:
    waiters = _reach_waiters.get(host)
    if waiters is not None:
        waiters.discard(fut)
        if not waiters:
            del _reach_waiters[host]
    fut.cancel()


async def sleep_unless_reached(addr: str, delay_s: float) -> bool:
    """Sleep ``delay_s`` (a redial backoff), ending early if the host of ``addr`` ("host:port")
    connects to us meanwhile.  Returns True if it ended early."""
    host = addr.rpartition(":")[0] or addr
    fut = _reach_future(host)
    try:
        done, _ = await asyncio.wait({fut}, timeout=max(0.0, delay_s))
        return bool(done)
    finally:
        _forget_reach_future(host, fut)


_TIMER_SLACK_S = 0.001  # uvloop's timers have millisecond resolution and may fire up to that early


@dataclass(slots=True)
class Reply:
    """What a handler returns for a request (treat as immutable; not ``frozen`` for speed, as Frame)."""

    code: int = ResponseCode.SUCCESS
    header: dict[str, Any] = field(default_factory=dict)
    body: Any = None

    @staticmethod
    def error(code: ResponseCode, message: str, **header: Any) -> Reply:
        return Reply(code, {"message": message, **header})


Handler = Callable[[Frame, "Connection"], "Awaitable[Reply | None] | Reply | None"]
"""Answers one incoming request or one-way message.  An ``async def`` handler always works; a plain
function may answer at once (a Reply, or None for no reply) and return an awaitable only when it
must wait (a Raft commit, a read barrier).  Answering at once skips creating a task per request,
which is most of the cost of a cheap request such as a heartbeat.  An awaitable that is an
``asyncio.Future`` (resolved by someone else, e.g. a group commit) is answered from its done
callback, also without a task; any other awaitable runs in a task."""


async def _no_handler(frame: Frame, conn: Connection) -> Reply | None:
    if frame.kind == Kind.REQUEST:
        return Reply.error(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"no handler for code {frame.code}")
    return None


class Connection:
    """One framed, bidirectional stream."""

    _ids = itertools.count(1)

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        handler: Handler = _no_handler,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        name: str = "",
        ordered_oneways: bool = True,
        liveness: LinkTimeouts | ProcessDefault | None = PROCESS_DEFAULT,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self._transport = writer.transport  # StreamWriter.transport is a property: read per request
        self.handler = handler
        self.max_frame_bytes = max_frame_bytes
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.name = name or self.peer
        self.ordered_oneways = ordered_oneways
        self._pending: dict[int, asyncio.Future[Frame]] = {}
        # Request timeouts: rid -> (deadline in loop time, code, timeout_s), in send order, and one
        # timer for the earliest deadline (see _expire).
        self._deadlines: dict[int, tuple[float, int, float]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._next_id = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = asyncio.Event()
        self._is_closed = False  # mirrors _closed: read per frame, and a plain bool is cheaper
        self.close_reason = ""
        self.attrs: dict[str, Any] = {}  # per-connection state for handlers (e.g. broker identity)
        self._reader_task: asyncio.Task[None] | None = None
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self.liveness = _resolve(liveness)
        self._received_at = 0.0  # loop time of the last bytes read (liveness)
        self._watch: LinkWatch | None = None
        self._watch_timer: asyncio.TimerHandle | None = None
        self._watch_due = 0.0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._reader_task = loop.create_task(self._read_loop())
        if self.liveness is not None:
            self._received_at = loop.time()
            self._watch = LinkWatch(self._received_at)
            self._arm_watch(loop)

    def _arm_watch(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self.liveness is not None
        delay = self.liveness.ping_interval_s / 2
        self._watch_due = loop.time() + delay
        self._watch_timer = loop.call_at(self._watch_due, self._check_link)

    def _check_link(self) -> None:
        """The liveness timer: run the pure check, then ping or close as it says."""
        self._watch_timer = None
        if self._is_closed or self._watch is None or self.liveness is None:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        self._watch, verdict, reason = next_link_watch(
            self._watch, now=now, received_at=self._received_at, backlog_bytes=self._backlog_bytes(),
            late_s=now - self._watch_due, timeouts=self.liveness)
        if verdict is LinkVerdict.DEAD:
            log.info("closing connection %s: %s", self.name, reason)
            self.close(reason)
            return
        if verdict is LinkVerdict.PING:
            with contextlib.suppress(ConnectionLost):
                self._write(Frame(_REQUEST, next(self._next_id), _PING, {}, None))  # the reply is ignored
        self._arm_watch(loop)

    def _backlog_bytes(self) -> int:
        try:
            return int(self._transport.get_write_buffer_size()) + sum(map(len, self._out))
        except Exception:  # a closing transport
            return 0

    @property
    def closed(self) -> bool:
        return self._is_closed

    @property
    def received_at(self) -> float:
        """Loop time of the last bytes read from the peer: its last sign of life.  Before any, the
        connection's start with liveness on (0.0 with it off).  With liveness on, a healthy peer is
        heard at least every ``ping_interval_s`` plus a round trip."""
        return self._received_at

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def _write(self, frame: Frame) -> None:
        """Queue one encoded frame; frames queued in the same event-loop iteration go out in one
        ``write`` (one syscall instead of one per reply under pipelined load)."""
        if self.closed:
            raise ConnectionLost(f"connection to {self.name} is closed ({self.close_reason})")
        self._out.append(encode_frame(frame))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._out:
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        if self.closed:
            return
        try:
            self.writer.write(data)
        except Exception as exc:  # transport already closing
            self.close(f"write failed: {exc}")

    async def request(
        self, code: int, header: dict[str, Any] | None = None, body: Any = None, *, timeout_s: float = 5.0,
        check: bool = True,
    ) -> Frame:
        """Send a request and wait for its response.

        Raises:
            RpcError: the reply code is not SUCCESS (only if ``check``).
            RequestTimeout: no reply in ``timeout_s`` (outcome unknown).
            ConnectionLost: the connection closed first (outcome unknown).
        """
        rid = next(self._next_id)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Frame] = loop.create_future()
        self._pending[rid] = fut
        # No timer per request (creating and cancelling one cost more than the rest of a pipelined
        # request): the deadline goes into a table that one connection timer sweeps.
        deadline = loop.time() + timeout_s
        self._deadlines[rid] = (deadline, code, timeout_s)
        if self._timer is None or deadline < self._timer_at:
            self._arm(loop, deadline)
        try:
            self._write(Frame(_REQUEST, rid, int(code), header or {}, body))
            if self._transport.get_write_buffer_size() > 1 << 20:
                await self.writer.drain()
            resp = await fut
        finally:
            self._pending.pop(rid, None)
            self._deadlines.pop(rid, None)
        if check and resp.code != _SUCCESS:
            raise RpcError(resp.code, str(resp.header.get("message", "")), resp.header)
        return resp

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(when, self._expire)
        self._timer_at = when

    def _expire(self) -> None:
        """Fail every request past its deadline with RequestTimeout, then arm the timer for the
        earliest deadline left.  Runs about once per timeout period when replies keep arriving."""
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time() + _TIMER_SLACK_S  # a timer may fire that much early
        earliest: float | None = None
        for rid, (deadline, code, timeout_s) in list(self._deadlines.items()):
            if deadline <= now:
                del self._deadlines[rid]
                fut = self._pending.get(rid)
                if fut is not None and not fut.done():
                    fut.set_exception(RequestTimeout(
                        f"no reply from {self.name} to {_code_name(code)} within {timeout_s}s"))
            elif earliest is None or deadline < earliest:
                earliest = deadline
        if earliest is not None and not self._is_closed:
            self._arm(loop, earliest)

    def send_oneway(self, code: int, header: dict[str, Any] | None = None, body: Any = None) -> None:
        """Queue a one-way message (no reply).  Raises ConnectionLost if closed."""
        self._write(Frame(_ONEWAY, 0, int(code), header or {}, body))

    async def drain(self) -> None:
        self._flush()
        with contextlib.suppress(ConnectionError):
            await self.writer.drain()

    def close(self, reason: str = "closed") -> None:
        if self.closed:
            return
        with contextlib.suppress(Exception):
            self._flush()  # replies already queued still go out before the close
        self.close_reason = reason
        self._closed.set()
        self._is_closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._watch_timer is not None:
            self._watch_timer.cancel()
            self._watch_timer = None
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionLost(f"connection to {self.name} lost: {reason}"))
        self._pending.clear()
        with contextlib.suppress(Exception):
            self.writer.close()
        if self._reader_task is not None and self._reader_task is not asyncio.current_task():
            self._reader_task.cancel()

    async def _read_loop(self) -> None:
        decoder = FrameDecoder(self.max_frame_bytes)
        loop = asyncio.get_running_loop()
        try:
            while True:
                data = await self.reader.read(256 * 1024)
                if not data:
                    self.close("peer closed the connection")
                    return
                self._received_at = loop.time()
                decoder.feed(data)
                for frame in decoder.frames():
                    if frame.kind == _RESPONSE:
                        fut = self._pending.get(frame.request_id)
                        if fut is not None and not fut.done():
                            fut.set_result(frame)
                        continue
                    in_order = self._dispatch(frame)
                    if in_order is not None:
                        await in_order
        except RemoteProtocolError as exc:
            log.warning("closing connection %s: malformed frame: %s", self.name, exc)
            self.close(f"malformed frame: {exc}")
        except (ConnectionError, OSError) as exc:
            self.close(f"I/O error: {exc}")
        except asyncio.CancelledError:
            self.close("cancelled")
            raise
        except Exception as exc:  # a bug in dispatch must not kill the process
            log.exception("closing connection %s after internal error", self.name)
            self.close(f"internal error: {exc}")

    def _dispatch(self, frame: Frame) -> Awaitable[None] | None:
        """Hand a request or one-way to the handler.  Returns what the read loop must await before
        the next frame (an ordered one-way still running), else None: a plain method, because a
        coroutine per frame showed for requests answered at once."""
        if frame.code == _PING:  # liveness: answered here, whatever the handler serves
            self._reply(frame, _PONG)
            return None
        try:
            validate_header(frame.code, frame.header)
            answer = self.handler(frame, self)
        except Exception as exc:
            self._reply(frame, self._error_reply(frame, exc))
            return None
        if answer is None or isinstance(answer, Reply):
            self._reply(frame, answer)
            return None
        in_order = frame.kind == _ONEWAY and self.ordered_oneways
        if isinstance(answer, asyncio.Future) and not in_order:
            answer.add_done_callback(functools.partial(self._settled, frame))  # already running: no task
            return None
        if not inspect.isawaitable(answer):
            self._reply(frame, self._error_reply(frame, TypeError(f"handler returned {answer!r:.100}")))
            return None
        if in_order:
            return self._finish(frame, answer)
        task = asyncio.get_running_loop().create_task(self._finish(frame, answer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return None

    async def _finish(self, frame: Frame, answer: Awaitable[Reply | None]) -> None:
        try:
            reply = await answer
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reply = self._error_reply(frame, exc)
        self._reply(frame, reply)

    def _settled(self, frame: Frame, answer: asyncio.Future[Reply | None]) -> None:
        if answer.cancelled():
            return  # as a cancelled _finish: no reply
        exc = answer.exception()
        if exc is None:
            self._reply(frame, answer.result())
        elif isinstance(exc, Exception):
            self._reply(frame, self._error_reply(frame, exc))
        else:
            raise exc

    def _error_reply(self, frame: Frame, exc: Exception) -> Reply:
        if isinstance(exc, SchemaError):
            log.info("malformed request from %s: %s", self.name, exc)
            return Reply.error(ResponseCode.MALFORMED_REQUEST, str(exc))
        if isinstance(exc, RpcError):
            return Reply(exc.code, {"message": exc.message, **exc.header})
        log.error("handler for %s from %s failed", _code_name(frame.code), self.name, exc_info=exc)
        return Reply.error(ResponseCode.SYSTEM_ERROR, f"{exc.__class__.__name__}: {exc}")

    def _reply(self, frame: Frame, reply: Reply | None) -> None:
        if frame.kind != _REQUEST or reply is None or self.closed:
            return
        try:
            self._write(Frame(_RESPONSE, frame.request_id, int(reply.code), reply.header, reply.body))
        except ConnectionLost:
            return
        except Exception as exc:
            log.exception("cannot encode reply to %s", _code_name(frame.code))
            self._write(Frame(Kind.RESPONSE, frame.request_id, int(ResponseCode.SYSTEM_ERROR),
                              {"message": str(exc)}, None))


def _code_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


_PONG = Reply()


class RpcServer:
    """Accepts connections and serves them with one handler.

    ``liveness``: the accepted connections' LinkTimeouts (default: the process's, see
    :func:`link_timeouts`; None: no pings, no socket options).
    """

    def __init__(self, handler: Handler, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, name: str = "",
                 liveness: LinkTimeouts | ProcessDefault | None = PROCESS_DEFAULT) -> None:
        self.handler = handler
        self.max_frame_bytes = max_frame_bytes
        self.name = name
        self.liveness = _resolve(liveness)
        self.connections: set[Connection] = set()
        self._server: asyncio.base_events.Server | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen on host:port (port 0 picks a free port).  Returns the bound address."""
        self._server = await asyncio.start_server(self._accept, host, port, limit=1 << 20)
        sock = self._server.sockets[0].getsockname()
        return sock[0], sock[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _tune_socket(writer, self.liveness)
        peer = writer.get_extra_info("peername")
        if self.liveness is not None and isinstance(peer, tuple) and _reach_waiters:
            note_reached_by(str(peer[0]))
        conn = Connection(reader, writer, self.handler, max_frame_bytes=self.max_frame_bytes, liveness=self.liveness)
        self.connections.add(conn)
        conn.start()
        try:
            await conn.wait_closed()
        finally:
            self.connections.discard(conn)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close("server stopping")
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)


def split_addr(addr: str) -> tuple[str, int]:
    """Parse ``host:port``.  Raises ValueError naming the bad address."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"address must be host:port, got {addr!r}")
    return host, int(port)


async def connect(
    addr: str,
    handler: Handler = _no_handler,
    *,
    timeout_s: float = 3.0,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    liveness: LinkTimeouts | ProcessDefault | None = PROCESS_DEFAULT,
) -> Connection:
    """Open a connection to ``host:port``.

    With liveness on, a connect that gets no answer (a SYN dropped by a partition) is abandoned
    after ``connect_attempt_s`` and tried afresh until ``timeout_s`` has passed, rather than waiting
    for the kernel's SYN retransmissions (1 s, then 3 s...): after a heal the next attempt gets
    through within ``connect_attempt_s``.  An attempt is also restarted at once when the host
    connects to us meanwhile (module duty 6), unless it is younger than a tenth of
    ``connect_attempt_s`` (its SYN may still be answered).  A refused connection fails at once,
    as before.

    Raises:
        ConnectionLost: could not connect within ``timeout_s``.
    """
    host, port = split_addr(addr)
    timeouts = _resolve(liveness)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    attempt_s = timeouts.connect_attempt_s if timeouts is not None else timeout_s
    attempts = 0
    while True:
        attempts += 1
        started = loop.time()
        remaining = deadline - started
        opening = asyncio.ensure_future(asyncio.open_connection(host, port, limit=1 << 20))
        reached = _reach_future(host) if timeouts is not None else None
        try:
            wait_s = max(0.001, min(attempt_s, remaining))
            if reached is not None and attempt_s / 10 < wait_s:  # too young to restart: wait it out first
                await asyncio.wait({opening}, timeout=attempt_s / 10)
            if not opening.done():
                waits: set[asyncio.Future[Any]] = {opening} if reached is None else {opening, reached}
                await asyncio.wait(waits,
                                   timeout=max(0.0, started + wait_s - loop.time()),
                                   return_when=asyncio.FIRST_COMPLETED)
        finally:
            if reached is not None:
                _forget_reach_future(host, reached)
            if not opening.done():
                opening.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await opening
        if not opening.cancelled():
            try:
                reader, writer = opening.result()
                break
            except OSError as exc:
                raise ConnectionLost(f"cannot connect to {addr}: {exc or exc.__class__.__name__}") from exc
        if deadline - loop.time() <= 0.001:
            raise ConnectionLost(f"cannot connect to {addr}: no answer in {timeout_s}s ({attempts} attempts)")
    _tune_socket(writer, timeouts)
    conn = Connection(reader, writer, handler, max_frame_bytes=max_frame_bytes, name=addr, liveness=timeouts)
    conn.start()
    return conn
