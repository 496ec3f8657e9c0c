"""Cheap construction of frozen slotted records on the paths every write takes.

Events and metadata records are frozen dataclasses (an invalid or mutated record can never exist),
but the ``__init__`` dataclasses generates for a frozen class sets each field through
``object.__setattr__``: the records rebuilt by every node's apply of every write cost several
times a plain object.  :func:`slot_constructor` builds them at about half that cost; the
instances are the same frozen objects.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def slot_constructor(cls: type[T]) -> Callable[..., T]:
    """A positional constructor for the frozen slotted dataclass ``cls``: every field, in order.

    It fills the slots through their descriptors, about half the cost of the generated frozen
    ``__init__`` (one ``object.__setattr__`` call per field).  It runs no ``__post_init__``: the
    caller validates (an event decoded from the wire calls it), or builds from values taken from
    records already validated.  Every field must be given (defaults are not applied).

    Raises:
        TypeError: ``cls`` is not a slotted dataclass.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"slot_constructor needs a slotted dataclass, got {cls!r}")
    names = [f.name for f in dataclasses.fields(cls)]
    slots: dict[str, types.MemberDescriptorType] = {}
    for n in names:
        d = getattr(cls, n, None)  # a subclass's fields may be slots of its base
        if not isinstance(d, types.MemberDescriptorType):
            raise TypeError(f"slot_constructor needs a slotted dataclass, got {cls!r}")
        slots[n] = d
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    namespace.update({f"set_{n}": d.__set__ for n, d in slots.items()})
    body = "".join(f"    set_{n}(o, {n})\n" for n in names)
    exec(f"def make({', '.join(names)}):\n    o = new(cls)\n{body}    return o\n", namespace)
    make: Callable[..., T] = namespace["make"]
    make.__qualname__ = f"{cls.__name__}.fast"
    return make
