"""Mutation bench: how much of the bug space nobody planted do generic chaos and the simulator find?

The *catalogue* (:data:`MUTANTS`, one frozen :class:`Mutant` per row) holds small, realistic mistakes in the cluster
under test, one place each: an off-by-one in an offset rule, a missing epoch check, a dropped fsync, a lease
compared in the wrong units, an election that ignores a rule of the SyncStateSet, a registration step reordered, a
Raft commit rule that ignores the term...  Each row names its component (:data:`COMPONENTS`, the parts issue 31
lists), the file, the exact source text it replaces (it must occur exactly once in that file at the base revision)
and its replacement, the real bug class it models, and what a checker should see when a run exercises it.  They
were written from the cluster's code and the seed documents, not from any project's bug reports.

A mutant is never applied to the work tree.  :func:`mutant_commit` builds it as a git commit object of this
repository with plumbing only -- the base revision read into a temporary index (``GIT_INDEX_FILE``), the mutated
file stored with ``hash-object -w`` and put in that index with ``update-index --cacheinfo``, then ``write-tree``
and ``commit-tree -p BASE`` -- and keeps it under ``refs/splitbrain/mutants/<name>`` so ``git gc`` leaves it alone.
The work tree and the real index are not touched.  Author, committer and dates are fixed (the base's committer
date), so the same mutant of the same base is always the same commit.  ``splitbrain test SPEC --sut-revision REV``
then runs it: the nodes run the cluster code of revision REV, while clients, nemeses and checkers stay the
harness's.

The search, per mutant and per method: ``random`` and ``guided`` (``--nemesis-mode``) run real ``splitbrain test``
commands against the mutant's revision (local backend, :func:`bench.search_runs.search`) until a run reports an
anomaly (verdict invalid) or the attempts' main phases add up to ``--budget-s``.  Every mutant runs the same spec
(:func:`search_spec`): safe settings, the queue, controller-register, membership and broker-ids workloads, and
generic chaos -- partitions, kills, pauses, clock faults, disk faults and crashes at protocol steps (plus the
registration crashes broker-ids adds) -- with no schedule written for any mutant.

The third method, ``simulation``, searches the mutant with the whole-cluster simulator of issue 31 section 3 -- the
*mutant's own* simulator: the revision is built (:func:`harness.revisions.ensure_build`) and its interpreter runs
``-I -m harness.cli sim`` (:func:`bench.search_runs.sim_search`), so the simulated controllers and brokers run the
mutated code.  Seeds ``seed*1000, seed*1000+1, ..`` of ``--sim-seconds`` simulated seconds each, with every fault
kind the simulator makes (:data:`SIM_FAULTS`) as the pool each swarm seed draws its subset of kinds, workloads and
intensities from (``--sim-swarm``, :data:`SIM_SWARM`; ``--no-sim-swarm``: every seed every kind at fixed
intensities) and the safe settings, until a seed is invalid (through a failing
checker's kinds, :func:`bench.search_runs.failing_kinds`, not only ``--ignore-kinds``) or the search's budget is
spent.  The budget is the same number, ``--budget-s``, but of CPU seconds of the simulator's process, not of
simulated seconds: the simulator runs many times faster than real time (docs/simulation.md), so one CPU minute
plays about an hour of cluster time.  The report gives the seed and the simulated time of the detection, the
simulated seconds searched and the CPU seconds spent.  A mutant the simulator searched without finding is probed
(:func:`bench.search_runs.sim_probe`): its first seeds are played again under a line tracer to tell whether the
mutated lines ran at all -- the evidence that marks a mutant whose code the simulator does not run (its file never
loaded, or the lines never reached) rather than a guess from docs/simulation.md's list.  A revision older than the
simulator (no module of ``splitbrain sim``: :data:`SIM_COMMANDS`, or no ``sim`` subcommand) reads "simulator not in
this revision", never a miss.

A *control* row runs the base revision itself the same way: it must not be found, or a kill means nothing (the
report says so loudly).  A run invalid only through the anomaly kinds of ``--ignore-kinds`` (default
``unavailable``, :data:`IGNORED_KINDS`) does not count as a find; the report still shows such runs.  A mutant is
*killed* by a method when one of its searches by that method found it; the
report gives per mutant and method: found or not, the detection time (main-phase seconds, as fault_search
measures it; CPU seconds for ``simulation``), the anomaly kinds the finding runs reported (so a reader can see they
fit the mutation's symptom), and overall the kill rate, the rate per method, the rate by chaos (``random`` or
``guided``: without the simulator), by the simulator and by both (with it), and the mutants only chaos or only the
simulator killed.  Target (issue 31): at least 80% of the catalogue killed within 3 minutes of search each
(``--budget-s 180``), by chaos or simulation.

Each finished search is appended to ``DIR/progress.jsonl`` under ``--results DIR``; run again on the same root
with the same settings and base, the bench resumes (a search is redone when its spec, budget or mutant commit
changed).  Pin the base with ``--base SHA`` when a long bench runs in parts while others commit.  The chaos
methods need root (network namespaces) and a ``splitbrain test`` that knows ``--sut-revision``; ``simulation``
needs neither.

Usage::

    python bench/mutants.py --list
    python bench/mutants.py --build [--base REV]           # make the mutant commits and refs, run nothing
    python bench/mutants.py [--json] [--mutants a,b] [--methods random,guided,simulation] [--seeds 1]
        [--first-seed 1] [--budget-s 180] [--run-s 60] [--interval-s 8] [--sim-seconds 60] [--base REV]
        [--no-control] [--ignore-kinds unavailable] [--results DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.search_runs import (  # noqa: E402
    NOT_IN_REVISION,
    SIM_SEEDS_PER_SEARCH,
    Progress,
    checkout_commit,
    sim_probe,
    sim_search,
    summarize,
)
from bench.search_runs import search as run_search  # noqa: E402
from harness.revisions import RevisionError, ensure_build  # noqa: E402
from nemesis.disk_kinds import FAULTS as DISK_LIVE_FAULTS  # noqa: E402
from system_under_test.sim.faults import FAULT_KINDS as SIM_FAULT_KINDS  # noqa: E402
from systems.splitbrain.revision import REVISIONS  # noqa: E402

COMPONENTS: dict[str, str] = {
    "controller/state-machine": "the replicated controller metadata and its apply function",
    "controller/requests": "the leader's request decisions (elections, SyncStateSet, registration, heartbeats)",
    "controller/scan": "the leader's periodic fencing and re-election",
    "controller/elect-policy": "the choice of the new master",
    "controller/heartbeat": "the controller's lease table of brokers",
    "broker/confirm-ack": "the confirm offset and when a put may be acknowledged",
    "broker/ha-transfer": "the master streaming its log to the slaves",
    "broker/truncation": "where a slave cuts its log to agree with the master",
    "broker/role-change": "changeToMaster / changeToSlave",
    "broker/registration": "how a broker gets and keeps its persistent broker id",
    "broker/store-recovery": "the store's durability and what it trusts when it opens",
    "broker/lease": "the broker's own lease: when it fences itself",
    "raft": "the controller quorum's Raft core",
}
"""The component classes, one table: every part issue 31 names (controller: state machine, requests, scan, election
policy, heartbeats; broker: confirm/ack rules, HA transfer and truncation, role changes, registration, store
recovery; Raft) plus the broker's lease."""

ISSUE_COMPONENTS = frozenset(COMPONENTS) - {"broker/lease"}
"""The classes issue 31 names: the catalogue must cover each."""

