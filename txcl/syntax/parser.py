"""The strict TXCL parser: text → `Rule`, or `TxclSyntaxError` with every diagnostic.

Lark is the parser of record: the LALR(1) table Lark builds from grammar/txcl.lark
(once per process, cached on disk) decides what parses, and the transformer
(txcl.syntax.transform) builds the AST inline, during the reductions. Two things are
done by hand for speed and for error quality: tokens come from the scanner
(txcl.syntax.lexer) as plain tuples, and the LALR loop is Lark's own `feed_token` algorithm
run over the table pre-resolved to dicts of integers, with the reduction callbacks built
here with Lark's tree-builder semantics (no per-step Token/Rule hashing, no wrapper
chains). Together this takes about 0.7 of the time of a bare Lark parse that builds only
a parse tree.

Error handling: when the table rejects a token, the explainer
(txcl.syntax.explain) walks the failing stretch with the same grammar written as
recursive descent to name the exact TX0xx code; then parsing resumes at the next clause
keyword with a fresh parser state, so independent mistakes in later clauses are reported
too. Per-rule TX1xx checks (txcl.syntax.validate) run only on texts without TX0xx.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
import tempfile
import threading
from operator import itemgetter
from pathlib import Path
from typing import Any, Callable

import lark
from lark import Lark
from lark.exceptions import VisitError
from lark.lexer import Lexer
from lark.parsers.lalr_analysis import Shift
from lark.parsers.lalr_parser_state import ParseConf

from txcl.errors import Diagnostic, Position, Span, TxclSyntaxError, span_of
from txcl.resources import grammar_path
from txcl.syntax import ast
from txcl.syntax import codec as _codec
from txcl.syntax import diskcache as _diskcache
from txcl.syntax.batch import keeping_parses
from txcl.syntax.compiled import twin as _compiled_twin
from txcl.syntax.lexer import scan
from txcl.syntax.tokens import CLAUSE_KW_SET, LINE, START, TYPE, Row, Tok, row_span
from txcl.syntax.transform import TxclTransformer

__all__ = ["parse_rule", "parse_source", "clear_cache", "get_parser"]


class _NoLexer(Lexer):
    """Placeholder: tokens are fed to the LALR parser directly by `_Parser.parse`."""

    def __init__(self, lexer_conf: Any) -> None:
        self.lexer_conf = lexer_conf

    def lex(self, lexer_state: Any, parser_state: Any):  # pragma: no cover - never called
        raise NotImplementedError


# Part of the cache key: change it whenever the Lark(...) options below change.
_LARK_OPTIONS_KEY = "lalr;custom-lexer;maybe_placeholders=True"


def _cache_file(grammar: str) -> Path | None:
    """Where the analysed grammar is kept between processes (None: do not cache)."""
    if os.environ.get("TXCL_NO_GRAMMAR_CACHE"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256("\0".join((grammar, _LARK_OPTIONS_KEY, lark.__version__,
                                    sys.version)).encode(
        "utf-8", "surrogatepass")).hexdigest()[:24]
    return Path(base) / "txcl" / f"grammar-{key}.lark"


def _load_lark() -> Lark:
    """Lark for grammar/txcl.lark: from the private cache (~10 ms) or built (~60 ms).

    The cache file is keyed by the grammar text and the Lark and Python versions, written
    atomically, and any problem with it just means building the grammar again.
    """
    grammar = grammar_path().read_text(encoding="utf-8")
    cache = _cache_file(grammar)
    if cache is not None and cache.is_file():
        try:
            with open(cache, "rb") as fh:
                return Lark.load(fh)
        except Exception:  # noqa: BLE001 - a stale or damaged cache is rebuilt
            pass
    built = Lark(grammar, parser="lalr", lexer=_NoLexer, maybe_placeholders=True)
    if cache is not None:
        tmp = None
        try:
            cache.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=cache.parent, prefix=".grammar-")
            with os.fdopen(fd, "wb") as fh:
                built.save(fh)
            os.replace(tmp, cache)
            tmp = None
        except Exception:  # noqa: BLE001 - caching is an optimisation only
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
    return built


class _Parser:
    """Owns the Lark instance, its parse table and the inline transformer."""

    def __init__(self) -> None:
        self.transformer = TxclTransformer()
        self.lark = _load_lark()
        inner = self.lark.parser.parser.parser  # frontend → LALR_Parser → _Parser
        conf = ParseConf(inner.parse_table, inner.callbacks, "start")
        self.start_state = conf.start_state
        self.end_state = conf.end_state
        # the transformer's methods named after terminals, called when one is shifted
        self.term_callbacks: dict[str, Any] = {
            t.name: getattr(self.transformer, t.name) for t in self.lark.terminals
            if callable(getattr(self.transformer, t.name, None))}
        if not _no_rule_passes_a_flat_on(self.lark.rules):
            raise RuntimeError("grammar/txcl.lark: a ?rule of one helper symbol passes the helper's "
                               "list on; the reductions splice helpers by position")
        self.actions, self.reductions = _compile_table(conf, self.transformer)
        # Accepting is shifting `$END` in the end state, which Lark's table leaves empty:
        # then the driver needs no end-of-input test of its own.
        self.actions[self.end_state]["$END"] = self.end_state
        self.lock = threading.Lock()
        self.mismatches = 0  # explainer disagreed with the table (tests watch this)

    # ------------------------------------------------------------ the driver

    def _accepts(self, stack: list, ttype: str) -> bool:
        """Would the table shift `ttype` next (after any reductions)? No callbacks run."""
        actions = self.actions
        reductions = self.reductions
        stack = list(stack)
        while True:
            act = actions[stack[-1]].get(ttype)
            if act is None:
                return False
            if act >= 0:
                return True
            size, gotos, _ = reductions[~act]
            if size:
                del stack[-size:]
            stack.append(gotos[stack[-1]])

    def _run(self, rows: list[Row], i: int) -> int | None:
        """Parse rows[i:] (which end with `_END_OF_INPUT`) from a fresh state; the index of
        the failing token or None.

        This is Lark's LALR loop (ParserState.feed_token) over Lark's own table and
        callbacks, with the table pre-resolved to plain dicts of integers (see
        `_compile_table`) so no Token or Rule hashing happens per step.
        """
        actions = self.actions
        reductions = self.reductions
        term_callbacks = self.term_callbacks
        state = self.start_state
        stack = [state]
        values: list = []
        try:
            for j in range(i, len(rows)):
                tok = rows[j]
                t = tok[0]  # an ERROR row's type is in no row of the table: it fails below
                # contextual EVERY / MAX: keywords only where a LOOP modifier may start
                if t == "NAME" and tok[2] is not None and self._accepts(stack, tok[2]):
                    t = tok[2]
                    rows[j] = tok = (t, *tok[1:])  # the keyword from now on (and for errors)
                while True:
                    act = actions[state].get(t)
                    if act is None:
                        return j
                    if act >= 0:  # shift
                        state = act
                        stack.append(act)
                        cb = term_callbacks.get(t)
                        values.append(tok if cb is None else cb(tok))
                        break
                    size, gotos, callback = reductions[~act]
                    if size == 1:  # pops are cheaper than slices for the commonest sizes
                        children = [values.pop()]
                        stack.pop()
                    elif size == 2:
                        last = values.pop()
                        children = [values.pop(), last]
                        stack.pop()
                        stack.pop()
                    elif size:
                        children = values[-size:]
                        del stack[-size:]
                        del values[-size:]
                    else:
                        children = []
                    values.append(callback(children))
                    state = gotos[stack[-1]]
                    stack.append(state)
        except VisitError as exc:  # an exception inside a callback: unwrap it
            raise exc.orig_exc from None
        return None  # `$END` was shifted: accepted

    def parse(self, text: str, filename: str) -> tuple[ast.Rule | None, list[Diagnostic]]:
        """(rule or None, TX0xx diagnostics in file order)."""
        rule, diags, _calls = self.parse_with_calls(text, filename)
        return rule, diags

    def parse_with_calls(self, text: str,
                         filename: str) -> tuple[ast.Rule | None, list[Diagnostic], list]:
        from txcl.syntax.explain import explain

        scanner = scan(text, filename)
        n = len(scanner.rows)
        rows = [*scanner.rows, _END_OF_INPUT]  # the driver marks contextual keywords in it
        diags: list[Diagnostic] = []
        with self.lock:
            tr = self.transformer
            tr.reset(filename)
            i = 0
            tokens: list[Tok] = []  # made at the first error, for the explainer
            end_tok = None
            while True:
                bad = self._run(rows, i)
                if bad is None:
                    break
                if end_tok is None:
                    tokens = [Tok(*row) for row in rows[:n]]
                    end_tok = Tok(*_end_row(text))
                else:  # a row this run read may have become a contextual keyword
                    for k in range(i, min(bad + 1, n)):
                        if rows[k][TYPE] != tokens[k].type:
                            tokens[k] = Tok(*rows[k])
                diag, agreed = explain(tokens, i, bad, end_tok, filename)
                if not agreed:
                    self.mismatches += 1
                diags.append(diag)
                i = _resume_index(rows, bad, i)
                if i >= n:
                    break
            clauses = tr.clauses
            calls = tr.calls
            diags.extend(tr.diags)
            tr.reset(filename)
        rule, more = _assemble(clauses, scanner.comments, filename, text)
        diags.extend(more)
        diags.sort(key=lambda d: (d.span.start.offset, d.span.end.offset))
        return (rule if not diags else None), diags, calls


class _Flat(list):
    """Children of a Lark helper rule (`x*`, `x+`), spliced into the parent's children."""

    __slots__ = ()


