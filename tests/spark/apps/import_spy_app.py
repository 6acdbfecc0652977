"""``import_spy_app.py <workdir> [off_in_the_builder]``: notes which thread first imports openlineage-python's
client, and when (while ``getOrCreate()`` creates the context and session, or after), then runs one write; and the
emitter child processes the driver has as it starts (before pyspark's import) and after the write.

Knows nothing about lineage; the start-up hook instruments it (unless ``off_in_the_builder``: its builder sets
``spark.openlineage.python.enabled=false``, which wins over spark-submit's ``--conf``). Writes ``[thread, phase]``
pairs to ``<workdir>/importers.json``, the children's pids to ``<workdir>/emitter_children.json``.
"""
import json
import os
import sys
import threading


def emitter_children():
    """The pids of this process's children running the emitter (emitter.emitter_process): every process whose
    parent is this one, from /proc/<pid>/stat (the /proc/<pid>/task/<tid>/children files are documented as
    unreliable unless the children are stopped)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                parent = int(f.read().rsplit(b")", 1)[1].split()[1])
            if parent != os.getpid():
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"emitter.emitter_process" in f.read():
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return sorted(found)


def started_early():
    """The pid of the child the start-up hook says it started (diagnostics for a failing assertion), or None."""
    startup = sys.modules.get("spark_plugin._startup")
    child = getattr(startup, "_state", {}).get("emitter_child") if startup else None
    return None if child is None else child.pid


children = {"start": emitter_children(), "started_early": started_early()}

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
builder = SparkSession.builder.appName("Import Spy")
if sys.argv[2:] == ["off_in_the_builder"]:
    builder = builder.config("spark.openlineage.python.enabled", "false")
spark = builder.getOrCreate()
phase[0] = "after"
spark.sparkContext.setLogLevel("ERROR")
spark.range(3).write.mode("overwrite").parquet(f"{workdir}/lake/spy")
children["after"] = emitter_children()
spark.stop()
with open(f"{workdir}/importers.json", "w") as f:
    json.dump(importers, f)
with open(f"{workdir}/emitter_children.json", "w") as f:
    json.dump(children, f)
