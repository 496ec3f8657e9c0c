"""Pure parts of the per-system node images (harness/images.py): the packages an adapter declares, the image tag,
the Dockerfile, and ``splitbrain images build --system`` refusing an unknown system before building anything."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

import systems
from harness.images import (
    ImageError,
    configure,
    image_name,
    node_packages,
    render_system_dockerfile,
    run,
    system_image_tag,
)


@pytest.mark.parametrize(("name", "want"), [
    ("etcd", ("etcd-server",)),
    ("redis", ("redis-server", "redis-sentinel")),
    ("rabbitmq", ("rabbitmq-server",)),
    ("rabbitmq-mirrored", ("rabbitmq-server",)),
    ("splitbrain", ()),
    ("counter", ()),
])
def test_each_built_in_adapter_declares_its_node_packages(name: str, want: tuple[str, ...]) -> None:
    assert node_packages(systems.get(name)) == want


@dataclass(frozen=True)
class _Odd:
    name: str = "odd"
    node_packages: object = ("etcd server",)


@pytest.mark.parametrize("value", [("etcd server",), ["etcd-server"], ("Etcd",), ("",), (3,)])
def test_node_packages_refuses_what_is_not_a_tuple_of_debian_names(value: object) -> None:
    with pytest.raises(ImageError, match="system 'odd': node_packages must be a tuple of Debian package names"):
        node_packages(_Odd(node_packages=value))


def test_system_image_tag() -> None:
    assert system_image_tag("etcd", "0.1.0") == "splitbrain/node-etcd:0.1.0"
    assert system_image_tag("redis-7", "2") == "splitbrain/node-redis-7:2"


@pytest.mark.parametrize(("name", "want"), [
    ("etcd", "etcd"), ("redis", "redis"), ("rabbitmq", "rabbitmq"),
    ("rabbitmq-mirrored", "rabbitmq"),  # the same adapter under a second name: one image, built once
])
def test_each_built_in_adapter_names_its_image(name: str, want: str) -> None:
    assert image_name(systems.get(name)) == want


def test_image_name_refuses_what_is_not_a_string() -> None:
    @dataclass(frozen=True)
    class _Named:
        name: str = "odd"
        image_name: object = ("rabbitmq",)

    with pytest.raises(ImageError, match="system 'odd': image_name must be a string"):
        image_name(_Named())


@pytest.mark.parametrize("bad", ["Etcd", "-x", "a/b", "", "x y", "a--"])
def test_system_image_tag_refuses_names_docker_refuses(bad: str) -> None:
    with pytest.raises(ImageError, match="cannot be part of an image name"):
        system_image_tag(bad, "1")


def test_system_dockerfile_installs_the_packages_from_the_context_sources_without_starting_services() -> None:
    text = render_system_dockerfile(node_image="splitbrain/node:0.1.0", packages=["redis-server", "redis-sentinel"],
                                    labels={"splitbrain.system": "redis",
                                            "splitbrain.system-packages": "redis-server,redis-sentinel"})
    lines = text.splitlines()
    assert lines[0] == "FROM splitbrain/node:0.1.0"
    assert lines[1] == "COPY sources.list /etc/apt/sources.list"
    run_step = text[text.index("RUN "):text.index("LABEL")]
    order = ["/usr/sbin/policy-rc.d", "apt-get update", "install -y -qq --no-install-recommends redis-server "
             "redis-sentinel", "rm -f /usr/sbin/policy-rc.d", "rm -rf /var/lib/apt/lists/*"]
    assert [run_step.index(s) for s in order] == sorted(run_step.index(s) for s in order)
    assert "exit 101" in run_step  # Debian's policy-rc.d: no service started by a maintainer script
    assert lines[-1] == 'LABEL splitbrain.system="redis" splitbrain.system-packages="redis-server,redis-sentinel"'
    assert text.count("RUN ") == 1  # one layer: each step costs seconds on overlay file systems


@pytest.mark.parametrize(("kw", "match"), [
    ({"node_image": "Splitbrain Node"}, "docker reference"),
    ({"packages": []}, "no packages"),
    ({"packages": ["etcd-server; rm -rf /"]}, "not a Debian package name"),
    ({"labels": {"a": 'x" RUN id'}}, "plain value"),
])
def test_system_dockerfile_rejects_unsafe_inputs(kw: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"node_image": "splitbrain/node:1", "packages": ["etcd-server"], "labels": {}, **kw}
    with pytest.raises(ImageError, match=match):
        render_system_dockerfile(**args)  # type: ignore[arg-type]


def test_images_build_refuses_an_unknown_system_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    configure(parser)
    args = parser.parse_args(["build", "--system", "no-such-system"])
    assert run(args) == 2
    err = capsys.readouterr().err
    assert "--system no-such-system" in err and "no system called 'no-such-system'" in err and "etcd" in err


def test_a_docker_run_takes_its_system_image_and_a_failed_build_names_the_system(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    import harness.images
    from harness.commands._backend import BackendUnavailable, system_image
    from harness.spec import spec_from_dict

    spec = spec_from_dict({"name": "x", "system": "etcd", "backend": "docker", "nodes": {"members": 3},
                           "workloads": ["register"]}, file="<unit>")
    asked: list[str] = []

    def made(system: str, *, log: object = None) -> str:
        asked.append(system)
        return f"splitbrain/node-{system}:test"

    monkeypatch.setattr(harness.images, "image_for_system", made)
    assert asyncio.run(system_image(spec)) == "splitbrain/node-etcd:test" and asked == ["etcd"]

    def broken(system: str, *, log: object = None) -> str:
        raise ImageError("docker build of splitbrain/node-etcd:test failed: apt-get exit 100")

    monkeypatch.setattr(harness.images, "image_for_system", broken)
    with pytest.raises(BackendUnavailable, match=r"no node image for system 'etcd': docker build .* apt-get exit 100"):
        asyncio.run(system_image(spec))
