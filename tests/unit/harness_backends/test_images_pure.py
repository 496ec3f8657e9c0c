"""Pure parts of harness/images.py: apt source parsing (both formats), mirror choice, sources.list
and Dockerfile rendering, pip index settings, node requirements."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.images import (
    APT_PACKAGES,
    AptSource,
    ImageError,
    node_requirements,
    parse_deb822,
    parse_one_line,
    pick_mirror,
    pip_build_args,
    pip_cert_path,
    render_dockerfile,
    render_sources_list,
)

DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb deb-src
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main contrib

Types: deb
Enabled: no
URIs: http://disabled.example/debian
Suites: bookworm
Components: main
"""

ONE_LINE = """\
# a comment
deb [signed-by=/usr/share/keyrings/x.gpg arch=amd64] http://one.example/debian bookworm main contrib
deb-src http://one.example/debian bookworm main
deb http://one.example/debian-security bookworm-security main  # trailing comment
deb http://other.example/ubuntu jammy main
"""


def test_deb822_parses_stanzas_and_skips_disabled() -> None:
    got = parse_deb822(DEB822)
    assert got == [
        AptSource(("deb",), "http://mirror.example/debian", ("bookworm", "bookworm-updates"), ("main",)),
        AptSource(("deb", "deb-src"), "http://mirror.example/debian-security", ("bookworm-security",),
                  ("main", "contrib")),
    ]


def test_one_line_parses_options_comments_and_types() -> None:
    got = parse_one_line(ONE_LINE)
    assert [(s.types, s.uri, s.suites, s.components) for s in got] == [
        (("deb",), "http://one.example/debian", ("bookworm",), ("main", "contrib")),
        (("deb-src",), "http://one.example/debian", ("bookworm",), ("main",)),
        (("deb",), "http://one.example/debian-security", ("bookworm-security",), ("main",)),
        (("deb",), "http://other.example/ubuntu", ("jammy",), ("main",)),
    ]


@pytest.mark.parametrize(("text", "parse", "want"), [
    (DEB822, parse_deb822, "http://mirror.example/debian"),
    (ONE_LINE, parse_one_line, "http://one.example/debian"),
])
def test_pick_mirror_takes_the_main_suite_source(text: str, parse: object, want: str) -> None:
    assert pick_mirror(parse(text)) == want  # type: ignore[operator]


def test_pick_mirror_error_lists_what_was_found() -> None:
    with pytest.raises(ImageError, match=r"no apt source for suite 'bookworm'.*other.example"):
        pick_mirror(parse_one_line("deb http://other.example/ubuntu jammy main\n"))


def test_sources_list_keeps_bookworm_family_binary_sources_only() -> None:
    text = render_sources_list(parse_deb822(DEB822) + parse_one_line(ONE_LINE))
    assert text.splitlines() == [
        "deb http://mirror.example/debian bookworm main",
        "deb http://mirror.example/debian bookworm-updates main",
        "deb http://mirror.example/debian-security bookworm-security main contrib",
        "deb http://one.example/debian bookworm main contrib",
        "deb http://one.example/debian-security bookworm-security main",
    ]


def test_bad_uri_is_rejected_with_the_value() -> None:
    with pytest.raises(ValueError, match="not a uri"):
        AptSource(("deb",), "not a uri", ("bookworm",), ("main",))


@given(st.lists(st.sampled_from(["bookworm", "bookworm-updates", "bookworm-security", "jammy", "sid"]), min_size=1,
                max_size=4, unique=True))
def test_one_line_and_deb822_agree(suites: list[str]) -> None:
    deb822 = f"Types: deb\nURIs: http://m.example/debian\nSuites: {' '.join(suites)}\nComponents: main\n"
    one = "".join(f"deb http://m.example/debian {s} main\n" for s in suites)
    a = render_sources_list(parse_deb822(deb822)) if any(s.startswith("bookworm") for s in suites) else None
    b = render_sources_list(parse_one_line(one)) if any(s.startswith("bookworm") for s in suites) else None
    assert a == b


