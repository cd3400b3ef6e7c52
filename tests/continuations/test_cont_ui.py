"""The dashboard and the playground in a real browser: Debian's chromium driven by Playwright,
against a real `txcl serve --ui` on 127.0.0.1 and the real test worker, on every store backend.

The runs page lists a parked run and updates when its callback arrives; the itemized grid
shows the items done; the trace shows the envelope's changed paths; the playground shows a WHEN
result and a diagnostic with its code; without the token nothing is shown."""

from __future__ import annotations

import html

import json
import re
import urllib.request

import pytest
from cont_support import http_get, wait_until
from contworker import post_json

from playwright import sync_api as playwright_api
from testtools import require_tool

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
BODY = 'WHEN @web.req.body != ""\nEXEC "txco://noop"\nEMIT .in = &json(&b64decode(@web.req.body))'
TOKEN = "correct-horse-battery-staple"


def ui_tree(worker_url: str) -> dict[str, str]:
    return {
        "OPS/shop/10/body.txcl": BODY,
        "OPS/shop/100/enrich.txcl": f'WITH mode = "async", timeout = "5m", into = "enriched"\nEXEC "{worker_url}"',
        "OPS/shop/200/after.txcl": 'EXEC "txco://noop"\nEMIT .total = 42, .enriched.seen = true',
        "OPS/fan/10/body.txcl": BODY,
        "OPS/fan/100/items.txcl": f'WITH mode = "async", each = .in.items, window = 2, into = "out", timeout = "5m"\n'
                                  f'EXEC "{worker_url}"',
        "txcl.toml": '[[serve.routes]]\npath = "/fan"\nstack = "fan"\n\n[[serve.routes]]\npath = "/"\nstack = "shop"\n',
    }


@pytest.fixture(scope="module")
def browser():
    chromium = require_tool("chromium")  # a missing browser fails the tests: ./run-tests installs it
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser, tmp_path):
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    yield pg
    context.close()


def post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_runs_page_lists_a_parked_run_and_updates_when_its_callback_arrives(serve, workspace, worker, page):
    srv = serve(workspace(ui_tree(worker.url())), "--ui", "--trace-mode", "full")
    status, body = post(srv.url + "/", {"order": 7})
    assert status == 202
    job = worker.wait_job()
    run_id = job.body["_txc"]["run_id"]
    page.goto(srv.url + "/_txc/ui/")
    row = page.locator(f'tr[data-run="{run_id}"]')
    assert row.locator("[data-state]").inner_text() == "waiting"
    assert "shop/100" in row.inner_text()  # the stage it waits at
    assert page.locator('[data-count="waiting"]').inner_text() == "1"
    assert worker.callback(job, {"ok": True})[0] == 200
    # no reload: the page's own refresh brings the new state
    page.wait_for_function(
        f"""document.querySelector('tr[data-run="{run_id}"] [data-state]').textContent === 'completed'""")
    assert page.locator('[data-count="completed"]').inner_text() == "1"
    # the run page: its segments and the trace's envelope diff
    page.click(f'tr[data-run="{run_id}"] a')
    page.wait_for_selector("#run-state")
    assert page.locator("#run-state").inner_text() == "completed"
    assert page.get_by_text(f"resume-{run_id}", exact=False).count() >= 1
    page.click(f'a[href$="/traces/resume-{run_id}-shop_100-v1"]')
    # traces are written in the background, so the resume's may land a moment after the run
    # shows completed: reload until its envelope diff is there
    changed = page.locator('table.diff tr[data-path=".total"]')
    def diff_shown() -> bool:
        if changed.count() == 1:
            return True
        page.reload()
        return False

    wait_until(diff_shown, timeout=15, interval=0.2)
    assert changed.count() == 1 and "added" in changed.inner_text() and "42" in changed.inner_text()
    assert page.locator('table.diff tr[data-path=".enriched"], table.diff tr[data-path=".enriched.seen"]').count() >= 1
    page.screenshot(path=str(srv.ws / "trace.png"))


