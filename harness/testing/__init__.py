"""Test support for the harness itself: ``splitbrain selftest`` on the counter system (``run_counter``; the system
is :mod:`systems.counter`, its workload :mod:`workloads.counter`), the helper that runs a spec built in code the way
``splitbrain test`` runs a file (``run_spec``), one workload against a real local cluster (``run_workload``), the
controller-only probe workload (``probe``), a real headless browser (``browser``) and a bounded wait (``wait``)."""
