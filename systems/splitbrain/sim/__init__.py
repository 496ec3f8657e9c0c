"""The harness side of our cluster's deterministic simulator: ``splitbrain sim``, its checks and its shrinker.

The simulator itself (``system_under_test/sim``) plays our cluster's production cores on simulated time; it is
our cluster's, not the harness's, so what runs it lives with the cluster's adapter:

* :mod:`systems.splitbrain.sim.check` judges a simulated run with the checkers of a real run and stores it like
  one;
* :mod:`systems.splitbrain.sim.shrink` plays a given schedule, shrinks a failing one with ddmin in simulation,
  and turns it into a spec for ``splitbrain test``;
* :mod:`systems.splitbrain.sim.command` is the ``splitbrain sim`` subcommand (listed in
  :data:`systems.splitbrain.commands.COMMANDS`).
"""
