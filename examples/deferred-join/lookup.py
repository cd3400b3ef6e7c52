"""A slow, unrelated lookup for the deferred-join example (half a second)."""

import time


def weather(op_input, ctx):
    time.sleep(0.5)
    return {"weather": {"sky": "clear"}}
