"""Mail in over LMTP on a real `txcl serve` (both store backends), with Python's LMTP client:
routing and refusals at RCPT, envelopes shared by the recipients of one stack, verdicts per
recipient and default-deny, a flow that suspends answered 250 and finished as a durable run,
a repeated delivery recognised, size and recipient limits, a failing walk answered 451."""

from __future__ import annotations

import json
import re
import shutil
import socket
import tempfile
from pathlib import Path

import pytest
from cont_support import wait_until
from lmtpclient import deliver, message
from testtools import EchoServer


@pytest.fixture
def sock_dir():
    path = Path(tempfile.mkdtemp(prefix="lmtp", dir="/tmp"))  # short: a socket path has ~100 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _serve_lmtp(serve, ws, *flags: str) -> int:
    """`txcl serve --lmtp` on a port the system picks as it binds (no other process can take
    it in between); the port, as the server logs it."""
    proc = serve(ws, "--lmtp", "127.0.0.1:0", *flags)
    pattern = re.compile(r"accepting mail over LMTP on 127\.0\.0\.1:(\d+)")
    found = wait_until(lambda: next((m for line in list(proc.lines) if (m := pattern.search(line))), None))
    return int(found.group(1))


def mail_tree(url: str, worker_url: str = "http://127.0.0.1:9/unused") -> dict[str, str]:
    return {
        "OPS/support/100/accept.txcl": ('WHEN @lmtp.msg.subject =~ /wifi/\n'
                                        'EMIT @lmtp.res.code = 250, @lmtp.res.msg = "queued for support"'),
        "OPS/support/100/report.txcl": ("SET .rcpt = @lmtp.rcpt, .all = @lmtp.transaction_rcpt,\n"
                                        "    .subject = @lmtp.msg.subject, .sender = @lmtp.mail.from,\n"
                                        "    .text = @lmtp.msg.text, .id = @lmtp.msg.id, .helo = @lmtp.client.helo,\n"
                                        "    .from = @lmtp.msg.from, .src = @src\n"
                                        f'EXEC "{url}/mail"'),
        # the catch-all accepts its first recipient only: the others are refused (never inherited)
        "OPS/_mail/100/first.txcl": 'EMIT @lmtp.res.recipients = &array(&object("code", 250, "msg", "first only"))',
        # a verdict written before the flow suspends is the answer
        "OPS/held/050/verdict.txcl": 'EMIT @lmtp.res.code = 250, @lmtp.res.msg = "taken"',
        "OPS/held/100/work.txcl": f'WITH mode = "async", timeout = "1m"\nEXEC "{worker_url}"',
        "OPS/slow/100/work.txcl": f'WITH mode = "async", timeout = "1m"\nEXEC "{worker_url}"',
        "OPS/slow/200/done.txcl": 'EMIT .finished = .enriched',
        "OPS/broken/100/jump.txcl": 'EMIT @goto = "nowhere/100"',
        "OPS/silent/100/nothing.txcl": "EMIT .seen = true",
    }


FLAGS = ["--lmtp-default-hosts", "mail.test", "--lmtp-recipients", "vip@corp.test=support,@partner.test=silent"]


def reported(reports: EchoServer) -> list[dict]:
    return [json.loads(raw) for _, raw in reports.received]


def test_routing_verdicts_and_the_shared_envelope(serve, workspace, reports, sock_dir):
    ws = workspace(mail_tree(reports.url))
    where = str(sock_dir / "lmtp.sock")
    srv = serve(ws, "--lmtp", f"unix:{where}", *FLAGS)
    rcpts = ["support@mail.test", "support+urgent@mail.test", "vip@corp.test", "anyone@mail.test",
             "other@mail.test", "x@partner.test", "nobody@elsewhere.test", "broken@mail.test"]
    at_rcpt, after = deliver(where, "alice@example.com", rcpts, message())
    assert at_rcpt["nobody@elsewhere.test"][0] == 550 and "5.1.1" in at_rcpt["nobody@elsewhere.test"][1]
    assert all(at_rcpt[r] == (250, "2.1.5 ok") for r in rcpts if r != "nobody@elsewhere.test")
    accepted = [r for r in rcpts if r != "nobody@elsewhere.test"]
    by_rcpt = dict(zip(accepted, after))
    for r in ("support@mail.test", "support+urgent@mail.test", "vip@corp.test"):
        assert by_rcpt[r] == (250, "2.0.0 queued for support")
    assert by_rcpt["anyone@mail.test"] == (250, "2.0.0 first only")  # _mail's first recipient
    assert by_rcpt["other@mail.test"][0] == 550 and "5.1.1" in by_rcpt["other@mail.test"][1]  # not inherited
    assert by_rcpt["x@partner.test"] == (550, "5.1.1 no rule accepted this recipient")  # default-deny
    assert by_rcpt["broken@mail.test"][0] == 451 and "4.3.0" in by_rcpt["broken@mail.test"][1]
    [sent] = wait_until(lambda: reported(reports), timeout=5)  # one envelope for support's three
    assert sent["rcpt"] == ["support@mail.test", "support+urgent@mail.test", "vip@corp.test"]
    assert sent["all"] == accepted and sent["src"] == "lmtp" and sent["helo"] == "test.client"
    assert sent["subject"] == "wifi keeps dropping" and sent["sender"] == "alice@example.com"
    assert sent["text"] == "Hi support,\n\nMy wifi drops.\n" and sent["id"] == "<m1@example.com>"
    assert sent["from"] == [{"name": "Alice", "addr": "alice@example.com"}]
    srv.stop()
    assert not Path(where).exists()  # the socket is removed at shutdown


