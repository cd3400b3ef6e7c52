"""In-process ops for the quickstart. Each receives a copy of its input and an OpContext."""


def total(op_input: dict, ctx) -> dict:
    """Sum qty * price over the selected items."""
    items = op_input.get("items") or []
    amount = sum(item.get("qty", 1) * item.get("price", 0) for item in items if isinstance(item, dict))
    return {"total": round(amount, 2), "item_count": len(items)}


def poll_payment(op_input: dict, ctx) -> dict:
    """A stand-in payment provider that settles on the third poll."""
    attempt = (op_input.get("payment") or {}).get("attempt", 0) + 1
    status = "settled" if attempt >= 3 else "pending"
    return {"payment": {"attempt": attempt, "status": status, "amount": op_input.get("to_pay")}}
