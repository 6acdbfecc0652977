"""``import_spy_app.py <workdir>``: notes which thread first imports openlineage-python's client, and when (while
``getOrCreate()`` creates the context and session, or after), then runs one write.

Knows nothing about lineage; the start-up hook instruments it. Writes ``[thread, phase]`` pairs to
``<workdir>/importers.json``.
"""
import json
import sys
import threading

importers = []
phase = ["before"]


class ImportSpy:
    """A meta path finder that finds nothing: it only notes the thread of each first ``openlineage.client`` import
    (``openlineage`` itself is a namespace package: finding it runs no code)."""

    def find_spec(self, name, path=None, target=None):
        if name == "openlineage.client":
            importers.append([threading.current_thread().name, phase[0]])
        return None


sys.meta_path.insert(0, ImportSpy())

from pyspark.sql import SparkSession  # noqa: E402 - after the spy, on purpose

workdir = sys.argv[1]
phase[0] = "getOrCreate"
spark = SparkSession.builder.appName("Import Spy").getOrCreate()
phase[0] = "after"
spark.sparkContext.setLogLevel("ERROR")
spark.range(3).write.mode("overwrite").parquet(f"{workdir}/lake/spy")
spark.stop()
with open(f"{workdir}/importers.json", "w") as f:
    json.dump(importers, f)
