"""OpenLineage's own Spark integration test scripts, unchanged, through ``spark-submit`` with this plugin: how many
of their expected events ours match, matched as their ``SparkContainerIntegrationTest`` matches them.

Their scripts are not in this repository (their code; ``tests/spark/apps/jvm_scripts.py`` holds our own
equivalents, which the test suite runs). Point this at a copy of https://github.com/OpenLineage/OpenLineage, a work
tree or a bare clone (``--commit``, default HEAD; the fixtures in ``../shared/openlineage-spark-expected`` are of
commit 8f02abfb7):

    .venv/bin/python benchmarks/openlineage_spark_scripts.py --checkout PATH [--commit SHA] [script ...]

Each script runs as their ``SparkContainerUtils.makePysparkContainerWithDefaultConf`` runs it: the same ``--conf``,
the namespace and extra conf of its test, a file transport in place of their MockServer. Their scripts write to
absolute paths, so each runs in a fresh "container": the ``/tmp/<dir>`` paths its text names, ``/tmp/warehouse``,
``/tmp/derby`` (the metastore) and ``/test_data`` (a copy of their ``src/test/resources/test_data``) are deleted
first. **This deletes those paths on this machine.**

Checked per script: every fixture of each of its test's ``verifyEvents(...)`` calls is matched by one event
(``tests/spark/test_jvm_shapes.mismatches``, json-unit's partial matching), each call's fixtures arrived in its
order, our own ``order_problems``, the extra assertions their tests make (input-only RDD, rdd_with_parquet's
statistics, facets_disable, smart_debug), schema validity, exit code 0 and no line of the plugin's in the output.
Scripts that need a service (Kafka, BigQuery, Glue) are not run. Prints each script's result, then the total.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "spark"), str(ROOT / "tests")]
import spark_overhead  # noqa: E402 - the driver's environment, as every Spark benchmark sets it
from test_jvm_shapes import EXPECTED, in_their_order, mismatches, order_problems  # noqa: E402

from ol_schema import assert_valid_event  # noqa: E402

RESOURCES = "integration/spark/app/src/test/resources"
VENV_BIN = Path(sys.executable).parent

#: script -> (its test's namespace, extra conf, the fixture lists of its verifyEvents(...) calls in their order)
SCRIPTS: dict[str, tuple[str, dict[str, str], list[list[str]]]] = {
    "spark_word_count": ("testPysparkWordCountWithCliArgs", {}, [[
        "pysparkWordCountWithCliArgsStartEvent", "pysparkWordCountWithCliArgsRunningEvent",
        "pysparkWordCountWithCliArgsCompleteEvent"]]),
    "spark_rdd_to_table": ("testPysparkRddToTable", {}, [[
        "pysparkRddToCsvStartEvent", "pysparkRddToCsvCompleteEvent", "pysparkRddToTableStartEvent",
        "pysparkRddToTableRunningEvent", "pysparkRddToTableCompleteEvent"]]),
    "spark_hive": ("testPysparkSQLHiveTest", {}, [[
        "pysparkHiveStartEvent", "pysparkHiveRunningEvent", "pysparkHiveCompleteEvent", "pysparkHiveSelectStartEvent",
        "pysparkHiveSelectEndEvent"]]),
    "spark_hadoop_fs_relation": ("testPysparkSQLHadoopFSTest", {}, [[
        "pysparkHadoopFSStartEvent", "pysparkHadoopFSEndEvent"]]),
    # their transport URL's ?app_name=appName (UrlParser) is this key
    "overwrite_appname": ("testPysparkSQLHiveTest", {"spark.openlineage.appName": "appName"}, [[
        "pysparkOverwriteNameStartEvent", "pysparkOverwriteNameRunningEvent", "pysparkOverwriteNameCompleteEvent"]]),
    "spark_overwrite_hive": ("testPysparkSQLHiveOverwriteDirTest", {}, [[
        "pysparkHiveOverwriteDirStartEvent", "pysparkHiveOverwriteDirCompleteEvent"]]),
    "spark_ctas_load": ("testCreateAsSelectAndLoad", {}, [
        ["pysparkCTASStart", "pysparkCTASEnd", "pysparkLoadStart", "pysparkLoadComplete"],
        ["pysparkCTASWithColumnLineageEnd"]]),
    "spark_cached": ("cachedDataset", {}, [["pysparkCachedDatasetComplete"]]),
    "spark_hive_catalog": ("symlinks", {}, [["pysparkSymlinksComplete"]]),
    "spark_create_table": ("testCreateTable", {}, [[
        "pysparkCreateTableStartEvent", "pysparkCreateTableCompleteEvent"]]),
    "spark_drop_table": ("testDropTable", {}, [["pysparkDropTableEvent"]]),
    "spark_truncate_table": ("testTruncateTable", {}, [["pysparkTruncateTableCompleteEvent"]]),
    "spark_octas_load": ("testOptimizedCreateAsSelectAndLoad", {}, [["pysparkOCTASStart", "pysparkOCTASEnd"]]),
    "spark_cll": ("testColumnLevelLineage", {}, [["pysparkCLLStart", "pysparkCLLEnd"]]),
    "spark_alter_table": ("testAlterTable", {}, [["pysparkAlterTableAddColumnsEnd", "pysparkAlterTableRenameEnd"]]),
    "spark_facets_disable": ("testFacetsDisable", {}, []),
    "spark_input_only_rdd": ("tesInputOnlyRdd", {}, []),
    "spark_rdd_with_parquet": ("testRddWithParquet", {}, [["pysparkRDDWithParquet"]]),
    "spark_single_input_rdd": ("testSingleRddInputStats", {}, [["pysparkSingleRDDStatistics"]]),
    "spark_emit_metrics": ("testEmitMetrics", {"spark.openlineage.facets.debug.disabled": "false"},
                           [["pysparkMetricsEnd"]]),
    "spark_smart_debug": ("testSmartDebugFacet", {
        "spark.openlineage.debug.smart": "true", "spark.openlineage.debug.smartMode": "output-missing",
        "spark.openlineage.filter.allowedSparkNodes": "[org.apache.spark.sql.catalyst.plans.logical.ShowTables]",
        "spark.openlineage.facets.debug.disabled": "true"}, []),
}
#: the --conf every one of their PySpark containers gets (SparkContainerUtils), bar the transport
CONTAINER_CONF = {
    "spark.sql.warehouse.dir": "/tmp/warehouse",
    "spark.sql.shuffle.partitions": "1",
    "spark.driver.extraJavaOptions": "-Dderby.system.home=/tmp/derby",
    "spark.openlineage.facets.spark.logicalPlan.disabled": "false",
    "spark.openlineage.facets.spark_unknown.disabled": "false",
    "spark.openlineage.columnLineage.datasetLineageEnabled": "false",
    "spark.openlineage.columnLineage.descriptionsEnabled": "true",
    "spark.openlineage.dataset.namespaceResolvers.kafka-cluster-prod.type": "hostList",
    "spark.openlineage.dataset.namespaceResolvers.kafka-cluster-prod.hosts": "[kafka-host;kafka-host-other]",
    "spark.ui.enabled": "false",
}
#: words of ours that must not reach a script's output (their "Open Lineage Integration" app names aside; a
#: warning PySpark gives their script, such as registerTempTable's FutureWarning, is the host's own)
PLUGIN_WORDS = re.compile(r"(?i:lineage.capture|lineage_capture|spark_plugin|emitter|openlineage|traceback)")


def their_resources(checkout: Path, commit: str, into: Path) -> Path:
    """Their ``src/test/resources`` directory: in a work tree as it is, from a bare clone extracted into ``into``."""
    if (checkout / RESOURCES / "spark_scripts").is_dir():
        return checkout / RESOURCES
    archive = subprocess.run(["git", "--git-dir", str(checkout), "archive", "--format=tar", commit,
                              f"{RESOURCES}/spark_scripts", f"{RESOURCES}/test_data"],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / RESOURCES


def fresh_container(script_text: str, resources: Path) -> None:
    """Delete what an earlier script (or run) left at the absolute paths this one uses; copy their test data."""
    names = {"warehouse", "derby"} | set(re.findall(r"/tmp/([\w.-]+)", script_text))
    for path in [Path("/tmp") / name for name in sorted(names)] + [Path("/test_data")]:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    shutil.copytree(resources / "test_data", "/test_data")


def run_script(script: str, resources: Path, work: Path) -> dict:
    """spark-submit one script unchanged (plugin on, file transport); what it left."""
    namespace, extra, _ = SCRIPTS[script]
    path = resources / "spark_scripts" / f"{script}.py"
    fresh_container(path.read_text(), resources)
    out = work / script
    shutil.rmtree(out, ignore_errors=True)
    (out / "state").mkdir(parents=True)
    conf = {"spark.openlineage.python.enabled": "true", "spark.openlineage.transport.type": "file",
            "spark.openlineage.transport.location": str(out / "events.jsonl"),
            "spark.openlineage.namespace": namespace, **CONTAINER_CONF, **extra}
    command = [str(VENV_BIN / "spark-submit"), "--master", "local"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    env = spark_overhead.driver_env(out / "state")
    began = time.perf_counter()
    result = subprocess.run([*command, str(path)], env=env, cwd=out, capture_output=True, text=True, timeout=900)
    events_file = out / "events.jsonl"
    lines = events_file.read_text().splitlines() if events_file.exists() else []
    return {"rc": result.returncode, "seconds": time.perf_counter() - began, "lines": lines,
            "output": result.stdout.splitlines() + result.stderr.splitlines()}


def _input_only_rdd(events: list[dict], lines: list[str]) -> list[str]:
    jobs = [e for e in events if "map_partitions" in e["job"]["name"]]
    fails = [f"map_partitions events have outputs: {o['name']}" for e in jobs for o in e["outputs"]]
    inputs = [i["name"] for e in jobs for i in e["inputs"]]
    return fails + ([] if inputs == ["/tmp/input_rdd"] else [f"map_partitions inputs {inputs} != ['/tmp/input_rdd']"])


def _rdd_with_parquet(events: list[dict], lines: list[str]) -> list[str]:
    stats = [o["outputFacets"]["outputStatistics"] for e in events for o in e["outputs"]
             if "rdd_c" in o["name"] and "outputStatistics" in o.get("outputFacets", {})]
    fails = [] if stats and stats[0].get("rowCount") == 4 else [f"rdd_c outputStatistics {stats[:1]} (rowCount 4)"]
    if any("rdd_c" in i["name"] and "inputStatistics" in i.get("inputFacets", {}) for e in events for i in e["inputs"]):
        fails.append("an rdd_c input has inputStatistics")
    return fails


def _create_table(events: list[dict], lines: list[str]) -> list[str]:
    named = {e["job"]["name"] for e in events if e["job"]["name"].endswith("create_table_test")}
    return [] if len(named) == 1 else [f"job names ending with create_table_test: {sorted(named)} (one wanted)"]


def _facets_disable(events: list[dict], lines: list[str]) -> list[str]:
    # their verify(request) passes when one request body mentions none of the disabled facets
    clean = re.compile(r"^((?!(spark_unknown|spark.logicalPlan|dataSource)).)*$")
    return [] if any(clean.fullmatch(line) for line in lines) else ["every event mentions a disabled facet"]


def _smart_debug(events: list[dict], lines: list[str]) -> list[str]:
    debug = [e for e in events if "debug" in e["run"]["facets"]]
    fails = []
    if len(debug) != 1 or debug[0]["eventType"] != "COMPLETE" or "parent" not in debug[0]["run"]["facets"]:
        fails.append(f"debug facets on {[(e['eventType'], e['job']['name']) for e in debug]} (one COMPLETE wanted)")
    elif debug[0]["run"]["facets"]["debug"].get("logs") != ["No input datasets detected",
                                                           "No output datasets detected"]:
        fails.append(f"debug logs: {debug[0]['run']['facets']['debug'].get('logs')}")
    return fails


#: the assertions their tests make beyond verifyEvents
EXTRA_CHECKS: dict[str, Callable[[list[dict], list[str]], list[str]]] = {
    "spark_input_only_rdd": _input_only_rdd, "spark_rdd_with_parquet": _rdd_with_parquet,
    "spark_create_table": _create_table, "spark_facets_disable": _facets_disable, "spark_smart_debug": _smart_debug}


def check(script: str, ran: dict) -> tuple[int, int, list[str]]:
    """(fixtures matched, fixtures, problems) of one script's run."""
    events = [json.loads(line) for line in ran["lines"]]
    problems = [] if ran["rc"] == 0 else [f"exit code {ran['rc']}"]
    for event in events:
        try:
            assert_valid_event(event)
        except AssertionError as error:
            problems.append(f"schema: {event['eventType']} {event['job']['name']}: {str(error).splitlines()[0]}")
    matched = total = 0
    for sequence in SCRIPTS[script][2]:
        expected = [json.loads((EXPECTED / f"{name}.json").read_text()) for name in sequence]
        for name, fixture in zip(sequence, expected):
            total += 1
            if any(not mismatches(fixture, event) for event in events):
                matched += 1
            else:
                problems.append(f"no event matches {name}")
        first_missing = in_their_order(expected, events)
        if first_missing is not None:
            problems.append(f"order of {sequence}: {sequence[first_missing]} missing or out of order")
    problems += order_problems(events)
    problems += EXTRA_CHECKS.get(script, lambda *_: [])(events, ran["lines"])
    problems += [f"output: {line[:200]}" for line in ran["output"]
                 if PLUGIN_WORDS.search(line) and "Open Lineage Integration" not in line]
    return matched, total, problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, required=True, help="their repository: a work tree or a bare clone")
    parser.add_argument("--commit", default="HEAD", help="the commit of a bare clone")
    parser.add_argument("scripts", nargs="*", metavar="script", help=f"default: all of {', '.join(SCRIPTS)}")
    args = parser.parse_args()
    unknown = sorted(set(args.scripts) - set(SCRIPTS))
    if unknown:
        parser.error(f"unknown scripts: {', '.join(unknown)}")
    args.scripts = args.scripts or list(SCRIPTS)
    matched_all = total_all = 0
    with tempfile.TemporaryDirectory(prefix="openlineage_scripts_") as temp:
        resources = their_resources(args.checkout, args.commit, Path(temp))
        for script in args.scripts:
            ran = run_script(script, resources, Path(temp) / "runs")
            matched, total, problems = check(script, ran)
            matched_all, total_all = matched_all + matched, total_all + total
            print(f"{script}: {matched}/{total} fixtures, {len(ran['lines'])} events, {ran['seconds']:.0f} s"
                  + "".join(f"\n    {problem}" for problem in problems), flush=True)
    print(f"total: {matched_all}/{total_all} fixtures matched over {len(args.scripts)} scripts")


if __name__ == "__main__":
    main()