CONTROL = "control"
"""The row that runs the base revision unmutated (a name no mutant may take)."""
CHAOS_METHODS = ("random", "guided")
"""Methods that run real ``splitbrain test`` processes with generic chaos (``--nemesis-mode``)."""
SIMULATION = "simulation"
METHODS = (*CHAOS_METHODS, SIMULATION)
SIM_FAULTS = SIM_FAULT_KINDS
"""Every fault kind the simulator makes, from its own table (``registration-crash`` included, as the chaos spec's
broker-ids workload adds registration crashes)."""
SIM_SECONDS = 60.0
SIM_THREADS = 4
SIM_SWARM = True
"""Whether the simulation method runs swarm seeds by default (``--sim-swarm``).  Measured at one base, 180 CPU s
each: swarm killed ``hb-half-lease`` (55.7 CPU s) and ``role-equal-epoch-reapplied`` (76.0 s), which every-kind
seeds missed (179 CPU s each), ``raft-read-without-heartbeat-round`` (105.5 s, a partition shape only swarm draws),
and ``reg-temp-deleted-before-meta`` in 16.5 s against 36.5 s; its control stayed clean (docs/bugs.md,
*Swarm seeds in the mutation bench*)."""
PROBE_SEEDS = 10
"""How many of a missed search's first seeds the line probe plays again (under the tracer a seed costs about twice
its CPU time; ten seeds of 60 s are about 700 simulated seconds)."""
SIM_COMMANDS = ("systems/splitbrain/sim/command.py", "harness/commands/sim.py")
"""Where the module of ``splitbrain sim`` has lived (now, then before issue 29 moved it into our cluster's adapter):
a revision with neither is older than the simulator."""
KILL_RATE_TARGET = 0.8
IGNORED_KINDS = ("unavailable",)
"""Anomaly kinds that do not count as a kill by default (``--ignore-kinds``; they still show in the report).
``unavailable`` is the availability verdict of issue 31 section 2: under this spec's chaos the unmutated control
tripped it (guided, seed 3002: controller-register and broker-ids writes waited 8.7 s > 8 s while the controller
leader and a broker were paused), so a kill through it alone would say nothing about the mutation."""
TARGET_BUDGET_S = 180.0
COVERAGE_S = 30.0
REF_PREFIX = "refs/splitbrain/mutants/"
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class MutantError(ValueError):
    """A mutant that cannot be built (its text does not occur exactly once, the result does not compile, a git
    step failed); the message names the mutant, the file and the revision."""


@dataclass(frozen=True)
class Mutant:
    """One small mistake in one place of the cluster.

    Attributes:
        name: a lower-case dashed name (also the ref ``refs/splitbrain/mutants/<name>``).
        component: a key of :data:`COMPONENTS`.
        file: the file under ``system_under_test/`` (repository-relative, ``/``-separated).
        old: the exact source text replaced; it must occur exactly once in ``file`` at the base revision.
        new: its replacement.
        models: the real bug class it models, in one sentence.
        symptom: what a checker should see when a run exercises it (or why none may).
    """

    name: str
    component: str
    file: str
    old: str
    new: str
    models: str
    symptom: str

    def __post_init__(self) -> None:
        if not _NAME.match(self.name) or self.name == CONTROL:
            raise ValueError(f"Mutant.name must be lower-case words joined by '-' and not {CONTROL!r}, "
                             f"got {self.name!r}")
        if self.component not in COMPONENTS:
            raise ValueError(f"Mutant {self.name}: component {self.component!r} is not one of {sorted(COMPONENTS)}")
        if not (self.file.startswith("system_under_test/") and self.file.endswith(".py")) or ".." in self.file:
            raise ValueError(f"Mutant {self.name}: file {self.file!r} must be a .py file under system_under_test/")
        if not self.old or self.old == self.new:
            raise ValueError(f"Mutant {self.name}: old text must be non-empty and differ from the new text")
        for field_name in ("models", "symptom"):
            if not getattr(self, field_name).strip():
                raise ValueError(f"Mutant {self.name}: {field_name} must say something")


