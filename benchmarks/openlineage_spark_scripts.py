"""OpenLineage's own Spark integration test scripts, unchanged, through ``spark-submit`` with this plugin, at the
absolute paths they write to: how many of their expected events ours match, matched as their
``SparkContainerIntegrationTest`` matches them.

The test suite (``tests/spark/test_jvm_shapes.py``) runs the copy in ``tests/spark/openlineage_scripts`` with their
paths moved under a directory of its own. This runs them as they are, from that copy or from a newer one of
https://github.com/OpenLineage/OpenLineage (a work tree, or a bare clone with ``--commit``, default HEAD; the
fixtures in ``../shared/openlineage-spark-expected`` are of commit 8f02abfb7):

    .venv/bin/python benchmarks/openlineage_spark_scripts.py [--checkout PATH [--commit SHA]] [script ...]

Each script runs as their ``SparkContainerUtils.makePysparkContainerWithDefaultConf`` runs it: the same ``--conf``,
the namespace and extra conf of its test, a file transport in place of their MockServer, in a fresh "container":
the ``/tmp/<dir>`` paths its text names, ``/tmp/warehouse``, ``/tmp/derby`` (the metastore) and ``/test_data`` (a
copy of their test data) are deleted first. **This deletes those paths on this machine.**

Checked per script, with the test suite's checks: every fixture of each of its test's ``verifyEvents(...)`` calls
is matched by one event, each call's fixtures arrived in its order, our own ``order_problems``, the extra
assertions their tests make, schema validity, exit code 0 and no line of the plugin's in the output. Scripts that
need a service (Kafka, BigQuery, Glue) are not run. Prints each script's result, then the total.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "spark"), str(ROOT / "tests")]
import spark_overhead  # noqa: E402 - the driver's environment, as every Spark benchmark sets it
from test_jvm_shapes import (  # noqa: E402 - the test suite's table of their scripts and its checks
    EXTRA_CHECKS,
    SCRIPTS,
    THEIRS,
    ScriptRun,
    host_problems,
    mismatches,
    order_problems,
    run_their_script,
    sequence_problems,
    their_fixture,
)

from ol_schema import assert_valid_event  # noqa: E402

RESOURCES = "integration/spark/app/src/test/resources"


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


def check(script: str, ran: ScriptRun) -> tuple[int, int, list[str]]:
    """(fixtures matched, fixtures, problems) of one script's run, at their real paths."""
    events = ran.events
    problems = []
    for event in events:
        try:
            assert_valid_event(event)
        except AssertionError as error:
            problems.append(f"schema: {event['eventType']} {event['job']['name']}: {str(error).splitlines()[0]}")
    fixtures = [name for sequence in SCRIPTS[script].sequences for name in sequence]
    matched = [name for name in fixtures if any(not mismatches(their_fixture(name, ""), e) for e in events)]
    problems += [f"no event matches {name}" for name in fixtures if name not in matched]
    problems += sequence_problems(script, events, "") + order_problems(events)
    problems += EXTRA_CHECKS.get(script, lambda *_: [])(events, ran.lines, "")
    return len(matched), len(fixtures), problems + host_problems(ran)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, help="their repository, a work tree or a bare clone (default: the "
                        "copy in tests/spark/openlineage_scripts)")
    parser.add_argument("--commit", default="HEAD", help="the commit of a bare clone")
    parser.add_argument("scripts", nargs="*", metavar="script", help=f"default: all of {', '.join(SCRIPTS)}")
    args = parser.parse_args()
    unknown = sorted(set(args.scripts) - set(SCRIPTS))
    if unknown:
        parser.error(f"unknown scripts: {', '.join(unknown)}")
    args.scripts = args.scripts or list(SCRIPTS)
    matched_all = total_all = 0
    with tempfile.TemporaryDirectory(prefix="openlineage_scripts_") as temp:
        resources = their_resources(args.checkout, args.commit, Path(temp)) if args.checkout else THEIRS
        for script in args.scripts:
            work = Path(temp) / "runs" / script
            ran = run_their_script(script, resources, "", work, spark_overhead.driver_env(work.parent / "state"))
            matched, total, problems = check(script, ran)
            matched_all, total_all = matched_all + matched, total_all + total
            print(f"{script}: {matched}/{total} fixtures, {len(ran.lines)} events, {ran.seconds:.0f} s"
                  + "".join(f"\n    {problem}" for problem in problems), flush=True)
    print(f"total: {matched_all}/{total_all} fixtures matched over {len(args.scripts)} scripts")


if __name__ == "__main__":
    main()
