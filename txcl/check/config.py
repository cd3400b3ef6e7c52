"""`txcl check` configuration: `[tool.txcl.check]` in pyproject.toml or `[check]` in txcl.toml.

The nearest file wins (searched upward from the first checked path; in one directory
`txcl.toml` wins over `pyproject.toml`). Keys use `-` or `_` interchangeably.

    select = ["TX2", "TX301"]        # code prefixes; default: every code
    ignore = ["TX302"]
    per-file-ignores = { "OPS/legacy/**" = ["TX201"] }
    severity = { TX201 = "error", TX301 = "warning" }
    exclude = ["OPS/vendor/**"]
    allow = ["*.yaml"]               # extra file patterns TX240 accepts
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from txcl.codes import CODES
from txcl.errors import TxclError

SEVERITIES = ("error", "warning", "info")


class ConfigError(TxclError):
    """An invalid configuration file or option (exit 2)."""


@attrs.define
class CheckConfig:
    select: tuple[str, ...] = ()  # empty means every code
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    severity: dict[str, str] = attrs.field(factory=dict)
    exclude: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    loop_max: int | None = None  # `op-loop-max` of [tool.txcl.serve] in the same file (TX211)
    egress: Any = None  # the EgressPolicy of [egress] in the same file (TX241); None: the default policy
    secrets: Any = None  # the SecretProvider of [serve] secrets-provider/-dir (TX242); None: the environment
    root: Path | None = None  # directory of the config file (patterns are relative to it)
    source: str | None = None  # the file it came from, for messages

    def enabled(self, code: str) -> bool:
        """Whether `code` is reported at all (select, then ignore; longest prefix wins)."""
        sel = _best_prefix(code, self.select) if self.select else 0
        if self.select and sel < 0:
            return False
        ign = _best_prefix(code, self.ignore)
        if ign < 0:
            return True
        return sel > ign if self.select else False

    def ignored_for(self, code: str, path: str | Path) -> bool:
        """True when a per-file-ignores pattern matching `path` names `code`."""
        for pattern, codes in self.per_file_ignores:
            if self._match(pattern, path) and _best_prefix(code, codes) >= 0:
                return True
        return False

    def severity_of(self, code: str, default: str) -> str:
        return self.severity.get(code, default)

    def excluded(self, path: str | Path) -> bool:
        return any(self._match(p, path) for p in self.exclude)

    def allowed_extra(self, path: str | Path) -> bool:
        return any(self._match(p, path) for p in self.allow)

    def _match(self, pattern: str, path: str | Path) -> bool:
        return match_path(pattern, path, self.root)


def _best_prefix(code: str, prefixes: tuple[str, ...]) -> int:
    """Length of the longest prefix in `prefixes` matching `code`, -1 when none (ALL = 0)."""
    best = -1
    for prefix in prefixes:
        if prefix == "ALL":
            best = max(best, 0)
        elif code.startswith(prefix):
            best = max(best, len(prefix))
    return best


def match_path(pattern: str, path: str | Path, root: Path | None) -> bool:
    """Glob match of `pattern` against `path` made relative to `root` (also its basename
    and every trailing part, so `*.bak` and `legacy/**` match anywhere below)."""
    p = Path(path)
    if root is not None and p.is_absolute():
        try:
            rel = PurePosixPath(p.relative_to(root).as_posix())
        except ValueError:
            rel = PurePosixPath(p.as_posix())
    else:
        rel = PurePosixPath(Path(path).as_posix())
    text = str(rel)
    pat = pattern.rstrip("/")
    if fnmatch.fnmatchcase(text, pat) or fnmatch.fnmatchcase(text, pat + "/*") :
        return True
    if pat.endswith("/**") and (text == pat[:-3] or text.startswith(pat[:-3] + "/")):
        return True
    if "/" not in pat:
        return any(fnmatch.fnmatchcase(part, pat) for part in rel.parts)
    if pat.startswith("**/"):
        parts = rel.parts
        return any(match_path(pat[3:], "/".join(parts[i:]), None) for i in range(len(parts)))
    return False


# ---------------------------------------------------------------- loading

def find_config_file(start: Path) -> tuple[Path, str] | None:
    """The nearest config file at or above `start`: (path, table kind)."""
    start = start.resolve()
    if start.is_file():
        start = start.parent
    for directory in (start, *start.parents):
        txcl_toml = directory / "txcl.toml"
        if txcl_toml.is_file():
            return txcl_toml, "txcl"
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file() and _has_tool_txcl(pyproject):
            return pyproject, "pyproject"
    return None


def _has_tool_txcl(pyproject: Path) -> bool:
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return False
    if "tool.txcl" not in text and "[tool]" not in text:
        return False
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return "[tool.txcl" in text  # broken but clearly ours: report it when loading
    return isinstance(data.get("tool"), dict) and "txcl" in data["tool"]


def load_config(start: str | Path = ".") -> CheckConfig:
    """The configuration that applies at `start` (defaults when there is no file)."""
    found = find_config_file(Path(start))
    if found is None:
        return CheckConfig()
    path, kind = found
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    return config_from_document(data, path)


def config_from_document(data: dict, path: Path) -> CheckConfig:
    """The check settings of a parsed txcl.toml or pyproject.toml."""
    from txcl.configfile import top_level_problem

    top = data.get("tool", {}).get("txcl", {}) if path.name == "pyproject.toml" else data
    problem = top_level_problem(top, f"{path} [tool.txcl]" if path.name == "pyproject.toml" else str(path))
    if problem is not None:
        raise ConfigError(problem)
    if path.name == "pyproject.toml":
        tool = data.get("tool", {}).get("txcl", {})
        table, serve = tool.get("check", {}), tool.get("serve", {})
        where = f"{path} [tool.txcl.check]"
    else:
        table, serve = data.get("check", {}), data.get("serve", {})
        where = f"{path} [check]"
    cfg = config_from_table(table, where, path.parent.resolve())
    if isinstance(serve, dict):
        raw = serve.get("op-loop-max", serve.get("op_loop_max"))
        if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
            cfg.loop_max = raw
        kind = str(serve.get("secrets-provider", serve.get("secrets_provider", "env"))).lower()
        directory = str(serve.get("secrets-dir", serve.get("secrets_dir", "/run/secrets")))
        if kind in ("env", "dir"):
            from txcl.secrets import SecretProvider

            folder = Path(directory)
            cfg.secrets = SecretProvider(kind, str(folder if folder.is_absolute() else path.parent / folder))
    egress = (data.get("tool", {}).get("txcl", {}) if path.name == "pyproject.toml" else data).get("egress")
    if isinstance(egress, dict):
        cfg.egress = _egress_policy(egress, path)
    return cfg


def _egress_policy(table: dict, path: Path) -> Any:
    """The policy `txcl serve` would build from this `[egress]` table (TX241 checks targets against it)."""
    from txcl.egress import EgressPolicy

    def names(key: str) -> list[str]:
        value = table.get(key, [])
        return [str(v) for v in value] if isinstance(value, list) else [p.strip() for p in str(value).split(",")]

    try:
        return EgressPolicy.build(names("allow"), names("deny"), str(table.get("private", "allow")).lower(),
                                  str(table.get("loopback", "allow")).lower())
    except ValueError as exc:
        raise ConfigError(f"{path} [egress]: {exc}") from None


def config_from_table(table: Any, where: str, root: Path | None) -> CheckConfig:
    """Validate one `[check]` table; every mistake is a ConfigError naming its key."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    cfg = CheckConfig(root=root, source=where)
    for raw_key, value in table.items():
        key = raw_key.replace("_", "-")
        if key == "select":
            cfg.select = _codes(value, where, raw_key)
        elif key in ("ignore", "extend-ignore"):
            cfg.ignore = cfg.ignore + _codes(value, where, raw_key)
        elif key == "extend-select":
            cfg.select = cfg.select + _codes(value, where, raw_key)
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: {raw_key} must be a table of pattern = [codes]")
            cfg.per_file_ignores = tuple(
                (str(pattern), _codes(codes, where, f"{raw_key}.{pattern}"))
                for pattern, codes in value.items())
        elif key == "severity":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: severity must be a table of CODE = \"error|warning|info\"")
            for code, sev in value.items():
                _check_code(code, where, "severity")
                if sev not in SEVERITIES:
                    raise ConfigError(f"{where}: severity.{code} must be one of error, warning, info (got {sev!r})")
                if code not in CODES:
                    raise ConfigError(f"{where}: severity.{code}: a severity needs a full code such as TX201")
                cfg.severity[code] = sev
        elif key in ("exclude", "allow", "extend-exclude"):
            patterns = _strings(value, where, raw_key)
            if key == "allow":
                cfg.allow = cfg.allow + patterns
            else:
                cfg.exclude = cfg.exclude + patterns
        else:
            from txcl.configfile import LINT_KEYS
            from txcl.suggest import did_you_mean

            close = did_you_mean(key, LINT_KEYS)
            hint = f"did you mean {close!r}?" if close else \
                "expected select, ignore, per-file-ignores, severity, exclude or allow"
            raise ConfigError(f"{where}: unknown key {raw_key!r} ({hint})")
    return cfg


def _strings(value: Any, where: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _codes(value: Any, where: str, key: str) -> tuple[str, ...]:
    codes = _strings(value, where, key)
    for code in codes:
        _check_code(code, where, key)
    return codes


def _check_code(code: str, where: str, key: str) -> None:
    """A full code, a prefix of at least one code (`TX2`, `TX30`), or ALL."""
    if code == "ALL":
        return
    if not any(c.startswith(code) for c in CODES) or not code.startswith("TX"):
        raise ConfigError(f"{where}: {key}: {code!r} is not a rule code or code prefix (e.g. TX201, TX2)")


def parse_code_list(text: str, option: str) -> tuple[str, ...]:
    """Codes from a command-line option (`TX201,TX3`)."""
    codes = tuple(c.strip() for c in text.split(",") if c.strip())
    for code in codes:
        _check_code(code, option, "value")
    return codes