M = Mutant
MUTANTS: tuple[Mutant, ...] = (
    # ---- controller: state machine -------------------------------------------------------------------
    M("sm-alter-epoch-not-bumped", "controller/state-machine", "system_under_test/controller/state_machine.py",
      "bs, sync_state_set=ev.sync_state_set, sync_state_set_epoch=bs.sync_state_set_epoch + 1",
      "bs, sync_state_set=ev.sync_state_set, sync_state_set_epoch=bs.sync_state_set_epoch",
      "A SyncStateSet change is applied without bumping its version, so two different sets share one epoch.",
      "controller-register: not linearizable (a read after an accepted alter shows the old set epoch); brokers' "
      "next alters are fenced for a set epoch the controller never had."),
    M("sm-elect-keeps-sync-state-set", "controller/state-machine", "system_under_test/controller/state_machine.py",
      "sync_state_set=(ev.broker_id,),", "sync_state_set=bs.sync_state_set,",
      "An election leaves the old SyncStateSet in force instead of shrinking it to the new master, so the set can "
      "name the failed master and omit the new one.",
      "controller-register: not linearizable (the set after an election is not the elected broker alone); queue: "
      "puts wait on a dead member, and a later election may pick a member that never copied the new master."),
    M("sm-elect-ignores-set-epoch", "controller/state-machine", "system_under_test/controller/state_machine.py",
      "stale = (bs.master_epoch, bs.sync_state_set_epoch) != expected",
      "stale = bs.master_epoch != ev.expected_master_epoch",
      "The apply-time fencing of an election checks the master epoch but not the SyncStateSet epoch, so an "
      "election decided before a set shrink was applied still elects a broker the shrink removed.",
      "queue: lost-write when a pipelined election races a shrink (rare: it needs the scan and an alter decided "
      "on the same state); controller-register: not linearizable if its elect and alter race."),
    M("sm-next-broker-id-off-by-one", "controller/state-machine", "system_under_test/controller/state_machine.py",
      "max(bs.next_broker_id, ev.broker_id + 1)", "max(bs.next_broker_id, ev.broker_id)",
      "After an id is applied the set's next broker id is not moved past it (an off-by-one), so GetNextBrokerId "
      "hands out an id that is already held.",
      "broker-ids: not linearizable (GetNextBrokerId returned an id already assigned); fresh brokers' claims get "
      "refused and retried."),
    # ---- controller: requests ------------------------------------------------------------------------
    M("req-elect-unclean-fallback", "controller/requests", "system_under_test/controller/requests.py",
      "everyone = bs.broker_ids() if ctx.config.enable_elect_unclean_master else None", "everyone = bs.broker_ids()",
      "The broker- and admin-triggered election ignores enableElectUncleanMaster and falls back to replicas "
      "outside the SyncStateSet.",
      "controller-register: not linearizable (a designated replica outside the set is elected); queue: lost-write "
      "when a master whose set had shrunk to itself fails and a lagging broker asks to be elected."),
    M("req-heartbeat-epoch-unchecked", "controller/requests", "system_under_test/controller/membership.py",
      "    if not epoch_matches(state, reg, given) or reg is None:\n"
      "        return stale_epoch(name, broker_id, given, reg)\n"
      "    lease = h.get(\"heartbeat_timeout_ms\")",
      "    if reg is None:\n"
      "        return stale_epoch(name, broker_id, given, reg)\n"
      "    lease = h.get(\"heartbeat_timeout_ms\")",
      "A heartbeat is accepted without comparing its broker epoch (KIP-380), so a replaced incarnation keeps the "
      "broker's lease alive.",
      "membership: stale-epoch-accepted (a heartbeat carrying the previous incarnation's epoch is answered)."),
    M("req-register-keeps-broker-epoch", "controller/requests", "system_under_test/controller/membership.py",
      "new_incarnation = reg is None or reg.incarnation_id != incarnation", "new_incarnation = reg is None",
      "A restarted broker's registration is taken for a retry of the old one, so the new process keeps the old "
      "broker epoch and requests of the old process still count (KIP-631 incarnations).",
      "membership: bounce-kept-epoch (a bounced broker comes back with the same broker epoch)."),
    # ---- controller: scan ----------------------------------------------------------------------------
    M("scan-elects-fenced", "controller/scan", "system_under_test/controller/scan.py",
      "return electable(bs, i, heartbeats, now_ms)", "return heartbeats.is_alive((bs.broker_name, i), now_ms)",
      "The re-election checks only that a candidate's lease is live and forgets that a fenced broker or one in "
      "controlled shutdown may not become master.",
      "membership: shutdown-kept-mastership (a leaving master is elected again while it shuts down); queue: "
      "errors while a just-restarted, still fenced broker is master."),
    M("scan-unclean-fallback", "controller/scan", "system_under_test/controller/scan.py",
      "everyone = bs.broker_ids() if config.enable_elect_unclean_master else None", "everyone = bs.broker_ids()",
      "The leader's re-election of a dead master ignores enableElectUncleanMaster and picks any live replica when "
      "no SyncStateSet member is electable.",
      "queue: lost-write (acknowledged sends missing after a broker outside the set became master)."),
    # ---- controller: election policy -----------------------------------------------------------------
    M("elect-designate-unchecked", "controller/elect-policy", "system_under_test/controller/elect_policy.py",
      "return prefer if prefer in alive else None", "return prefer",
      "An admin-designated master is elected without checking that it is an electable member of the "
      "SyncStateSet.",
      "controller-register: not linearizable (a designation of a replica outside the set succeeds)."),
    M("elect-dead-candidates", "controller/elect-policy", "system_under_test/controller/elect_policy.py",
      "alive = sorted({c for c in candidates if is_alive(c)})", "alive = sorted(set(candidates))",
      "The election ranks every SyncStateSet member without asking whether it is alive, so the failed master can "
      "be elected again.",
      "mostly availability: after a master fails the set keeps electing dead brokers until one restarts; sends "
      "fail meanwhile, which no safety checker counts (issue 31 section 2); membership: shutdown-kept-mastership "
      "when the scan elects a leaving broker again."),
    # ---- controller: heartbeats ----------------------------------------------------------------------
    M("hb-half-lease", "controller/heartbeat", "system_under_test/controller/heartbeat.py",
      "return self.last_update_ms + self.lease_timeout_ms",
      "return self.last_update_ms + self.lease_timeout_ms // 2",
      "The controller expires a broker after half the lease the broker itself honours, so a master the "
      "controller replaced can still believe its lease valid and take writes.",
      "queue: lost-write or inconsistent-offsets when a deposed master whose set had shrunk to itself acknowledges "
      "in the window; otherwise only spurious re-elections."),
    # ---- broker: confirm offset and acks ---------------------------------------------------------------
    M("confirm-skips-unacked-member", "broker/confirm-ack", "system_under_test/broker/ha/confirm.py",
      "        if ack is None or ack < 0:\n            return min(previous, master_max_offset)",
      "        if ack is None or ack < 0:\n            continue",
      "The confirm offset skips a disconnected SyncStateSet member instead of holding still, so consumers read "
      "records a member that may become master does not have.",
      "queue: inconsistent-offsets or unexpected (a polled record later replaced or gone after a failover)."),
    M("ack-any-member", "broker/confirm-ack", "system_under_test/broker/ha/confirm.py",
      "return all(acks.get(m, -1) >= request_end_offset for m in others)",
      "return not others or any(acks.get(m, -1) >= request_end_offset for m in others)",
      "allAckInSyncStateSet is implemented as 'one member acked', so a put is acknowledged before every member "
      "that could be elected holds it.",
      "queue: lost-write (an acknowledged send missing after the member that lacked it became master)."),
    M("confirm-max-not-min", "broker/confirm-ack", "system_under_test/broker/ha/confirm.py",
      "confirm = min(confirm, ack)", "confirm = max(confirm, ack)",
      "The confirm offset is advanced past the in-sync minimum (min and max swapped), so records are visible "
      "before every SyncStateSet member holds them.",
      "queue: inconsistent-offsets, unexpected or nonmonotonic polls (records read from a master are cut after a "
      "failover)."),
    # ---- broker: HA transfer ---------------------------------------------------------------------------
    M("transfer-beyond-stable", "broker/ha-transfer", "system_under_test/broker/ha/transfer.py",
      "mx = stable_offset  # only finished (under SYNC: fsynced) appends are replicated",
      "mx = max_offset",
      "The master streams bytes whose append has not finished (not yet fsynced), so a slave can hold a record the "
      "master then undoes after a failed fsync.",
      "queue: lost-write or inconsistent-offsets (the next record written where the undone one lay is confirmed by "
      "the slave's ack of the undone one's bytes, and a failover to that slave serves the undone record in its "
      "place); needs a failed fsync (the simulator's fsync fault, eio-fsync) then a failover."),
    # ---- broker: truncation ----------------------------------------------------------------------------
    M("truncate-keeps-longer-end", "broker/truncation", "system_under_test/broker/store/truncation.py",
      "point = min(mine.end_offset, theirs.end_offset)", "point = max(mine.end_offset, theirs.end_offset)",
      "The truncation point is taken from the longer end of the shared epoch, so a deposed master keeps the tail "
      "the new master never had.",
      "queue: inconsistent-offsets if the kept tail is ever served; the store's queue-offset check refuses the "
      "master's next batch, so the slave more likely just stops replicating (availability only)."),
    # ---- broker: role changes --------------------------------------------------------------------------
    M("role-no-epoch-entry", "broker/role-change", "system_under_test/broker/ha/role.py",
      "append: list[RoleStep] = [] if keep_entry else [AppendEpochEntry(master_epoch, max_offset)]",
      "append: list[RoleStep] = []",
      "A new master does not record where its epoch starts, so its records are filed under the previous master's "
      "epoch and the truncation of a returning old master compares the wrong ranges.",
      "queue: inconsistent-offsets or lost-write after an old master with an unreplicated tail rejoins."),
    M("role-equal-epoch-reapplied", "broker/role-change", "system_under_test/broker/ha/role.py",
      "if new_master_epoch <= local_master_epoch:", "if new_master_epoch < local_master_epoch:",
      "A role notification with the master epoch the broker already holds is acted on again (< where <= was "
      "meant), so every poll redoes changeToMaster/changeToSlave.",
      "mostly availability: the master drops its slaves and fails waiting puts every poll; a safety anomaly only "
      "if a re-activation adopts an older SyncStateSet in a race."),
    # ---- broker: registration --------------------------------------------------------------------------
    M("reg-temp-taken-as-meta", "broker/registration", "system_under_test/broker/registration/state_machine.py",
      "return RestartFoundTemp(temp)", "return RestartFoundMeta(temp.to_meta())",
      "A broker that crashed before its id claim was accepted treats the temp meta file as its identity and "
      "registers the unclaimed id directly.",
      "broker-ids restarts: restart-refused (a broker crashed between writing the temp file and ApplyBrokerId "
      "is refused the unassigned id), or an id held twice."),
    M("reg-temp-deleted-before-meta", "broker/registration", "system_under_test/broker/registration/driver.py",
      "PROMOTE_STEPS: tuple[str, ...] = (PREPARE_META, FP_META_BEFORE_RENAME, COMMIT_META, FP_META_AFTER_RENAME, "
      "DELETE_TEMP)",
      "PROMOTE_STEPS: tuple[str, ...] = (DELETE_TEMP, PREPARE_META, FP_META_BEFORE_RENAME, COMMIT_META, "
      "FP_META_AFTER_RENAME)",
      "A registration step is reordered: the temp meta file is deleted before the meta file is in place, so a crash "
      "in between leaves neither and the broker starts over with a new id, leaking the one it claimed.",
      "invariants: broker-id-leaked -- a broker crashed at broker.meta.before_rename after the controller applied "
      "its claim comes back under a fresh id (the simulator's registration-crash broker, or a real run's "
      "registration-crash / lane crash whose identity files held the applied id)."),
    # ---- broker: store recovery and durability ---------------------------------------------------------
    M("store-confirm-not-clamped", "broker/store-recovery", "system_under_test/broker/store/recovery.py",
      "confirm = min(max(stored_confirm, lo), hi)", "confirm = max(stored_confirm, lo)",
      "At open the checkpoint's confirm offset is not clamped to the recovered log end, so after a lost or cut tail "
      "replicated records become visible as soon as they land, before they are confirmed.",
      "queue: inconsistent-offsets or unexpected after a disk fault cut a tail below the confirm offset and a "
      "failover followed."),
    M("store-fsync-dropped", "broker/store-recovery", "system_under_test/broker/store/durability.py",
      "    return SyncPlan(fsync=True, target=max_offset)",
      "    return SyncPlan(fsync=False, target=max_offset)",
      "The commit log's fsync is skipped while the synced offset is still published, so acknowledged records live "
      "only in the page cache (the rule is durability.py's plan_sync, which the commit log and the simulated store "
      "both run).",
      "simulation: a simulated crash is a power cut, keeping only what an fsync made durable, so a killed broker "
      "comes back below its published synced offset (a durable loss) and acknowledged records can be lost (lost-write, "
      "or unavailable when every member lost some); real runs: none expected -- a killed process keeps the page "
      "cache, and the lose-unfsynced nemesis cuts the log at the store's own published synced offset."),
    # ---- broker: lease ---------------------------------------------------------------------------------
    M("lease-renewed-at-reply", "broker/lease", "system_under_test/broker/lease.py",
      "renewed = max(last_renew_ms, sent_ms)", "renewed = now_ms",
      "The broker renews its lease from when a heartbeat reply arrived instead of when the heartbeat was sent, so "
      "a delayed reply stretches the lease past the controller's.",
      "queue or membership (fenced-broker-acked, write-on-superseded-master) when a deposed master acknowledges in "
      "the stretched window; all-ack usually refuses such writes for want of slave acks."),
    # ---- raft ------------------------------------------------------------------------------------------
    M("raft-commit-ignores-term", "raft", "system_under_test/raft/log.py",
      "if index > self.committed and self.term(index) == term:", "if index > self.committed:",
      "The leader commits an entry of an earlier term by counting replicas (Raft section 5.4.2 ignored), so a "
      "later leader can overwrite it.",
      "controller-register or broker-ids: not linearizable, or a controller stopping on a log invariant; needs the "
      "rare leader changes of the paper's figure 8."),
    M("raft-vote-ignores-log", "raft", "system_under_test/raft/core.py",
      "if can_vote and self.log.is_up_to_date(m.log_term, m.index):", "if can_vote:",
      "Votes (and pre-votes) are granted without the up-to-date check, so a controller with a stale log can win "
      "and truncate committed entries.",
      "controller-register or broker-ids: not linearizable (committed metadata lost), or a controller stopping on "
      "a log invariant, after a lagging controller wins an election."),
    M("raft-read-without-heartbeat-round", "raft", "system_under_test/raft/core.py",
      "if self._quorum == 1:", "if self._quorum >= 1:",
      "The read index is granted from the leader's commit index without the heartbeat round that proves it is "
      "still leader (== written as >=), so a deposed leader serves reads.",
      "controller-register: not linearizable (a stale read from a paused or partitioned old leader)."),
)
del M


