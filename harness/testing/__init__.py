"""Test support for the harness itself: a counter service with its workload and runnable test
(``counter*``, ``run_counter``), one workload against a real local cluster (``run_workload``), the
controller-only probe workload (``probe``), a real headless browser (``browser``) and a bounded wait
(``wait``)."""
