"""Identifiers and tokens shared by the runtime, the store and the continuations layer.

- run ids: ``run_<ULID>`` (time-ordered, 26 Crockford base32 characters); request ids are
  bare ULIDs;
- poll capabilities: ``rc_<22 random base58 characters>`` (128.9 bits);
- interaction ids: ``opc_<22 random base58 characters>``; await units ``au_…`` and resume
  claims ``clm_…`` likewise;
- callback tokens: 32 random bytes, base64url without padding. Only the SHA-256 (hex) of a
  token is stored; a presented token is hashed and compared in constant time.

Tokens and capabilities draw their randomness from :mod:`secrets`; request ids from a pool
of `os.urandom` bytes fetched in blocks (they are minted on every request and are not secrets).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
import threading
import time
from typing import Iterable

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_WIDTH_16 = 22  # 58**22 > 2**128: every 16-byte value fits in 22 characters

RCID_RE = re.compile(r"^rc_[1-9A-HJ-NP-Za-km-z]{16,32}$")
OPC_RE = re.compile(r"^opc_[1-9A-HJ-NP-Za-km-z]{16,32}$")
RUN_ID_RE = re.compile(r"^run_[0-9A-HJKMNP-TV-Z]{26}$")


_CROCKFORD_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]  # ten bits per lookup


def _stamp_digits(ms: int) -> str:
    """The ten Crockford base32 digits of a ULID's 48-bit millisecond timestamp."""
    p = _CROCKFORD_PAIRS
    t = ms & ((1 << 48) - 1)
    return "".join((p[t >> 40], p[(t >> 30) & 1023], p[(t >> 20) & 1023], p[(t >> 10) & 1023], p[t & 1023]))


def ulid(now_ms: int | None = None, rand: bytes | None = None) -> str:
    """A 26-character ULID: 48-bit millisecond timestamp (10 characters) then 80 random
    bits (16 characters), in Crockford's base32 (ten bits per table lookup). `rand`: the
    ten random bytes when the caller has them."""
    ms = time.time_ns() // 1_000_000 if now_ms is None else int(now_ms)
    if rand is None:
        rand = secrets.token_bytes(10)
    high, low = int.from_bytes(rand[:5], "big"), int.from_bytes(rand[5:], "big")
    p = _CROCKFORD_PAIRS
    return _stamp_digits(ms) + "".join((p[high >> 30], p[(high >> 20) & 1023], p[(high >> 10) & 1023],
                                        p[high & 1023], p[low >> 30], p[(low >> 20) & 1023],
                                        p[(low >> 10) & 1023], p[low & 1023]))


_POOL_SIZE = 4000  # 400 request ids per os.urandom call: a getrandom syscall per id would cost more than the id
# base32 (RFC 4648) digit → the Crockford digit of the same value
_TO_CROCKFORD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", _CROCKFORD.encode("ascii"))
_RANDOM_DIGITS = 16  # 80 bits: a ULID's random part


class _RandomPool:
    """Random ULID tails from os.urandom, fetched in blocks and encoded a block at a time
    (every ten bytes are exactly sixteen base32 digits, so one C call encodes 400 tails);
    thread-safe, and emptied in a forked child (which would otherwise hand out the same
    tails as its parent)."""

    def __init__(self) -> None:
        self._text = ""
        self._pos = 0
        self._lock = threading.Lock()

    def take_digits(self) -> str:
        """Sixteen Crockford base32 digits of fresh random bits (80 of them)."""
        with self._lock:
            start = self._pos
            if start + _RANDOM_DIGITS > len(self._text):
                self._text = base64.b32encode(os.urandom(_POOL_SIZE)).translate(_TO_CROCKFORD).decode("ascii")
                start = 0
            self._pos = start + _RANDOM_DIGITS
            return self._text[start:start + _RANDOM_DIGITS]

    def forget(self) -> None:
        self._text = ""
        self._pos = 0
        self._lock = threading.Lock()