def _catalogue(mutants: Sequence[Mutant]) -> dict[str, Mutant]:
    out: dict[str, Mutant] = {}
    for m in mutants:
        if m.name in out:
            raise RuntimeError(f"bench/mutants.py: mutant {m.name!r} declared twice")
        out[m.name] = m
    return out


CATALOGUE: dict[str, Mutant] = _catalogue(MUTANTS)


# ---------------------------------------------------------------------------------------------------------
# Applying a mutant (pure) and building its commit (git plumbing only)


def apply_mutant(source: str, mutant: Mutant, *, where: str = "HEAD") -> str:
    """``source`` (the text of ``mutant.file``) with ``mutant.old`` replaced by ``mutant.new`` (pure).

    Raises:
        MutantError: the old text occurs other than exactly once, or the result does not compile.
    """
    count = source.count(mutant.old)
    if count != 1:
        raise MutantError(f"mutant {mutant.name}: its source text occurs {count} times in {mutant.file} at {where} "
                          "(expected exactly once); update the catalogue row")
    mutated = source.replace(mutant.old, mutant.new)
    try:
        compile(mutated, mutant.file, "exec")
    except SyntaxError as exc:
        raise MutantError(f"mutant {mutant.name}: {mutant.file} does not compile once mutated: {exc}") from None
    return mutated


def _git(repo: Path, *args: str, env: Mapping[str, str] | None = None, stdin: bytes | None = None) -> str:
    """Run a git plumbing command in ``repo``; its stdout, stripped.  Raises MutantError naming the command."""
    proc = subprocess.run(["git", *args], cwd=repo, input=stdin, capture_output=True, timeout=60,
                          env={**os.environ, **env} if env is not None else None)
    if proc.returncode != 0:
        raise MutantError(f"git {' '.join(args[:3])}: {proc.stderr.decode(errors='replace').strip()[:300]}")
    return proc.stdout.decode().strip()


def resolve_base(repo: Path, rev: str) -> str:
    """The full sha of commit ``rev`` in ``repo``.  Raises MutantError if it names no commit."""
    if rev.startswith("-"):
        raise MutantError(f"--base {rev!r} is not a revision")
    return _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")


def mutant_commit(repo: Path, base: str, mutant: Mutant, *, update_ref: bool = True) -> str:
    """The commit (full sha) of ``base`` with ``mutant`` applied, made with plumbing only: a temporary index, the
    mutated blob, a tree and a commit whose parent is ``base``; with ``update_ref`` it is kept under
    ``refs/splitbrain/mutants/<name>``.  The work tree and the real index are never touched.

    Raises:
        MutantError: the file is missing at ``base``, the text does not match exactly once, the result does not
            compile, or a git step failed.
    """
    base = resolve_base(repo, base)
    listing = _git(repo, "ls-tree", base, "--", mutant.file)
    if not listing:
        raise MutantError(f"mutant {mutant.name}: {mutant.file} does not exist at {base[:12]}")
    mode = listing.split()[0]
    source = _git_bytes(repo, "cat-file", "blob", f"{base}:{mutant.file}").decode("utf-8")
    mutated = apply_mutant(source, mutant, where=base[:12])
    blob = _git(repo, "hash-object", "-w", "--stdin", stdin=mutated.encode("utf-8"))
    date = _git(repo, "show", "-s", "--format=%ct", base)
    who = {"GIT_AUTHOR_NAME": "splitbrain mutation bench", "GIT_AUTHOR_EMAIL": "mutants@splitbrain.invalid",
           "GIT_COMMITTER_NAME": "splitbrain mutation bench", "GIT_COMMITTER_EMAIL": "mutants@splitbrain.invalid",
           "GIT_AUTHOR_DATE": f"{date} +0000", "GIT_COMMITTER_DATE": f"{date} +0000"}
    with tempfile.TemporaryDirectory(prefix="mutant-index-") as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(repo, "read-tree", base, env=index)
        _git(repo, "update-index", "--cacheinfo", f"{mode},{blob},{mutant.file}", env=index)
        tree = _git(repo, "write-tree", env=index)
    message = f"mutant {mutant.name} ({mutant.component}, {mutant.file})\n\n{mutant.models}\n"
    commit = _git(repo, "commit-tree", tree, "-p", base, env=who, stdin=message.encode("utf-8"))
    if update_ref:
        _git(repo, "update-ref", REF_PREFIX + mutant.name, commit)
    return commit


