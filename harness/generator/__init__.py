"""Pure, seeded generators of operations (in the spirit of jepsen-io/generator).

In a nutshell: a *generator* is an immutable value with two methods.

* ``op(ctx)`` returns ``None`` (exhausted), or ``(PENDING, gen')`` (nothing to do right now; ask
  again after the next event or a little later), or ``(op, gen')`` where ``op`` is an invocation
  dict with ``type``, ``process``, ``time`` (logical ns), ``f`` and ``value``.  An op whose
  ``time`` is later than ``ctx.time_ns`` is a promise about the future: the interpreter waits and
  asks again -- it only *commits* to ``gen'`` once ``time <= now``.
* ``update(ctx, event)`` returns the generator after an invocation or completion happened.

The *context* carries logical time, the threads this generator may use (client threads are
``0..n-1``, the nemesis thread is ``"nemesis"``), which of them are free, each thread's current
process, and a seeded :class:`random.Random`.  Nothing here reads a clock, touches the OS or uses
the global ``random``: the same seed and the same event sequence give the same ops
(:func:`simulate` proves it in the tests).

Plain values are generators too (:func:`as_gen`): a dict is one op, a list runs each element in
turn, a callable ``f(ctx) -> dict | None`` is called for every op, ``None`` is exhausted.

Special op types the interpreter never sends to a worker: ``"sleep"`` (just a wake-up time).

Client load: :func:`pace` runs one stream per client thread at ``rate / threads`` ops/s, each op drawn
from an RNG seeded by ``(seed, thread, op number)`` -- so every worker gets its share of the load and
its ops do not shift when timing does.  :func:`stagger` is one shared stream (round robin over the
free threads) drawn from the context's RNG.
"""

from harness.generator._combinators import (
    any_of,
    cycle,
    filter_ops,
    flip_flop,
    limit,
    map_ops,
    mix,
    once,
    phases,
    repeat,
    synchronize,
    then,
    until_ok,
)
from harness.generator._core import (
    NEMESIS_THREAD,
    NS_PER_S,
    PENDING,
    Context,
    Gen,
    OpDict,
    Process,
    Thread,
    as_gen,
    make_context,
    next_process,
)
from harness.generator._pace import LoadDial, pace, stream_seed
from harness.generator._simulate import simulate
from harness.generator._threads import clients, each_process, each_thread, nemesis, reserve
from harness.generator._time import delay, sleep, stagger, time_limit

__all__ = [
    "LoadDial",
    "NEMESIS_THREAD",
    "NS_PER_S",
    "PENDING",
    "Context",
    "Gen",
    "OpDict",
    "Process",
    "Thread",
    "any_of",
    "as_gen",
    "clients",
    "cycle",
    "delay",
    "each_process",
    "each_thread",
    "filter_ops",
    "flip_flop",
    "limit",
    "make_context",
    "map_ops",
    "mix",
    "nemesis",
    "next_process",
    "once",
    "pace",
    "phases",
    "repeat",
    "reserve",
    "simulate",
    "sleep",
    "stagger",
    "stream_seed",
    "synchronize",
    "then",
    "time_limit",
    "until_ok",
]
