"""The egress policy on a served workspace: every workspace of these tests refuses loopback
and private addresses and reaches its test worker through an explicit allow of 127.0.0.1
(cont_support.STRICT_EGRESS), so the whole continuation suite runs under a strict policy.
Here: an async op whose worker address is refused fails at once with the code, whether the
address is the metadata service (refused by default) or a loopback address the allow list
does not name."""

from __future__ import annotations

import json

from cont_support import http_get


def _error_of(srv) -> dict:
    status, headers, body = http_get(srv.url + "/go")
    assert status == 502 and "location" not in headers  # nothing was sent, so nothing waits
    return json.loads(body)["error"]


def test_an_async_op_to_the_metadata_address_fails_with_the_code(serve, workspace):
    ws = workspace({"OPS/shop/100/job.txcl": 'WITH mode = "async", timeout = "1h", into = "r"\n'
                                             'EXEC "http://169.254.169.254/latest/meta-data/"'})
    error = _error_of(serve(ws))
    assert error["code"] == "txcl_op_failed"
    assert error["message"].startswith("op job failed: txcl_egress_denied: rule shop/job: egress to 169.254.169.254 refused")


def test_a_loopback_worker_the_allow_list_does_not_name_is_refused(serve, workspace, worker):
    url = worker.url().replace("127.0.0.1", "127.0.0.2")
    ws = workspace({"OPS/shop/100/job.txcl": f'WITH mode = "async", timeout = "1h", into = "r"\nEXEC "{url}"'})
    error = _error_of(serve(ws))
    assert "txcl_egress_denied" in error["message"] and "loopback addresses are refused" in error["message"]
    assert not worker.jobs
