"""Do two versions of the code give the same events? Harvests the benchmark logs with this checkout and with
another revision (a temporary git worktree, same venv), then compares the event files byte for byte.

    .venv/bin/python benchmarks/same_events.py --base 1017df0                # 100k statements and queries
    .venv/bin/python benchmarks/same_events.py --base HEAD~3 --size 20000

A refactoring must print "identical" for both harvesters; a change of behaviour shows the first differing
event of each. Also prints each version's wall time (one run each, in one sitting: a hint, not a benchmark).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import snowflake_harvest
import sqlserver_harvest

ROOT = Path(__file__).resolve().parents[1]
#: Each harvester's command line over its generated log (the log's path is appended by ``_argv``).
HARVESTS = {
    "sqlserver": (sqlserver_harvest.generate, "xe_bench_{n}.xml", ["sqlserver", "--server", "db01", "--xml"]),
    "snowflake": (snowflake_harvest.generate, "sf_bench_{n}.jsonl",
                  ["snowflake", "--account", "myorg-acct", "--history"]),
}
_RUN = ("import sys; sys.path.insert(0, sys.argv[1]); from harvesters.cli import main; "
        "sys.exit(main(sys.argv[2:]))")


def _harvest(code_root: Path, argv: list[str], out: Path) -> float:
    """Run ``harvest *argv`` with the code at ``code_root`` into ``out``; the wall time."""
    out.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    with tempfile.TemporaryDirectory() as state:
        env["LINEAGE_CAPTURE_STATE_DIR"] = state
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", _RUN, str(code_root), *argv, "--conf", "transport.type=file",
                        "--conf", f"transport.location={out}"], env=env, cwd=code_root, check=False,
                       stderr=subprocess.DEVNULL)
        return time.perf_counter() - started


def _first_difference(a: Path, b: Path) -> str:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        for number, (la, lb) in enumerate(zip(fa, fb), 1):
            if la != lb:
                return f"line {number}:\n  base: {la[:300]!r}\n  this: {lb[:300]!r}"
    return "one file is a prefix of the other"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="git revision to compare with")
    parser.add_argument("--size", type=int, default=100_000, help="statements / history rows (default 100000)")
    args = parser.parse_args()
    worktree = Path(tempfile.mkdtemp(prefix="same-events-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), args.base], check=True,
                   capture_output=True)
    differ = 0
    try:
        for name, (generate, log_name, argv) in HARVESTS.items():
            log = Path("/tmp") / log_name.format(n=args.size)
            if not log.exists():
                generate(log, args.size)
            base_out, this_out = Path(f"/tmp/same_events_base_{name}.jsonl"), Path(f"/tmp/same_events_{name}.jsonl")
            base_time = _harvest(worktree, [*argv, str(log)], base_out)
            this_time = _harvest(ROOT, [*argv, str(log)], this_out)
            same = base_out.read_bytes() == this_out.read_bytes()
            lines = this_out.read_bytes().count(b"\n")
            print(f"{name}: {lines:,} events, {'identical' if same else 'DIFFERENT'}; "
                  f"base {base_time:.1f} s, this {this_time:.1f} s")
            if not same:
                differ += 1
                print(_first_difference(base_out, this_out))
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], check=False)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
