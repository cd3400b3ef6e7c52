"""py:// ops of the payments example: load the CSV, and write the joined output file."""

from __future__ import annotations

import csv
from pathlib import Path


def _query(op_input: dict, name: str, default: str) -> str:
    try:
        return op_input["_txc"]["web"]["req"]["url"]["query"][name][0]
    except (KeyError, IndexError, TypeError):
        return default


def _base(ctx) -> Path:
    return Path(ctx.workspace) if getattr(ctx, "workspace", None) else Path(__file__).resolve().parent


def load(op_input: dict, ctx) -> dict:
    """`{"batch": {…}, "records": [{payment_id, payer, amount, currency, iban}, …]}`."""
    name = Path(_query(op_input, "file", "payments.csv")).name  # never outside the example
    with open(_base(ctx) / name, newline="", encoding="utf-8") as f:
        records = [{**row, "amount": float(row["amount"])} for row in csv.DictReader(f)]
    return {"batch": {"file": name, "count": len(records)}, "records": records}


def finalize(op_input: dict, ctx) -> dict:
    """Write out/<file>-results.csv in record order; return the summary."""
    records, results = op_input.get("records", []), op_input.get("results", [])
    out_dir = _base(ctx) / "out"
    out_dir.mkdir(exist_ok=True)
    name = Path(op_input.get("batch", {}).get("file", "payments.csv")).stem
    path = out_dir / f"{name}-results.csv"
    approved = rejected = errors = 0
    approved_total = 0.0
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["payment_id", "payer", "amount", "currency", "status", "reason", "reference"])
        for record, result in zip(records, results):
            if "error" in result:
                status, reason, reference = "error", result["error"].get("message", ""), ""
                errors += 1
            else:
                status, reason, reference = result["status"], result.get("reason", ""), result.get("reference", "")
                if status == "approved":
                    approved += 1
                    approved_total += record["amount"]
                else:
                    rejected += 1
            writer.writerow([record["payment_id"], record["payer"], f"{record['amount']:.2f}", record["currency"],
                             status, reason, reference])
    return {"summary": {"records": len(records), "approved": approved, "rejected": rejected, "errors": errors,
                        "approved_total": round(approved_total, 2), "output_file": str(path)}}
