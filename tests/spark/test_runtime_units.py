"""The plugin runtime's pure parts: SparkConf reading, the failure guard, exit-status judgement, the
start-up hook's cost. No SparkSession needed."""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from emitter.records import JobRef, RunRef
from spark_plugin import exit_status
from spark_plugin.config import DebugSettings, PluginConfig, parse_tags
from spark_plugin.guard import Guard

ROOT_DIR = Path(__file__).resolve().parents[2]
P = "spark.openlineage."
RUN_A, RUN_B = "01890000-0000-7000-8000-00000000000a", "01890000-0000-7000-8000-00000000000b"

# (id, SparkConf, env, expected PluginConfig fields)
CONFIGS = [
    ("defaults", {"spark.app.name": "MyTestApplication"}, {},
     dict(namespace="default", app_name="my_test_application", parent=None, root=None,
          captured_properties=("spark.master", "spark.app.name"), disabled_facets=frozenset(), disabled=False,
          shutdown_timeout_s=5.0, queue_size=1000, unknown=())),
    ("app_name_key_wins", {"spark.app.name": "x", P + "appName": "Open Lineage Integration CTAS Load"}, {},
     dict(app_name="open_lineage_integration_ctas_load")),
    ("namespace", {P + "namespace": "team-a"}, {}, dict(namespace="team-a")),
    ("parent_all_three", {P + "parentJobNamespace": "af", P + "parentJobName": "d.t", P + "parentRunId": RUN_A}, {},
     dict(parent=RunRef(RUN_A, JobRef("af", "d.t")), root=None)),
    ("parent_missing_run_id", {P + "parentJobNamespace": "af", P + "parentJobName": "d.t"}, {}, dict(parent=None)),
    ("root", {P + "rootParentJobNamespace": "af", P + "rootParentJobName": "d", P + "rootParentRunId": RUN_B}, {},
     dict(parent=None, root=RunRef(RUN_B, JobRef("af", "d")))),
    ("context_wins", {P + "parentJobNamespace": "af", P + "parentJobName": "d.t", P + "parentRunId": RUN_A,
                      P + "context": json.dumps({"parent": {"run": {"runId": RUN_B},
                                                            "job": {"namespace": "c", "name": "p"}}})}, {},
     dict(parent=RunRef(RUN_B, JobRef("c", "p")), root=None)),
    ("context_not_json_falls_back", {P + "parentJobNamespace": "af", P + "parentJobName": "d.t",
                                     P + "parentRunId": RUN_A, P + "context": "{oops"}, {},
     dict(parent=RunRef(RUN_A, JobRef("af", "d.t")))),
    ("captured_properties", {P + "capturedProperties": "spark.master, spark.executor.memory,"}, {},
     dict(captured_properties=("spark.master", "spark.executor.memory"))),
    ("facets_disabled", {P + "facets.spark_properties.disabled": "true", P + "facets.spark.logicalPlan.disabled":
                         "TRUE", P + "facets.schema.disabled": "false"}, {},
     dict(disabled_facets=frozenset({"spark_properties", "spark.logicalPlan"}), unknown=())),
    ("disabled_conf", {P + "disabled": "true"}, {}, dict(disabled=True)),
    ("disabled_env", {}, {"OPENLINEAGE_DISABLED": "true"}, dict(disabled=True)),
    ("python_keys", {P + "python.enabled": "true", P + "python.shutdownTimeoutSeconds": "2.5",
                     P + "python.queueSize": "10"}, {}, dict(shutdown_timeout_s=2.5, queue_size=10, unknown=())),
    ("tags_and_owners", {P + "job.tags": "spark;key:value", P + "run.tags": "run;set:up:SERVICE",
                         P + "job.owners.team": "MyTeam", P + "job.owners.person": "John Smith"}, {},
     dict(job_tags=(("spark", "true", "CONFIG"), ("key", "value", "CONFIG")),
          run_tags=(("run", "true", "CONFIG"), ("set", "up", "SERVICE")),
          owners=(("person", "John Smith"), ("team", "MyTeam")), unknown=())),
    ("no_tags_no_owners", {}, {}, dict(job_tags=(), run_tags=(), owners=())),
    ("debug_defaults", {}, {}, dict(debug=DebugSettings(False, "any-missing", False, 100))),
    ("debug_keys", {P + "debug.smart": "true", P + "debug.smartMode": "output-missing",
                    P + "debug.metricsDisabled": "true", P + "debug.payloadSizeLimitInKilobytes": "7",
                    P + "debug.logPlanAsJson": "true"}, {},
     dict(debug=DebugSettings(True, "output-missing", True, 7), unknown=())),
    ("debug_bad_values_fall_back", {P + "debug.smartMode": "sometimes", P + "debug.payloadSizeLimitInKilobytes":
                                    "lots"}, {}, dict(debug=DebugSettings(False, "any-missing", False, 100), problems=(
        "spark.openlineage.debug.payloadSizeLimitInKilobytes=lots is not a whole number >= 0: the default 100 is used",
        "unsupported spark.openlineage.debug.smartMode sometimes: any-missing used"))),
    # a number that is not one keeps its default, named once the host's log is set up: lineage stays on
    ("numbers_not_understood", {P + "python.shutdownTimeoutSeconds": "abc", P + "python.queueSize": "1.5",
                                P + "python.pollIntervalSeconds": "nan"}, {},
     dict(shutdown_timeout_s=5.0, queue_size=1000, poll_interval_s=1.0, problems=(
         "spark.openlineage.python.shutdownTimeoutSeconds=abc is not a number >= 0.0: the default 5.0 is used",
         "spark.openlineage.python.queueSize=1.5 is not a whole number >= 1: the default 1000 is used",
         "spark.openlineage.python.pollIntervalSeconds=nan is not a number >= 0.0: the default 1.0 is used"))),
    ("numbers_out_of_range", {P + "python.shutdownTimeoutSeconds": "-1", P + "python.queueSize": "0",
                              P + "python.pollIntervalSeconds": " 0 "}, {},
     dict(shutdown_timeout_s=5.0, queue_size=1000, poll_interval_s=0.0, problems=(
         "spark.openlineage.python.shutdownTimeoutSeconds=-1 is not a number >= 0.0: the default 5.0 is used",
         "spark.openlineage.python.queueSize=0 is not a whole number >= 1: the default 1000 is used"))),
    ("numbers_understood", {P + "python.shutdownTimeoutSeconds": "2.5", P + "python.queueSize": "10",
                            P + "python.pollIntervalSeconds": "0.25"}, {},
     dict(shutdown_timeout_s=2.5, queue_size=10, poll_interval_s=0.25, problems=())),
    ("context_not_json", {P + "context": "{parent"}, {},
     dict(parent=None, problems=("spark.openlineage.context is not JSON: ignored",))),
    ("circuit_breaker_not_understood", {P + "circuitBreaker.type": "simpleMemory",
                                        P + "circuitBreaker.memoryThreshold": "120"}, {},
     dict(circuit_breaker=None, problems=(
         "spark.openlineage.circuitBreaker: memoryThreshold 120 is not a percentage: no circuit breaker",))),
    # smart debug sends the debug facet even when it is disabled (the JVM's EventEmitter)
    ("smart_debug_keeps_the_facet", {P + "debug.smart": "true", P + "facets.debug.disabled": "true"}, {},
     dict(disabled_facets=frozenset())),
    ("debug_disabled", {P + "facets.debug.disabled": "true"}, {}, dict(disabled_facets=frozenset({"debug"}))),
    ("rdd_events_by_default", {}, {}, dict(rdd_events=True)),
    ("rdd_events_disabled", {P + "filter.rddEventsDisabled": "true"}, {}, dict(rdd_events=False, unknown=())),
    ("unknown_keys", {P + "nmespace": "x", P + "transport.type": "http", P + "transport.auth.apiKey": "k",
                      P + "jobName.appendDatasetName": "false", P + "debugFacet": "enabled",
                      P + "columnLineage.datasetLineageEnabled": "true", P + "python.enabeld": "true"}, {},
     dict(unknown=("nmespace", "python.enabeld"))),  # the JVM's own keys are accepted silently
]


