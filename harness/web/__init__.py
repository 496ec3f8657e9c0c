"""The web UI over a results directory (``splitbrain serve``): what an engineer debugging a red run needs --
an index of runs coloured by verdict with filters; each run's crash and verdicts, the failing window of a
linearizability failure, its anomalies linked to their ops, plots, files and logs; the timeline with fault
bands and node logs; a live view of a running test; two runs compared; an optional dashboard directory.
Standard library HTTP.

:mod:`.index` caches per-run summaries keyed by ``results.json`` mtime and confines paths to the results root;
:mod:`.pages` renders the index and run pages, :mod:`.views` the debugging views, :mod:`.live` follows a
running history; :mod:`.server` is the ``http.server`` shell.  The timeline and the window pictures come
from :mod:`checker.timeline`.
"""

from harness.web.index import Filters, RunIndex, confine, filter_runs
from harness.web.server import ResultsServer, make_server

__all__ = ["Filters", "ResultsServer", "RunIndex", "confine", "filter_runs", "make_server"]
