"""Loading OPS trees: derivation, layout errors, fixtures, snapshots."""

from __future__ import annotations

import os

import pytest

from txcl.errors import TxclLoadError
from txcl.ops.layout import lineage, numbered_value
from txcl.ops.scan import scan_ops
from txcl.ops.tree import WorkspaceNotFound, find_workspace, load_ops


def test_numbered_segments():
    assert [numbered_value(s) for s in ("0300", "300", "0300_checks", "300-audit", "300 audit")] == [300] * 5
    assert numbered_value("300x") is None and numbered_value("x300") is None


def test_lineage():
    assert lineage("shop/beta/x") == ["shop/beta/x", "shop/beta", "shop"]
    assert lineage("www/_mail") == ["www/_mail"]
    assert lineage("www/_mail/eu") == ["www/_mail/eu", "www/_mail"]
    assert lineage("_sys/health") == ["_sys/health"]


def test_derivation_of_stack_scope_name(workspace):
    ws = workspace({
        "OPS/shop/beta/0300/x.txcl": "EMIT .a = 1",
        "OPS/shop/0200_a/0210_b/y.txcl": "EMIT .a = 1",
        "OPS/shop/0300/tax/vat.txcl": "EMIT .a = 1",
        "OPS/shop/0300_checks/one.txcl": "EMIT .a = 1",
        "OPS/shop/0300-audit/two.txcl": "EMIT .a = 1",
        "OPS/shop/0300/_off/draft.txcl": "this is not even valid",
        "OPS/shop/0300/.hidden.txcl": "nor this",
        "OPS/shop/README.md": "docs",
    })
    tree = load_ops(ws)
    keys = sorted(op.key for op in tree.all_rules())
    assert keys == ["shop/210/y", "shop/300/one", "shop/300/tax_vat", "shop/300/two", "shop/beta/300/x"]
    assert [op.name for op in tree.rules_at("shop", 300)] == ["one", "tax_vat", "two"]
    assert tree.stacks() == ["shop", "shop/beta"]
    assert tree.effective_scopes("shop/beta") == [210, 300]
    assert [op.stack for op in tree.rules_at("shop/beta", 300)] == ["shop/beta"]
    assert tree.next_scope("shop", 211) == 300 and tree.next_scope("shop", 301) is None


def test_all_layout_errors_reported_together(workspace):
    ws = workspace({
        "OPS/shop/x.txcl": "EMIT .a = 1",
        "OPS/0100/y.txcl": "EMIT .a = 1",
        "OPS/shop/0100/a.txcl": "EMIT .a = 1",
        "OPS/shop/0100_other/a.txcl": "EMIT .a = 1",
        "OPS/bad stack/0100/a.txcl": "EMIT .a = 1",
        "OPS/shop/1234567890/a.txcl": "EMIT .a = 1",
        "OPS/shop/0200/" + "n" * 65 + ".txcl": "EMIT .a = 1",
        "OPS/shop/0300/broken.txcl": "WHEN .x >",
        "OPS/shop/0300/broken2.txcl": "EMIT .a =",
    })
    with pytest.raises(TxclLoadError) as info:
        load_ops(ws)
    codes = sorted(d.code for d in info.value.diagnostics)
    assert codes.count("TX120") == 1 and codes.count("TX121") == 1 and codes.count("TX122") == 1
    assert codes.count("TX123") == 3
    assert len([c for c in codes if c.startswith("TX0")]) >= 2
    text = str(info.value)
    assert "OPS/shop/x.txcl is not under a numbered scope directory" in text
    assert "both define shop/100/a" in text and "0100_other/a.txcl" in text
    assert 'stack segment "bad stack"' in text
    assert "broken.txcl" in text and "broken2.txcl" in text


