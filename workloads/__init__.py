"""Workloads: client + generator + checkers per kind of test (queue, controller-register, broker-ids, membership)."""

from workloads.registry import Workload, WorkloadContext, build, names, register

__all__ = ["Workload", "WorkloadContext", "build", "names", "register"]