def _make_callback(rule: Any, transformer: Any) -> Any:
    """The reduction callback of one rule, with Lark's tree-builder semantics.

    Like Lark's ParseTreeBuilder with `maybe_placeholders=True` and an inline
    transformer: helper rules (`_name`) splice their children into the parent, `[x]` that
    matched nothing gives None, a `?rule` with one child returns that child, and
    otherwise the transformer method named by the alias or the rule is called. Built here
    so that each reduction costs one call instead of a chain of wrappers.
    """
    origin = str(rule.origin.name)
    empty = list(rule.options.empty_indices or ())
    has_helpers = any(map(_is_helper, rule.expansion))
    items = _children_source(rule)
    reshape = _calling(items)(list)

    if origin.startswith("_"):
        if has_helpers and not empty:
            def grow(children: list) -> _Flat:
                # left recursion: extend the list built so far in place (LALR never
                # shares a value between two parents)
                first = children[0]
                if type(first) is not _Flat:
                    return _Flat(reshape(children))
                for child in children[1:]:
                    if type(child) is _Flat:
                        first.extend(child)
                    else:
                        first.append(child)
                return first
            return grow
        if empty:
            return _calling(items)(_Flat)
        return _Flat
    fn = getattr(transformer, rule.alias or origin, None)
    expand1 = bool(rule.options.expand1) and not rule.alias
    if fn is None and not expand1:
        raise RuntimeError(f"grammar rule {origin!r} has no transformer method")
    if has_helpers or empty:
        if expand1:
            def cb(children: list) -> Any:
                children = reshape(children)
                return children[0] if len(children) == 1 else fn(children)
            return cb
        return _calling(items)(fn)
    if expand1:
        if len(rule.expansion) == 1:
            return itemgetter(0)
        return lambda children: children[0] if len(children) == 1 else fn(children)
    return fn