def test_itemized_grid_shows_the_items_done(serve, workspace, worker, page):
    srv = serve(workspace(ui_tree(worker.url())), "--ui")
    status, _ = post(srv.url + "/fan", {"items": [{"n": i} for i in range(5)]})
    assert status == 202
    jobs = [worker.wait_job(), worker.wait_job()]  # the window: two in flight
    run_id = jobs[0].body["_txc"]["run_id"]
    page.goto(f"{srv.url}/_txc/ui/runs/{run_id}")
    grid = page.locator("ol.grid")
    assert grid.locator("li.item").count() == 5
    assert grid.locator("li.item.inflight").count() == 2
    assert grid.locator("li.item.queued").count() == 3
    assert page.locator("[data-inflight]").inner_text() == "2"
    for job in jobs:
        worker.callback(job, {"i": job.body["_txc"]["item_index"]})
    page.wait_for_function("document.querySelectorAll('ol.grid li.item.done').length >= 2")
    while True:  # answer the rest as they are sent
        try:
            job = worker.wait_job(timeout=3)
        except Exception:  # noqa: BLE001 - none left
            break
        worker.callback(job, {"i": job.body["_txc"]["item_index"]})
    page.wait_for_function("document.querySelectorAll('ol.grid li.item.done').length === 5")
    page.wait_for_function("document.getElementById('run-state').textContent === 'completed'")
    assert [c.get_attribute("data-status") for c in grid.locator("li.item").all()] == ["completed"] * 5


def test_playground_shows_when_per_condition_and_a_diagnostic_code(serve, workspace, worker, page):
    srv = serve(workspace(ui_tree(worker.url())), "--ui")
    page.goto(srv.url + "/_txc/ui/playground")
    page.wait_for_function("document.body.getAttribute('data-evaluated')")
    assert page.locator("#when-result").inner_text() == "true"
    page.fill("#envelope", '{"order": {"id": "A-1", "total": 50}, "customer": {"tier": "gold"}}')
    page.wait_for_function("document.getElementById('when-result').textContent === 'false'")
    conditions = page.locator("#conditions li").all_inner_texts()
    assert any(c.startswith("false") and ".order.total > 100" in c for c in conditions)
    assert any(c.startswith("true") and '.customer.tier == "gold"' in c for c in conditions)
    page.fill("#rule", 'WHEN .a == 1 .b == 2\nEMIT .x = &lenght(.a)')
    page.wait_for_selector("#diagnostics li")
    codes = page.locator("#diagnostics li code").all_inner_texts()
    assert "TX010" in codes
    page.fill("#rule", 'EMIT .x = &lenght(.a)')
    page.wait_for_function("[...document.querySelectorAll('#diagnostics code')].some(c => c.textContent === 'TX101')")
    # the highlighted rule sits under the text
    assert page.locator("#rule-hl .tx-k").count() >= 1
    # stack mode: the whole stack with every EXEC mocked (the async worker is never called)
    page.check('input[value="stack"]')
    page.select_option("#stack", "shop")
    page.fill("#envelope", '{"x": 1}')
    page.wait_for_function("document.getElementById('when-result').textContent === 'completed' && "
                           "document.getElementById('envelope-after').textContent.includes('\"x\": 1')")
    after = json.loads(page.locator("#envelope-after").inner_text())
    assert after["total"] == 42 and after["x"] == 1
    assert worker.jobs == []


def test_a_synchronous_request_is_found_in_the_requests_list(serve, workspace, worker, page):
    """A request that never suspends has a trace but no run: the Requests page lists it, newest
    first, and leads to its trace."""
    files = ui_tree(worker.url())
    files["OPS/quick/0100/a.txcl"] = "EMIT .quick = true"
    files["txcl.toml"] = files["txcl.toml"].replace('[[serve.routes]]\npath = "/fan"',
                                                    '[[serve.routes]]\npath = "/quick"\nstack = "quick"\n\n'
                                                    '[[serve.routes]]\npath = "/fan"')
    srv = serve(workspace(files), "--ui")
    status, answer = post(srv.url + "/quick", {"a": 1})
    assert status == 200 and answer["quick"] is True
    for _ in range(100):  # traces are written in batches, off the request
        response = page.goto(srv.url + "/_txc/ui/traces")
        assert response is not None and response.status == 200
        if page.locator("table.runs tbody tr[data-rid]").count():
            break
        page.wait_for_timeout(200)
    row = page.locator("table.runs tbody tr[data-rid]").first
    assert "quick" in row.inner_text() and "completed" in row.inner_text()
    rid = row.get_attribute("data-rid")
    # the search: the beginning of its request id and its status find it; another status does not
    page.fill('input[name="rid"]', rid[:12])
    page.select_option('select[name="status"]', "completed")
    page.click('form[role="search"] button[type="submit"]')
    page.wait_for_load_state()
    assert [r.get_attribute("data-rid") for r in page.locator("table.runs tbody tr[data-rid]").all()] == [rid]
    page.select_option('select[name="status"]', "failed")
    page.click('form[role="search"] button[type="submit"]')
    page.wait_for_load_state()
    assert page.locator("table.runs tbody tr[data-rid]").count() == 0 and "rid=" + rid[:12] in page.url
    page.goto(srv.url + "/_txc/ui/traces")
    row = page.locator("table.runs tbody tr[data-rid]").first
    row.locator("a").first.click()
    page.wait_for_load_state()
    assert "/_txc/ui/traces/" in page.url and "quick" in page.content()


