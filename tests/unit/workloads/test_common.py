"""Workload options are declared once (dataclass fields made with ``option``) and read against that one
declaration: every in-range value is taken as given, every out-of-range one is refused naming its key."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.spec import SpecError, spec_from_dict
from workloads import registry
from workloads.broker_ids import BrokerIdsOptions
from workloads.common import parse_options
from workloads.controller_register import RegisterOptions
from workloads.membership import MembershipOptions
from workloads.queue import QueueOptions

SPEC = spec_from_dict({"name": "w", "nodes": {"controllers": 3, "broker_sets": {"count": 2, "replicas": 3}},
                       "seed": 1}, file="<test>")
CLASSES = [QueueOptions, BrokerIdsOptions, RegisterOptions, MembershipOptions]


def ctx(options: dict[str, Any]) -> registry.WorkloadContext:
    return registry.WorkloadContext(spec=SPEC, db=None, options=options, seed=1)


def ranged(cls: type) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if f.metadata.get("lo") is not None]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_no_options_give_the_declared_defaults(cls: type) -> None:
    assert parse_options(ctx({}), cls) == cls()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_in_range_values_are_taken_and_out_of_range_ones_refused(cls: type, data: st.DataObject) -> None:
    field = data.draw(st.sampled_from(ranged(cls)))
    lo, hi = field.metadata["lo"], field.metadata["hi"]
    if isinstance(field.default, float):
        inside: Any = data.draw(st.floats(lo, hi, allow_nan=False))
        outside: Any = data.draw(st.one_of(st.floats(max_value=lo, exclude_max=True, allow_infinity=False),
                                           st.floats(min_value=hi, exclude_min=True, allow_infinity=False)))
    else:
        inside = data.draw(st.integers(lo, hi))
        outside = data.draw(st.one_of(st.integers(max_value=lo - 1), st.integers(min_value=hi + 1)))
    assert getattr(parse_options(ctx({field.name: inside}), cls), field.name) == inside
    with pytest.raises(SpecError) as err:
        parse_options(ctx({field.name: outside}), cls)
    assert err.value.key == f"workloads[0].options.{field.name}"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_an_unknown_key_is_refused_naming_it(cls: type) -> None:
    with pytest.raises(SpecError) as err:
        parse_options(ctx({"no_such_option": 1}), cls)
    assert err.value.key == "workloads[0].options.no_such_option"


class _BareDB:
    """A DB with no client protocol at all (past validation: a test's own, or an adapter that lies)."""

    async def setup(self, test: dict[str, Any], node: str) -> None: ...
    async def teardown(self, test: dict[str, Any], node: str) -> None: ...


@pytest.mark.parametrize(("name", "capability", "protocol"), [
    ("register", "register-client", "RegisterClients"),
    ("counter", "counter-client", "CounterClients"),
    ("generic-queue", "queue-client", "QueueClients"),
])
def test_a_generic_workload_on_a_db_without_its_protocol_names_the_db_and_the_capability(
        name: str, capability: str, protocol: str) -> None:
    with pytest.raises(SpecError) as info:
        registry.build(name, registry.WorkloadContext(spec=SPEC, db=_BareDB(), options={}, seed=1, index=2))
    err = info.value
    assert (err.key, err.value) == ("workloads[2].name", name)
    assert f"{name} needs {capability} (harness.protocols.{protocol})" in err.allowed
    assert f"({__name__}._BareDB)" in err.allowed