def _is_helper(sym: Any) -> bool:
    """A helper rule (`_name`): its children are spliced into its parent's."""
    return not sym.is_term and sym.name.startswith("_")


def _children_source(rule: Any) -> str:
    """The items of the list a rule's callback gets, as source over `c` (the values reduced):
    a helper's list spliced in place (helpers' callbacks always give a `_Flat`; no other rule
    passes one on, see `_no_rule_passes_a_flat_on`) and None where an optional part matched
    nothing, e.g. `c[0], *c[1], None`."""
    flags = list(rule.options.empty_indices or ()) or [False] * len(rule.expansion)
    items, k = [], 0
    for flag in flags:
        if flag:
            items.append("None")
            continue
        items.append(f"*c[{k}]" if _is_helper(rule.expansion[k]) else f"c[{k}]")
        k += 1
    return ", ".join(items)


@functools.lru_cache(maxsize=None)
def _calling(items: str) -> Callable[[Any], Callable[[list], Any]]:
    """`fn` → `lambda c: fn([items])`: compiled once per shape of children (a few dozen for
    the grammar), each rule's callback a closure over its own `fn`."""
    source = f"lambda fn: lambda c: fn([{items}])"
    return eval(compile(source, "<txcl reduction>", "eval"), {})  # noqa: S307 - our own source


def _no_rule_passes_a_flat_on(rules: Any) -> bool:
    """Whether only helper rules give a `_Flat`: a `?rule` of one symbol returns that child
    as it is, so one whose symbol is a helper would pass a helper's list on (and the
    generated reshaping, which splices by position, would not see it)."""
    return not any(r.options.expand1 and not r.alias and len(r.expansion) == 1
                   and _is_helper(r.expansion[0]) and not str(r.origin.name).startswith("_") for r in rules)