@pytest.mark.parametrize("name,spark_conf,env,expected", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_plugin_config(name, spark_conf, env, expected):
    config = PluginConfig.from_spark_conf(spark_conf, environ=env)
    assert {field: getattr(config, field) for field in expected} == expected


# spark.openlineage.job.tags / run.tags value -> (key, value, source) tags (the JVM's ArgumentParserTest cases)
TAGS = [
    ("spark;key:value", [("spark", "true", "CONFIG"), ("key", "value", "CONFIG")]),
    ("run;set:up:SERVICE", [("run", "true", "CONFIG"), ("set", "up", "SERVICE")]),
    ("tag;key:value;k:v:s;this:will:get:skipped",
     [("tag", "true", "CONFIG"), ("key", "value", "CONFIG"), ("k", "v", "s"), ("this", "will", "get")]),
    ("escaped\\:key:escaped\\;value;other:notescaped:tag",
     [("escaped:key", "escaped;value", "CONFIG"), ("other", "notescaped", "tag")]),
    ("\\;startkey\\;:endvalue\\;", [(";startkey;", "endvalue;", "CONFIG")]),
    ("a:;:b", [("a", "true", "CONFIG")]),  # "a:" is "a"; ":b" has a blank key
    (";;:; : ;", []),
    ("a::c; b : c ;k:v: ", [("b", "c", "CONFIG")]),  # a blank value or source skips the tag; elements are trimmed
    ("a\\b:c\\", [("a\\b", "c\\", "CONFIG")]),  # other escaped characters keep their backslash
    ("dup:1;dup:2", [("dup", "1", "CONFIG"), ("dup", "2", "CONFIG")]),  # kept as written
    ("", []),
]


@pytest.mark.parametrize("text,expected", TAGS)
def test_parse_tags(text, expected):
    assert parse_tags(text) == tuple(expected)


#: the JVM integration's keys a configuration shared with JVM jobs carries: accepted without a word
JVM_KEYS = {P + "filter.allowedSparkNodes": "[x]", P + "filter.deniedSparkNodes": "[y]",
            P + "filter.rddEventsDisabled": "false", P + "run.tags": "a", P + "job.tags": "b",
            P + "job.owners.team": "t", P + "debugFacet": "enabled", P + "timeoutSecs": "5",
            P + "overriddenAppName": "x", P + "columnLineage.datasetLineageEnabled": "true",
            P + "circuitBreaker.type": "simpleMemory", P + "jobName.appendDatasetName": "false",
            P + "dataset.removePath.pattern": "(.*)", P + "facets.disabled": "[a]", P + "vendors.x.y": "1",
            P + "metrics.type": "x", P + "testExtensionProvider": "x", P + "capturedProperties": "a",
            P + "debug.smart": "true", P + "python.queueSize": "5", P + "transport.type": "file",
            P + "transport.location": "/tmp/lineage.jsonl", P + "facets.custom_environment_variables": "[A;B]",
            P + "circuitBreaker.type": "javaRuntime", P + "circuitBreaker.gcCpuThreshold": "5"}


def test_the_jvm_keys_are_accepted_quietly_by_the_plugin_and_its_emitter(caplog, monkeypatch, tmp_path):
    """Neither the plugin's one warning nor the emitter's configuration loader says anything about them; the
    emitter gets only the sections it reads."""
    from emitter.config import load_config

    for name in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(tmp_path / "none.yml"))
    config = PluginConfig.from_spark_conf({"spark.app.name": "a", **JVM_KEYS}, environ={})
    with caplog.at_level(logging.DEBUG):
        config.warn_problems()
        load_config(config.emitter_overrides)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert config.emitter_overrides == {"dataset.removePath.pattern": "(.*)", "facets.disabled": "[a]",
                                        "transport.type": "file", "transport.location": "/tmp/lineage.jsonl",
                                        "facets.custom_environment_variables": "[A;B]"}
    assert config.environment_variables == ("A", "B")
    assert config.circuit_breaker is not None and config.circuit_breaker.gc_cpu_threshold == 5


