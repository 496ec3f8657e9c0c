"""The web UI over a results directory (``splitbrain serve``): an index of runs coloured by verdict with
filters, each run's files, plots, timeline and logs, and zip downloads.  Standard library only.

:mod:`.index` caches per-run summaries keyed by ``results.json`` mtime and confines paths to the results root;
:mod:`.pages` renders HTML; :mod:`.server` is the ``http.server`` shell.
"""

from harness.web.index import Filters, RunIndex, confine, filter_runs
from harness.web.server import ResultsServer, make_server

__all__ = ["Filters", "ResultsServer", "RunIndex", "confine", "filter_runs", "make_server"]