def _git_bytes(repo: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, timeout=60)
    if proc.returncode != 0:
        raise MutantError(f"git {' '.join(args[:3])}: {proc.stderr.decode(errors='replace').strip()[:300]}")
    return proc.stdout


# ---------------------------------------------------------------------------------------------------------
# The spec every mutant is searched with


SELECTORS = ["one", "minority", "primaries", "masters", "slaves", "slaves:one", "controller-leader"]
PACKAGES = ["partition", "kill", "pause", "clock", "disk", "protocol-crash"]
DISK_KINDS = [*DISK_LIVE_FAULTS, "lose-unfsynced", "corrupt-file"]
"""Every disk fault the disk package makes.  ``corrupt-file`` was left out at first: its tail modes cut an
acknowledged, fsynced record off one replica, and the unmutated cluster did not survive that when the replica was
the master (the control was found so, guided, seed 2001).  The cluster now refuses to lead until replication
refills a store that lost durable records (docs/broker.md, *Lost durable records*), so it is back in."""


def search_spec(*, run_s: float, interval_s: float, store_fs: str = "plain") -> dict[str, Any]:
    """The one spec every mutant (and the control) is searched with; the mode is given on the command line.

    Safe settings (all-ack on, clean election, fsync before ack); workloads that exercise the controller (the
    controller-register and broker-ids linearizability checks) and the broker (queue, membership); generic chaos
    from every nemesis package that makes sense on one local cluster.  broker-ids runs no lanes of its own
    (``failpoints: 0``), so registration crashes come only from the nemesis (its ``registration-crash`` package,
    which the workload adds); controller-register's virtual brokers hold leases longer than a clock bump (as in
    ``examples/clock.yaml``), so the controller never expires them behind the model's back (pure).

    ``store_fs="lazyfs"`` (``--store-fs lazyfs``) puts every broker's store on the lazy file system, so
    ``lose-unfsynced`` drops what was really never fsynced (docs/nemeses.md, *Disks*); the default spec has no
    ``store_fs`` key at all, so searches recorded before the flag existed are still found in ``progress.jsonl``."""
    cluster: dict[str, Any] = {"all_ack_in_sync_state_set": True, "enable_elect_unclean_master": False,
                               "flush": "sync"}
    if store_fs != "plain":
        cluster["store_fs"] = store_fs
    return {
        "name": "mutant-search", "backend": "local",
        "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 3}},
        "cluster": cluster,
        "workloads": [{"name": "queue", "options": {"queues_per_set": 4}},
                      {"name": "controller-register", "options": {"broker_sets": 1, "lease_ms": 120_000}},
                      {"name": "membership", "options": {"brokers": 3}},
                      {"name": "broker-ids", "options": {"failpoints": 0}}],
        "nemesis": {"packages": list(PACKAGES), "interval_s": interval_s, "targets": list(SELECTORS),
                    "options": {"disk": {"kinds": list(DISK_KINDS)}}},
        "concurrency": 4, "rate": 40.0, "time_limit_s": run_s,
        "phases": {"recovery_s": 3, "final_drain_s": 15},
    }


def sim_args(*, seconds: float, swarm: bool = False) -> list[str]:
    """The arguments every simulator search gives ``splitbrain sim`` (besides seeds, ``--json`` and ``--out``): the
    main phase, every fault kind (:data:`SIM_FAULTS`), the client threads, and ``--swarm`` when each seed is to run
    the subset of those kinds and workloads it draws (docs/simulation.md, Swarm; a revision older than the swarm
    mode refuses the flag); the simulator's settings are the safe ones unless ``--unsafe`` is given, and it never
    is (pure)."""
    return ["--seconds", f"{seconds:g}", "--faults", ",".join(SIM_FAULTS), "--threads", str(SIM_THREADS),
            *(["--swarm"] if swarm else [])]


def mutated_lines(source: str, mutant: Mutant) -> tuple[int, int]:
    """The first and last line (1-based, inclusive) that ``mutant.new`` occupies in the mutated file, given the
    base ``source`` (pure).  A replacement that ends with a newline does not occupy the line after it."""
    start = source.index(mutant.old)
    first = source.count("\n", 0, start) + 1
    body = mutant.new[:-1] if mutant.new.endswith("\n") else mutant.new
    return first, first + body.count("\n")


def coverage_of(probe: Mapping[str, Any] | None) -> str | None:
    """What a line probe (:func:`bench.search_runs.sim_probe`) says about a mutant's code in the simulator (pure):
    ``not loaded`` (its file was never imported), ``not reached`` (imported, the mutated lines never ran), ``ran``,
    ``probe failed``; None without a probe."""
    if probe is None:
        return None
    if "error" in probe:
        return "probe failed"
    if not probe.get("loaded"):
        return "not loaded"
    return "ran" if probe.get("hit_lines") else "not reached"


NOT_SIMULATED = ("not loaded", "not reached")
"""Probe readings that mark a mutant whose code the simulator does not run."""
_READINGS = ("ran", "not reached", "not loaded", "probe failed")
"""Probe readings, the one that says most first (lines that ran in one search ran, whatever another saw)."""


# ---------------------------------------------------------------------------------------------------------
# The report (pure)


def _chaos_cell(searches: Sequence[Mapping[str, Any]], budget_s: float, ignore: frozenset[str]) -> dict[str, Any]:
    s = summarize(list(searches), budget_s)
    kinds = sorted({k for x in searches if x.get("found") for k in x.get("anomalies") or ()})
    attempts = [a for x in searches for a in x.get("attempts") or ()]
    return {**s, "killed": s["found"] > 0, "anomalies": kinds,
            "errors": sum(1 for a in attempts if "error" in a),
            "ignored_runs": sum(1 for a in attempts if set(a.get("anomalies") or ()) & ignore)}


def _sim_cell(searches: Sequence[Mapping[str, Any]], budget_s: float) -> dict[str, Any] | str:
    """The simulation column of one row: :data:`NOT_IN_REVISION` when no search could run the simulator, else the
    chaos cell's figures (``detect_s`` and the budget in CPU seconds) plus the first detection's simulator seed,
    its simulated time, the simulated seconds searched, and the line probe's reading of a miss."""
    searched = [x for x in searches if x.get("status") != "not-in-revision"]
    if not searched:
        return NOT_IN_REVISION
    s = summarize(searched, budget_s)
    hits = sorted((x for x in searched if x.get("found")), key=lambda x: float(x.get("detect_s") or 0.0))
    readings = {coverage_of(x.get("exercised")) for x in searched if not x.get("found")}
    reading = next((r for r in _READINGS if r in readings), None)  # the strongest evidence of the searches
    first = hits[0] if hits else None
    return {**s, "killed": bool(hits), "budget_unit": "cpu_s",
            "anomalies": sorted({k for x in hits for k in x.get("anomalies") or ()}),
            "errors": sum(1 for x in searched if x.get("status") == "error"),
            "error": next((str(x["error"]) for x in searched if x.get("error")), None),
            "ignored_runs": sum(len(x.get("ignored_seeds") or ()) for x in searched),
            "seeds_run": sum(int(x.get("seeds_run") or 0) for x in searched),
            "simulated_s": round(sum(float(x.get("simulated_s") or 0.0) for x in searched), 1),
            "cpu_s": round(sum(float(x.get("cpu_s") or 0.0) for x in searched), 1),
            "sim_seed": first.get("sim_seed") if first else None,
            "detect_sim_s": first.get("detect_sim_s") if first else None,
            "simulated_s_to_detect": first.get("simulated_s_to_detect") if first else None,
            "replay": first.get("replay") if first else None,
            "coverage": "ran" if hits else reading,
            "probes": [x["exercised"] for x in searched if x.get("exercised")]}


