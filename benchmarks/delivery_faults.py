"""Benchmark delivery under faults (issue 11): `harvest sqlserver --xml` of 5,000 statements, each in a fresh
process, to

- the file transport (the reference);
- an HTTP backend answering every POST after 10 ms (a slow Marquez), in its own process on 127.0.0.1;
- an HTTP backend that takes every request and never answers (a hanging Marquez): all events must be spooled;
- then `lineage-capture replay` of that spool to the slow backend: a replay sends as fast as a harvest delivers
  (before, one request at a time: ten times the fresh delivery's time).

    .venv/bin/python benchmarks/delivery_faults.py
    .venv/bin/python benchmarks/delivery_faults.py --statements 5000 --delay-ms 10 --in-flight 16 --repeat 5

Targets: slow backend <= 2x the file transport's wall time (the median ratio of --repeat interleaved pairs);
hanging backend spooled within 15 s. Prints one line per run (wall seconds, exit code, events delivered/spooled),
the medians, and a JSON summary.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlserver_harvest import generate

ROOT = Path(__file__).resolve().parents[1]

#: The backend, run as its own process so its CPU time is not the harvest's. A real Marquez runs on another
#: machine; this one shares the harvest's two cores, so it is written to cost little per request (asyncio streams,
#: keep-alive, a Content-Length body): http.server's ThreadingHTTPServer spent about 300 us of CPU per request,
#: time taken from the harvest by the benchmark itself. `--threaded-backend` uses it anyway.
SERVER = r'''
import asyncio, sys
port, mode, delay = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
posts = 0
async def handle(reader, writer):
    global posts
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length:
                await reader.readexactly(length)
            if head.startswith(b"GET"):
                body = str(posts).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                continue
            posts += 1
            if mode == "hang":
                await asyncio.sleep(3600)
            await asyncio.sleep(delay)
            writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    print("ready", flush=True)
    await server.serve_forever()
asyncio.run(main())
'''

#: http.server's ThreadingHTTPServer (the previous benchmark backend), for --threaded-backend.
THREADED_SERVER = r'''
import sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
mode, delay = sys.argv[2], float(sys.argv[3])
count = [0]
lock = threading.Lock()
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as Marquez
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with lock:
            count[0] += 1
        if mode == "hang":
            time.sleep(3600)
        time.sleep(delay)
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def do_GET(self):
        body = str(count[0]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer.request_queue_size = 512
server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
print("ready", flush=True)
server.serve_forever()
'''


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def harvest(log: Path, work: Path, conf: list[str]) -> tuple[float, int, str]:
    """Run `harvest sqlserver` in a fresh process: (wall seconds, exit code, its summary lines and the CPU seconds
    of the harvest and its reader process)."""
    env = {**os.environ, "LINEAGE_CAPTURE_STATE_DIR": str(work / "state")}
    argv = [sys.executable, "-m", "harvesters.cli", "sqlserver", "--xml", str(log), "--server", "db01"]
    for pair in conf:
        argv += ["--conf", pair]
    started, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - started, _children_cpu() - cpu
    lines = [line for line in done.stderr.splitlines() if line.startswith(("INFO: lineage events", "harvest "))]
    return elapsed, done.returncode, f"CPU {cpu:.2f} s | " + " | ".join(lines)


def _children_cpu() -> float:
    """CPU seconds of the ended child processes (the harvest and the reader it waited for); the backend, killed
    and waited for only at the end of its case, is not in the harvest's number."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def with_backend(mode: str, delay: float, run: callable, threaded: bool = False
                 ) -> tuple[tuple[float, int, str], int]:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", THREADED_SERVER if threaded else SERVER, str(port), mode,
                               str(delay)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        result = run(f"http://127.0.0.1:{port}")
        if mode == "hang":
            received = -1
        else:
            import urllib.request

            received = int(urllib.request.urlopen(f"http://127.0.0.1:{port}/count").read())
        return result, received
    finally:
        server.kill()
        server.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--statements", type=int, default=5000)
    parser.add_argument("--delay-ms", type=float, default=10.0)
    parser.add_argument("--timeout-ms", type=int, default=5000, help="the http transport's timeout (its default)")
    parser.add_argument("--in-flight", type=int, default=None,
                        help="requests in flight (transport.type=async_http, max_concurrent_requests=N); "
                             "default: the emitter's http default")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved pairs of file and slow-backend runs")
    parser.add_argument("--threaded-backend", action="store_true",
                        help="the backend as http.server's ThreadingHTTPServer (costs ~300 us CPU per request on "
                             "the harvest's machine)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    work = Path(tempfile.mkdtemp(prefix="delivery_bench_"))
    try:
        log = work / "log.xml"
        generate(log, args.statements)
        out = work / "events.jsonl"

        def http(url: str, spool: str) -> tuple[float, int, str]:
            shutil.rmtree(work / spool, ignore_errors=True)
            conf = ["transport.type=http", f"transport.url={url}", f"transport.timeoutInMillis={args.timeout_ms}",
                    f"spool.dir={work / spool}"]
            if args.in_flight:  # async_http's own key sets how many requests the emitter keeps in flight
                conf += ["transport.type=async_http", f"transport.max_concurrent_requests={args.in_flight}"]
            return harvest(log, work, conf)

        # file and slow backend interleaved, --repeat times: this VM's speed drifts, a ratio of one pair is noise
        file_times, slow_times, ratios = [], [], []
        for _ in range(args.repeat):
            out.unlink(missing_ok=True)
            file_s, file_code, file_summary = harvest(log, work, ["transport.type=file",
                                                                  f"transport.location={out}"])
            events = sum(1 for _ in open(out, "rb"))
            print(f"file transport:        {file_s:6.2f} s  exit {file_code}  {events} events  [{file_summary}]")
            (slow_s, slow_code, slow_summary), received = with_backend("slow", args.delay_ms / 1000,
                                                                       lambda url: http(url, "spool-slow"),
                                                                       args.threaded_backend)
            print(f"http, {args.delay_ms:g} ms answers:  {slow_s:6.2f} s  exit {slow_code}  {received} POSTs "
                  f"received  ratio to file {slow_s / file_s:.2f}  [{slow_summary}]")
            file_times.append(file_s)
            slow_times.append(slow_s)
            ratios.append(slow_s / file_s)
        file_s, slow_s, ratio = (statistics.median(v) for v in (file_times, slow_times, ratios))
        print(f"median of {args.repeat}: file {file_s:.2f} s, http {slow_s:.2f} s, ratio {ratio:.2f} (target <= 2)")
        (hang_s, hang_code, hang_summary), _ = with_backend("hang", 0, lambda url: http(url, "spool-hang"),
                                                            args.threaded_backend)
        spooled = sum(1 for p in (work / "spool-hang").rglob("events.jsonl") for _ in open(p, "rb"))
        print(f"http, hanging backend: {hang_s:6.2f} s  exit {hang_code}  {spooled} events spooled "
              f"(target: all {events} within 15 s)  [{hang_summary}]")

        def replay(url: str) -> tuple[float, int, str]:
            argv = [sys.executable, "-m", "lineage_capture.cli", "replay", "--to-configured", "--conf",
                    f"spool.dir={work / 'spool-hang'}", "--conf", "transport.type=http", "--conf",
                    f"transport.url={url}"]
            started = time.perf_counter()
            done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
            return time.perf_counter() - started, done.returncode, done.stdout.strip()[:160]

        (replay_s, replay_code, replay_said), replayed = with_backend("slow", args.delay_ms / 1000, replay,
                                                                    args.threaded_backend)
        print(f"replay of that spool, {args.delay_ms:g} ms answers: {replay_s:6.2f} s  exit {replay_code}  "
              f"{replayed} POSTs received  ratio to the harvest's fresh delivery {replay_s / slow_s:.2f}  "
              f"[{replay_said}]")
        print(json.dumps({"statements": args.statements, "file_s": round(file_s, 2), "slow_s": round(slow_s, 2),
                          "slow_ratio": round(ratio, 2), "hang_s": round(hang_s, 2), "hang_spooled": spooled,
                          "events": events, "replay_s": round(replay_s, 2), "replayed": replayed}))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