# (id, openlineage.yml text (None: no file), OPENLINEAGE__* variables, expected SparkConf entries, warnings)
FILE_SETTINGS = [
    ("no_file", None, {}, {}, []),
    ("jvm_sections", "facets:\n  disabled: [spark_unknown, spark.logicalPlan]\n  spark_properties:\n"
     "    disabled: true\n  custom_environment_variables: [A, B]\ncircuitBreaker:\n  type: simpleMemory\n"
     "  memoryThreshold: 20\ncolumnLineage:\n  datasetLineageEnabled: false\njob:\n  owners:\n    team: data\n"
     "namespace: prod\n", {},
     {P + "facets.disabled": "[spark_unknown;spark.logicalPlan]", P + "facets.spark_properties.disabled": "true",
      P + "facets.custom_environment_variables": "[A;B]", P + "circuitBreaker.type": "simpleMemory",
      P + "circuitBreaker.memoryThreshold": "20", P + "columnLineage.datasetLineageEnabled": "false",
      P + "job.owners.team": "data", P + "namespace": "prod"}, []),
    # the emitter's sections are read by the emitter; a key no SparkConf form has is named once
    ("emitter_sections_and_lists_of_mappings",
     "transport:\n  type: http\n  url: http://h:5000\nspool:\n  dir: /s\nrun:\n  tags:\n    - key: a\n"
     "      value: b\n", {}, {}, ["lineage capture: openlineage.yml settings with no spark.openlineage.* form "
                                "ignored: run.tags"]),
    ("file_over_variables", "facets:\n  spark_unknown:\n    disabled: false\n",
     {"OPENLINEAGE__FACETS__SPARK_UNKNOWN__DISABLED": "true", "OPENLINEAGE__FACETS__DEBUG__DISABLED": "false"},
     {P + "facets.spark_unknown.disabled": "false", P + "facets.debug.disabled": "false"}, []),
    ("not_a_mapping", "- a\n- b\n", {}, {}, ["lineage capture: openlineage.yml not read for the Spark settings: "
                                            "{path}: expected a mapping at the top level"]),
]