def _compile_table(conf: ParseConf, transformer: Any) -> tuple[Any, list]:
    """Lark's parse table as `{state: {symbol: action}}` with plain-str keys and int actions
    (a list indexed by state when the states are numbered 0…n-1, as Lark numbers them).

    An action `>= 0` is a shift to that state (for a terminal) or a goto (for a rule); an
    action `< 0` is reduction number `~action` in the list returned beside the table, each
    `(size, {state below: state after}, callback)`: the gotos of the reduced rule are
    looked up once, here, instead of at every reduction.
    """
    numbers: dict = {}
    reductions: list = []
    for actions in conf.states.values():
        for action, arg in actions.values():
            if action is not Shift and arg not in numbers:
                numbers[arg] = len(reductions)
                reductions.append(arg)
    table: dict = {
        state: {str(sym): arg if action is Shift else ~numbers[arg]
                for sym, (action, arg) in actions.items()}
        for state, actions in conf.states.items()}
    compiled = []
    for rule in reductions:
        origin = str(rule.origin.name)
        gotos = {state: row[origin] for state, row in table.items() if origin in row}
        compiled.append((len(rule.expansion), gotos, _make_callback(rule, transformer)))
    # Lark numbers its states 0…n-1: a list indexed by state is read without hashing
    rows = [table.get(state) for state in range(len(table))]
    if None in rows:  # pragma: no cover - a Lark that numbered its states otherwise
        return table, compiled
    return rows, compiled


def _resume_index(rows: list[Row], bad: int, start: int) -> int:
    """Where parsing resumes after an error at `bad`."""
    n = len(rows)
    row = rows[bad] if bad < n else None
    # A clause keyword written as a name (`WITH set = 1`) does not start a clause.
    if row is not None and row[TYPE] in CLAUSE_KW_SET and bad > start and not (
            bad + 1 < n and rows[bad + 1][TYPE] == "ASSIGN"):
        return bad
    j = bad + 1
    while j < n and rows[j][TYPE] not in CLAUSE_KW_SET:
        j += 1
    return j


# What the driver reads after the last token: only its type is looked at.
_END_OF_INPUT: Row = ("$END",)


def _end_row(text: str) -> Row:
    """`$END`, placed just after the last non-blank character."""
    stripped = len(text.rstrip(" \t\r\n"))
    before = text[:stripped]
    line = before.count("\n") + 1
    col = stripped - (before.rfind("\n") + 1) + 1
    return ("$END", "", None, line, col, stripped, line, col, stripped)


def _whole_text_span(text: str) -> Span:
    """From the first character to the end of `text`."""
    line = text.count("\n") + 1
    return span_of(1, 1, 0, line, len(text) - (text.rfind("\n") + 1) + 1, len(text))


def _assemble(clauses: list, comments: list, filename: str,
              text: str) -> tuple[ast.Rule, list[Diagnostic]]:
    """Clauses in source order → Rule; SET PRE/POST by position; TX011 for repeats."""
    diags: list[Diagnostic] = []
    # `clauses` are in source order: the parser reduces a clause when it reads the keyword
    # of the next one (or the end), and recovery after an error only moves forward
    select_at = next((c[2][START] for c in clauses if c[0] == "select"), None)
    single: dict[str, Any] = {}
    first_line: dict[str, int] = {}
    set_pre: list = []
    set_post: list = []
    with_: list = []
    emit: list = []
    marks: list = []
    for kind, node, kw, span in clauses:
        if kind == "set":
            post = select_at is not None and kw[START] > select_at
            (set_post if post else set_pre).extend(node)
            marks.append(ast.ClauseMark("set_post" if post else "set_pre", span=span))
            continue
        marks.append(ast.ClauseMark(kind, span=span))
        if kind == "with":
            with_.extend(node)
        elif kind == "emit":
            emit.extend(node)
        elif kind in single:
            diags.append(Diagnostic(
                "TX011", f"{kind.upper()} given more than once (first at line {first_line[kind]})",
                filename, row_span(kw)))
        else:
            single[kind] = node
            first_line[kind] = kw[LINE]
    rule = ast.Rule(
        when=single.get("when"), set_pre=tuple(set_pre), select=single.get("select"),
        set_post=tuple(set_post), with_=tuple(with_), priority=single.get("priority"),
        exec=single.get("exec"), loop=single.get("loop"), emit=tuple(emit),
        clauses=tuple(marks), comments=tuple(comments), filename=filename,
        span=_whole_text_span(text),
    )
    return rule, diags