def test_a_repeated_delivery_gets_the_same_verdict_without_a_second_walk(serve, workspace, reports, store_at):
    ws = workspace(mail_tree(reports.url))
    port = _serve_lmtp(serve, ws, *FLAGS)
    first = deliver(f"127.0.0.1:{port}", "a@example.com", ["support@mail.test", "broken@mail.test"], message())
    assert [c for c, _ in first[1]] == [250, 451]
    wait_until(lambda: reported(reports), timeout=5)
    again = deliver(f"127.0.0.1:{port}", "a@example.com", ["support@mail.test", "broken@mail.test"], message())
    assert again[1] == first[1]  # 250 recorded; the 451 is walked again (and fails again)
    assert len(reported(reports)) == 1  # support's envelope was walked once
    other = deliver(f"127.0.0.1:{port}", "a@example.com", ["support@mail.test"], message(message_id="<m2@x>"))
    assert other[1] == [(250, "2.0.0 queued for support")]
    wait_until(lambda: len(reported(reports)) == 2, timeout=5)
    # without a Message-ID the same bytes are the same message
    bare = message(message_id=None)
    deliver(f"127.0.0.1:{port}", "a@example.com", ["support@mail.test"], bare)
    deliver(f"127.0.0.1:{port}", "a@example.com", ["support@mail.test"], bare)
    wait_until(lambda: len(reported(reports)) == 3, timeout=5)
    store = store_at(ws / ".txcl-data" / "txcl.db")
    traced = wait_until(lambda: (t := store.recent_traces(stack="support", limit=10)) and len(t) >= 3 and t,
                        timeout=10)
    assert len(traced) == 3 and {t["src"] for t in traced} == {"lmtp"}


def test_a_flow_that_suspends_answers_250_and_finishes_as_a_durable_run(serve, workspace, reports, worker,
                                                                       store_at):
    ws = workspace(mail_tree(reports.url, worker.url()))
    port = _serve_lmtp(serve, ws, *FLAGS)
    _, after = deliver(f"127.0.0.1:{port}", "a@example.com", ["slow@mail.test"], message())
    [(code, text)] = after
    assert code == 250 and text.startswith("2.0.0 accepted; continues as run run_"), text
    run_id = text.split()[-1]
    job = worker.wait_job()
    assert worker.callback(job, {"enriched": "yes"})[0] == 200
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = wait_until(lambda: (r := store.get_run(run_id)) is not None and r.status == "completed" and r, timeout=10)
    assert run.result["finished"] == "yes" and run.src == "lmtp"
    # a verdict written before the suspension is the answer
    _, after = deliver(f"127.0.0.1:{port}", "a@example.com", ["held@mail.test"], message(message_id="<h@x>"))
    assert after == [(250, "2.0.0 taken")]
    worker.wait_job()


def test_limits_size_and_recipients(serve, workspace, reports):
    ws = workspace(mail_tree(reports.url))
    port = _serve_lmtp(serve, ws, "--lmtp-max-msg-bytes", "2KiB", "--lmtp-max-recipients", "2", *FLAGS)
    rcpts = ["support@mail.test", "anyone@mail.test", "support+3@mail.test"]
    at_rcpt, after = deliver(f"127.0.0.1:{port}", "a@example.com", rcpts, message(body=("x" * 70 + "\n") * 80))
    assert at_rcpt["support+3@mail.test"][0] == 452 and "4.5.3" in at_rcpt["support+3@mail.test"][1]
    assert after == [(552, "5.3.4 message too large")] * 2  # one reply per accepted recipient
    assert reported(reports) == []
    _, after = deliver(f"127.0.0.1:{port}", "a@example.com", rcpts[:1], message())
    assert after == [(250, "2.0.0 queued for support")]  # the session after is fine


def test_a_bad_lmtp_setting_stops_serve_with_a_message(tmp_path):
    import subprocess

    from cont_support import TXCL

    (tmp_path / "OPS" / "support" / "100").mkdir(parents=True)
    (tmp_path / "OPS" / "support" / "100" / "a.txcl").write_text("EMIT .a = 1\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = taken.getsockname()[1]
        for flags, text in ((["--lmtp", "nowhere"], "must be unix:/path, host:port or :port"),
                            (["--lmtp", f"127.0.0.1:{busy}"], f"cannot accept mail on 127.0.0.1:{busy}"),
                            (["--lmtp", ":1", "--lmtp-recipients", "nobody"], "needs address=stack"),
                            (["--lmtp", ":1", "--lmtp-max-recipients", "0"], "must be at least 1")):
            done = subprocess.run([TXCL, "serve", str(tmp_path), "--port", "0", *flags], capture_output=True,
                                  text=True, timeout=60)
            assert done.returncode == 2 and text in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_client_too_slow_with_its_data_is_cut_off_with_421(serve, workspace, reports):
    import time

    ws = workspace(mail_tree(reports.url))
    port = _serve_lmtp(serve, ws, "--lmtp-data-timeout", "1s", *FLAGS)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        reader = conn.makefile("rb")

        def reply() -> bytes:
            lines = [reader.readline()]
            while lines[-1][3:4] == b"-":
                lines.append(reader.readline())
            return lines[-1]

        assert reply().startswith(b"220")
        for command, want in ((b"LHLO t\r\n", b"250"), (b"MAIL FROM:<a@example.com>\r\n", b"250"),
                              (b"RCPT TO:<support@mail.test>\r\n", b"250"), (b"DATA\r\n", b"354")):
            conn.sendall(command)
            assert reply().startswith(want)
        conn.sendall(b"Subject: wifi\r\n\r\nhalf a messa")
        started = time.monotonic()
        assert reply().startswith(b"421 4.4.2")
        assert time.monotonic() - started < 5
        assert reader.readline() == b""  # and the session is closed
    assert reported(reports) == []
