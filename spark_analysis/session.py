"""The SparkSession shell: embedded ``local[*]`` by default, any cluster with ``--master URL``.

Startup options are kept light (few shuffle partitions, no UI, no console progress bar, UTC session time
zone) so that an embedded session starts in seconds and tests stay fast.  On a non-local master the
``spark_analysis`` and ``checker`` packages are zipped and shipped to the executors with ``addPyFile``, so
the cluster needs only Python and pyspark, not this repository.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "get_session", "ship_code"]

DEFAULT_MASTER = "local[*]"
_SHIPPED = ("spark_analysis", "checker")


def get_session(master: str = DEFAULT_MASTER, *, app_name: str = "splitbrain-spark",
                shuffle_partitions: int = 4, driver_memory: str = "2g",
                conf: Mapping[str, str] | None = None) -> SparkSession:
    """A SparkSession for ``master`` (reuses the active one if it exists); ``conf`` adds Spark options.

    Adaptive query execution is off: the warehouse's aggregates are small and its extra planning
    stages cost more than they save at this size (measured on 2 cores).
    """
    logging.getLogger("py4j").setLevel(logging.WARNING)  # py4j logs every connection close at INFO
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master).appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(max(2, shuffle_partitions)))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.adaptive.enabled", "false")
    )
    # Workers import this same checkout (not whatever another install of the package points at).
    code_root = str(Path(__file__).resolve().parent.parent)
    builder = builder.config("spark.executorEnv.PYTHONPATH", code_root)
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    if master.startswith("local"):  # embedded: keep all traffic on the loopback interface
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not master.startswith("local"):
        ship_code(spark)
    return spark


def ship_code(spark: SparkSession) -> Path:
    """Zip this repository's ``spark_analysis`` and ``checker`` packages and add them to the executors.

    The zip's temporary directory is removed when this process exits: the driver serves the file to
    executors from that path for the whole application, so it cannot go sooner.
    """
    root = Path(__file__).resolve().parent.parent
    tmp = tempfile.mkdtemp(prefix="splitbrain-spark-")
    atexit.register(shutil.rmtree, tmp, True)
    out = Path(tmp) / "splitbrain_code.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for pkg in _SHIPPED:
            for f in sorted((root / pkg).rglob("*.py")):
                zf.write(f, f.relative_to(root).as_posix())
    spark.sparkContext.addPyFile(str(out))
    return out