def _row(by_method: Mapping[str, Sequence[Mapping[str, Any]]], budget_s: float,
         ignore: frozenset[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for method in METHODS:
        searches = by_method.get(method)
        if searches is None:
            out[method] = None  # not searched in this run of the bench
        elif method == SIMULATION:
            out[method] = _sim_cell(searches, budget_s)
        else:
            out[method] = _chaos_cell(searches, budget_s, ignore)
    return out


def _killed(cell: Any) -> bool:
    return isinstance(cell, Mapping) and bool(cell.get("killed"))


def _rate(killed: int, of: int) -> float | None:
    return round(killed / of, 3) if of else None


def build_report(raw: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]], config: Mapping[str, Any], *,
                 minutes: float, catalogue: Mapping[str, Mutant] | None = None) -> dict[str, Any]:
    """The bench's JSON document from its searches (``raw[mutant or "control"][method]``) (pure).

    A mutant is killed by a method when one of that method's searches found it (an invalid verdict through a kind
    that counts); killed at all when some method killed it.  The kill rate is over the mutants searched (the
    control excluded); the simulator's own rate is over the mutants it could search (a revision without the
    simulator is not a miss).  ``kill_rate_without_simulation`` is the chaos methods' (``random`` or ``guided``),
    ``kill_rate_with_simulation`` theirs and the simulator's together; each is None when its methods did not run.
    The control row must not be found: ``control_found`` true means a run of the unmutated base was invalid, so a
    kill proves nothing until that is explained.
    """
    catalogue = CATALOGUE if catalogue is None else catalogue
    budget_s = float(config["budget_s"])
    methods = [m for m in METHODS if m in config["methods"]]
    chaos = [m for m in CHAOS_METHODS if m in methods]
    ignore = frozenset(config.get("ignore_kinds") or ())
    rows: dict[str, Any] = {}
    for name, by_method in raw.items():
        row = _row(by_method, budget_s, ignore)
        m = catalogue.get(name)
        if m is not None:
            row.update({"component": m.component, "file": m.file, "models": m.models, "symptom": m.symptom})
        rows[name] = row
    mutants = [n for n in rows if n != CONTROL]
    killed_by = {n: [meth for meth in methods if _killed(rows[n].get(meth))] for n in mutants}
    killed = [n for n in mutants if killed_by[n]]
    searchable = {meth: [n for n in mutants if isinstance(rows[n].get(meth), Mapping)] for meth in methods}
    per_method = {meth: _rate(sum(1 for n in searchable[meth] if meth in killed_by[n]), len(searchable[meth]))
                  for meth in methods}
    by_chaos = [n for n in mutants if set(killed_by[n]) & set(chaos)]
    by_sim = [n for n in mutants if SIMULATION in killed_by[n]]
    with_sim = SIMULATION in methods
    only = {meth: [n for n in mutants if killed_by[n] == [meth]] for meth in methods} if len(methods) > 1 else {}
    control = rows.get(CONTROL)
    control_found = None if control is None else any(_killed(control.get(m)) for m in methods)
    rate = _rate(len(killed), len(mutants))
    full = set(mutants) == set(catalogue) and budget_s <= TARGET_BUDGET_S
    wall_s = sum(float(x.get("detect_wall_s") or 0.0) for by_method in raw.values() for searches in by_method.values()
                 for x in searches)
    return {
        "config": dict(config), "minutes": minutes, "run_minutes": round(wall_s / 60, 1), "rows": rows,
        "mutants": len(mutants), "killed": killed, "not_killed": [n for n in mutants if n not in killed],
        "kill_rate": rate,
        "kill_rate_per_method": per_method,
        "kill_rate_without_simulation": _rate(len(by_chaos), len(mutants)) if chaos else None,
        "kill_rate_with_simulation": rate if with_sim and chaos else None,
        "killed_by_one_method_only": only,
        "killed_only_by_chaos": [n for n in by_chaos if n not in by_sim] if chaos and with_sim else None,
        "killed_only_by_simulation": [n for n in by_sim if n not in by_chaos] if chaos and with_sim else None,
        "simulation": _sim_summary(rows, mutants) if with_sim else "not run",
        "control_found": control_found,
        "target": {"kill_rate": f">= {KILL_RATE_TARGET} of the catalogue within {TARGET_BUDGET_S:g} s of search each",
                   "verdict": _verdict(rate, full, control_found, methods)},
        "components": {c: [n for n in mutants if catalogue.get(n) and catalogue[n].component == c]
                       for c in COMPONENTS},
    }


def _sim_summary(rows: Mapping[str, Mapping[str, Any]], mutants: Sequence[str]) -> dict[str, Any]:
    """The simulator's column summed: what it searched, and which misses its line probe says it never ran."""
    cells = {n: rows[n].get(SIMULATION) for n in [*mutants, CONTROL] if n in rows}
    searched = {n: c for n, c in cells.items() if isinstance(c, Mapping)}
    missed = {n: c for n, c in searched.items() if n != CONTROL and not c["killed"]}
    return {"budget": "CPU seconds of the simulator's process per search (simulated seconds run many times faster)",
            "searched": sorted(n for n in searched if n != CONTROL),
            "not_in_revision": sorted(n for n, c in cells.items() if c == NOT_IN_REVISION),
            "not_simulated": {n: c["coverage"] for n, c in missed.items() if c.get("coverage") in NOT_SIMULATED},
            "ran_not_found": sorted(n for n, c in missed.items() if c.get("coverage") == "ran"),
            "simulated_s": round(sum(float(c.get("simulated_s") or 0.0) for c in searched.values()), 1),
            "cpu_s": round(sum(float(c.get("cpu_s") or 0.0) for c in searched.values()), 1),
            "seeds_run": sum(int(c.get("seeds_run") or 0) for c in searched.values())}


def _verdict(rate: float | None, full: bool, control_found: bool | None, methods: Sequence[str]) -> str:
    if control_found:
        return "void (the control was found)"
    if rate is None:
        return "no mutants"
    met = "met" if rate >= KILL_RATE_TARGET else "missed"
    scope = [] if full else ["on this subset (the target reads the whole catalogue at a budget "
                             f"<= {TARGET_BUDGET_S:g} s)"]
    if set(methods) != set(METHODS):
        scope.append(f"with {', '.join(methods)} only")
    return " ".join([met, *scope])


def _chaos_text(cell: Mapping[str, Any]) -> str:
    if not cell["killed"]:
        ignored = f" ({cell['ignored_runs']} run(s) with ignored kinds)" if cell.get("ignored_runs") else ""
        return f"not found ({cell['found']}/{cell['seeds']})" + (f" {cell['errors']} err" if cell["errors"] else "") \
            + ignored
    when = cell["median_detect_s"]
    t = f"{when:.1f}s" if when is not None else f">{cell['budget_s']:g}s median"
    return f"found {cell['found']}/{cell['seeds']} {t} [{','.join(cell['anomalies'])}]"


def _sim_text(cell: Mapping[str, Any]) -> str:
    searched = f"{cell['simulated_s']:.0f} sim-s/{cell['cpu_s']:.0f} cpu-s"
    if not cell["killed"]:
        notes = [f"{cell['errors']} err"] if cell["errors"] else []
        if cell.get("coverage"):
            notes.append(f"code {cell['coverage']}")
        if cell.get("ignored_runs"):
            notes.append(f"{cell['ignored_runs']} seed(s) with ignored kinds")
        return f"not found ({cell['found']}/{cell['seeds']}) {searched}" + (f"; {'; '.join(notes)}" if notes else "")
    when = cell["median_detect_s"]
    t = f"{when:.1f} cpu-s" if when is not None else f">{cell['budget_s']:g} cpu-s median"
    at = f"{cell['detect_sim_s']:.1f}" if cell.get("detect_sim_s") is not None else "?"
    return (f"found {cell['found']}/{cell['seeds']} {t}, seed {cell['sim_seed']} @{at} sim-s "
            f"({cell['simulated_s']:.0f} sim-s searched) [{','.join(cell['anomalies'])}]")