def test_the_stacks_page_and_the_playground_use_the_stack_schema(serve, workspace, worker, page):
    """Typed envelopes in the browser: the Stacks page lists each stack's input and output paths
    with their types and descriptions; in stack mode the playground's envelope box completes a
    key from the chosen stack's $defs.input, and picking one inserts it."""
    files = ui_tree(worker.url())
    files["OPS/shop/schema.json"] = json.dumps({"$defs": {
        "input": {"type": "object", "properties": {"order": {"type": "object", "properties": {
            "total": {"type": "number", "description": "the order's total"}, "id": {"type": "string"}}}}},
        "output": {"type": "object", "properties": {"total": {"type": "integer"}}}}})
    srv = serve(workspace(files), "--ui")
    page.goto(srv.url + "/_txc/ui/stacks")
    shop = page.locator("section.stack", has=page.locator("h2", has_text="shop"))
    rows = shop.locator("table.schema").first.locator("tbody tr").all_inner_texts()
    assert any(".order.total" in r and "number" in r and "the order's total" in r for r in rows)
    assert "No schema" in page.locator("section.stack", has=page.locator("h2", has_text="fan")).inner_text()
    held = []  # the answer for the stack chosen first is held back until after shop's

    def hold_other_stacks(route):
        if "stack=shop" in route.request.url:
            route.continue_()
        else:
            held.append(route)

    page.route("**/playground/paths?*", hold_other_stacks)
    page.goto(srv.url + "/_txc/ui/playground")
    page.check('input[value="stack"]')
    page.select_option("#stack", "shop")
    page.wait_for_function("!document.getElementById('envelope-hint').hidden")
    assert held, "the first stack's paths were asked for before shop was chosen"
    for route in held:  # the stale answer arrives last; it must not clear shop's paths
        route.fulfill(json={"paths": []})
    page.evaluate("() => new Promise(r => setTimeout(r, 100))")
    assert not page.locator("#envelope-hint").is_hidden()
    page.fill("#envelope", "")
    page.type("#envelope", '{"order": {"to')
    page.wait_for_selector("#envelope-suggest li")
    options = page.locator("#envelope-suggest li").all_inner_texts()
    assert len(options) == 1 and options[0].startswith("total") and "number" in options[0]
    page.locator("#envelope-suggest li").first.dispatch_event("mousedown")
    assert page.input_value("#envelope") == '{"order": {"total": '


