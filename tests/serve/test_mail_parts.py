"""The pure parts of mail in: parsing a message into @lmtp.msg, routing recipients, and the
per-recipient verdicts."""

from __future__ import annotations

import base64

import pytest

from txcl.mail.message import message_key, parse_message
from txcl.mail.routing import MailRouter
from txcl.mail.verdict import reply, verdicts

MIXED = (b"From: Alice <alice@example.com>\r\nTo: support@mail.test, Bob <bob@mail.test>\r\n"
         b"Cc: carol@mail.test\r\nSubject: =?utf-8?q?wifi_=E2=9C=93?=\r\nMessage-ID: <abc@example.com>\r\n"
         b"Date: Mon, 25 May 2026 16:00:00 +0200\r\nReceived: one\r\nReceived: two\r\nMIME-Version: 1.0\r\n"
         b"Content-Type: multipart/mixed; boundary=b1\r\n\r\n"
         b"--b1\r\nContent-Type: multipart/related; boundary=b2\r\n\r\n"
         b"--b2\r\nContent-Type: text/html\r\n\r\n<p>Hi <img src=\"cid:logo\"></p>\r\n"
         b"--b2\r\nContent-Type: image/png\r\nContent-ID: <logo>\r\nContent-Disposition: inline\r\n"
         b"Content-Transfer-Encoding: base64\r\n\r\niVBORw0K\r\n--b2--\r\n"
         b"--b1\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"a.pdf\"\r\n"
         b"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0x\r\n--b1--\r\n")


def test_a_message_becomes_the_msg_facts():
    facts = parse_message(MIXED)
    assert facts["id"] == "<abc@example.com>" and facts["date"] == "2026-05-25T14:00:00Z"
    assert facts["subject"] == "wifi \u2713"
    assert facts["from"] == [{"name": "Alice", "addr": "alice@example.com"}]
    assert [a["addr"] for a in facts["to"]] == ["support@mail.test", "bob@mail.test"]
    assert facts["cc"] == [{"name": "", "addr": "carol@mail.test"}]
    assert facts["html"] == '<p>Hi <img src="cid:logo"></p>' and facts["text"] is None
    assert facts["headers"]["received"] == ["one", "two"] and list(facts["headers"]) == sorted(facts["headers"])
    assert [(a["name"], a["type"], a["inline"]) for a in facts["attachments"]] == [
        ("a.pdf", "application/pdf", False), ("", "image/png", True)]  # attached first, then shown inline
    assert facts["attachments"][0]["size"] == 6
    assert base64.b64decode(facts["raw"][4:]) == MIXED


def test_a_message_that_cannot_be_parsed_keeps_its_raw_bytes():
    facts = parse_message(b"\xff\xfe not a message")
    assert facts["raw"] == "b64:" + base64.b64encode(b"\xff\xfe not a message").decode()
    assert facts["id"] is None and facts["from"] == []


def test_the_message_key_is_the_id_or_the_digest_of_the_bytes():
    assert message_key(b"x", "<a@b>") == "id:<a@b>"
    assert message_key(b"x", None) == message_key(b"x", None) != message_key(b"y", None)


@pytest.mark.parametrize("address, stack, via", [
    ("support@mail.test", "support", "default-host"),
    ("Support+Urgent@MAIL.test", "support", "default-host"),
    ("anyone@mail.test", "_mail", "catch-all"),
    ("vip@corp.test", "exec", "recipient"),
    ("someone@partner.test", "partners", "domain"),
    ("support@elsewhere.test", None, None),
    ("not-an-address", None, None),
])
def test_routing(address, stack, via):
    router = MailRouter.build([("vip@corp.test", "exec"), ("@partner.test", "partners")], ["mail.test"],
                              lambda s: s in ("support", "_mail", "exec", "partners"))
    route = router.route(address)
    assert (route.stack, route.via) == (stack, via) if stack else route is None


def test_without_a_mail_stack_an_unknown_local_part_is_refused():
    router = MailRouter.build([], ["mail.test"], lambda s: s == "support")
    assert router.route("anyone@mail.test") is None and router.route("support@mail.test").stack == "support"


def test_verdicts():
    assert verdicts(None, 2) == [(550, "no rule accepted this recipient")] * 2
    assert verdicts({"code": 250, "msg": "ok"}, 2) == [(250, "ok")] * 2
    assert verdicts({"recipients": [{"code": 250}]}, 3) == [(250, "ok"), (550, "no rule accepted this recipient"),
                                                            (550, "no rule accepted this recipient")]
    assert verdicts({"recipients": [{"code": 251}, {"code": 452, "msg": "full"}, {"code": 250}]}, 2) == [
        (251, "ok"), (452, "full")]  # extras ignored
    assert verdicts({"code": "250"}, 1) == [(250, "ok")]
    assert verdicts({"code": 999}, 1)[0][0] == 451 and verdicts({"code": "yes"}, 1)[0][0] == 451
    assert verdicts({"recipients": [{"code": 350}]}, 1)[0][0] == 451


def test_reply_lines_get_an_enhanced_code_and_clean_text():
    assert reply(250, "queued") == "250 2.0.0 queued"
    assert reply(550, "5.7.1 spam") == "550 5.7.1 spam"
    assert reply(452, "full") == "452 4.2.2 full"
    assert reply(250, "line\r\nbreak \u00e9") == "250 2.0.0 line  break ?"
    assert len(reply(250, "x" * 1000)) < 220