_pool = _RandomPool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pool.forget)

_stamp: tuple[int, str] = (-1, "")  # the last millisecond a request id was minted in, and its digits


def new_request_id() -> str:
    """A request id: a ULID whose random part comes from a pool (one is minted per request),
    its timestamp digits written once per millisecond. Request ids name traces and runs; they
    are not secrets (tokens use `secrets` directly)."""
    global _stamp
    ms = time.time_ns() // 1_000_000
    stamp = _stamp
    if stamp[0] != ms:
        stamp = _stamp = (ms, _stamp_digits(ms))
    return stamp[1] + _pool.take_digits()


_B58_PAIRS = [a + b for a in _B58 for b in _B58]  # two digits per divmod step


def base58_fixed(data: bytes, width: int) -> str:
    """Base58 (Bitcoin alphabet) left-padded with '1' to a fixed width."""
    value = int.from_bytes(data, "big")
    chunks = []
    while value:
        value, rem = divmod(value, 3364)
        chunks.append(_B58_PAIRS[rem])
    text = "".join(reversed(chunks)).lstrip(_B58[0])
    return text.rjust(width, _B58[0])


# Random base58 text straight from random bytes: a byte below 232 (= 4 × 58) stands for the
# character at its value modulo 58 (every character equally likely), larger bytes are dropped.
# Two C calls instead of a divmod loop over a 128-bit integer.
_B58_OF_BYTE = bytes((ord(_B58[i % 58]) if i < 232 else 0) for i in range(256))
_B58_REJECTED = bytes(range(232, 256))


def random_base58(width: int = _B58_WIDTH_16) -> str:
    """`width` characters drawn uniformly from the base58 alphabet (5.86 bits each)."""
    while True:
        text = secrets.token_bytes(width + width // 2 + 4).translate(_B58_OF_BYTE, _B58_REJECTED)
        if len(text) >= width:  # short about once in 15 million draws at width 22: draw again
            return text[:width].decode("ascii")


def new_run_id(now_ms: int | None = None) -> str:
    return "run_" + ulid(now_ms)


def new_rcid() -> str:
    return "rc_" + random_base58()


def new_opc() -> str:
    return "opc_" + random_base58()


def new_claim_token() -> str:
    """Fencing token of a resume claim (never sent outside the process that holds it)."""
    return "clm_" + random_base58()


def new_token() -> str:
    """A callback token: 32 random bytes, base64url, no padding (43 characters)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode("ascii")


def hash_token(token: str) -> str:
    """SHA-256 hex of a token; the only form in which tokens are stored."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_matches(presented: str | None, stored_hashes: str | Iterable[str] | None) -> bool:
    """Constant-time check of a presented token against stored hash(es).

    ``stored_hashes`` is one hex digest, a comma-separated list of them (an interaction whose
    dispatch was resent carries the hash of every token it was sent with), or an iterable.
    Every stored hash is compared, so the time taken does not depend on which one matches.
    """
    if not presented or not stored_hashes:
        return False
    if isinstance(stored_hashes, str):
        hashes = [h for h in stored_hashes.split(",") if h]
    else:
        hashes = list(stored_hashes)
    digest = hash_token(presented).encode("ascii")
    ok = False
    for stored in hashes:
        ok |= hmac.compare_digest(digest, stored.encode("ascii"))
    return ok


def is_rcid(text: str) -> bool:
    return bool(RCID_RE.match(text or ""))


def is_opc(text: str) -> bool:
    return bool(OPC_RE.match(text or ""))


def is_run_id(text: str) -> bool:
    return bool(RUN_ID_RE.match(text or ""))


def admin_token_matches(given: str | None, token: str) -> bool:
    """Constant-time comparison of a presented admin token with the configured one (the
    admin endpoint and the dashboard both ask it)."""
    if not given:
        return False
    return hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))
