"""Writing one run's ``ops`` rows as Parquet from an executor (pyarrow), Hive-partitioned by date and workload.

Why not ``createDataFrame(rdd)``: converting ten million Python tuples into JVM rows costs far more than
parsing them (measured: ~7k ops/s on a loaded 2-core machine).  Each task instead writes its run's ops
straight to ``<warehouse>/ops/date=<d>/workload=<w>/<batch>-<run hash>.parquet`` with pyarrow, and Spark
reads the directory as an ordinary partitioned Parquet table.  The file name is a function of the batch and
the run, and the file is written to a dot-named temporary and renamed into place, so a retried task
replaces its own output instead of duplicating it, and readers never see a half-written file.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from spark_analysis.runfiles import OpColumns

__all__ = ["ARROW_OPS", "escape_partition_value", "write_op_files"]

# The OPS table without its partition columns (date, workload), in spark_analysis.tables.OPS order.
ARROW_OPS = pa.schema([
    ("run_id", pa.string()), ("idx", pa.int64()), ("time_ns", pa.int64()), ("type", pa.string()),
    ("process", pa.string()), ("f", pa.string()), ("node", pa.string()), ("error", pa.string()),
    ("op_json", pa.string()), ("is_nemesis", pa.bool_()), ("latency_ns", pa.int64()), ("invoke_ns", pa.int64()),
    ("fault_seq", pa.int32()), ("fault_kind", pa.string()),
])
# Characters Hive/Spark escape in partition directory names (as %XX).
_ESCAPE = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0x20)}


def escape_partition_value(v: str) -> str:
    """``v`` as a partition directory value, escaped the way Spark unescapes it on read."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in v) or "__HIVE_DEFAULT_PARTITION__"


def write_op_files(table_dir: str | Path, run_id: str, batch_id: str, groups: OpColumns) -> int:
    """Write a run's op columns (:func:`spark_analysis.runfiles.op_columns`) under ``table_dir``; returns the
    number of ops written."""
    name = f"{batch_id}-{hashlib.sha1(run_id.encode()).hexdigest()[:16]}.parquet"
    n = 0
    for (date, workload), cols in groups.items():
        d = Path(table_dir) / f"date={escape_partition_value(date)}" / f"workload={escape_partition_value(workload)}"
        d.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_arrays([pa.array(c, type=ARROW_OPS.field(i).type) for i, c in enumerate(cols)],
                                     schema=ARROW_OPS)
        tmp = d / f".{name}.{os.getpid()}.tmp"
        pq.write_table(table, tmp, compression="snappy")
        os.replace(tmp, d / name)
        n += table.num_rows
    return n
