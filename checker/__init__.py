"""Checkers: pure functions from histories to verdicts (linearizability, queue anomalies, invariants, perf)."""
