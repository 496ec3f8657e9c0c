"""The code table and header schemas: one entry per code, validation errors naming the field."""

from __future__ import annotations

import pytest

from system_under_test.protocol import RESPONSE_INFO, SCHEMAS, RequestCode, ResponseCode, SchemaError, validate_header
from system_under_test.protocol.codes import REQUEST_DOCS, is_definite


def test_every_code_documented_and_seed_values_mirrored() -> None:
    assert set(RESPONSE_INFO) == set(ResponseCode)
    assert set(REQUEST_DOCS) == set(RequestCode)
    assert RequestCode.BROKER_HEARTBEAT == 904
    assert [RequestCode(c).name for c in range(1001, 1014) if c in RequestCode._value2member_map_]
    assert ResponseCode.CONTROLLER_NOT_LEADER == 2007
    assert ResponseCode.CONTROLLER_BROKER_ID_INVALID == 2014


@pytest.mark.parametrize(
    "code, definite",
    [(ResponseCode.CONTROLLER_NOT_LEADER, True), (ResponseCode.TIMEOUT, False), (ResponseCode.SYSTEM_ERROR, False),
     (ResponseCode.STALE_BROKER_EPOCH, True), (ResponseCode.FLUSH_SLAVE_TIMEOUT, False), (99999, False)],
)
def test_definite_flag(code: int, definite: bool) -> None:
    assert is_definite(code) is definite


GOOD_APPLY = {"cluster_name": "c", "broker_name": "b", "broker_id": 1, "register_code": "x", "broker_addr": "h:1"}


@pytest.mark.parametrize(
    "header, fragment",
    [
        ({k: v for k, v in GOOD_APPLY.items() if k != "broker_id"}, "missing required field 'broker_id'"),
        ({**GOOD_APPLY, "broker_id": "1"}, "field 'broker_id' must be int, got str"),
        ({**GOOD_APPLY, "broker_id": True}, "field 'broker_id' must be int, got bool"),
        ({**GOOD_APPLY, "brokerid": 1}, "unknown field(s) ['brokerid']"),
        ({**GOOD_APPLY, "broker_name": None}, "got nil"),
    ],
    ids=["missing", "wrong-type", "bool-is-not-int", "unknown-field", "nil"],
)
def test_schema_errors_name_the_field(header: dict[str, object], fragment: str) -> None:
    with pytest.raises(SchemaError) as err:
        validate_header(RequestCode.CONTROLLER_APPLY_BROKER_ID, header)
    assert fragment in str(err.value)
    assert "CONTROLLER_APPLY_BROKER_ID" in str(err.value)


def test_valid_header_and_unknown_code_accepted() -> None:
    validate_header(RequestCode.CONTROLLER_APPLY_BROKER_ID, GOOD_APPLY)
    validate_header(424242, {"anything": 1})


def test_schemas_only_for_known_codes() -> None:
    assert set(SCHEMAS) <= set(RequestCode)
