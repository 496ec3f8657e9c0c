"""Every part of the tree starts from the one default lease (system_under_test/lease_timing.py).

The controllers, the brokers (config and command line), the harness's cluster options, the simulator and the
membership workload each carried their own ``2000`` once; a change of the default had to find them all.  This test
reads the default each part really uses, so a part that goes back to a literal of its own fails here.
"""

from __future__ import annotations

import argparse

from hypothesis import given
from hypothesis import strategies as st

from system_under_test.broker import main as broker_main
from system_under_test.broker.config import BrokerConfig
from system_under_test.controller import main as controller_main
from system_under_test.controller.config import ControllerConfig
from system_under_test.lease_timing import DEFAULT_LEASE_TIMEOUT_MS, heartbeat_interval_for, scan_interval_for
from system_under_test.sim.broker import BrokerOptions
from system_under_test.sim.cluster import SimConfig
from systems.splitbrain.options import ClusterOptions
from workloads.membership import MembershipOptions


def _cli_default(configure: object, flag: str) -> object:
    p = argparse.ArgumentParser()
    configure(p)  # type: ignore[operator]
    return next(a.default for a in p._actions if flag in a.option_strings)


def test_every_part_uses_the_one_default_lease() -> None:
    d = DEFAULT_LEASE_TIMEOUT_MS
    assert ClusterOptions().lease_timeout_ms == d
    assert ControllerConfig(cluster_name="c").lease_timeout_ms == d
    assert ControllerConfig(cluster_name="c").scan_interval_ms == scan_interval_for(d)
    assert _cli_default(controller_main.configure, "--lease-timeout-ms") == d
    assert _cli_default(broker_main.configure, "--lease-timeout-ms") == d
    broker = BrokerConfig(cluster_name="c", broker_name="b", listen="127.0.0.1:9000", store_dir="x",
                          controllers=("127.0.0.1:1",), token="t")
    assert (broker.lease_timeout_ms, broker.heartbeat_interval_ms) == (d, heartbeat_interval_for(d))
    assert SimConfig().lease_timeout_ms == d
    assert (BrokerOptions().lease_timeout_ms, BrokerOptions().heartbeat_interval_ms) == (d, heartbeat_interval_for(d))
    assert MembershipOptions().lease_ms == d


@given(st.integers(min_value=100, max_value=600_000))
def test_derived_intervals_fit_the_lease(lease_ms: int) -> None:
    """Several heartbeats and scans fit in every lease the cluster accepts (100..600000 ms), none over 500 ms."""
    hb, scan = heartbeat_interval_for(lease_ms), scan_interval_for(lease_ms)
    assert 10 <= scan <= hb <= 500
    assert 4 * hb <= max(lease_ms, 40) and 8 * scan <= max(lease_ms, 80)
    assert scan < lease_ms  # ControllerConfig requires it