def test_without_the_token_nothing_is_shown(serve, workspace, worker, page):
    srv = serve(workspace(ui_tree(worker.url())), "--ui", "--admin-token", TOKEN)
    status, _ = post(srv.url + "/", {"order": 8})
    assert status == 202
    run_id = worker.wait_job().body["_txc"]["run_id"]
    for path in ("/_txc/ui/", f"/_txc/ui/runs/{run_id}", "/_txc/ui/playground"):
        response = page.goto(srv.url + path)
        assert response is not None and response.status == 401
        assert run_id not in page.content() and page.locator("#token").count() == 1
    page.fill("#token", "not-the-token-at-all")
    page.click("button[type=submit]")
    assert page.locator("[role=alert]").inner_text() == "That is not the token."
    assert run_id not in page.content()
    page.fill("#token", TOKEN)
    page.click("button[type=submit]")
    page.wait_for_selector(f'tr[data-run="{run_id}"]')
    cookie = next(c for c in page.context.cookies() if c["name"] == "txcl_ui")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and TOKEN not in cookie["value"]
    # the same with a bearer token, and without any
    assert http_get(srv.url + "/_txc/ui/")[0] == 401
    req = urllib.request.Request(srv.url + "/_txc/ui/", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200 and run_id in resp.read().decode()
    req = urllib.request.Request(srv.url + "/_txc/ui/", headers={"Authorization": "Bearer nope"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=10)
    assert info.value.code == 401 and run_id not in info.value.read().decode()


def test_dashboard_is_off_unless_asked(serve, workspace, worker):
    srv = serve(workspace(ui_tree(worker.url())))
    status, _, body = http_get(srv.url + "/_txc/ui/")
    assert status == 404 and b"Runs" not in body


def test_runs_filters_and_paging(serve, workspace, worker):
    ws = workspace(ui_tree(worker.url()))
    srv = serve(ws, "--ui")
    for i in range(3):
        assert post(srv.url + "/", {"n": i})[0] == 202
    assert post(srv.url + "/fan", {"items": [{"n": 1}]})[0] == 202
    wait_until(lambda: len(worker.jobs) >= 4)
    _, _, body = http_get(srv.url + "/_txc/ui/?stack=fan", accept="text/html")
    rows = re.findall(rb'data-run="(run_[^"]+)"', body)
    assert len(rows) == 1
    _, _, body = http_get(srv.url + "/_txc/ui/?state=waiting&stack=shop", accept="text/html")
    assert len(re.findall(rb'data-run="', body)) == 3
    newest = re.findall(rb'data-run="(run_[^"]+)"', http_get(srv.url + "/_txc/ui/", accept="text/html")[2])
    assert len(newest) == 4
    # a run id, or the start of one, finds that run
    for text in (newest[1].decode(), newest[1].decode()[:-3]):
        _, _, body = http_get(srv.url + f"/_txc/ui/?q={text}", accept="text/html")
        assert re.findall(rb'data-run="(run_[^"]+)"', body) == [newest[1]]
    # pages of two: the second page holds the two older runs, and nothing of the first
    _, _, body = http_get(srv.url + "/_txc/ui/?limit=2", accept="text/html")
    assert re.findall(rb'data-run="(run_[^"]+)"', body) == newest[:2]
    older = re.search(rb'rel="next" href="([^"]+)"', body).group(1).decode().replace("&amp;", "&")
    _, _, body = http_get(srv.url + older, accept="text/html")
    assert re.findall(rb'data-run="(run_[^"]+)"', body) == newest[2:]
    assert b'rel="next"' not in body and b">Newest<" in body
    # the part the page refreshes
    _, _, fragment = http_get(srv.url + "/_txc/ui/?fragment=1", accept="text/html")
    assert b"<html" not in fragment and b'data-count="waiting"' in fragment


def test_pages_fit_a_narrow_window_and_work_from_the_keyboard(serve, workspace, worker, browser):
    srv = serve(workspace(ui_tree(worker.url())), "--ui")
    assert post(srv.url + "/fan", {"items": [{"n": i} for i in range(40)]})[0] == 202
    run_id = worker.wait_job().body["_txc"]["run_id"]
    context = browser.new_context(viewport={"width": 375, "height": 740})
    try:
        pg = context.new_page()
        for path in ("/_txc/ui/", f"/_txc/ui/runs/{run_id}", "/_txc/ui/playground"):
            pg.goto(srv.url + path)
            # nothing wider than the window but the tables' own scrolling boxes
            assert pg.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), path
        pg.goto(srv.url + "/_txc/ui/")
        pg.keyboard.press("Tab")
        assert pg.evaluate("document.activeElement.className") == "skip"
        pg.keyboard.press("Enter")
        assert pg.evaluate("location.hash") == "#main"
        # every form control has a label
        unlabeled = pg.evaluate("""[...document.querySelectorAll('input, select, textarea')]
            .filter(e => e.type !== 'hidden' && !e.labels?.length && !e.getAttribute('aria-label')).length""")
        assert unlabeled == 0
    finally:
        context.close()


def test_a_run_can_be_cancelled_from_its_page(serve, workspace, worker, page, store_at):
    ws = workspace(ui_tree(worker.url()))
    srv = serve(ws, "--ui")
    assert post(srv.url + "/", {"order": 9})[0] == 202
    job = worker.wait_job()
    run_id = job.body["_txc"]["run_id"]
    # another page cannot press the button: the request needs the dashboard's own header
    status, _ = post(f"{srv.url}/_txc/ui/runs/{run_id}/cancel", {"reason": "forged"})
    assert status == 403
    page.goto(f"{srv.url}/_txc/ui/runs/{run_id}")
    page.once("dialog", lambda dialog: dialog.accept("customer asked"))
    page.click("[data-cancel]")
    page.wait_for_function("document.getElementById('run-state').textContent === 'failed'")
    assert page.locator("[data-cancel]").count() == 0  # a finished run has no button
    run = store_at(ws / ".txcl-data" / "txcl.db").get_run(run_id)
    assert run.fail_reason == "cancelled" and run.error["reason"] == "customer asked"
    assert worker.callback(job, {"late": 1})[0] == 410


def test_a_failed_run_can_be_retried_from_its_page(serve, workspace, worker, page, store_at):
    ws = workspace(ui_tree(worker.url()))
    srv = serve(ws, "--ui")
    assert post(srv.url + "/", {"order": 9})[0] == 202
    job = worker.wait_job()
    run_id = job.body["_txc"]["run_id"]
    store = store_at(ws / ".txcl-data" / "txcl.db")
    assert worker.callback(job, status="failed", error="printer jammed")[0] == 200
    wait_until(lambda: store.get_run(run_id).status == "failed")
    assert post(f"{srv.url}/_txc/ui/runs/{run_id}/retry", {})[0] == 403  # not from another page
    page.goto(f"{srv.url}/_txc/ui/runs/{run_id}")
    assert page.locator("[data-cancel]").count() == 0
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-retry]")
    page.wait_for_function("document.getElementById('run-state').textContent === 'waiting'")
    again = worker.wait_job()  # the failed call, sent again by the server
    assert again.opc == job.opc and again.body["_txc"]["retry"] == 1
    assert worker.callback(again, {"ok": 1})[0] == 200
    page.wait_for_function("document.getElementById('run-state').textContent === 'completed'")
    assert page.locator("[data-retry]").count() == 0
    assert store.get_run(run_id).result["total"] == 42