# ---------------------------------------------------------------- module-level API

_PARSER: _Parser | None = None
_BUILD_LOCK = threading.Lock()
_CACHE: dict[tuple[str, str], Any] = {}
_CACHE_MAX = 8192  # entries
_CACHE_TEXT_MAX = 2 * 1024 * 1024  # characters of rule text held as keys: an AST takes ~30x its text
_cache_text = 0


def get_parser() -> _Parser:
    """The process-wide parser (built on first use, ~20 ms)."""
    global _PARSER
    if _PARSER is None:
        with _BUILD_LOCK:
            if _PARSER is None:
                _PARSER = _Parser()
    return _PARSER


def clear_cache() -> None:
    global _cache_text
    _CACHE.clear()
    _cache_text = 0


def _remember(key: tuple[str, str], result: Any) -> None:
    """Cache one parse; the oldest entries go first when the cache holds too many entries
    or too much text (so memory stays bounded however big the files parsed)."""
    global _cache_text
    size = len(key[0])
    if size > _CACHE_TEXT_MAX // 4:
        return  # a huge text is not worth keeping
    while _CACHE and (len(_CACHE) >= _CACHE_MAX or _cache_text + size > _CACHE_TEXT_MAX):
        try:  # drop the oldest entry; another thread may have got there first
            old = next(iter(_CACHE))
            if _CACHE.pop(old, None) is not None:
                _cache_text -= len(old[0])
        except (RuntimeError, StopIteration):
            break
    _CACHE[key] = result
    _cache_text += size


#: The largest rule text accepted, in bytes of UTF-8. A rule is a few lines; the limit
#: keeps a stray multi-megabyte file from costing gigabytes of memory to parse.
MAX_RULE_BYTES = 1024 * 1024


def _size_problem(text: str, filename: str) -> Diagnostic | None:
    """TX034 when the text is longer than MAX_RULE_BYTES (pointing where the limit is crossed)."""
    if len(text) <= MAX_RULE_BYTES // 4:
        return None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= MAX_RULE_BYTES:
        return None
    cut = len(text.encode("utf-8", "surrogatepass")[:MAX_RULE_BYTES].decode("utf-8", "ignore"))
    return Diagnostic("TX034", f"rule text is {size:,} bytes; a rule file may be at most {MAX_RULE_BYTES:,} "
                      "bytes (1 MiB)", filename, _point_span(text, min(cut, len(text) - 1)),
                      "split the work over several rules, or move data into the envelope")


def _encoding_problem(text: str, filename: str) -> Diagnostic | None:
    """TX002 for NUL characters and for lone surrogates (text that is not UTF-8)."""
    nul = text.find("\x00")
    bad = -1
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = exc.start
    if nul < 0 and bad < 0:
        return None
    if nul >= 0 and (bad < 0 or nul < bad):
        pos, message = nul, "NUL character in file"
    else:
        pos, message = bad, "file is not valid UTF-8"
    return Diagnostic("TX002", message, filename, _point_span(text, pos))


#: How deep parentheses, brackets, function calls and `!` may nest in one rule. Far beyond
#: what a rule needs; it keeps every step that walks a rule (parser, checker, formatter,
#: compiler, JSON dump of the AST) far from Python's recursion limit.
MAX_NESTING = 64


def _nesting_problem(text: str, filename: str) -> Diagnostic | None:
    """TX033 at the first token that nests deeper than MAX_NESTING (None: within it)."""
    if text.count("(") + text.count("[") + text.count("!") <= MAX_NESTING:  # ("&f(" holds a "(")
        return None  # cannot nest that deep
    from txcl.syntax.lexer import scan

    depth = bangs = 0
    for row in scan(text, filename).rows:
        t = row[TYPE]
        if t in ("LPAR", "LSQB", "CALL_START"):
            depth += 1
        elif t in ("RPAR", "RSQB"):
            depth = max(0, depth - 1)
        bangs = bangs + 1 if t == "BANG" else 0
        if depth > MAX_NESTING or bangs > MAX_NESTING:
            span = row_span(row)
            what = "`!` are chained" if bangs > MAX_NESTING else "parentheses, brackets and calls nest"
            return Diagnostic("TX033", f"{what} deeper than {MAX_NESTING} levels", filename, span,
                              "split the expression: set an intermediate value with SET, then use it")
    return None


