"""harness/revisions.py's pure parts (revision names, build records, the node command), our cluster's part of a
build (systems/splitbrain/revision.py: the wire-compatibility rule and the wire history), the revision image's
Dockerfile, and the cluster option / override that name a revision."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.images import ImageError, render_revision_dockerfile, revision_image_tag
from harness.revisions import RevisionError, SutBuild, build_record, harness_wire, node_command, parse_revision_text
from harness.spec import SpecError, apply_overrides
from systems.splitbrain.db import node_flags_used
from systems.splitbrain.options import cluster_options
from systems.splitbrain.revision import REVISIONS, WIRE_HISTORY, legacy_wire_version, wire_differences

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize("text", ["HEAD", "HEAD~2", "v0.3.0", "release/0.3", SHA, "main@{1}", "abc^", "a+b-c_d"])
def test_revision_names_git_uses_are_accepted(text: str) -> None:
    assert parse_revision_text(text, where="x") == text


@pytest.mark.parametrize("text", ["", "-x", "--upload-pack=evil", "a b", "a;b", "$(x)", "a\nb", 12, None, "x" * 201])
def test_revision_names_with_shell_or_option_characters_are_refused(text: Any) -> None:
    with pytest.raises(RevisionError, match=r"cluster\.revision"):
        parse_revision_text(text, where="cluster.revision")


def test_cluster_revision_is_a_validated_option_and_the_override_sets_it() -> None:
    assert cluster_options({"revision": "HEAD~1"}).revision == "HEAD~1"
    assert cluster_options({}).revision is None
    with pytest.raises(SpecError, match=r"cluster\.revision"):
        cluster_options({"revision": "-rf"})
    with pytest.raises(SpecError, match=r"cluster\.revision"):
        cluster_options({"revision": 1234567})
    out = apply_overrides({"cluster": {"lease_timeout_ms": 3000}}, {"sut_revision": "v1"})
    assert out["cluster"] == {"lease_timeout_ms": 3000, "revision": "v1"}


# -- the wire rule -------------------------------------------------------------------------------------------


def _wire() -> dict[str, Any]:
    return {
        "request": {"SEND": 10, "PULL": 11, "EVENTS": 50},
        "response": {"SUCCESS": 0, "NOT_LEADER": 3},
        "kinds": {"REQUEST": 0, "RESPONSE": 1},
        "schemas": {"SEND": {"topic": ["str", True, False], "producer_id": ["str", False, False]},
                    "PULL": {"topic": ["str", True, False]}},
        "wire_version": 1,
        "node_flags": {"controller": ["--node-id", "--peers", "-h"], "broker": ["--listen"]},
    }


def test_identical_tables_are_compatible_and_miss_nothing() -> None:
    report = wire_differences(_wire(), _wire())
    assert report.compatible and report.missing_requests == ()


def test_the_harness_own_tables_are_compatible_with_themselves() -> None:
    ours = harness_wire(REVISIONS)
    assert "SEND_MESSAGE" in ours["request"] and ours["schemas"]["SEND_MESSAGE"]
    assert wire_differences(ours, copy.deepcopy(ours)).compatible


def _mutate(change: str) -> dict[str, Any]:
    w = _wire()
    if change == "renumbered request":
        w["request"]["PULL"] = 12
    elif change == "number reused by another request":
        w["request"] = {"SEND": 10, "FETCH": 11, "EVENTS": 50}
    elif change == "renumbered response":
        w["response"]["NOT_LEADER"] = 4
    elif change == "frame kinds":
        w["kinds"]["ONEWAY"] = 2
    elif change == "field type":
        w["schemas"]["SEND"]["topic"] = ["int", True, False]
    elif change == "field the harness always sends is unknown there":
        del w["schemas"]["SEND"]["topic"]
    elif change == "new required field":
        w["schemas"]["PULL"]["max_count"] = ["int", True, False]
    elif change == "wire version":
        w["wire_version"] = 0
    return w


@pytest.mark.parametrize("change", ["renumbered request", "number reused by another request", "renumbered response",
                                    "frame kinds", "field type", "field the harness always sends is unknown there",
                                    "new required field", "wire version"])
def test_a_difference_in_something_both_sides_use_refuses_the_revision(change: str) -> None:
    report = wire_differences(_wire(), _mutate(change))
    assert not report.compatible and report.problems


def test_requests_only_one_side_knows_do_not_refuse_but_are_listed() -> None:
    older = _wire()
    del older["request"]["EVENTS"]
    report = wire_differences(_wire(), older)
    assert report.compatible and report.missing_requests == ("EVENTS",)
    older_fields = _wire()
    del older_fields["schemas"]["SEND"]["producer_id"]  # an optional field newer than the revision
    report = wire_differences(_wire(), older_fields)
    assert report.compatible and report.missing_optional_fields == ("SEND.producer_id",)
    newer = _wire()
    newer["request"]["NEW_ADMIN"] = 99
    newer["schemas"]["SEND"]["optional_new"] = ["int", False, False]
    assert wire_differences(_wire(), newer) == wire_differences(_wire(), _wire())


@given(st.dictionaries(st.from_regex(r"[A-Z]{1,6}", fullmatch=True), st.integers(100, 10_000), max_size=6))
def test_codes_added_only_by_the_revision_never_refuse_it(extra: dict[str, int]) -> None:
    theirs = _wire()
    taken = set(theirs["request"].values())
    for name, num in extra.items():
        if name not in theirs["request"] and num not in taken:
            theirs["request"][name] = num
            taken.add(num)
    assert wire_differences(_wire(), theirs).compatible


@given(st.sampled_from(["SEND", "PULL", "EVENTS"]), st.integers(0, 10_000))
def test_any_renumbering_of_a_shared_request_refuses(name: str, num: int) -> None:
    theirs = _wire()
    if theirs["request"][name] == num:
        return
    theirs["request"][name] = num
    assert not wire_differences(_wire(), theirs).compatible


def test_node_commands_must_take_every_flag_the_harness_passes() -> None:
    used = {"controller": {"--node-id", "--peers"}, "broker": {"--listen"}}
    assert wire_differences(_wire(), _wire(), used).compatible
    report = wire_differences(_wire(), _wire(), {**used, "controller": {"--node-id", "--seed"}})
    assert report.problems == ("its controller command does not take --seed, which the harness passes",)
    unknown = _wire()
    unknown["node_flags"] = {"controller": None}
    assert not wire_differences(_wire(), unknown, {"controller": {"--node-id"}}).compatible


def test_the_harness_renders_every_flag_it_can_pass_and_its_own_commands_take_them() -> None:
    used = node_flags_used()
    assert {"--node-id", "--peers", "--seed", "--enable-elect-unclean-master", "--bug"} <= used["controller"]
    assert {"--listen", "--store-dir", "--no-all-ack-in-sync-state-set"} <= used["broker"]
    assert wire_differences(harness_wire(REVISIONS), harness_wire(REVISIONS), used).compatible


def test_revisions_from_before_the_wire_version_get_theirs_from_the_history_table() -> None:
    (version, commit), = WIRE_HISTORY
    assert legacy_wire_version(lambda c: c == commit) == version
    assert legacy_wire_version(lambda c: False) == 0


# -- builds --------------------------------------------------------------------------------------------------


def test_a_build_is_keyed_by_a_full_sha() -> None:
    b = SutBuild(SHA, Path("cache") / SHA, "0.3.0", ("PING",), package="system_under_test")
    assert b.python == Path("cache") / SHA / "venv" / "bin" / "python"
    assert b.short == SHA[:12]
    with pytest.raises(ValueError, match="40-hex-digit"):
        SutBuild("HEAD", Path("x"), "0.1", (), package="system_under_test")
    with pytest.raises(ValueError, match="package name"):  # it is written into the install checks' shell strings
        SutBuild(SHA, Path("x"), "0.1", (), package="x; rm -rf /")


def test_the_build_record_says_revision_never_dirty_and_what_it_lacks() -> None:
    rec = build_record(SutBuild(SHA, Path("c"), "0.3.0", ("PING",), package="system_under_test"))
    assert rec == {"version": "0.3.0", "revision": SHA, "dirty": False, "revision_error": None, "build": "revision",
                   "missing_requests": ["PING"], "missing_optional_fields": []}


def test_nodes_start_the_revision_in_isolated_mode() -> None:
    # -I: neither the working directory nor PYTHONPATH (the docker backend's points at the harness's checkout)
    # may put the harness's code in front of the revision's.
    assert node_command("/c/venv/bin/python") == ["/c/venv/bin/python", "-I", "-m", "harness.cli"]


def test_the_revision_image_copies_the_packages_and_checks_where_they_import_from() -> None:
    text = render_revision_dockerfile(node_image="splitbrain/node:0.1.0", packages=["harness", "system_under_test"],
                                      labels={"splitbrain.sut-revision": SHA}, system_package="system_under_test")
    assert text.startswith("FROM splitbrain/node:0.1.0\n")
    assert "COPY src/ /opt/sut/src/" in text and "/opt/sut/venv" in text
    assert "system_under_test.__file__.startswith(" in text and "-I -c" in text
    assert f'splitbrain.sut-revision="{SHA}"' in text
    assert revision_image_tag(SHA) == f"splitbrain/node:sut-{SHA[:12]}"
    other = render_revision_dockerfile(node_image="splitbrain/node:0.1.0", packages=["harness", "their_system"],
                                       labels={}, system_package="their_system")
    assert "their_system.__file__.startswith(" in other and "system_under_test" not in other  # the build's package
    for bad in ({"node_image": "Bad Image"}, {"packages": ["../etc"]}, {"labels": {"Bad Key": "v"}},
                {"system_package": "not_copied"}):
        args: dict[str, Any] = {"node_image": "splitbrain/node:0.1.0", "packages": ["harness"], "labels": {},
                                "system_package": "harness", **bad}
        with pytest.raises(ImageError):
            render_revision_dockerfile(**args)
    with pytest.raises(ImageError):
        revision_image_tag("HEAD")


def test_only_an_adapter_whose_nodes_run_this_repository_builds_revisions() -> None:
    import systems
    from harness.revisions import revision_system_of

    assert revision_system_of(systems.get("splitbrain")) is REVISIONS
    assert all(revision_system_of(systems.get(name)) is None for name in ("etcd", "redis", "rabbitmq", "counter"))