def test_unknown_scheme_and_bad_py_import_name_the_file(workspace):
    ws = workspace({
        "OPS/s/0100/a.txcl": 'EXEC "foo://bar"',
        "OPS/s/0100/b.txcl": 'EXEC "py://mod_missing_for_test:fn"',
        "OPS/s/0100/c.txcl": 'EXEC "py://mod_has_no_attr:fn"',
        "OPS/s/0100/d.txcl": 'EXEC "py://mod_import_fails:fn"',
        "mod_has_no_attr.py": "x = 1\n",
        "mod_import_fails.py": "raise RuntimeError('boom at import')\n",
    })
    with pytest.raises(TxclLoadError) as info:
        load_ops(ws)
    by_file = {os.path.basename(d.file): d for d in info.value.diagnostics}
    assert by_file["a.txcl"].code == "TX103"
    assert by_file["b.txcl"].code == "TX104" and "No module named 'mod_missing_for_test'" in by_file["b.txcl"].message
    assert 'has no attribute "fn"' in by_file["c.txcl"].message
    assert "RuntimeError: boom at import" in by_file["d.txcl"].message
    assert by_file["b.txcl"].line == 1 and by_file["b.txcl"].column == 6


def test_fixtures_apply_to_their_directory_only(workspace):
    ws = workspace({
        "OPS/s/0100/a.txcl": "EMIT .a = 1",
        "OPS/s/0100/mock-request.json": '{"req": 1}',
        "OPS/s/0100/sub/b.txcl": "EMIT .a = 1",
    })
    tree = load_ops(ws)
    assert tree.find("s", 100, "a").fixtures == {"mock-request.json": {"req": 1}}
    assert tree.find("s", 100, "sub_b").fixtures == {}


def test_bad_fixture_is_load_error(workspace):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1", "OPS/s/0100/mock-response.json": "[1, 2]"})
    with pytest.raises(TxclLoadError) as info:
        load_ops(ws)
    assert "fixture must be a JSON object" in str(info.value) and "mock-response.json" in str(info.value)


def test_scan_lists_skipped_files(workspace):
    ws = workspace({
        "OPS/s/0100/a.txcl": "EMIT .a = 1",
        "OPS/s/0100/a.txcl.bak": "old",
        "OPS/s/0100/FILES/x.css": "body{}",
        "OPS/s/FILES/site.css": "body{}",
        "OPS/s/mock-request.json": "{}",
    })
    os.symlink(ws / "OPS/s/0100/a.txcl", ws / "OPS/s/0100/link.txcl")
    scan = scan_ops(ws / "OPS")
    reasons = {s.rel: s.reason for s in scan.skipped}
    assert reasons == {"s/0100/a.txcl.bak": "stray", "s/0100/FILES/x.css": "stray",
                       "s/0100/link.txcl": "symlink", "s/mock-request.json": "fixture-outside-scope"}
    assert scan.assets == {"s": ws.resolve() / "OPS/s/FILES"}
    assert not scan.diagnostics


def test_workspace_discovery(workspace):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1"})
    (ws / "deep" / "er").mkdir(parents=True)
    assert find_workspace(ws / "OPS") == (ws.resolve(), ws.resolve() / "OPS")
    assert find_workspace(ws / "OPS/s/0100") == (ws.resolve(), ws.resolve() / "OPS")
    assert find_workspace(ws / "deep/er")[0] == ws.resolve()
    with pytest.raises(WorkspaceNotFound):
        find_workspace("/")


def test_snapshot_id_is_content_addressed(workspace):
    files = {"OPS/s/0100/a.txcl": "EMIT .a = 1", "OPS/s/0100/mock-request.json": '{"x": 1}'}
    t1 = load_ops(workspace(files))
    t2 = load_ops(workspace(files))
    assert t1.snapshot_id == t2.snapshot_id and len(t1.snapshot_id) == 64
    t3 = load_ops(workspace({**files, "OPS/s/0100/mock-request.json": '{"x": 2}'}))
    assert t3.snapshot_id != t1.snapshot_id


def test_tree_from_snapshot_round_trip(workspace):
    import json

    from txcl.ops.tree import tree_from_snapshot

    tree = load_ops(workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1", "OPS/s/0200/b.txcl": 'EXEC "txco://noop"'}))
    body = json.loads(json.dumps(tree.snapshot()))
    again = tree_from_snapshot(body)
    assert again.snapshot_id == tree.snapshot_id
    assert [op.key for op in again.all_rules()] == [op.key for op in tree.all_rules()]
