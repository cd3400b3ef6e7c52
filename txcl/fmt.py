"""`txcl fmt`: rewrite rule files in canonical form (txcl.syntax.printer), safely.

The result is re-parsed and must give the same rule and the same comments; a file whose
formatting would change its meaning is left alone with an error (never silently broken).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import attrs

from txcl.errors import Diagnostic, TxclError, TxclSyntaxError


class FormatError(TxclError):
    """The formatter refused a file; `code` says why (the codes docs/check.md lists):
    `fmt-invalid-output`, `fmt-changes-rule`, `fmt-moves-noqa`."""

    def __init__(self, message: str, code: str) -> None:
        self.code = code
        super().__init__(f"{message} [{code}]")


@attrs.frozen
class FormatResult:
    path: str
    old: str
    new: str | None  # None when the file could not be formatted
    diagnostics: tuple[Diagnostic, ...] = ()
    error: str | None = None

    @property
    def changed(self) -> bool:
        return self.new is not None and self.new != self.old


def _parse(text: str, filename: str):
    """The rule, even when it has only load-time (TX1xx) errors; TxclSyntaxError otherwise."""
    from txcl.check.analyze import parse
    rule, diags = parse(text, filename)
    if rule is None:
        raise TxclSyntaxError(diags)
    return rule


def _fingerprint(rule):
    from txcl.check.fix import semantic_json
    from txcl.syntax.ast import to_json

    comments = sorted(c.text.rstrip() for c in rule.comments)
    # fmt keeps number spellings, so they are compared too
    return semantic_json(rule), comments, _int_texts(to_json(rule))


def _int_texts(node, out=None):
    out = [] if out is None else out
    if isinstance(node, dict):
        if node.get("node") in ("IntLit", "FloatLit"):
            out.append(node.get("text"))
        for k, v in node.items():
            if k != "span":
                _int_texts(v, out)
    elif isinstance(node, list):
        for v in node:
            _int_texts(v, out)
    return out


FORMAT_FIXES = ("TX301", "TX302")  # clause order and split clauses: what formatting fixes


def _findings(text: str, filename: str) -> Counter:
    """What `txcl check` reports for the text, except what formatting itself fixes (clause
    order and split clauses). Those are ignored before `# noqa` is applied, so a directive
    that only suppressed one of them counts as unused both before and after formatting."""
    from txcl.check import check_source
    from txcl.check.config import CheckConfig
    return Counter(d.code for d in check_source(text, filename, CheckConfig(ignore=FORMAT_FIXES)))


def format_text(text: str, filename: str = "<string>") -> str:
    """Canonical text of one rule. Raises TxclSyntaxError (syntax errors) or FormatError."""
    from txcl.syntax.printer import print_rule
    rule = _parse(text, filename)
    crlf = "\r\n" in text
    source = text
    new = print_rule(rule, source)
    try:
        again = _parse(new, filename)
    except TxclSyntaxError as exc:
        raise FormatError(f"{filename}: formatting would produce invalid text ({exc.diagnostics[0].message}); "
                          "the file was left unchanged", "fmt-invalid-output") from None
    if _fingerprint(again) != _fingerprint(rule):
        raise FormatError(f"{filename}: formatting would change the rule; the file was left unchanged",
                          "fmt-changes-rule")
    if any("noqa" in c.text.lower() for c in rule.comments) and _findings(new, filename) != _findings(text, filename):
        raise FormatError(f"{filename}: formatting would move a `# noqa` comment away from the finding it "
                          "suppresses; put the comment at the end of the line of the item it is for. "
                          "The file was left unchanged", "fmt-moves-noqa")
    if crlf:
        converted = new.replace("\n", "\r\n")
        try:
            if _fingerprint(_parse(converted, filename)) == _fingerprint(rule):
                new = converted
        except TxclSyntaxError:
            pass
    return new


def format_file(path: str | Path, display: str | None = None) -> FormatResult:
    shown = display or str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return FormatResult(shown, "", None, error=f"{shown}: cannot read: {exc.strerror or exc}")
    try:
        old = data.decode("utf-8")
    except UnicodeDecodeError:
        from txcl.check.analyze import parse
        _, diags = parse(data, shown)
        return FormatResult(shown, "", None, tuple(diags))
    try:
        return FormatResult(shown, old, format_text(old, shown))
    except TxclSyntaxError as exc:
        return FormatResult(shown, old, None, tuple(exc.diagnostics))
    except FormatError as exc:
        return FormatResult(shown, old, None, error=str(exc))