def _point_span(text: str, pos: int) -> Span:
    before = text[:pos]
    line = before.count("\n") + 1
    col = pos - (before.rfind("\n") + 1) + 1
    return Span(Position(line, col, pos), Position(line, col + 1, pos + 1))


def _with_source(diags: list[Diagnostic], text: str) -> list[Diagnostic]:
    return [Diagnostic(d.code, d.message, d.file, d.span, d.hint, d.severity, text)
            for d in diags]


def _parse_and_check(text: str, filename: str) -> Any:
    """The rule, or the list of every diagnostic of the text (TX0xx, else TX1xx)."""
    problem = _size_problem(text, filename) or _encoding_problem(text, filename) or _nesting_problem(text, filename)
    if problem is not None:
        return _with_source([problem], text)
    rule, diags, calls = get_parser().parse_with_calls(text, filename)
    if not diags and rule is not None:
        from txcl.syntax.validate import validate_rule

        diags = validate_rule(rule, filename, calls)
    return rule if not diags else _with_source(diags, text)


def _from_disk(disk: Any, text: str, filename: str) -> Any:
    """The result the parse cache on disk holds for `text` (None: none, or unreadable)."""
    data = disk.get(text)
    if data is None:
        return None
    try:
        return _codec.decode(data, text, filename)
    except Exception:  # noqa: BLE001 - a damaged entry is parsed again (and replaced)
        return None


def _to_disk(disk: Any, result: Any, text: str, filename: str) -> None:
    if len(text) > _CACHE_TEXT_MAX // 4:
        return
    try:
        disk.put(text, _codec.encode(result, text, filename))
    except Exception:  # noqa: BLE001 - e.g. a value marshal cannot write: just not cached
        pass


def parse_rule(text: str, filename: str = "<string>") -> ast.Rule:
    """Parse one rule text; raises TxclSyntaxError with every TX0xx (or per-rule TX1xx).

    Results are cached by (text, filename): parsing the same text again is a dict lookup.
    """
    key = (text, filename)
    hit = _CACHE.get(key)
    if hit is not None:
        if type(hit) is ast.Rule:
            return hit
        raise TxclSyntaxError(hit)
    if not isinstance(text, str):
        if isinstance(text, (bytes, bytearray, memoryview)):
            return parse_source(bytes(text), filename)
        raise TypeError(f"parse_rule() needs str or bytes, not {type(text).__name__}")
    if not keeping_parses():  # an editor's buffer (txcl.syntax.batch.parsing_once)
        result: Any = _parse_and_check(text, filename)
    else:
        disk = _diskcache.active()
        result = _from_disk(disk, text, filename) if disk is not None else None
        if result is None:
            result = _parse_and_check(text, filename)
            if disk is not None:
                _to_disk(disk, result, text, filename)
        _remember(key, result)
    if type(result) is ast.Rule:
        return result
    raise TxclSyntaxError(result)


def parse_source(data: bytes | str, filename: str = "<string>") -> ast.Rule:
    """Like parse_rule, for file contents: bytes that are not UTF-8 or hold NUL are TX002."""
    if isinstance(data, str):
        return parse_rule(data, filename)
    if len(data) > MAX_RULE_BYTES:  # refused before decoding a huge file
        head = data[:MAX_RULE_BYTES].decode("utf-8", "replace")
        diag = Diagnostic("TX034", f"rule text is {len(data):,} bytes; a rule file may be at most "
                          f"{MAX_RULE_BYTES:,} bytes (1 MiB)", filename, _point_span(head + "?", len(head)),
                          "split the work over several rules, or move data into the envelope")
        raise TxclSyntaxError(_with_source([diag], head))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        good = data[: exc.start].decode("utf-8")
        diag = Diagnostic("TX002", "file is not valid UTF-8", filename,
                          _point_span(good + "?", len(good)))
        raise TxclSyntaxError(_with_source([diag], good)) from None
    return parse_rule(text, filename)


# This module compiled (txcl.syntax.compiled), when the install built it from this source:
# its parser class (the scanner and the LALR loop run as C), shared by the functions above.
_twin = _compiled_twin(__name__, __file__)
if _twin is not None:
    _Parser = _twin._Parser  # type: ignore[misc]  # noqa: F811
