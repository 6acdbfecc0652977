"""The page in a real browser: Debian's Chromium, headless, through Selenium and /usr/bin/chromedriver."""
from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest
from graph_events import event as E

from lineage_graph.cli import main
from lineage_graph.server import make_server

webdriver = pytest.importorskip("selenium.webdriver")

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
pytestmark = pytest.mark.skipif(not (Path(CHROMIUM).exists() and Path(DRIVER).exists()),
                                reason="needs Debian chromium and chromium-driver")

EVENTS = [
    E(0, "dagrun", "etl", ns="airflow", job_type="DAG", integration="AIRFLOW"),
    E(1, "t1", "etl.extract", ns="airflow", parent=("etl", "dagrun"), job_type="TASK", integration="AIRFLOW"),
    E(2, "app", "app", ns="spark", parent=("etl.extract", "t1", "airflow"), job_type="APPLICATION"),
    E(3, "a1", "app.execute_insert.orders", ns="spark", parent=("app", "app"), inputs=["raw.orders"],
      outputs=["warehouse.orders"]),
    E(4, "t2", "etl.report", "FAIL", ns="airflow", parent=("etl", "dagrun"), inputs=["warehouse.orders"],
      outputs=["mart.daily"], error="division by zero"),
    E(5, "t3", "etl.unrelated", ns="airflow", parent=("etl", "dagrun"), inputs=["other.src"], outputs=["other.dst"]),
]


@pytest.fixture
def browser(tmp_path):
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,900", f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    yield driver
    driver.quit()


