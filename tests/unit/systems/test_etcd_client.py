"""The etcd register client's pure parts: gateway requests and replies, error classification, completions, the
member command line and the per-key split of a history.  No server, no network."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from checker.history import Op
from checker.per_key import split_by_key
from systems.etcd.client import EtcdRegisterClient, serializable_for, transport_error
from systems.etcd.db import member_argv
from systems.etcd.wire import (
    EtcdError,
    cas_pair,
    cas_request,
    decode_value,
    encode_key,
    encode_value,
    error_from_reply,
    put_request,
    range_request,
    read_value,
    txn_succeeded,
)
from workloads.common import completion_for

JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                    max_leaves=6)


def unb64(s: str) -> bytes:
    return base64.b64decode(s)


@given(JSON)
def test_values_round_trip_through_the_gateway_encoding(value: Any) -> None:
    assert decode_value(encode_value(value)) == value


def test_equal_maps_encode_to_equal_bytes_so_a_cas_compare_matches() -> None:
    assert encode_value({"a": 1, "b": 2}) == encode_value({"b": 2, "a": 1})


def test_keys_are_base64_of_utf8() -> None:
    assert unb64(encode_key("r-é")) == "r-é".encode()


@pytest.mark.parametrize(("mode", "flag"), [("linearizable", False), ("serializable", True)])
def test_read_mode_picks_the_range_requests_serializable_flag(mode: str, flag: bool) -> None:
    assert serializable_for(mode) is flag
    assert range_request("r0", serializable=serializable_for(mode)) == {"key": encode_key("r0"), "serializable": flag}


@pytest.mark.parametrize("mode", ["stale", None, "Linearizable"])
def test_an_unknown_read_mode_is_refused_naming_the_option(mode: Any) -> None:
    with pytest.raises(ValueError, match=r"read_mode: expected one of \['linearizable', 'serializable'\]"):
        EtcdRegisterClient(read_mode=mode)


def test_put_carries_the_json_text_of_the_value() -> None:
    body = put_request("r0", [1, "x"])
    assert unb64(body["key"]) == b"r0" and json.loads(unb64(body["value"])) == [1, "x"]


def test_cas_compares_the_value_and_puts_the_new_one() -> None:
    body = cas_request("r0", 1, 2)
    (cmp,) = body["compare"]
    assert (cmp["target"], cmp["result"], unb64(cmp["value"])) == ("VALUE", "EQUAL", b"1")
    (succ,) = body["success"]
    assert unb64(succ["request_put"]["value"]) == b"2"
    assert "failure" not in body


def test_cas_from_nil_compares_version_zero_since_etcd_fails_value_compares_on_missing_keys() -> None:
    (cmp,) = cas_request("r0", None, 5)["compare"]
    assert (cmp["target"], cmp["result"], cmp["version"]) == ("VERSION", "EQUAL", "0")


def test_range_replies() -> None:
    assert read_value({"header": {"revision": "3"}}) is None  # the gateway leaves out an empty kvs
    assert read_value({"kvs": [{"key": encode_key("r0"), "value": encode_value(7)}], "count": "1"}) == 7
    with pytest.raises(EtcdError, match="returned 2 keys") as two:
        read_value({"kvs": [{"value": encode_value(1)}, {"value": encode_value(2)}]})
    assert two.value.definite
    with pytest.raises(EtcdError, match="not base64 of JSON"):
        read_value({"kvs": [{"value": base64.b64encode(b"plain text").decode()}]})


def test_txn_success_is_only_an_explicit_true() -> None:
    assert txn_succeeded({"succeeded": True, "responses": []}) is True
    assert txn_succeeded({"header": {}}) is False  # the gateway omits succeeded: false


@pytest.mark.parametrize(("status", "body", "definite"), [
    (400, {"error": "etcdserver: key is not provided", "code": 3, "message": "etcdserver: key is not provided"}, True),
    (429, {"message": "etcdserver: too many requests", "code": 8}, True),
    (503, {"error": "etcdserver: request timed out", "code": 14}, False),
    (503, {"message": "etcdserver: leader changed", "code": 14}, False),
    (504, {"message": "context deadline exceeded", "code": 4}, False),
    (500, "upstream broke", False),
    (502, {"no": "code"}, False),
])
def test_error_replies_are_definite_only_for_refusals_before_proposal(status: int, body: Any, definite: bool) -> None:
    err = error_from_reply(status, body)
    assert err.definite is definite
    assert f"HTTP {status}" in str(err)


@pytest.mark.parametrize(("exc", "definite"), [
    (httpx.ConnectError("refused"), True),
    (httpx.ConnectTimeout("no SYN-ACK"), True),
    (httpx.PoolTimeout("pool"), True),
    (httpx.ReadTimeout("slow"), False),
    (httpx.WriteTimeout("slow"), False),
    (httpx.RemoteProtocolError("closed mid-reply"), False),
    (httpx.ReadError("reset"), False),
])
def test_transport_errors_are_definite_only_when_nothing_was_sent(exc: httpx.HTTPError, definite: bool) -> None:
    assert transport_error("/v3/kv/put", exc).definite is definite


@pytest.mark.parametrize(("f", "definite", "kind"), [
    ("write", False, "info"), ("cas", False, "info"), ("write", True, "fail"), ("cas", True, "fail"),
    ("read", False, "fail"), ("read", True, "fail"),
])
def test_completion_kinds(f: str, definite: bool, kind: str) -> None:
    op = {"process": 0, "type": "invoke", "f": f, "key": "r0", "value": None}
    done = completion_for(op, EtcdError("x", definite=definite), read_only=f == "read")
    assert (done["type"], done["key"], done["f"]) == (kind, "r0", f)


def test_bad_cas_values_are_refused_before_sending() -> None:
    assert list(cas_pair([1, 2])) == [1, 2]
    for bad in (None, 3, [1], [1, 2, 3]):
        with pytest.raises(EtcdError, match=r"\[expected, new\]") as info:
            cas_pair(bad)
        assert info.value.definite


@pytest.mark.parametrize(("op", "why"), [
    ({"process": 0, "f": "write", "value": 1}, "string 'key'"),
    ({"process": 0, "f": "read", "key": 3}, "string 'key'"),
])
def test_the_prototype_client_fails_ops_without_sending(op: dict[str, Any], why: str) -> None:
    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        unopened = await EtcdRegisterClient().invoke({}, op)
        opened = EtcdRegisterClient(http=httpx.AsyncClient(base_url="http://0.0.0.0:1"))  # unused: the key is bad
        try:
            return unopened, await opened.invoke({}, op)
        finally:
            await opened.close({})

    unopened, bad_key = asyncio.run(both())
    assert unopened["type"] == "fail" and "not open" in unopened["error"]
    assert bad_key["type"] == "fail" and why in bad_key["error"]



class _Addresses:
    """The one thing ``open`` asks of a Remote: a node's address."""

    def address(self, node: str) -> str:
        return "0.0.0.0"


