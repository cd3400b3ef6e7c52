"""End to end with Debian's Postfix: mail submitted with `sendmail` is relayed by a real Postfix
over LMTP on a Unix socket to `txcl serve --lmtp`, as the Mail-in guide sets it up. Postfix's
own log shows each recipient's verdict: a routed recipient is delivered, an unrouted one
bounces, and a suspending flow is accepted at once and finishes as a durable run."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from cont_support import wait_until

pytestmark = pytest.mark.parametrize("backend", ["sqlite"])


@pytest.fixture
def postfix():
    from txcl.testing.postfix import PostfixUnavailable, TempPostfix

    sock_dir = Path(tempfile.mkdtemp(prefix="txcl-lmtp-", dir="/tmp"))
    sock_dir.chmod(0o755)  # Postfix's lmtp client runs as the postfix user
    try:
        instance = TempPostfix.start("mail.test", sock_dir / "lmtp.sock")
    except PostfixUnavailable as exc:
        pytest.fail(f"Postfix is needed for this test: {exc}")
    yield instance, sock_dir / "lmtp.sock"
    instance.stop()
    shutil.rmtree(sock_dir, ignore_errors=True)


def test_postfix_delivers_to_txcl_over_lmtp(postfix, serve, workspace, reports, worker, store_at):
    instance, sock = postfix
    ws = workspace({
        "OPS/support/100/accept.txcl": ('WHEN @lmtp.msg.subject =~ /wifi/\n'
                                        'EMIT @lmtp.res.code = 250, @lmtp.res.msg = "queued for support"'),
        "OPS/support/100/report.txcl": ('SET .subject = @lmtp.msg.subject, .rcpt = @lmtp.rcpt\n'
                                        f'EXEC "{reports.url}/mail"'),
        "OPS/slow/100/work.txcl": f'WITH mode = "async", timeout = "1m"\nEXEC "{worker.url()}"',
    })
    serve(ws, "--lmtp", f"unix:{sock}", "--lmtp-socket-mode", "0666", "--lmtp-default-hosts", "mail.test")
    instance.sendmail(b"From: alice@example.com\nTo: support@mail.test\nSubject: wifi down\n"
                      b"Message-ID: <pf1@example.com>\n\nhello\n", "alice@example.com",
                      ["support@mail.test", "nobody@mail.test"])
    sent = instance.wait_for("to=<support@mail.test>")
    assert "status=sent (250 2.0.0 queued for support)" in sent and f"[{sock}]" in sent
    refused = instance.wait_for("to=<nobody@mail.test>")
    assert "status=bounced" in refused and "550 5.1.1" in refused  # refused at RCPT, before DATA
    [report] = wait_until(lambda: [json.loads(b) for _, b in reports.received], timeout=10)
    assert (report["subject"], report["rcpt"]) == ("wifi down", ["support@mail.test"])

    # a flow that suspends: Postfix hears 250 at once; the run finishes when the worker answers
    instance.sendmail(b"From: alice@example.com\nTo: slow@mail.test\nSubject: enrich me\n"
                      b"Message-ID: <pf2@example.com>\n\nhello\n", "alice@example.com", ["slow@mail.test"])
    line = instance.wait_for("to=<slow@mail.test>")
    assert "status=sent (250 2.0.0 accepted; continues as run run_" in line
    run_id = line.split("continues as run ")[1].split(")")[0]
    job = worker.wait_job()
    assert worker.callback(job, {"enriched": True})[0] == 200
    store = store_at(ws / ".txcl-data" / "txcl.db")
    wait_until(lambda: (r := store.get_run(run_id)) is not None and r.status == "completed", timeout=10)
