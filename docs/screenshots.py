"""Take the dashboard's screenshots for the documentation: `python docs/screenshots.py`.

Starts the MCP example's tool server and `txcl serve examples/mcp --ui --trace-mode full` (a
throw-away database), posts the example article, and photographs with the system's chromium
(driven by Playwright) the runs page while the run waits, the run page with its itemized
grid, the trace of the resume with the envelope's changes, and the playground. The images go
to docs/images/.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mcp"
OUT = ROOT / "docs" / "images"
TXCL = str(Path(sys.executable).parent / "txcl")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


def main() -> int:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed")
    OUT.mkdir(parents=True, exist_ok=True)
    tools = subprocess.Popen([sys.executable, str(EXAMPLE / "tools_server.py")], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory() as tmp:
        serve = subprocess.Popen([TXCL, "serve", str(EXAMPLE), "--port", "0", "--db", str(Path(tmp) / "t.db"), "--ui",
                                  "--trace-mode", "full"], stderr=subprocess.PIPE, text=True)
        try:
            assert serve.stderr is not None
            base = ""
            for line in serve.stderr:
                found = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
                if found:
                    base = found.group(1)
                    break
            threading.Thread(target=lambda: [None for _ in serve.stderr], daemon=True).start()
            time.sleep(1.0)
            req = urllib.request.Request(base + "/", data=(EXAMPLE / "article.json").read_bytes(), method="POST",
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as resp:
                json.loads(resp.read())
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=ARGS)
                page = browser.new_page(viewport={"width": 1200, "height": 820})
                page.goto(base + "/_txc/ui/")
                page.screenshot(path=str(OUT / "ui-runs.png"))
                run_id = page.locator("tr[data-run]").first.get_attribute("data-run")
                page.goto(f"{base}/_txc/ui/runs/{run_id}")
                page.wait_for_function("document.getElementById('run-state').textContent === 'completed'",
                                       timeout=30_000)
                page.locator("section.unit").first.scroll_into_view_if_needed()
                page.screenshot(path=str(OUT / "ui-run.png"))
                page.click("a[href*='/traces/resume-']")
                page.locator("table.diff").first.scroll_into_view_if_needed()
                page.screenshot(path=str(OUT / "ui-trace.png"))
                page.goto(base + "/_txc/ui/playground")
                page.wait_for_function("document.body.getAttribute('data-evaluated')")
                page.screenshot(path=str(OUT / "ui-playground.png"))
                browser.close()
        finally:
            serve.terminate()
            serve.wait(30)
            tools.terminate()
            tools.wait(10)
    print("wrote", ", ".join(sorted(p.name for p in OUT.glob("ui-*.png"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