def test_a_trace_explains_why_it_went_its_way(serve, workspace):
    """The trace page links to the explanation: each rule's outcome and its WHEN with both sides."""
    ws = workspace({"OPS/shop/100/flag.txcl": 'WHEN .qty > 10\nEMIT .big = true',
                    "OPS/shop/100/small.txcl": 'WHEN .qty <= 10\nEMIT .small = true'})
    srv = serve(ws, "--ui", "--trace-ops", "answers")
    status, _ = post_json(srv.url + "/", {"qty": 3})
    assert status == 200
    def listed():  # the trace is written a moment after the answer
        _, _, body = http_get(srv.url + "/_txc/ui/traces", accept="text/html")
        return re.search(r'/traces/([0-9A-Za-z]{20,40})"', body.decode())
    rid = wait_until(listed, timeout=10).group(1)
    _, _, trace = http_get(f"{srv.url}/_txc/ui/traces/{rid}", accept="text/html")
    assert f"/traces/{rid}/why" in trace.decode()
    # "Debug this request": the launch configuration txcl dap walks it again with
    launch = re.search(r'<pre class="json" id="debug-launch-json">(.*?)</pre>', trace.decode(), re.S)
    assert launch is not None and 'data-copy="debug-launch-json"' in trace.decode()
    config = json.loads(html.unescape(launch.group(1)))
    assert config == {"type": "txcl", "request": "launch", "name": f"Debug request {rid}",
                      "workspace": "${workspaceFolder}", "trace": rid}
    status, _, page = http_get(f"{srv.url}/_txc/ui/traces/{rid}/why", accept="text/html")
    text = page.decode()
    assert status == 200 and "walked again with the recorded op answers" in text
    assert re.search(r'data-rule="shop/100/flag">.*?<td data-verdict>when false', text, re.S)
    assert re.search(r'data-rule="shop/100/small">.*?<td data-verdict>ran', text, re.S)
    assert "<code>.qty &gt; 10</code>" in text and "left <code>3</code>" in text
