"""The worker SDK validates a job against the op's own schema file from the OPS tree: an input
that does not match fails the job with what did not match (the function never runs), an output
that does not match fails it too, a matching one is sent; a file without $defs is refused."""

from __future__ import annotations

import asyncio
import json

import pytest

from txcl.worker import Job, Worker

SCHEMA = {"$defs": {"money": {"type": "number", "minimum": 0},
                    "input": {"type": "object", "properties": {"amount": {"$ref": "#/$defs/money"}},
                              "required": ["amount"]},
                    "output": {"type": "object", "required": ["receipt"]}}}


def _run(worker: Worker, name: str, payload) -> list[dict]:
    sent: list[dict] = []

    async def post(body: dict):
        sent.append(body)
        return {}

    job = Job(input=payload, opc="opc_x", token="t", callback_url=None, idempotency_key=f"k-{payload}")
    job.poster = post
    asyncio.run(worker.run_job(worker.ops[name], job))
    return sent


def test_the_op_schema_file_checks_input_and_output(tmp_path):
    path = tmp_path / "charge.schema.json"
    path.write_text(json.dumps(SCHEMA))
    worker = Worker()
    ran: list = []

    @worker.op("charge", schema_file=path)
    def charge(job):
        ran.append(job.input)
        return {"receipt": "r1"} if job.input["amount"] < 100 else {"oops": True}

    assert _run(worker, "charge", {"amount": 5}) == [{"status": "completed", "output": {"receipt": "r1"}}]
    bad_input = _run(worker, "charge", {"amount": -1})
    assert bad_input[0]["status"] == "failed" and "does not match the op's schema" in bad_input[0]["error"]["message"]
    assert "amount" in bad_input[0]["error"]["message"] and ran == [{"amount": 5}]  # never ran on it
    bad_output = _run(worker, "charge", {"amount": 500})
    assert bad_output[0]["status"] == "failed" and "receipt" in bad_output[0]["error"]["message"]


def test_a_schema_file_without_defs_is_refused(tmp_path):
    path = tmp_path / "x.schema.json"
    path.write_text('{"type": "object"}')
    with pytest.raises(ValueError, match="no \\$defs.input or \\$defs.output"):
        Worker().op("x", schema_file=path)
    with pytest.raises(ValueError, match="cannot read the op schema"):
        Worker().op("x", schema_file=tmp_path / "missing.json")
