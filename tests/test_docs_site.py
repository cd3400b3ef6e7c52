"""The documentation site: it builds with `mkdocs build --strict`, its generated references
come from the code (every function has computed examples), the rules it shows parse, the
getting-started commands print what the page says, the example worker works against a real
`txcl serve`, and the built pages render in headless Chromium with navigation and search."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from testtools import require_tool

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
TXCL = str(Path(sys.executable).parent / "txcl")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_the_site_builds_strictly_with_the_generated_references(site: Path) -> None:
    for page in ("index.html", "getting-started/index.html", "language/index.html",
                 "reference/functions/index.html", "reference/rule-codes/index.html",
                 "reference/cli/index.html", "reference/settings/index.html", "testing/index.html",
                 "workers/index.html", "differences/index.html"):
        assert (site / page).is_file(), page
    functions = (site / "reference/functions/index.html").read_text()
    assert "&amp;mod(-17, 5)" in functions and "<code>-2</code>" in functions  # computed at build time
    assert "division by zero" in functions
    codes = (site / "reference/rule-codes/index.html").read_text()
    assert 'id="tx201"' in codes and 'id="tx401"' in codes and "Fixable: <code>txcl check --fix</code>" in codes
    cli = (site / "reference/cli/index.html").read_text()
    assert "txcl test" in cli and "--fail-under" in cli
    # the sequence diagrams reach the page as Mermaid blocks (the theme renders them)
    assert (site / "continuations/index.html").read_text().count('class="mermaid"') == 4
    assert 'class="mermaid"' in (site / "workers/index.html").read_text()
    settings = (site / "reference/settings/index.html").read_text()
    assert "TXCL_ASYNC_ACK_TIMEOUT" in settings and "How long a dispatch waits" in settings


def test_every_function_has_examples_that_run_and_errors_that_fail() -> None:
    from txcl.docsgen import FUNCTION_ERRORS, FUNCTION_EXAMPLES, evaluate_example
    from txcl.functions.registry import REGISTRY

    assert set(FUNCTION_EXAMPLES) == set(REGISTRY)
    failing = [(e, r) for exs in FUNCTION_EXAMPLES.values() for e, env in exs
               for ok, r in [evaluate_example(e, env)] if not ok]
    assert failing == [("&div(1, 0)", failing[0][1])] and "division by zero" in failing[0][1]
    assert set(FUNCTION_ERRORS) == {n for n in REGISTRY if not n.startswith("try_")}
    for name, expression in FUNCTION_ERRORS.items():
        if expression:
            ok, message = evaluate_example(expression, {"list": [1]})
            assert not ok and message.startswith(f"&{name}: "), (name, message)


RULE_PAGES = sorted({*DOCS.glob("*.md"), REPO / "README.md", *REPO.glob("examples/*/README.md")})


def _blocks(text: str) -> list[tuple[str, str, str]]:
    """(marker comment before the block, language, body) of every fenced block."""
    out = []
    for m in re.finditer(r'(?:<!-- (?P<marker>[^>]*) -->\n)?```(?P<lang>[a-z]*)(?: title="(?P<title>[^"]+)")?\n'
                         r"(?P<body>.*?)```", text, re.S):
        marker = f"file: {m.group('title')}" if m.group("title") else (m.group("marker") or "").strip()
        out.append((marker, m.group("lang"), m.group("body")))
    return out


def test_the_rules_shown_in_the_docs_parse() -> None:
    from txcl.syntax.parser import parse_rule

    checked = 0
    for page in RULE_PAGES:
        for _, lang, block in _blocks(page.read_text()):
            # a block may show several files, each under its `# OPS/…` header line
            for body in re.split(r"\n(?=# OPS/)", block):
                lines = [ln for ln in body.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
                if (lang and lang != "txcl") or not lines or not re.match(r"(WHEN|SET|SELECT|WITH|EXEC|EMIT|LOOP|PRIORITY)\b", lines[0]):
                    continue
                parse_rule(body, f"{page.name}.txcl")  # raises on a mistake
                checked += 1
    assert checked >= 20


def _varying(text: str) -> str:
    """Output with what differs from run to run (ids, times, durations) blanked out."""
    text = re.sub(r"\b[0-9A-HJKMNP-TV-Z]{26}\b", "<id>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", "<time>", text)
    text = re.sub(r"\d+(\.\d+)?ms\b", "<ms>", text)
    text = re.sub(r"duration_ms=\d+", "duration_ms=<n>", text)
    return re.sub(r" in \d+\.\d+s$", " in <s>", text, flags=re.M)


def test_the_getting_started_commands_print_what_the_page_shows(tmp_path: Path) -> None:
    text = (DOCS / "getting-started.md").read_text()
    runs = 0
    for marker, lang, body in _blocks(text):
        if marker.startswith("file: "):
            path = tmp_path / marker[len("file: "):]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
        elif marker == "check-output":
            command, *expected = body.rstrip("\n").split("\n")
            assert command.startswith("$ ") and "txcl " in command
            path = os.pathsep.join([str(Path(TXCL).parent), os.environ.get("PATH", "")])
            proc = subprocess.run(["bash", "-c", command[2:]], cwd=tmp_path, capture_output=True, text=True,
                                  timeout=60, env={**os.environ, "NO_COLOR": "1", "PATH": path})
            assert _varying("\n".join(expected)) == _varying(proc.stdout.rstrip("\n")), f"{command}\n{proc.stderr}"
            runs += 1
    assert runs == 9


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_example_worker_completes_a_run_through_txcl_serve(tmp_path: Path) -> None:
    port = _free_port()
    # the two rules of docs/workers.md, with the worker on a free port
    rules = [b for _, lang, b in _blocks((DOCS / "workers.md").read_text()) if not lang and b.startswith("# OPS/")]
    assert len(rules) == 2
    for body in rules:
        rule = tmp_path / body.splitlines()[0][2:]
        rule.parent.mkdir(parents=True)
        rule.write_text(body.replace("127.0.0.1:8770", f"127.0.0.1:{port}"))
    worker = subprocess.Popen([sys.executable, str(DOCS / "examples/worker.py"), str(port)],
                              stderr=subprocess.PIPE, text=True)
    server = subprocess.Popen([TXCL, "serve", str(tmp_path), "--port", "0", "--default-stack", "docs"],
                              stderr=subprocess.PIPE, text=True)
    try:
        assert "worker on" in worker.stderr.readline()
        base = ""
        for line in server.stderr:
            m = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
            if m:
                base = m.group(1)
                break
        threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
        with urllib.request.urlopen(urllib.request.Request(base + "/", data=b'{"text": "one two three"}',
                                                           headers={"Content-Type": "application/json"},
                                                           method="POST"), timeout=30) as answer:
            status, body, location = answer.status, json.loads(answer.read()), answer.headers["Location"]
        # 202 and a continuation to poll; or, when the worker's callback came before txcl had
        # finished sending the dispatch (this worker answers in microseconds), the final 200
        if status == 200:
            assert body["summary"] == {"words": 3, "chars": 13} and location is None
            return
        assert status == 202, body
        deadline = time.monotonic() + 30
        while True:
            with urllib.request.urlopen(urllib.request.Request(base + location,
                                                               headers={"Accept": "application/json"}),
                                        timeout=30) as answer:
                result = json.loads(answer.read())
                if answer.status == 200:
                    break
            assert time.monotonic() < deadline, result
            time.sleep(0.1)
        assert result["summary"] == {"words": 3, "chars": 13}
    finally:
        for proc in (server, worker):
            proc.terminate()
            proc.wait(15)


@pytest.mark.browser
def test_the_built_site_renders_in_headless_chromium(site: Path, tmp_path: Path) -> None:
    require_tool("chromium")
    import http.server
    import functools

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        for page, words in (("/", "Getting started"), ("/reference/functions/", "tz_offsets")):
            cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                   "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                   f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
                   base + page]
            dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
            assert 'class="md-nav' in dom and 'class="md-search__input' in dom, page
            assert words in dom, page
    finally:
        httpd.shutdown()


def test_every_difference_from_the_reference_has_an_example_rule_that_does_what_it_says() -> None:
    from txcl.errors import TxclSyntaxError
    from txcl.syntax.parser import parse_rule

    rows = [line for line in (DOCS / "differences.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| What")]
    assert len(rows) >= 35
    parsed = refused = 0
    for row in rows:
        example = row.rstrip(" |").rsplit(" | ", 1)[1]
        assert example.strip(), row
        for m in re.finditer(r"`([^`]+)`(?: is (TX\d{3}))?", example):
            rule, code = m.group(1), m.group(2)
            if not re.match(r"(?i)(WHEN|SET|SELECT|WITH|EXEC|EMIT)\b", rule):
                continue
            if code is None:
                parse_rule(rule)
                parsed += 1
            elif code < "TX200":
                with pytest.raises(TxclSyntaxError) as info:
                    parse_rule(rule)
                assert code in {d.code for d in info.value.diagnostics}, (rule, code)
                refused += 1
    assert parsed >= 15 and refused >= 4


def test_the_committed_reference_pages_are_up_to_date() -> None:
    """docs/reference/ is generated from the code (functions, rule codes, settings, commands)
    and committed, so its links work on GitHub; `python -m txcl.docsgen` writes it again."""
    from txcl.docsgen import PAGES

    stale = [path for path, make in PAGES.items()
             if not (DOCS / path).is_file() or (DOCS / path).read_text(encoding="utf-8") != make()]
    import difflib

    diff = "".join(difflib.unified_diff((DOCS / stale[0]).read_text(encoding="utf-8").splitlines(True),
                                       PAGES[stale[0]]().splitlines(True))) if stale else ""
    assert stale == [], f"run `python -m txcl.docsgen` to write {', '.join(stale)}:\n{diff[:2000]}"


def test_the_grafana_dashboard_queries_only_metrics_txcl_exports():
    """The example dashboard is valid JSON, and every query names metrics of the catalogue
    (a renamed metric would leave a panel empty)."""
    from txcl.metrics import CATALOGUE, NAMESPACE

    dashboard = json.loads((DOCS / "examples" / "grafana-dashboard.json").read_text(encoding="utf-8"))
    known = {f"{NAMESPACE}_{s.name}" + ("_total" if s.kind == "counter" else "") for s in CATALOGUE}
    known |= {f"{NAMESPACE}_{s.name}_bucket" for s in CATALOGUE if s.kind == "histogram"}
    used = {name for panel in dashboard["panels"] for target in panel["targets"]
            for name in re.findall(r"\btxcl_[a-z_]+", target["expr"])}
    assert len(dashboard["panels"]) >= 12 and used and used <= known, used - known
    covered = {name.removesuffix("_bucket") for name in used}
    assert {f"{NAMESPACE}_{s.name}" + ("_total" if s.kind == "counter" else "") for s in CATALOGUE} <= covered
