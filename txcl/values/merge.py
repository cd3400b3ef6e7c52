"""Merging op outputs into the envelope.

One rule at every depth, "the type change wins": scalars and null replace, two arrays
concatenate (existing items first), two objects merge recursively, and any other pairing
lets the output value take the place of the existing one.
"""

from __future__ import annotations

from typing import Any

from txcl.errors import TxclValueTooDeepError, depth_guarded

__all__ = ["merge", "merge_into", "deep_copy"]


def deep_copy(value: Any) -> Any:
    """A deep copy of a JSON-shaped value (dicts, lists, scalars); much faster than
    `copy.deepcopy` because it knows the shapes and keeps no memo."""
    t = type(value)
    if t is dict:
        return {k: (v if type(v) not in _CONTAINERS else _copy(v)) for k, v in value.items()}
    if t is list:
        return [(v if type(v) not in _CONTAINERS else _copy(v)) for v in value]
    if isinstance(value, dict):
        return {k: deep_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [deep_copy(v) for v in value]
    return value


def _copy(value: Any) -> Any:
    if type(value) is dict:
        return {k: (v if type(v) not in _CONTAINERS else _copy(v)) for k, v in value.items()}
    return [(v if type(v) not in _CONTAINERS else _copy(v)) for v in value]


# How deep a value the rules build or move may nest (every such value is copied through
# `copy_value`): below the 256 levels request bodies and callbacks may have, leaving room for
# the path it is written at, so an envelope the rules grow can always be encoded, stored,
# answered and polled as JSON.
MAX_VALUE_DEPTH = 200


def copy_value(value: Any) -> Any:
    """`deep_copy` for a value a rule writes (EMIT, SET, SELECT, LOOP SET, a path read into
    a value, &set): one nested deeper than MAX_VALUE_DEPTH raises TxclValueTooDeepError, the
    rule's error with the code `txcl_value_too_deep`."""
    t = type(value)
    if t is dict:
        return {k: (v if type(v) not in _CONTAINERS else _limited(v, 2)) for k, v in value.items()}
    if t is list:
        return [(v if type(v) not in _CONTAINERS else _limited(v, 2)) for v in value]
    if isinstance(value, (dict, list, tuple)):
        return copy_value(deep_copy(value))
    return value


def _limited(value: Any, depth: int) -> Any:
    if depth > MAX_VALUE_DEPTH:
        raise TxclValueTooDeepError(f"the value nests arrays and objects deeper than {MAX_VALUE_DEPTH} levels")
    below = depth + 1
    if type(value) is dict:
        return {k: (v if type(v) not in _CONTAINERS else _limited(v, below)) for k, v in value.items()}
    return [(v if type(v) not in _CONTAINERS else _limited(v, below)) for v in value]


_CONTAINERS = frozenset({dict, list})


def merge_into(target: dict, output: dict, owned: bool = False) -> None:
    """Merge `output` into `target` in place. Values taken from `output` are deep-copied,
    so later changes to either side never alias — unless `owned`: the caller made `output`
    for this merge and drops it afterwards, so its containers are moved in as they are."""
    for key, new in output.items():
        tn = type(new)
        if tn is dict or (tn is not list and isinstance(new, dict)):
            old = target.get(key)
            if isinstance(old, dict):
                merge_into(old, new, owned)
            else:
                target[key] = new if owned and tn is dict else deep_copy(new)
        elif tn is list or isinstance(new, list):
            old = target.get(key)
            if isinstance(old, list):
                old.extend(new if owned and tn is list else deep_copy(new))
            else:
                target[key] = new if owned and tn is list else deep_copy(new)
        else:
            target[key] = new


@depth_guarded
def merge(envelope: dict, output: dict) -> dict:
    """A new dict: `envelope` with `output` merged in. Neither input is changed."""
    if not isinstance(envelope, dict) or not isinstance(output, dict):
        raise TypeError("merge takes two objects (dicts)")
    result = deep_copy(envelope)
    if output:
        merge_into(result, output)
    return result