def _cell(cell: Any) -> str:
    if cell is None:
        return "-"
    if isinstance(cell, str):
        return cell
    return _sim_text(cell) if cell.get("budget_unit") == "cpu_s" else _chaos_text(cell)


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.0%}"


def table(doc: Mapping[str, Any]) -> list[str]:
    """The printed report: one line per mutant and the control, then the kill rates and the target (pure)."""
    cfg = doc["config"]
    methods = [m for m in METHODS if m in cfg["methods"]]
    widths = {m: 62 if m == SIMULATION else 40 for m in methods}
    budget = [f"chaos: main-phase s in runs of {cfg['run_s']:g}s"] if set(methods) & set(CHAOS_METHODS) else []
    if SIMULATION in methods:
        budget.append(f"simulation: CPU s of the simulator, seeds of {cfg.get('sim_seconds', SIM_SECONDS):g} "
                      "simulated s")
    lines = [f"mutation bench: base {str(cfg.get('base'))[:12]}, {doc['mutants']} mutant(s)"
             f"{' + control' if CONTROL in doc['rows'] else ''}, methods {','.join(methods)}, seeds {cfg['seeds']}, "
             f"budget {cfg['budget_s']:g} per search ({'; '.join(budget)}) ({doc.get('run_minutes', '?')} min of "
             f"runs, {doc['minutes']} min this time); kinds not counted as kills: "
             f"{', '.join(cfg.get('ignore_kinds') or []) or '-'}",
             f"  {'mutant':34s} {'component':25s} " + " | ".join(f"{m:{widths[m]}s}" for m in methods)]
    for name, row in doc["rows"].items():
        comp = row.get("component", "(unmutated base)" if name == CONTROL else "?")
        cells = " | ".join(f"{_cell(row.get(m)):{widths[m]}s}" for m in methods)
        lines.append(f"  {name:34s} {comp:25s} {cells}".rstrip())
    if doc["control_found"]:
        lines.append("  CONTROL FOUND: a run of the unmutated base was invalid; no kill below means anything until "
                     "that run is explained")
    elif doc["control_found"] is False:
        lines.append("  control: not found by any method (as it must be)")
    else:
        lines.append("  control: not run (--no-control): kills are not checked against the unmutated base")
    rate = doc["kill_rate"]
    if rate is not None:
        per = ", ".join(f"{m} {_pct(r)}" for m, r in doc["kill_rate_per_method"].items())
        lines.append(f"  kill rate: {len(doc['killed'])}/{doc['mutants']} = {rate:.0%} ({per})   target "
                     f"{doc['target']['kill_rate']}: {doc['target']['verdict']}")
        lines.append(f"  without the simulator (chaos only): {_pct(doc['kill_rate_without_simulation'])}; "
                     f"with it (chaos or simulation): {_pct(doc['kill_rate_with_simulation'])}")
    for meth, names in doc["killed_by_one_method_only"].items():
        lines.append(f"  killed by {meth} only: {', '.join(names) or '-'}")
    for group in ("chaos", "simulation"):
        names = doc.get(f"killed_only_by_{group}")
        if names is not None:
            lines.append(f"  killed by {group} and not by the {'simulator' if group == 'chaos' else 'chaos methods'}:"
                         f" {', '.join(names) or '-'}")
    sim = doc.get("simulation")
    if isinstance(sim, Mapping):
        not_sim = ", ".join(f"{n} ({why})" for n, why in sim["not_simulated"].items()) or "-"
        lines.append(f"  simulator: {sim['seeds_run']} seeds, {sim['simulated_s']:.0f} simulated s in "
                     f"{sim['cpu_s']:.0f} CPU s; misses whose mutated code never ran in the probed seeds: {not_sim}; "
                     f"misses whose code ran: {', '.join(sim['ran_not_found']) or '-'}"
                     + (f"; {NOT_IN_REVISION}: {', '.join(sim['not_in_revision'])}" if sim["not_in_revision"] else ""))
    lines.append(f"  not killed: {', '.join(doc['not_killed']) or '-'}")
    return lines