def test_pip_build_args_reads_config_then_env_and_drops_host_paths() -> None:
    config = ("global.index-url='https://pypi.example/simple'\n:env:.find-links='/opt/wheels'\n"
              "global.cert='/etc/ssl/certs/ca.crt'\nglobal.trusted-host='pypi.example'\n")
    got = pip_build_args(config, {"PIP_EXTRA_INDEX_URL": "https://extra.example/simple", "PIP_FIND_LINKS": "/x"})
    assert got == {"PIP_INDEX_URL": "https://pypi.example/simple", "PIP_TRUSTED_HOST": "pypi.example",
                   "PIP_EXTRA_INDEX_URL": "https://extra.example/simple"}
    assert pip_build_args("", {"PIP_INDEX_URL": "https://env.example/simple"}) == {
        "PIP_INDEX_URL": "https://env.example/simple"}


def test_node_requirements_drop_host_only_dependencies() -> None:
    nfq = "NetfilterQueue>=1.1; sys_platform == 'linux'"
    deps = ["msgpack>=1.0", "pyspark>=3.5", "PyYAML>=6.0", "pyarrow >= 14", nfq]
    pyproject = f'[project]\nname="x"\nversion="1"\ndependencies={json.dumps(deps)}\n'
    assert node_requirements(pyproject) == ["msgpack>=1.0", "PyYAML>=6.0", nfq]


def _render(**kw: object) -> str:
    args: dict[str, object] = {"base_image": "splitbrain/base:bookworm", "requirements": ["msgpack>=1.0"],
                               "pip_args": ["PIP_INDEX_URL"]}
    args.update(kw)
    return render_dockerfile(**args)  # type: ignore[arg-type]


def test_dockerfile_renders_base_packages_args_and_layer_order() -> None:
    text = _render()
    lines = text.splitlines()
    froms = [ln for ln in lines if ln.startswith("FROM ")]
    assert froms == ["FROM splitbrain/base:bookworm"]
    assert "ARG PIP_INDEX_URL" in lines
    assert " ".join(APT_PACKAGES) in text
    assert "pip install --no-cache-dir --disable-pip-version-check -q 'msgpack>=1.0'" in text
    # slow layers first: apt, then dependencies, then the wheel
    assert text.index("apt-get install") < text.index("'msgpack>=1.0'") < text.index("COPY wheels/")
    assert "{{" not in text and "{%" not in text
    assert "LABEL" not in text
    labelled = _render(labels={"splitbrain.version": "0.1.0", "splitbrain.image": "node"})
    assert [ln for ln in labelled.splitlines() if ln.startswith("LABEL")] == [
        'LABEL splitbrain.version="0.1.0" splitbrain.image="node"']


def test_dockerfile_without_pip_args_declares_none() -> None:
    assert "ARG " not in _render(pip_args=[])


@pytest.mark.parametrize(("kw", "match"), [
    ({"base_image": "Debian Bookworm"}, "docker reference"),
    ({"requirements": ["x\nRUN rm -rf /"]}, "unsafe"),
    ({"requirements": [""]}, "unsafe"),
    ({"labels": {"a": 'x" RUN id'}}, "plain value"),
])
def test_dockerfile_rejects_unsafe_inputs(kw: dict[str, object], match: str) -> None:
    with pytest.raises(ImageError, match=match):
        _render(**kw)


def test_dockerfile_shell_quotes_requirements_with_markers() -> None:
    text = _render(requirements=["NetfilterQueue>=1.1; sys_platform == 'linux'", "x$(id)"])
    assert """'NetfilterQueue>=1.1; sys_platform == '"'"'linux'"'"'' 'x$(id)'""" in text


def test_pip_cert_path_from_config_or_env() -> None:
    assert pip_cert_path("global.cert='/etc/ssl/ca.crt'\n", {}) == "/etc/ssl/ca.crt"
    assert pip_cert_path("global.cert='/etc/ssl/ca.crt'\n", {"PIP_CERT": "/env.crt"}) == "/env.crt"
    assert pip_cert_path("global.index-url='x'\n", {}) is None


def test_dockerfile_copies_the_pip_ca_only_when_configured() -> None:
    with_cert = _render(pip_cert=True)
    assert "PIP_CERT=/opt/splitbrain-build/pip-ca.crt pip install" in with_cert
    assert "pip-ca.crt" not in _render()
