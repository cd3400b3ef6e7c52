"""`txcl test` running cases: expectations, mocks (through the production HTTP path and the
stand-in hook), the network refused, the virtual clock, reports and exit codes."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

SHOP = {
    "OPS/shop/100/intake.txcl": 'SET .order.customer = "guest"\nSELECT .order.customer AS .customer',
    "OPS/shop/200/price.txcl": 'SELECT .order AS .order\nWITH into = "price", timeout = "2s"\n'
                               'EXEC "https://pricing.example.net/quote"',
    "OPS/shop/300/vip.txcl": 'WHEN .customer == "vip"\nPRIORITY 5\nEMIT .to_pay = &mul(.price.amount, 0.8)',
    "OPS/shop/300/standard.txcl": "WHEN .price.amount > 0\nPRIORITY 1\nEMIT .to_pay = .price.amount",
    "OPS/shop/400/stamp.txcl": 'EMIT .stamped_at = &now("rfc3339")',
    "OPS/shop/500/big.txcl": "WHEN .to_pay >= 1000\nEMIT @halt = true, .big = true",
    "OPS/shop/600/ship.txcl": 'EXEC "py://shipping:rate"',
    "shipping.py": "def rate(op_input, ctx):\n    return {'shipping': 'real'}\n",
}

PRICE = '"https://pricing.example.net/quote": {output: {amount: 100}}'


def _file(cases: str, stack: str = "shop") -> str:
    return f"stack: {stack}\ncases:\n{cases}"


def test_passing_cases_exit_0_with_the_pytest_like_summary(ws, run_tests) -> None:
    root = ws({**SHOP, "tests/shop.test.yaml": _file(f"""
  - name: a vip pays less
    input: {{order: {{customer: vip}}}}
    clock: "2026-03-04T05:06:07Z"
    mocks:
      {PRICE}
      "py://shipping:rate": {{output: {{shipping: mocked}}}}
    expect:
      envelope: {{to_pay: 80.0, price: {{amount: 100}}, stamped_at: "2026-03-04T05:06:07Z", shipping: mocked}}
      ran: [shop/300/vip, shop/600/ship]
      not_ran: [shop/300/standard]
  - name: a guest pays the full price and the real py op runs
    input: {{order: {{}}}}
    mocks:
      {PRICE}
    expect:
      envelope: {{customer: guest, to_pay: 100, shipping: real}}
      absent: [.big]
""")})
    code, out, err = run_tests(root)
    assert code == 0, out + err
    assert out.splitlines()[0] == "tests/shop.test.yaml .."
    assert out.splitlines()[-1].startswith("2 passed, 0 failed in ")


def test_a_failing_case_shows_the_differences_and_the_steps_and_exits_1(ws, run_tests) -> None:
    root = ws({**SHOP, "shop.test.yaml": _file(f"""
  - name: wrong total
    input: {{order: {{customer: vip}}}}
    mocks:
      {PRICE}
    expect:
      status: halted
      envelope: {{to_pay: 90, price: {{amount: 100, currency: EUR}}}}
      absent: [.customer]
      ran: [shop/300/standard]
      not_ran: [shop/300/vip]
""")})
    code, out, _ = run_tests(root)
    assert code == 1
    assert "FAILED shop.test.yaml::wrong total" in out
    for line in ("status: expected halted, got completed", ".to_pay: expected 90, got 80.0",
                 '.price.currency: expected "EUR", got nothing', '.customer: expected absent, got "vip"',
                 "ran: shop/300/standard did not run", "not_ran: shop/300/vip ran",
                 "shop/200/price https ok"):
        assert line in out, line
    assert out.splitlines()[-1].startswith("0 passed, 1 failed")


def test_an_http_target_that_is_not_mocked_fails_its_case_naming_it(ws, run_tests) -> None:
    root = ws({**SHOP, "shop.test.yaml": _file("""
  - name: forgot the mock
    input: {order: {}}
""")})
    code, out, _ = run_tests(root)
    assert code == 1
    assert "https://pricing.example.net/quote was called but is not mocked" in out


def test_a_mocked_error_fails_the_op_as_the_real_one_would(ws, run_tests) -> None:
    root = ws({**SHOP, "shop.test.yaml": _file("""
  - name: pricing down
    input: {order: {}}
    mocks:
      "https://pricing.example.net/quote": {error: "pricing down"}
      "py://shipping:rate": {error: {message: "no carrier"}}
    expect:
      envelope: {_ts: "2026-01-01T00:00:00.000Z", customer: guest}
      absent: [.price, .to_pay, .shipping]
