"""etcd as a system under test: the building blocks (see README.md beside this file).

* :mod:`systems.etcd.db` -- ``EtcdDB``: a static cluster, one member per node, with kill, pause, primaries
  and log files.
* :mod:`systems.etcd.client` -- ``EtcdRegisterClient``: per-key read / write / cas registers over the v3
  JSON gateway, linearizable or serializable reads.
* :mod:`systems.etcd.wire` -- the pure core both use: requests, replies and error classification.
* :mod:`systems.etcd.system` -- the adapter (``system: etcd``): members, capabilities, ``make_db``.

The history's split into one ``cas-register`` history per key, and the per-key verdict, are generic:
:mod:`checker.per_key`, used by the ``register`` workload (:mod:`workloads.register`).
"""