def test_every_completion_of_an_opened_client_names_the_member_it_went_to() -> None:
    async def run() -> tuple[EtcdRegisterClient, dict[str, Any]]:
        client = await EtcdRegisterClient(port=1).open({"remote": _Addresses()}, "m2")
        try:
            return client, await client.invoke({}, {"process": 0, "f": "read", "key": 3})  # refused before sending
        finally:
            await client.close({})

    client, comp = asyncio.run(run())
    assert client.node == "m2" and comp["node"] == "m2" and comp["type"] == "fail"
    assert "node" not in asyncio.run(EtcdRegisterClient().invoke({}, {"process": 0, "f": "read", "key": "r0"}))

def test_member_command_line_lists_the_whole_static_cluster() -> None:
    addrs = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}
    argv = member_argv("n2", addrs, "/d/etcd.data", token="t")
    flags = dict(zip(argv[1::2], argv[2::2]))
    assert argv[0] == "etcd"
    assert flags["--name"] == "n2" and flags["--data-dir"] == "/d/etcd.data"
    assert flags["--listen-client-urls"] == flags["--advertise-client-urls"] == "http://10.0.0.2:2379"
    assert flags["--listen-peer-urls"] == flags["--initial-advertise-peer-urls"] == "http://10.0.0.2:2380"
    assert flags["--initial-cluster"] == "n1=http://10.0.0.1:2380,n2=http://10.0.0.2:2380,n3=http://10.0.0.3:2380"
    assert (flags["--initial-cluster-state"], flags["--initial-cluster-token"]) == ("new", "t")
    with pytest.raises(ValueError, match=r"node 'n4' is not in the cluster \['n1', 'n2', 'n3'\]"):
        member_argv("n4", addrs, "/d")


def op(index: int, type_: str, process: Any, f: str, value: Any = None, **extra: Any) -> Op:
    return Op.from_dict({"index": index, "time": index, "type": type_, "process": process, "f": f, "value": value,
                         **extra})


def test_split_by_key_gives_one_register_history_per_key_in_order() -> None:
    hist = [
        op(0, "invoke", 0, "write", 1, key="a"), op(1, "invoke", 1, "read", key="b"),
        op(2, "info", "nemesis", "kill", "n1"), op(3, "ok", 0, "write", 1, key="a"),
        op(4, "ok", 1, "read", None, key="b"), op(5, "invoke", 0, "cas", [1, 2], key="a"),
        op(6, "fail", 0, "cas", [1, 2], key="a"),
    ]
    parts = split_by_key(hist)
    assert {k: [o.index for o in v] for k, v in parts.items()} == {"a": [0, 3, 5, 6], "b": [1, 4]}
    with pytest.raises(ValueError, match=r"op 0 \(read\) has no string 'key' field"):
        split_by_key([op(0, "invoke", 0, "read")])