""")})
    code, out, _ = run_tests(root, "--output-format", "json")
    assert code == 0, out
    case = json.loads(out[: out.rindex("}") + 1])["cases"][0]
    assert case["outcome"] == "passed" and case["ran"] == ["shop/100/intake", "shop/200/price", "shop/400/stamp",
                                                          "shop/600/ship"]
    assert [(c["target"], c["kind"]) for c in case["calls"]] == [
        ("https://pricing.example.net/quote", "mock"), ("py://shipping:rate", "mock")]
    code, out, _ = run_tests(root, "--output-format", "full")  # the errors are in the steps of a failure
    root.joinpath("shop.test.yaml").write_text(root.joinpath("shop.test.yaml").read_text().replace(
        "customer: guest}", "customer: nobody}"))
    code, out, _ = run_tests(root)
    assert code == 1
    assert "shop/200/price https error: http https://pricing.example.net/quote: status 500" in out
    assert "shop/600/ship py error: no carrier" in out


def test_k_selects_x_stops_and_o_writes_junit(ws, run_tests) -> None:
    root = ws({**SHOP, "shop.test.yaml": _file(f"""
  - name: one fails
    input: {{order: {{}}}}
    mocks: {{{PRICE}}}
    expect: {{envelope: {{to_pay: 1}}}}
  - name: two fails
    input: {{order: {{}}}}
    mocks: {{{PRICE}}}
    expect: {{envelope: {{to_pay: 2}}}}
  - name: three passes
    input: {{order: {{}}}}
    mocks: {{{PRICE}}}
    expect: {{envelope: {{to_pay: 100}}}}
""")})
    code, out, _ = run_tests(root, "-k", "THREE")
    assert code == 0 and out.splitlines()[-1].startswith("1 passed, 0 failed")
    code, out, _ = run_tests(root, "-x")
    assert code == 1 and out.splitlines()[-1].startswith("0 passed, 1 failed")
    code, out, _ = run_tests(root, "--output-format", "junit", "-o", "report.xml")
    assert code == 1 and out.strip().startswith("1 passed, 2 failed")
    xml = ET.parse(root / "report.xml").getroot()
    suite = xml.find("testsuite")
    assert xml.tag == "testsuites" and xml.get("tests") == "3" and xml.get("failures") == "2"
    assert suite.get("name") == "shop.test.yaml"
    failures = {c.get("name"): c.find("failure") for c in suite.findall("testcase")}
    assert failures["three passes"] is None
    assert failures["one fails"].get("message") == ".to_pay: expected 1, got 100"


def test_concise_output_is_one_line_per_case(ws, run_tests) -> None:
    root = ws({**SHOP, "shop.test.yaml": _file(f"""
  - name: ok
    input: {{order: {{}}}}
    mocks: {{{PRICE}}}
""")})
    code, out, _ = run_tests(root, "--output-format", "concise")
    assert code == 0
    assert out.splitlines() == ["shop.test.yaml::ok PASSED", out.splitlines()[-1]]


def test_no_test_file_is_exit_2(ws, run_tests) -> None:
    root = ws(SHOP)
    code, _, err = run_tests(root)
    assert code == 2 and "no test files" in err


def test_an_ops_tree_that_does_not_load_is_exit_2(ws, run_tests) -> None:
    root = ws({"OPS/shop/100/bad.txcl": "WHEN .a ==", "t.test.yaml": "cases:\n  - name: x\n"})
    code, _, err = run_tests(root)
    assert code == 2 and "TX026" in err and "failed to load" in err


def test_test_files_in_ops_dot_and_underscore_folders_are_skipped(ws, run_tests) -> None:
    root = ws({**SHOP, "_drafts/a.test.yaml": "cases: [", ".hidden/b.test.yaml": "cases: [",
               "OPS/shop/100/c.test.yaml": "cases: [",
               "good.test.json": json.dumps({"stack": "shop", "cases": [
                   {"name": "json works", "input": {"order": {}},
                    "mocks": {"https://pricing.example.net/quote": {"output": {"amount": 3}}},
                    "expect": {"envelope": {"to_pay": 3}}}]})})
    code, out, err = run_tests(root)
    assert code == 0, out + err
    assert out.splitlines()[0] == "good.test.json ."


def test_an_ops_mock_request_and_response_pair_is_a_case(ws, run_tests) -> None:
    root = ws({
        "OPS/calc/100/double/double.txcl": 'SELECT .n\nEXEC "py://calc:double"',
        "OPS/calc/100/double/mock-request.json": '{"n": 21, "ignored": true}',
        "OPS/calc/100/double/mock-response.json": '{"doubled": 42}',
        "OPS/calc/100/copy/copy.txcl": 'WITH from = "n", to = "m"\nEXEC "txco://copy"',
        "OPS/calc/100/copy/mock-request.json": '{"n": 1}',
        "OPS/calc/100/copy/mock-response.json": '{"m": 2}',
        "calc.py": "def double(op_input, ctx):\n    return {'doubled': op_input['n'] * 2}\n",
    })
    code, out, _ = run_tests(root)
    assert code == 1, out
    assert "FAILED OPS/calc/100/copy/mock-response.json::calc/100/copy_copy (mock-request.json -> mock-response.json)" in out
    assert ".m: expected 2, got 1" in out
    assert out.splitlines()[-1].startswith("1 passed, 1 failed")
    code, out, err = run_tests(root, "--no-ops-fixtures")
    assert code == 2 and "no test files" in err


def test_a_case_can_be_a_cron_tick(ws, run_tests) -> None:
    """`tick:` makes the case's envelope the tick a `_cron` stack receives at that time (and
    the stack `_cron` unless the case names one)."""
    root = ws({"OPS/_cron/100/morning.txcl": "WHEN @cron.hour == 9 && @cron.minute == 0\nEMIT .morning = true",
               "OPS/_cron/100/every.txcl": "WHEN @cron.mod15 == 0\nEMIT .quarter = @cron.bucket",
               "cron.test.yaml": """cases:
  - name: nine o'clock
    tick: "2026-12-07T09:00:00Z"
    expect:
      envelope: {morning: true, quarter: "2026-12-07T09:00:00Z"}
  - name: ten past nine
    tick: "2026-12-07T09:10:00Z"
    expect:
      absent: [.morning, .quarter]
  - name: a wrong expectation fails
    tick: "2026-12-07T10:15:00Z"
    expect:
      envelope: {morning: true}