@pytest.mark.parametrize("name,text,env,expected,warnings", FILE_SETTINGS, ids=[f[0] for f in FILE_SETTINGS])
def test_file_settings(monkeypatch, tmp_path, name, text, env, expected, warnings):
    """openlineage.yml's sections the JVM integration reads from that file, as the SparkConf entries they stand for
    (the plugin puts them under the SparkConf)."""
    from spark_plugin.config import file_settings

    for variable in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(variable)
    path = tmp_path / "openlineage.yml"
    if text is not None:
        path.write_text(text)
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(path))
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # neither ./openlineage.yml nor ~/.openlineage/openlineage.yml
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    assert file_settings() == (expected, [w.format(path=path) for w in warnings])


def test_emitter_overrides_drop_unknown_keys_and_prefix():
    config = PluginConfig.from_spark_conf({"spark.app.name": "a", P + "transport.type": "http",
                                           P + "transport.url": "http://h:5000", P + "nmespace": "x"}, environ={})
    assert config.emitter_overrides == {"transport.type": "http", "transport.url": "http://h:5000"}


def test_guard_logs_a_kind_once_and_switches_a_failing_part_off(caplog):
    guard = Guard(max_consecutive=3)
    calls = []

    def boom(n):
        calls.append(n)
        raise ValueError(f"bad {n}")

    with caplog.at_level(logging.WARNING, logger="spark_plugin"):
        results = [guard.call("lineage", boom, n) for n in range(5)]
        assert guard.call("emit", lambda: "ok") == "ok"
    assert results == [None] * 5
    assert calls == [0, 1, 2]  # switched off after the third failure in a row
    assert guard.disabled == {"lineage"}
    assert [r.getMessage() for r in caplog.records] == [
        "lineage capture: lineage failed (ValueError: bad 0); the application is not affected, further "
        "failures of this kind are counted, not logged",
        "lineage capture: lineage failed 3 times in a row: switched off for this run",
    ]