def wait(driver, script, timeout=15.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {script}")


def test_offline_page_and_live_server(tmp_path, isolated_lineage_env, browser, capsys):
    events = isolated_lineage_env / "openlineage-events.jsonl"
    events.write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    out = tmp_path / "lineage.html"
    assert main(["graph", "html", "-o", str(out)]) == 0
    assert "src=\"http" not in out.read_text() and "href=\"http" not in out.read_text()  # nothing from a network

    browser.get(out.as_uri())
    wait(browser, "return window.lineage && window.lineage.ready")
    counts = browser.execute_script("var cy = window.lineage.cy; return [cy.nodes('.job').length, "
                                    "cy.nodes('.dataset').length, cy.nodes('.group').length, cy.edges().length, "
                                    "window.lineage.layout]")
    assert counts == [3, 5, 3, 6, "dagre"]
    # every node was placed and rendered inside the viewport after fit: a real layout, not all at (0, 0)
    positions = browser.execute_script("return window.lineage.cy.nodes('.job, .dataset').map("
                                       "function (n) { var p = n.renderedPosition(); return [p.x, p.y]; })")
    assert len({tuple(map(round, p)) for p in positions}) == 8
    ys = browser.execute_script("var cy = window.lineage.cy; return ['d', 'j', 'd2'].map(function (k) { return "
                                "cy.nodes().filter(function (n) { return n.data('key') === {d: 'db/raw.orders', "
                                "j: 'airflow/etl.extract.app.execute_insert.orders', d2: 'db/warehouse.orders'}[k]; "
                                "})[0].position().y; })")
    assert ys[0] < ys[1] < ys[2]  # layered top-down by level
    assert browser.execute_script("return window.lineage.cy.nodes('.failed').map(function (n) "
                                  "{ return n.data('key'); })") == ["airflow/etl.report"]

    # search finds a dataset (through the real input box)
    box = browser.find_element("id", "search")
    box.send_keys("warehouse.ord")
    wait(browser, "return document.getElementById('search-count').textContent === '1 found'")
    assert browser.execute_script("return window.lineage.cy.nodes('.found').map(function (n) "
                                  "{ return n.data('key'); })") == ["db/warehouse.orders"]

    # a click on the dataset highlights its downstream (and its upstream), the rest fades
    browser.execute_script("window.lineage.cy.nodes().filter(function (n) { return n.data('key') === "
                           "'db/warehouse.orders'; })[0].emit('tap')")
    down = browser.execute_script("return window.lineage.cy.nodes('.downstream').map(function (n) "
                                  "{ return n.data('key'); }).sort()")
    up = browser.execute_script("return window.lineage.cy.nodes('.upstream').map(function (n) "
                                "{ return n.data('key'); }).sort()")
    assert down == ["airflow/etl.report", "db/mart.daily"]
    assert up == ["airflow/etl.extract.app.execute_insert.orders", "db/raw.orders"]
    assert browser.execute_script("return window.lineage.cy.nodes('.faded').filter('.dataset').map("
                                  "function (n) { return n.data('key'); }).sort()") == ["db/other.dst", "db/other.src"]
    assert browser.find_element("id", "downstream").text.splitlines() == ["airflow/etl.report", "db/mart.daily"]
    browser.execute_script("window.lineage.cy.fit(undefined, 30)")
    shot = tmp_path / "lineage-page.png"
    browser.save_screenshot(str(shot))
    print(f"screenshot: {shot}")
    if Path("/tmp/graph_screenshot_wanted").exists():
        shutil.copy(shot, "/tmp/graph_screenshot.png")

    # collapsing a group hides its members and reroutes their edges to it
    browser.execute_script("window.lineage.collapse(window.lineage.cy.nodes('.group').filter(function (n) "
                           "{ return n.data('key') === 'airflow/etl.extract.app'; }).id())")
    assert browser.execute_script("return window.lineage.cy.nodes('.job:visible').length") == 2
    assert browser.execute_script("return window.lineage.cy.edges('.meta').length") == 2

    # the live page of `serve` picks up an event POSTed after it loaded
    srv = make_server(isolated_lineage_env / "lineage-graph.sqlite", "127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        host, port = srv.server_address[:2]
        browser.get(f"http://{host}:{port}/")
        wait(browser, "return window.lineage && window.lineage.ready")
        assert browser.execute_script("return window.lineage.cy.nodes('.job').length") == 3
        import urllib.request
        req = urllib.request.Request(f"http://{host}:{port}/api/v1/lineage", method="POST",
                                     data=json.dumps(E(9, "t9", "etl.late", ns="airflow", parent=("etl", "dagrun"),
                                                       inputs=["mart.daily"], outputs=["late.out"])).encode(),
                                     headers={"Content-Type": "application/json"})
        assert urllib.request.urlopen(req, timeout=10).status == 201
        wait(browser, "return window.lineage.cy.nodes('.job').length === 4", timeout=10)
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("layout_max,layout", [(1200, "dagre"), (0, "preset")])
def test_every_graph_shape_loads_in_both_layouts(tmp_path, db, browser, monkeypatch, layout_max, layout):
    # the graphs of test_page.py (groups with edges of their own, self loops, isolated nodes, cycles), each drawn
    # by dagre (small pages) and by the positions computed in Python (large pages)
    from test_page import PAGE_GRAPHS

    from lineage_graph import html

    monkeypatch.setattr(html, "DAGRE_MAX_NODES", layout_max)
    for case in PAGE_GRAPHS:
        events, nodes, edges = case.values
        db.conn.executescript("DELETE FROM runs; DELETE FROM jobs; DELETE FROM job_current; "
                              "DELETE FROM current_io; DELETE FROM job_versions;")
        db(events)
        out = tmp_path / f"{case.id}.html"
        out.write_text(html.page(db.conn), encoding="utf-8")
        browser.get(out.as_uri())
        wait(browser, "return window.lineage && window.lineage.ready")
        got = browser.execute_script(
            "var cy = window.lineage.cy, w = cy.width(), h = cy.height(); return {layout: window.lineage.layout, "
            "nodes: cy.nodes().map(function (n) { return n.data('key'); }).sort(), edges: cy.edges().length, "
            "placed: cy.nodes('.job, .dataset').map(function (n) { var p = n.renderedPosition(); "
            "return [Math.round(p.x), Math.round(p.y), p.x >= 0 && p.x <= w && p.y >= 0 && p.y <= h]; })}")
        assert (got["layout"], got["nodes"], got["edges"]) == (layout, sorted(nodes), len(edges)), case.id
        assert all(p[2] for p in got["placed"]), case.id  # inside the viewport after fit
        assert len({(p[0], p[1]) for p in got["placed"]}) == len(got["placed"]), case.id  # not on top of each other


NASTY_NAMES = ["<!--<script>", "</script><b>x</b>", "/*LIVE*/false", "out /*DAGRE_MAX*/0", "a & b > c", "x\u2028y"]


def test_names_that_look_like_markup_or_placeholders_are_drawn_as_written(tmp_path, db, browser):
    db([E(1, "r1", NASTY_NAMES[0], inputs=NASTY_NAMES[1:3], outputs=NASTY_NAMES[3:])])
    from lineage_graph import html

    out = tmp_path / "nasty.html"
    out.write_text(html.page(db.conn), encoding="utf-8")
    browser.get(out.as_uri())
    wait(browser, "return window.lineage && window.lineage.ready")
    labels = browser.execute_script("return window.lineage.cy.nodes().map(function (n) { return n.data('label'); })")
    assert sorted(labels) == sorted(NASTY_NAMES)
    assert browser.execute_script("return document.querySelectorAll('b').length") == 0


@pytest.mark.parametrize(("depth", "layout"), [(30, "dagre"), (100, "preset")])
def test_deeply_nested_parents_do_not_freeze_the_page(tmp_path, db, browser, depth, layout):
    """A chain of parent runs ``depth`` deep, each group holding the next (few nodes): dagre's compound layout took
    3.6 s at 100 levels and froze the tab at 300; beyond DAGRE_MAX_NESTING levels the page places them itself."""
    from lineage_graph import html

    events = [E(1, "r0", "j0", outputs=["x"])]
    events += [E(1, f"r{i}", f"j{i}", parent=(f"j{i - 1}", f"r{i - 1}"), inputs=["x"] if i == depth else [])
               for i in range(1, depth + 1)]
    db(events)
    out = tmp_path / "deep.html"
    out.write_text(html.page(db.conn), encoding="utf-8")
    started = time.monotonic()
    browser.get(out.as_uri())
    wait(browser, "return window.lineage && window.lineage.ready", timeout=30)
    assert browser.execute_script("return window.lineage.layout") == layout
    assert browser.execute_script("return window.lineage.cy.nodes('.job, .dataset').length") >= 2
    assert time.monotonic() - started < 20