"""})
    code, out, err = run_tests(root)
    assert code == 1 and "2 passed, 1 failed" in out.splitlines()[-1], out + err
    assert "a wrong expectation fails" in out and ".morning: expected true, got nothing" in out
    root = ws({"OPS/_cron/100/a.txcl": "EMIT .a = 1", "bad.test.yaml": "cases:\n  - name: x\n    tick: soon\n"})
    code, out, err = run_tests(root)
    assert code == 2 and "TX405" in out + err and "tick is not a time" in out + err


def test_a_case_can_be_a_delivered_mail_message(ws, run_tests) -> None:
    """`mail: file.eml` makes the case's envelope the one a stack receives for that message over
    LMTP (`rcpt:` the recipients, by default its To and Cc), so the verdict can be expected."""
    root = ws({"OPS/support/100/accept.txcl": ('WHEN @lmtp.msg.subject =~ /wifi/\n'
                                               'EMIT @lmtp.res.code = 250, .who = @lmtp.msg.from.0.addr, '
                                               '.rcpt = @lmtp.rcpt'),
               "wifi.eml": "From: Alice <alice@example.com>\nTo: support@mail.test\nCc: ops@mail.test\n"
                           "Subject: wifi keeps dropping\n\nHelp\n",
               "mail.test.yaml": """stack: support
cases:
  - name: wifi is accepted
    mail: wifi.eml
    expect:
      envelope: {who: alice@example.com, rcpt: [support@mail.test, ops@mail.test], _txc: {lmtp: {res: {code: 250}}}}
  - name: one recipient
    mail: wifi.eml
    rcpt: [support+urgent@mail.test]
    expect:
      envelope: {rcpt: [support+urgent@mail.test]}
  - name: a wrong expectation fails
    mail: wifi.eml
    expect:
      envelope: {_txc: {lmtp: {res: {code: 550}}}}
"""})
    code, out, err = run_tests(root)
    assert code == 1 and "2 passed, 1 failed" in out.splitlines()[-1], out + err
    assert "_txc.lmtp.res.code: expected 550, got 250" in out, out
    root = ws({"OPS/support/100/a.txcl": "EMIT .a = 1", "bad.test.yaml": "cases:\n  - name: x\n    mail: gone.eml\n"})
    code, out, err = run_tests(root)
    assert code == 2 and "TX406" in out + err and "no file gone.eml" in out + err


def test_a_case_can_be_a_scheduled_event_and_schedule_one(ws, run_tests) -> None:
    """`scheduled:` makes the envelope what a `_scheduled` stack receives when the event fires at
    the case's clock; a rule that schedules runs against the case's virtual clock."""
    root = ws({"OPS/_scheduled/100/drip.txcl": ('WHEN @scheduled.payload.kind == "drip"\n'
                                                'EMIT .send = @scheduled.payload.step, .late = @scheduled.fired_at,\n'
                                                '  .key = @scheduled.idempotency_key'),
               "OPS/shop/100/later.txcl": ('WITH idempotency_key = .id, schedule_at = .at, payload = .job\n'
                                           'EXEC "txco://schedule"'),
               "scheduled.test.yaml": """cases:
  - name: a drip step fires
    clock: "2026-06-30T08:00:05Z"
    scheduled: {payload: {kind: drip, step: 2}, idempotency_key: "drip:1", schedule_at: "2026-06-30T08:00:00Z"}
    expect:
      envelope: {send: 2, late: "2026-06-30T08:00:05Z", key: "drip:1"}
  - name: another kind is left alone
    scheduled: {payload: {kind: other}}
    expect:
      absent: [.send]
  - name: a rule schedules an event
    stack: shop
    input: {id: "r:1", at: "2026-07-01T00:00:00+02:00", job: {kind: drip}}
    expect:
      envelope: {status: scheduled, schedule_at: "2026-06-30T22:00:00Z", idempotency_key: "r:1"}
"""})
    code, out, err = run_tests(root)
    assert code == 0 and "3 passed" in out.splitlines()[-1], out + err
    root = ws({"OPS/_scheduled/100/a.txcl": "EMIT .a = 1",
               "bad.test.yaml": "cases:\n  - name: x\n    scheduled: {payload: {}, schedule_at: soon}\n"})
    code, out, err = run_tests(root)
    assert code == 2 and "TX406" in out + err and "is not an RFC 3339 time" in out + err