@pytest.mark.parametrize("level, traceback", [(logging.WARNING, False), (logging.DEBUG, True)])
def test_an_unreadable_relation_is_one_warning_line(caplog, level, traceback):
    """A relation whose datasets cannot be read (a catalog failing under a failed command, Apache Spark's hive.py
    example): the action keeps its other datasets, the host's log gets one line (no traceback unless DEBUG)."""
    from types import SimpleNamespace

    from spark_plugin.plan_lineage import _safe

    def broken(ctx, node):
        raise RuntimeError("Unable to instantiate SessionHiveMetaStoreClient\n\tat org.apache...")

    with caplog.at_level(level, logger="spark_plugin"):
        assert _safe(broken, None, SimpleNamespace(cls="x.CreateDataSourceTableCommand")) == []
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert record.getMessage() == ("lineage capture: cannot read the datasets of x.CreateDataSourceTableCommand "
                                   "(RuntimeError: Unable to instantiate SessionHiveMetaStoreClient)")
    assert bool(record.exc_info) is traceback


def test_guard_streak_resets_on_success():
    guard = Guard(max_consecutive=2)
    outcomes = iter([ValueError("x"), "ok", ValueError("y"), "ok"])

    def step():
        item = next(outcomes)
        if isinstance(item, Exception):
            raise item
        return item

    assert [guard.call("p", step) for _ in range(4)] == [None, "ok", None, "ok"]
    assert guard.disabled == set() and guard.failures["p"] == 2


# (id, Python snippet run as a script with the plugin's exit tracking, expected exit code, failed?, message)
EXITS = [
    ("normal_end", "pass", 0, False, ""),
    ("sys_exit_0", "sys.exit(0)", 0, False, ""),
    ("sys_exit_3", "sys.exit(3)", 3, True, "the application exited with code 3"),
    ("sys_exit_message", "sys.exit('bad input')", 1, True, "the application exited with code 1: bad input"),
    ("builtin_exit_4", "exit(4)", 4, True, "the application exited with code 4"),
    ("uncaught", "raise ValueError('boom')", 1, True, "ValueError: boom"),
    ("caught", "try:\n    raise ValueError('x')\nexcept ValueError:\n    pass", 0, False, ""),
    ("exit_in_thread", "import threading\nt = threading.Thread(target=sys.exit, args=(5,))\nt.start(); t.join()",
     0, False, ""),
    # the script's `from sys import exit as early_exit` ran before the plugin was installed (its session made)
    ("from_sys_import_exit", "early_exit(6)", 6, True, "the application exited with code 6"),
]


@pytest.mark.parametrize("name,body,code,failed,message", EXITS, ids=[e[0] for e in EXITS])
def test_exit_outcome(tmp_path, name, body, code, failed, message):
    script = tmp_path / "app.py"
    script.write_text(
        "import atexit, json, sys\n"
        "from sys import exit as early_exit\n"
        "from spark_plugin import exit_status\n"
        "exit_status.install()\n"
        f"atexit.register(lambda: open({str(tmp_path / 'out.json')!r}, 'w').write(json.dumps(\n"
        "    [exit_status.at_exit().failed, exit_status.at_exit().message])))\n" + body + "\n")
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT_DIR, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT_DIR)}, timeout=60)
    assert result.returncode == code, result.stderr
    assert json.loads((tmp_path / "out.json").read_text()) == [failed, message]


