"""The examples/quickstart tree runs as its README says (copied to tmp_path)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import threading
from http.server import ThreadingHTTPServer

from click.testing import CliRunner

from txcl.cli.main import cli


def _copy_example(repo_root, tmp_path, port: int | None = None):
    ws = tmp_path / "quickstart"
    shutil.copytree(repo_root / "examples" / "quickstart", ws,
                    ignore=shutil.ignore_patterns(".txcl", ".txcl-data", "__pycache__"))
    if port is not None:
        rule = ws / "OPS/shop/0500_checks/stock.txcl"
        rule.write_text(rule.read_text().replace("127.0.0.1:8765", f"127.0.0.1:{port}"))
    return ws


def _run(ws, payload: dict) -> dict:
    result = CliRunner().invoke(cli, ["run", str(ws), "--input", json.dumps(payload)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_readme_command(repo_root, tmp_path):
    ws = _copy_example(repo_root, tmp_path)
    order = json.loads((ws / "order.json").read_text())
    out = _run(ws, order)
    assert out["customer"] == "vip" and out["total"] == 125
    assert out["discount"] == 0.2 and out["to_pay"] == 100  # PRIORITY 10 beat PRIORITY 1
    assert out["payment"] == {"attempt": 3, "status": "settled", "amount": 100}  # LOOP
    assert out["shipping"] == "free"  # @halt at 600


def test_guest_and_goto(repo_root, tmp_path):
    ws = _copy_example(repo_root, tmp_path)
    out = _run(ws, {"order": {"items": [{"sku": "tea", "qty": 1, "price": 5}]}})
    assert out["customer"] == "guest" and out["discount"] == 0 and out["shipping"] == "standard"
    out = _run(ws, {"order": {}})
    assert out == {"order": {}, "error": "the order has no items", "shipping": "none"}


def test_http_op_with_worker(repo_root, tmp_path):
    spec = importlib.util.spec_from_file_location("quickstart_worker", repo_root / "examples/quickstart/worker.py")
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)  # type: ignore[union-attr]
    server = ThreadingHTTPServer(("127.0.0.1", 0), worker.Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        ws = _copy_example(repo_root, tmp_path, server.server_address[1])
        out = _run(ws, {"check_stock": True, "order": {"items": [{"sku": "pot", "qty": 5, "price": 30}]}})
        assert out["stock"]["available"] == {"pot": False}
        assert len(out["stock"]["request_id"]) == 26
    finally:
        server.shutdown()
        server.server_close()