# ---------------------------------------------------------------------------------------------------------
# The shell


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (not argparse's usage block)
        print(f"mutants: {message}", file=sys.stderr)
        raise SystemExit(2)


def _fail(message: str) -> int:
    print(f"mutants: {message}", file=sys.stderr)
    return 2


def sut_revision_supported() -> bool:
    """Whether this checkout's ``splitbrain test`` accepts ``--sut-revision``."""
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "test", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    return "--sut-revision" in proc.stdout


def simulator_in_revision(repo: Path, revision: str) -> bool:
    """Whether ``revision`` has ``splitbrain sim`` (its module, at either of :data:`SIM_COMMANDS`).  A revision with
    the module whose command line still lacks the subcommand is caught when its sweep starts."""
    return any(subprocess.run(["git", "cat-file", "-e", f"{revision}:{path}"], cwd=repo, capture_output=True,
                              timeout=60).returncode == 0 for path in SIM_COMMANDS)


def search_simulation(name: str, revision: str, seed: int, *, budget_s: float, sim_seconds: float, results: Path,
                      ignore: frozenset[str], repo: Path = ROOT, cache: Path | None = None,
                      swarm: bool = False) -> dict[str, Any]:
    """One simulator search of ``revision`` (a mutant's commit, or the base for the control): its build's
    interpreter runs the revision's ``splitbrain sim`` (:func:`bench.search_runs.sim_search`); a mutant's miss is
    then probed for whether its mutated lines ran (:func:`bench.search_runs.sim_probe`, on the first
    :data:`PROBE_SEEDS` seeds of the search)."""
    if not simulator_in_revision(repo, revision):
        print(f"#   {name} simulation seed={seed}: {NOT_IN_REVISION} ({revision[:12]})", file=sys.stderr)
        return {"seed": seed, "found": False, "detect_s": None, "anomalies": [], "status": "not-in-revision"}
    try:
        build = ensure_build(revision, system=REVISIONS, repo=repo, cache=cache)
    except RevisionError as exc:
        print(f"#   {name} simulation seed={seed}: {exc}", file=sys.stderr)
        return {"seed": seed, "found": False, "detect_s": None, "anomalies": [], "status": "error",
                "error": str(exc)}
    args = sim_args(seconds=sim_seconds, swarm=swarm)
    done = sim_search(name, seed, python=build.python, sim_args=args, budget_cpu_s=budget_s, results=results,
                      ignore=ignore)
    mutant = CATALOGUE.get(name)
    if mutant is not None and done.get("status") == "searched" and not done["found"]:
        source = _git_bytes(repo, "cat-file", "blob", f"{revision}^:{mutant.file}").decode("utf-8")
        first = seed * SIM_SEEDS_PER_SEARCH
        done["exercised"] = sim_probe(f"{name}-{seed}", python=build.python, sim_args=args, first_seed=first,
                                      seeds=max(1, min(PROBE_SEEDS, int(done.get("seeds_run") or 0))),
                                      file=mutant.file, lines=mutated_lines(source, mutant), results=results)
        print(f"#   {name} simulation seed={seed}: probe {coverage_of(done['exercised'])} "
              f"({done['exercised'].get('hit_lines')})", file=sys.stderr)
    return done


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = _Parser(prog="bench/mutants.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--list", action="store_true", help="print the catalogue and exit")
    p.add_argument("--build", action="store_true", help="build the mutant commits and refs, print them, run nothing")
    p.add_argument("--mutants", default="", help=f"comma list of mutants (default: all {len(CATALOGUE)})")
    p.add_argument("--methods", default=",".join(METHODS), help="comma list of random, guided, simulation (default "
                   "all three)")
    p.add_argument("--seeds", type=int, default=1, help="searches per mutant and method (default 1)")
    p.add_argument("--first-seed", type=int, default=1, help="seeds are first-seed .. first-seed+seeds-1")
    p.add_argument("--budget-s", type=float, default=TARGET_BUDGET_S,
                   help="per search: main-phase seconds (chaos), CPU seconds of the simulator (simulation); 180")
    p.add_argument("--run-s", type=float, default=60.0, help="main phase of each chaos attempt (default 60)")
    p.add_argument("--interval-s", type=float, default=8.0, help="nemesis.interval_s of the spec (default 8)")
    p.add_argument("--sim-seconds", type=float, default=SIM_SECONDS,
                   help=f"simulated seconds of each simulator seed's main phase (default {SIM_SECONDS:g})")
    p.add_argument("--sim-swarm", action=argparse.BooleanOptionalAction, default=SIM_SWARM,
                   help="each simulator seed runs the subset of fault kinds, workloads and intensities it draws "
                        f"(swarm testing, docs/simulation.md; default {'on' if SIM_SWARM else 'off'})")
    p.add_argument("--store-fs", default="plain", choices=["plain", "lazyfs"],
                   help="the brokers' store file system in chaos runs (cluster.store_fs; default plain)")
    p.add_argument("--base", default="HEAD", help="the revision the mutants are made from (default HEAD)")
    p.add_argument("--no-control", action="store_true", help="do not search the unmutated base")
    p.add_argument("--ignore-kinds", default=",".join(IGNORED_KINDS),
                   help="comma list of anomaly kinds that do not count as a kill (default: unavailable; '' counts "
                   "every invalid verdict)")
    p.add_argument("--results", help="results root (default: a temporary directory); searches already in its "
                   "progress.jsonl under the same settings are not run again")
    return p.parse_args(argv)


def _validate(args: argparse.Namespace) -> tuple[list[str], list[str]] | str:
    names = [n for n in args.mutants.split(",") if n] or list(CATALOGUE)
    bad = [n for n in names if n not in CATALOGUE]
    if bad:
        return f"--mutants: unknown {', '.join(bad)}; --list shows the {len(CATALOGUE)} known"
    if len(set(names)) != len(names):
        return "--mutants: a mutant is named twice"
    methods = [m for m in args.methods.split(",") if m]
    if not methods or set(methods) - set(METHODS) or len(set(methods)) != len(methods):
        return f"--methods: expected a comma list of {', '.join(METHODS)}, got {args.methods!r}"
    if args.seeds < 1 or args.first_seed < 1:
        return "--seeds and --first-seed must be >= 1"
    if not args.budget_s > 0:
        return "--budget-s must be > 0"
    if set(methods) & set(CHAOS_METHODS) and (not args.run_s > 0 or not args.budget_s >= args.run_s):
        return "--run-s must be > 0 and --budget-s >= --run-s"
    if not args.interval_s > 0:
        return "--interval-s must be > 0"
    if not 0 < args.sim_seconds <= 3600:
        return f"--sim-seconds must be in (0, 3600], got {args.sim_seconds:g}"
    if not all(_NAME.match(k) for k in args.ignore_kinds.split(",") if k):
        return f"--ignore-kinds: expected a comma list of anomaly kinds such as unavailable, got {args.ignore_kinds!r}"
    return names, methods


def _list() -> list[str]:
    lines = []
    for m in MUTANTS:
        lines.append(f"{m.name} [{m.component}] {m.file}\n  models: {m.models}\n  symptom: {m.symptom}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    checked = _validate(args)
    if isinstance(checked, str):
        return _fail(checked)
    names, methods = checked
    if args.list:
        print(json.dumps([asdict(m) for m in MUTANTS]) if args.json else "\n".join(_list()))
        return 0
    try:
        base = resolve_base(ROOT, args.base)
        commits = {n: mutant_commit(ROOT, base, CATALOGUE[n]) for n in names}
    except MutantError as exc:
        return _fail(str(exc))
    if args.build:
        if args.json:
            print(json.dumps({"base": base, "commits": commits}))
        else:
            print("\n".join(f"{REF_PREFIX}{n} {c}" for n, c in commits.items()))
        return 0
    if set(methods) & set(CHAOS_METHODS) and not sut_revision_supported():
        return _fail("`splitbrain test` has no --sut-revision here yet (python3 -m harness.cli test --help), so "
                     "mutants cannot be run by chaos; --methods simulation, or --build makes their commits meanwhile")
    results = Path(args.results or tempfile.mkdtemp(prefix="mutants-"))
    results.mkdir(parents=True, exist_ok=True)
    spec = search_spec(run_s=args.run_s, interval_s=args.interval_s, store_fs=args.store_fs)
    ignore = sorted({k for k in args.ignore_kinds.split(",") if k})
    settings = {"budget_s": args.budget_s, "run_s": args.run_s, "interval_s": args.interval_s,
                "coverage_s": COVERAGE_S, "ignore_kinds": ignore}
    progress = Progress(results / "progress.jsonl", settings)
    simulated = sim_args(seconds=args.sim_seconds, swarm=args.sim_swarm)
    # the simulator's searches are kept under settings of their own, so a change of the chaos runs' length does
    # not redo them (and the other way round)
    sim_progress = Progress(results / "progress.jsonl", {"budget_cpu_s": args.budget_s, "sim": simulated,
                                                         "probe_seeds": PROBE_SEEDS, "ignore_kinds": ignore})
    rows = ([] if args.no_control else [(CONTROL, base)]) + [(n, commits[n]) for n in names]
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    print(f"# mutation bench: base {base[:12]}, {len(names)} mutant(s), results {results}", file=sys.stderr)
    started = time.monotonic()
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for name, revision in rows:
        raw[name] = {m: [] for m in methods}
        for seed in seeds:  # the methods alternate, so a change in the machine's load falls on both alike
            for method in methods:
                store = sim_progress if method == SIMULATION else progress
                key: dict[str, Any] = ({"sim": simulated, "revision": revision} if method == SIMULATION
                                       else {"spec": spec, "revision": revision})
                done = store.get(name, method, seed, key)
                if done is not None:
                    print(f"#   {name} {method} seed={seed}: finished earlier ({store.path})", file=sys.stderr)
                elif method == SIMULATION:
                    done = search_simulation(name, revision, seed, budget_s=args.budget_s,
                                             sim_seconds=args.sim_seconds, results=results, ignore=frozenset(ignore),
                                             swarm=args.sim_swarm)
                    store.add(name, method, key, done)
                else:
                    done = run_search(name, method, seed, spec=spec, kinds=frozenset(), budget_s=args.budget_s,
                                      run_s=args.run_s, results=results, coverage_s=COVERAGE_S,
                                      sut_revision=revision, ignore=frozenset(ignore))
                    store.add(name, method, key, done)
                raw[name][method].append(done)
    config = {"base": base, "mutants": names, "methods": methods, "seeds": args.seeds, "first_seed": args.first_seed,
              "budget_s": args.budget_s, "run_s": args.run_s, "interval_s": args.interval_s,
              "sim_seconds": args.sim_seconds, "sim_args": simulated,
              "ignore_kinds": ignore, "results": str(results), "commit": checkout_commit(), "revisions": dict(rows),
              "spec": spec}
    doc = build_report(raw, config, minutes=round((time.monotonic() - started) / 60, 1))
    print(json.dumps(doc, default=str) if args.json else "\n".join(table(doc)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