# (id, exception propagating through SparkContext.stop, expected at_stop(): Outcome or None = decide at exit)
STOPS = [
    ("nothing", None, exit_status.Outcome(False)),
    ("system_exit_0", SystemExit(0), exit_status.Outcome(False)),
    ("system_exit_2", SystemExit(2), exit_status.Outcome(True, "the application exited with code 2")),
    ("error", ValueError("x"), None),
]


@pytest.mark.parametrize("name,error,expected", STOPS, ids=[s[0] for s in STOPS])
def test_at_stop(name, error, expected):
    if error is None:
        assert exit_status.at_stop() == expected
        return
    try:
        raise error
    except BaseException:  # noqa: BLE001 - what a finally block around spark.stop() sees
        assert exit_status.at_stop() == expected


def test_install_is_reversible():
    import builtins

    before = (sys.exit, builtins.exit)
    exit_status.install()
    exit_status.install()
    assert sys.exit is not before[0]
    exit_status.uninstall()
    exit_status.uninstall()
    assert (sys.exit, builtins.exit) == before


# (id, SIGTERM's handler before instrumenting: "default", "ignore" or "own", whether the plugin takes it)
SIGTERM_HANDLERS = [("default", signal.SIG_DFL, True), ("ignored", signal.SIG_IGN, False),
                    ("the_application_s_own", lambda signum, frame: None, False)]


@pytest.mark.parametrize("name,before,taken", SIGTERM_HANDLERS, ids=[h[0] for h in SIGTERM_HANDLERS])
def test_sigterm_handler_only_replaces_the_default_and_is_put_back(name, before, taken):
    previous = signal.signal(signal.SIGTERM, before)
    try:
        exit_status.install(on_terminate=lambda outcome: None)
        assert (signal.getsignal(signal.SIGTERM) is not before) == taken
        exit_status.uninstall()
        assert signal.getsignal(signal.SIGTERM) is before
    finally:
        exit_status.uninstall()
        signal.signal(signal.SIGTERM, previous)


def test_startup_hook_is_inert_outside_spark_submit(tmp_path):
    """The .pth line in a process without PYSPARK_GATEWAY_PORT: imports nothing of ours nor pyspark."""
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "lineage_capture.pth").write_text((ROOT_DIR / "spark_plugin" / "lineage_capture.pth").read_text())
    code = (f"import site, sys; site.addsitedir({str(site_dir)!r}); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('spark_plugin', 'pyspark', 'py4j')))")
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    inert = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           env={**env, "PYTHONPATH": str(ROOT_DIR)})
    assert inert.stdout.strip() == "[]", inert.stderr
    armed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           env={**env, "PYTHONPATH": str(ROOT_DIR), "PYSPARK_GATEWAY_PORT": "1"})
    assert armed.stdout.strip() == "['spark_plugin', 'spark_plugin._startup']", armed.stderr


# (spark-submit's JVM arguments, whether the driver started under them starts the emitter's child early)
EARLY_CHILD = [
    ("conf", ["--conf", "spark.openlineage.python.enabled=true"], True),
    ("conf_equals", ["--conf=spark.openlineage.python.enabled=TRUE"], True),
    ("last_wins", ["--conf", "spark.openlineage.python.enabled=true", "-c", "spark.openlineage.python.enabled=false"],
     False),
    ("not_true", ["--conf", "spark.openlineage.python.enabled=yes"], False),
    ("other_key", ["--conf", "spark.openlineage.python.enabledx=true"], False),
    ("none", ["app.py"], False),
]


@pytest.mark.parametrize("name,arguments,expected", EARLY_CHILD, ids=[e[0] for e in EARLY_CHILD])
def test_the_emitter_child_starts_early_when_spark_submits_command_line_enables_the_plugin(name, arguments,
                                                                                           expected):
    """The start-up hook reads its parent's (spark-submit's JVM's) command line: ``--conf
    spark.openlineage.python.enabled=true``, the last one winning, starts the emitter's child as the driver starts
    (a properties file is not read: the run starts the child then)."""
    check = "from spark_plugin import _startup; print(_startup._enabled_by_command_line())"
    parent = (f"import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', {check!r}]).returncode)")
    result = subprocess.run([sys.executable, "-c", parent, *arguments], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(ROOT_DIR)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(expected)


def test_worker_drops_when_full_never_blocks(caplog):
    import threading

    from spark_plugin.worker import Worker

    started, release, handled = threading.Event(), threading.Event(), []

    def handle(item):
        started.set()
        release.wait(10)  # a slow backend: the worker is stuck on the first item
        handled.append(item)

    worker = Worker(handle, Guard(), queue_size=2)
    with caplog.at_level(logging.WARNING, logger="spark_plugin"):
        assert worker.submit("a")
        assert started.wait(5)  # "a" is in flight, the queue is empty again
        accepted = [worker.submit(item) for item in "bcde"]
        assert worker.submit("app-end", always=True)
    assert accepted == [True, True, False, False]
    assert worker.dropped == 2
    assert [r.getMessage() for r in caplog.records] == [
        "lineage capture: the lineage queue is full (backend slow or down?); dropping lineage of further "
        "actions until it catches up (counted, reported at the end)"]
    assert worker.drain(0.2) is False  # the time budget is honoured while "a" hangs
    release.set()
    assert worker.drain(5)
    assert handled == ["a", "b", "c", "app-end"]
    worker.stop(5)
    assert worker.submit("late") is False


# a stage's DOT text (Spark's RDDOperationGraph.makeDotFile) -> the RDDs' (id, name)
DOT_NODES = [
    ('  4 [id="node_4" labelType="html" label="ParallelCollectionRDD [4]<br>parquet at X.java:0"];',
     [(4, "ParallelCollectionRDD")]),
    ('  7 [id="node_7" labelType="html" label="MapPartitionsRDD [7] [Cached]<br>x"];', [(7, "MapPartitionsRDD")]),
    ('  9 [id="node_9" labelType="html" label="my \\"named\\" rdd \\u00e9 [9] [Barrier] [Indeterminate]<br>y"];',
     [(9, 'my "named" rdd \u00e9')]),
    ('  subgraph cluster_3 {\n    label="mapPartitions";\n  }\n  4->5;', []),  # clusters and edges name no RDD
]


@pytest.mark.parametrize("dot,expected", DOT_NODES)
def test_rdd_names_from_the_operation_graph(dot, expected):
    from spark_plugin.rdd_jobs import _DOT_NODE, _dot_label

    assert [(int(node), _dot_label(label)) for node, label in _DOT_NODE.findall(dot)] == expected


# RDD names and dependencies -> the JVM's nameRDD of the last one
GRAPH_NAMES = [
    ({4: "ParallelCollectionRDD", 5: "MapPartitionsRDD"}, {5: [4]}, 5, "map_partitions_parallel_collection"),
    ({1: "FileScanRDD", 2: "MapPartitionsRDD", 3: "SQLExecutionRDD", 4: "MapPartitionsRDD"}, {2: [1], 3: [2], 4: [3]},
     4, "map_partitions_sql_execution_map_partitions_file_scan"),
    ({1: "words", 2: "MapPartitionsRDD"}, {2: [1]}, 2, "map_partitions_words"),  # a name of its own stays
    ({1: "MapPartitionsRDD", 2: "MapPartitionsRDD"}, {2: [1]}, 2, "map_partitions"),  # a prefix is not repeated
    ({1: "HadoopRDD", 2: "HadoopRDD", 3: "UnionRDD"}, {3: [1, 2]}, 3, "union_hadoop_hadoop"),
]


@pytest.mark.parametrize("names,parents,last,expected", GRAPH_NAMES)
def test_job_names_from_the_operation_graph(names, parents, last, expected):
    from spark_plugin.rdd_jobs import _node_name

    assert _node_name(last, names, parents, [200]) == expected


class _FakeJvmNode:
    """A py4j-like plan node: every method call is counted as one py4j round trip."""

    def __init__(self, name: str, calls: list[str]) -> None:
        self.name, self._calls = name, calls

    def _call(self, what: str, result: Any) -> Any:
        self._calls.append(f"{self.name}.{what}")
        return result

    def children(self) -> _FakeJvmNode:
        return self._call("children", _FakeJvmNode(f"{self.name}/children", self._calls))

    def apply(self, i: int) -> _FakeJvmNode:
        return self._call(f"apply({i})", _FakeJvmNode(f"{self.name}[{i}]", self._calls))

    def query(self) -> _FakeJvmNode:
        return self._call("query", _FakeJvmNode(f"{self.name}.query", self._calls))

    def getClass(self) -> _FakeJvmNode:  # noqa: N802 - the JVM's name
        return self._call("getClass", self)

    def getSimpleName(self) -> str:  # noqa: N802 - the JVM's name
        return self._call("getSimpleName", "LogicalPlan")


# (paths asked for, in order; the py4j calls made for each)
JVM_NODE_CASES = [
    ([(("c", 0),)], [["root.children", "root/children.apply(0)"]]),
    ([(("c", 0), ("c", 1)), (("c", 0), ("c", 1))],  # the second time from the memo
     [["root.children", "root/children.apply(0)", "root/children[0].children", "root/children[0]/children.apply(1)"],
      []]),
    ([(("c", 0),), (("c", 0), ("f", "query"))],  # a longer path starts where the known prefix ends
     [["root.children", "root/children.apply(0)"],
      ["root/children[0].query", "root/children[0].query.getClass", "root/children[0].query.getSimpleName"]]),
    ([(), (("i", 2),)], [[], ["root.apply(2)"]]),
]


@pytest.mark.parametrize("paths, expected", JVM_NODE_CASES)
def test_jvm_nodes_walk_each_path_prefix_once(paths, expected):
    from spark_plugin.plan_tree import JvmNodes

    calls: list[str] = []
    root = _FakeJvmNode("root", calls)
    nodes = JvmNodes(root)
    made = []
    for path in paths:
        before = len(calls)
        node = nodes.get(path)
        made.append(calls[before:])
        after = len(calls)
        assert node is nodes.get(path) and len(calls) == after  # the same object, and no further call
    assert made == expected


HADOOP_INPUT_DIRS = [  # (the mapreduce.input.fileinputformat.inputdir value, the paths Hadoop reads from it)
    ("file:/in/a", ["file:/in/a"]),
    ("file:/in/a,file:/in/b", ["file:/in/a", "file:/in/b"]),
    ("file:/in/{2020\\,2021}", ["file:/in/{2020,2021}"]),  # a brace glob: its comma escaped
    ("file:/in/a\\\\,file:/b", ["file:/in/a\\", "file:/b"]),  # an escaped backslash, then a separator
    ("file:/in/x\\y", ["file:/in/x\\y"]),  # an escape of nothing Hadoop escapes is kept
    ("file:/a,,file:/b,", ["file:/a", "file:/b"]),
    ("", []),
]


@pytest.mark.parametrize("value,expected", HADOOP_INPUT_DIRS)
def test_hadoop_input_paths(value, expected):
    from spark_plugin.plan_inputs import hadoop_input_paths

    assert hadoop_input_paths(value) == expected
