"""The runtime settings object: flags > environment > configuration file >
defaults, every value validated, errors naming their source.

Durations are stored as integer milliseconds, sizes as bytes. `Settings()` gives the
defaults; `load_settings(workspace, flags)` applies every source.
"""

from __future__ import annotations

from txcl.vocabulary import parse_duration_ns

import os
import re
import socket
import tomllib
from pathlib import Path
from typing import Any, Callable, Mapping

import attrs

from txcl.errors import TxclError


class ConfigError(TxclError):
    """An invalid setting (a usage error, exit 2); the message names key and source."""


def parse_duration_ms(value: Any) -> int:
    """An integer (ms) or a Go duration string with the extra unit `d`; ValueError if invalid."""
    if isinstance(value, bool):
        raise ValueError("not a duration")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("negative duration")
        return value
    if isinstance(value, float):
        if value < 0 or value != value:
            raise ValueError("negative duration")
        return int(value)
    if not isinstance(value, str):
        raise ValueError("not a duration")
    text = value.strip()
    if text.isdigit():
        return int(text)
    if not text:
        raise ValueError("empty duration")
    ns = parse_duration_ns(text, days=True) if text[:1] not in ("+", "-") else None
    if ns is None:
        raise ValueError(f"invalid duration {value!r}")
    return ns // 1_000_000


_SIZE_RE = re.compile(r"^([0-9]+)\s*(B|KiB|MiB|GiB|KB|MB|GB)?$")
_SIZE_UNIT = {None: 1, "B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3,
              "KB": 1000, "MB": 1000 ** 2, "GB": 1000 ** 3}


def parse_size(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("not a size")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("negative size")
        return value
    m = _SIZE_RE.match(str(value).strip())
    if m is None:
        raise ValueError(f"invalid size {value!r}")
    return int(m.group(1)) * _SIZE_UNIT[m.group(2)]


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("not an integer")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not re.fullmatch(r"-?[0-9]+", text):
        raise ValueError(f"invalid integer {value!r}")
    return int(text)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"invalid boolean {value!r}")


def _str(value: Any) -> str:
    return str(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _opt_duration(value: Any) -> int | None:
    return None if value is None or value == "" else parse_duration_ms(value)


def _name_list(value: Any) -> tuple[str, ...]:
    """A list of names: a TOML array, or one string with names separated by commas."""
    if isinstance(value, (list, tuple)):
        items = [str(v).strip() for v in value]
    else:
        items = [part.strip() for part in str(value).split(",")]
    return tuple(item for item in items if item)


def _choice(*options: str) -> Callable[[Any], str]:
    """A parser of one of `options` (case does not matter), naming them all when it fails."""
    listed = ", ".join(options[:-1]) + " or " + options[-1]

    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in options:
            raise ValueError(f"must be {listed}")
        return text
    return parse


def _validate_mode(value: Any) -> str:
    if value is True:
        return "log"
    if value is False:
        return "off"
    text = str(value).strip().lower()
    if text not in ("off", "log", "strict"):
        raise ValueError("must be off, log or strict")
    return text


def _egress_list(value: Any) -> tuple[str, ...]:
    """Host patterns and networks, each checked now so a typo fails at startup."""
    items = _name_list(value)
    from txcl.egress import EgressPolicy

    EgressPolicy.build(allow=items)
    return items


def _lmtp_listen(value: Any) -> str | None:
    """`unix:/path/lmtp.sock`, `host:port` or `:port` (empty: no LMTP listener)."""
    text = str(value).strip() if value is not None else ""
    if not text:
        return None
    if text.startswith("unix:"):
        if len(text) == 5:
            raise ValueError("needs a socket path after unix:")
        return text
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"must be unix:/path, host:port or :port, got {text!r}")
    return text


def _workers(value: Any) -> str:
    """`auto` (the machine's cores) or a count of processes from 1."""
    text = str(value).strip().lower()
    if text == "auto":
        return text
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"must be a number of processes from 1, or auto, got {value!r}")
    return str(int(text))


def _octal_mode(value: Any) -> str:
    text = str(value).strip()
    if not re.fullmatch(r"0?[0-7]{3}", text):
        raise ValueError(f"must be an octal file mode such as 0660, got {text!r}")
    return text


def _recipient_map(value: Any) -> tuple[tuple[str, str], ...]:
    """Recipient overrides: `{"vip@acme.example" = "exec", "@partner.example" = "partners"}`
    in the file, `vip@acme.example=exec,@partner.example=partners` in a flag or variable."""
    if isinstance(value, dict):
        pairs = [(str(k).strip(), str(v).strip()) for k, v in value.items()]
    else:
        pairs = []
        for part in _name_list(value):
            address, sep, stack = part.partition("=")
            if not sep:
                raise ValueError(f"{part!r} needs address=stack")
            pairs.append((address.strip(), stack.strip()))
    for address, stack in pairs:
        if "@" not in address or not stack:
            raise ValueError(f"{address!r} must be an address (name@host) or a domain (@host) mapped to a stack")
    return tuple((address.lower(), stack) for address, stack in pairs)


def _time_zone(value: Any) -> str:
    text = str(value).strip()
    if text.upper() == "UTC":
        return "UTC"
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{text!r} is not an IANA time zone (such as Europe/Paris)") from None
    return text


def _nonneg_int(value: Any) -> int:
    v = _int(value)
    if v < 0:
        raise ValueError("must not be negative")
    return v


# key -> (parser, default)
_FIELDS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "workspace": (_str, "."),
    "db": (_opt_str, None),
    "host": (_str, "127.0.0.1"),
    "port": (_nonneg_int, 8080),
    "default_stack": (_opt_str, None),
    "watch": (_bool, False),
    "op_timeout": (parse_duration_ms, 5_000),
    "op_timeout_max": (parse_duration_ms, 600_000),
    "request_deadline": (_opt_duration, None),
    "loop_timeout": (parse_duration_ms, 60_000),
    "op_loop_max": (_nonneg_int, 1000),
    "op_payload_max": (parse_size, 4 * 1024 * 1024),
    "py_threads": (_nonneg_int, 16),
    "max_fuel_per_request": (_nonneg_int, 100_000),
    "op_scope_ttl_max": (_nonneg_int, 500),
    "op_repeat_penalty_ms": (parse_duration_ms, 20),
    "async_runtime_default": (parse_duration_ms, 600_000),
    "async_ack_timeout": (parse_duration_ms, 5_000),
    "ack_write_delay": (parse_duration_ms, 20),
    "store_threads": (_nonneg_int, 0),
    "deferred_join_slack": (parse_duration_ms, 60_000),
    "continue_after_default": (parse_duration_ms, 5_000),
    "continuable_timeout_default": (parse_duration_ms, 600_000),
    "await_window_default": (_nonneg_int, 32),
    "await_window_max": (_nonneg_int, 1024),
    "await_items_max": (_nonneg_int, 10_000),
    "callback_base_url": (_opt_str, None),
    "callback_max_bytes": (parse_size, 1024 * 1024),
    "continuation_retention": (parse_duration_ms, 7 * 86_400_000),
    "continuation_sweep_period": (parse_duration_ms, 60_000),
    "continuation_stale_resume_after": (parse_duration_ms, 600_000),
    "resume_max_attempts": (_nonneg_int, 3),
    "reconcile_after": (parse_duration_ms, 30_000),
    "continuation_longpoll_ms": (parse_duration_ms, 12_000),
    "poll_retry_after": (parse_duration_ms, 3_000),
    "web_max_body_bytes": (parse_size, 30 * 1024 * 1024),
    "web_header_timeout": (parse_duration_ms, 10_000),
    "web_max_connections": (_nonneg_int, 2048),
    "trust_request_id": (_bool, False),
    "web_mock_header": (_bool, False),
    "web_json_body": (_bool, True),
    "access_log": (_bool, False),
    "validate_input": (_bool, False),
    "validate_output": (_validate_mode, "off"),
    "private": (_bool, False),
    "trace_mode": (_choice("off", "summary", "full"), "summary"),
    "trace_body_cap_bytes": (parse_size, 65_536),
    "trace_ops": (_choice("off", "answers"), "off"),
    "trace_retention": (parse_duration_ms, 7 * 86_400_000),
    "shutdown_grace": (parse_duration_ms, 25_000),
    "node_id": (_opt_str, None),
    "sqlite_busy_timeout": (parse_duration_ms, 30_000),
    "pg_pool_size": (_nonneg_int, 10),
    "ui": (_bool, False),
    "admin_token": (_opt_str, None),
    "mcp": (_bool, False),
    "mcp_tools": (_name_list, ()),
    "ui_allowed_hosts": (_name_list, ()),
    "egress_allow": (_egress_list, ()),
    "egress_deny": (_egress_list, ()),
    "egress_private": (_choice("allow", "deny"), "allow"),
    "egress_loopback": (_choice("allow", "deny"), "allow"),
    "secrets_provider": (_choice("env", "dir"), "env"),
    "secrets_dir": (_str, "/run/secrets"),
    "log_format": (_choice("text", "json"), "text"),
    "metrics": (_bool, False),
    "metrics_port": (_nonneg_int, 0),
    "metrics_refresh": (parse_duration_ms, 10_000),
    "cron_period": (parse_duration_ms, 60_000),
    "cron_missed": (_choice("skip", "catch-up"), "skip"),
    "cron_timezone": (_time_zone, "UTC"),
    "cron_catch_up_max": (_nonneg_int, 60),
    "scheduled_poll": (parse_duration_ms, 1_000),
    "scheduled_max_inflight": (_nonneg_int, 32),
    "scheduled_stale_after": (parse_duration_ms, 600_000),
    "scheduled_retention": (parse_duration_ms, 7 * 86_400_000),
    "workers": (_workers, "1"),
    "debug_breakpoints": (_bool, False),
    "queue_token": (_opt_str, None),
    "queue_lease": (parse_duration_ms, 30_000),
    "queue_max_wait": (parse_duration_ms, 30_000),
    "nats_url": (_opt_str, None),
    "lmtp": (_lmtp_listen, None),
    "lmtp_default_hosts": (_name_list, ()),
    "lmtp_recipients": (_recipient_map, ()),
    "lmtp_hostname": (_str, ""),
    "lmtp_socket_mode": (_octal_mode, "0660"),
    "lmtp_max_msg_bytes": (parse_size, 25 * 1024 * 1024),
    "lmtp_max_recipients": (_nonneg_int, 50),
    "lmtp_read_timeout": (parse_duration_ms, 30_000),
    "lmtp_data_timeout": (parse_duration_ms, 60_000),
    "lmtp_resp_timeout": (parse_duration_ms, 30_000),
}


_SECRET_KEYS = frozenset({"admin_token", "queue_token"})  # never in a repr or a log line


def _make_class() -> type:
    attributes = {key: attrs.field(default=default, repr=key not in _SECRET_KEYS)
                  for key, (_, default) in _FIELDS.items()}
    attributes["sources"] = attrs.field(factory=dict, eq=False, repr=False)
    attributes["routes"] = attrs.field(factory=list)
    return attrs.make_class("SettingsBase", attributes, frozen=True, kw_only=True)


_SettingsBase = _make_class()


class Settings(_SettingsBase):  # type: ignore[misc, valid-type]
    """Every runtime setting; durations in ms (names without a unit suffix), sizes in bytes.

    `sources[key]` says where a non-default value came from (flag, environment, file).
    """

    @property
    def request_deadline_ms(self) -> int:
        return self.request_deadline if self.request_deadline is not None else self.op_timeout_max

    @property
    def effective_node_id(self) -> str:
        return self.node_id or f"{socket.gethostname()}-{os.getpid()}"

    def db_path(self, workspace: Path) -> str:
        if self.db:
            return self.db
        from txcl.datadir import default_db

        return str(default_db(workspace))

    def evolve(self, **changes: Any) -> "Settings":
        return attrs.evolve(self, **changes)

    def validate(self) -> "Settings":
        """Check the settings against each other; raises ConfigError naming the key and its source."""
        def bad(key: str, why: str) -> None:
            src = self.sources.get(key, "default")
            raise ConfigError(f"invalid setting {key.replace('_', '-')} ({src}): {why}")

        if self.op_timeout > self.op_timeout_max:
            bad("op_timeout", "must not exceed op-timeout-max")
        if self.loop_timeout > self.op_timeout_max:
            bad("loop_timeout", "must not exceed op-timeout-max")
        if self.continue_after_default <= 0:
            bad("continue_after_default", "must be greater than 0")
        if self.continuable_timeout_default <= self.continue_after_default:
            bad("continuable_timeout_default", "must exceed continue-after-default")
        if self.async_ack_timeout <= 0:
            bad("async_ack_timeout", "must be greater than 0")
        if not (1 <= self.await_window_default <= self.await_window_max <= 1024):
            bad("await_window_default", "need 1 <= await-window-default <= await-window-max <= 1024")
        if (self.continuation_stale_resume_after and self.continuation_sweep_period
                and self.continuation_stale_resume_after <= self.continuation_sweep_period):
            bad("continuation_stale_resume_after", "must exceed continuation-sweep-period")
        if self.reconcile_after <= self.async_ack_timeout:
            bad("reconcile_after", "must exceed async-ack-timeout")
        if self.store_threads > 8:
            bad("store_threads", "must be at most 8 (each holds a database connection while it works)")
        if self.ack_write_delay > 1_000:
            bad("ack_write_delay", "must be at most 1s (a held-back ack is lost if the process dies)")
        if self.admin_token is not None and len(self.admin_token) < 16:
            bad("admin_token", "must be at least 16 characters")
        if self.queue_token is not None and len(self.queue_token) < 16:
            bad("queue_token", "must be at least 16 characters")
        if self.nats_url is not None and not re.match(r"^(nats|tls)://[^/\s]+", self.nats_url):
            bad("nats_url", "must be a nats:// or tls:// URL, such as nats://127.0.0.1:4222")
        if not 1_000 <= self.queue_lease <= 3_600_000:
            bad("queue_lease", "must be from 1s to 1h")
        if self.queue_max_wait > 300_000:
            bad("queue_max_wait", "must be at most 5m")
        if self.mcp and not self.mcp_tools:
            bad("mcp", "name the stacks to offer as tools with --mcp-tools (mcp_tools = [...] in [serve])")
        if self.cron_period and self.cron_period < 1000:
            bad("cron_period", "must be at least 1s (or 0: no ticks)")
        if self.scheduled_poll and self.scheduled_poll < 50:
            bad("scheduled_poll", "must be at least 50ms (or 0: no scheduled events fire here)")
        if self.lmtp_max_recipients < 1:
            bad("lmtp_max_recipients", "must be at least 1")
        if self.scheduled_max_inflight < 1:
            bad("scheduled_max_inflight", "must be at least 1")
        if self.callback_base_url is not None and not re.match(r"^https?://[^/\s]+", self.callback_base_url):
            bad("callback_base_url", "must be an absolute http(s) URL")
        return self


#: What each setting means, and the kind of value it takes (duration, size, count or
#: empty): the one source of `txcl serve --help` and the settings reference.
SETTING_HELP: dict[str, tuple[str, str]] = {
    'workspace': ('', 'The workspace: the folder holding OPS/ (the positional DIR sets the same).'),
    'db': ('', 'The database: a SQLite file path or sqlite:///path, or a postgresql:// URL.'),
    'host': ('', 'Address to listen on.'),
    'port': ('', 'Port to listen on; 0 picks a free one (printed at startup).'),
    'default_stack': ('', 'Stack for requests that no route matches.'),
    'watch': ('', 'Reload the OPS tree when its files change (new requests only).'),
    'op_timeout': ('duration', 'Timeout of a sync op without WITH timeout.'),
    'op_timeout_max': ('duration', 'Largest timeout a sync op may ask for; also the default request deadline.'),
    'request_deadline': ('duration', 'Deadline of one request or resume (default: --op-timeout-max); past it 503.'),
    'loop_timeout': ('duration', 'Timeout of a whole LOOP without WITH timeout.'),
    'op_loop_max': ('count', 'Largest LOOP MAX a rule may ask for.'),
    'op_payload_max': ('size', 'Largest HTTP op request or answer body, and kv value.'),
    'py_threads': ('count', 'Threads that run synchronous py:// functions.'),
    'max_fuel_per_request': ('count', 'Fuel a request may use before it fails (0: meter only, no cap).'),
    'op_scope_ttl_max': ('count', 'Scopes a request may enter (its starting TTL; 0 disables the count).'),
    'op_repeat_penalty_ms': ('duration', 'Pause before entering the same scope transition again (loops through @goto).'),
    'async_runtime_default': ('duration', 'Time an async worker has when the rule gives no WITH timeout.'),
    'async_ack_timeout': ('duration', "How long a dispatch waits for the worker's 202."),
    'ack_write_delay': ('duration', "How long a worker's 202 waits to be written, sharing a commit with others or with its callback (0: at once)."),
    'store_threads': ('count', 'Threads running store calls (0: 3 on PostgreSQL, whose round trips then overlap; always 1 on SQLite).'),
    'deferred_join_slack': ('duration', "Extra time a deferred op's run is kept past the op's own deadline."),
    'continue_after_default': ('duration', 'When a continuable op still running is promoted to an async one.'),
    'continuable_timeout_default': ('duration', 'Time a continuable op has in all when the rule gives no timeout.'),
    'await_window_default': ('count', 'Items of an itemized await in flight at once when the rule gives no window.'),
    'await_window_max': ('count', 'Largest window a rule may ask for (a larger one gets the default).'),
    'await_items_max': ('count', 'Largest array an itemized await (WITH each) may fan out over.'),
    'callback_base_url': ('', "Base URL workers call back to (default for serve: this server's address); set it when several nodes or a proxy share one address."),
    'callback_max_bytes': ('size', 'Largest callback body; a larger one is answered 413.'),
    'continuation_retention': ('duration', 'How long a finished run is kept before it is purged.'),
    'continuation_sweep_period': ('duration', 'Time between sweeper passes (0: only the pass at startup).'),
    'continuation_stale_resume_after': ('duration', 'A resume without a heartbeat for this long is taken over.'),
    'resume_max_attempts': ('count', 'Resume attempts, the first included, before a run fails resumer-stale.'),
    'reconcile_after': ('duration', 'Age after which the sweeper resends stuck dispatches and finishes stuck items.'),
    'continuation_longpoll_ms': ('duration', 'Longest time a JSON poll waits for the run to change.'),
    'poll_retry_after': ('duration', "Retry-After of a poll answer, and the wait page's refresh."),
    'web_max_body_bytes': ('size', 'Largest request body; a larger one is answered 413.'),
    'web_header_timeout': ('duration', "Close a connection whose request headers are not complete this long after its first byte (0: never)."),
    'web_max_connections': ('count', 'Connections and requests at once; past it new ones are answered 503 (0: no limit).'),
    'trust_request_id': ('', 'Use a well-formed client X-Request-ID as the request id.'),
    'web_mock_header': ('', 'Accept X-Txco-Mocks (globs of ops answered by their mock-response.json).'),
    'access_log': ('', "Log one line per request (method, path, status, request id) at the info level."),
    'web_json_body': ('', "Merge a JSON object body into the envelope's root, as txcl run --input does (the raw body stays in @web.req.body)."),
    'validate_input': ('', "Check each JSON body against its stack's schema.json $defs.input first; a violation is answered 422 txcl_invalid_input."),
    'validate_output': ('', "Check answers against the stack's $defs.output: log a violation (log, the flag alone), or answer 500 (strict)."),
    'private': ('', "Keep top-level '_' keys in JSON answers and in what txcl run prints."),
    'trace_mode': ('', 'Tracing: off, summary or full.'),
    'trace_body_cap_bytes': ('size', 'Largest body kept per step in full traces.'),
    'trace_ops': ('', 'answers: summary traces also keep the request and each op call\'s input and answer, so txcl replay can rerun them.'),
    'trace_retention': ('duration', 'How long traces are kept before they are purged.'),
    'shutdown_grace': ('duration', 'Time given to requests in flight on SIGTERM.'),
    'node_id': ('', "This node's name on claims and leases (default: <hostname>-<pid>)."),
    'sqlite_busy_timeout': ('duration', 'How long a SQLite writer waits for the lock.'),
    'pg_pool_size': ('count', 'PostgreSQL connections per node.'),
    'ui': ('', 'Serve the dashboard and the playground on /_txc/ui/ (loopback clients only unless --admin-token is set).'),
    'admin_token': ('', 'Token that opens the dashboard to any client (Authorization: Bearer, or its login form); keep it secret.'),
    'mcp': ('', 'Serve the stacks named by --mcp-tools as Model Context Protocol tools on /_txc/mcp.'),
    'mcp_tools': ('', 'Stacks to offer as MCP tools with --mcp, separated by commas (a TOML array in the file).'),
    'ui_allowed_hosts': ('', 'Host names the dashboard and playground answer besides loopback and the bound address (without --admin-token).'),
    'egress_allow': ('', 'Hosts (*.corp.example) and networks (10.1.0.0/16) ops may reach though the egress rules refuse them; commas between.'),
    'egress_deny': ('', 'Hosts and networks ops may never reach, commas between; the deny list wins over the allow list.'),
    'egress_private': ('', 'Whether ops may reach private addresses (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7): allow or deny.'),
    'egress_loopback': ('', 'Whether ops may reach loopback addresses (127/8, ::1): allow or deny.'),
    'secrets_provider': ('', 'Where the secrets rules name are read: env (TXCL_SECRET_<NAME>) or dir (files in --secrets-dir).'),
    'secrets_dir': ('', 'The directory of secret files, one file per secret, with secrets-provider dir.'),
    'log_format': ('', 'The server log: text, or json (one object per line with time, level, request and run ids).'),
    'metrics': ('', 'Serve Prometheus metrics on /_txc/metrics (behind --admin-token when set); needs the metrics extra.'),
    'metrics_port': ('count', 'With --metrics: serve them on this port of --host instead (0: on the main port).'),
    'metrics_refresh': ('duration', 'With --metrics: how often the gauges of open runs and items are read from the store.'),
    'cron_period': ('duration', 'Time between the ticks a _cron stack receives, on the wall clock\'s boundaries (0: no ticks).'),
    'cron_missed': ('', 'Ticks missed while every node was down: skip them, or catch-up (fire them at start-up).'),
    'cron_timezone': ('', 'The IANA time zone of the @cron clock fields.'),
    'cron_catch_up_max': ('count', 'With cron-missed catch-up: at most this many missed ticks are fired at start-up.'),
    'scheduled_poll': ('duration', 'Time between two looks for due scheduled events (0: this node fires none).'),
    'scheduled_max_inflight': ('count', 'Scheduled events a node fires at once.'),
    'scheduled_stale_after': ('duration', 'A claimed event whose node stopped while firing it is fired again after this long.'),
    'debug_breakpoints': ('', 'Honour ?_txc.break=<scope>: answer with the envelope as it enters that scope (a development aid; never in production).'),
    'queue_token': ('', 'Token workers present to claim jobs from pull queues (Authorization: Bearer); unset, only this host may claim.'),
    'queue_lease': ('duration', 'How long a worker holds a claimed job without a heartbeat before it goes back (when the claim names none).'),
    'queue_max_wait': ('duration', 'Longest wait a claim may ask for when its queue is empty (a long poll).'),
    'nats_url': ('', 'NATS server (with JetStream) that nats:// ops publish their jobs to, such as nats://127.0.0.1:4222.'),
    'workers': ('', 'Processes serving the port: a number, or auto for one per core; they coordinate through the store as nodes do.'),
    'lmtp': ('', 'Accept mail over LMTP here: unix:/path/lmtp.sock, host:port or :port (off by default).'),
    'lmtp_default_hosts': ('', 'Mail hosts whose recipients <stack>[+tag]@host route to that stack (else to _mail); commas between.'),
    'lmtp_recipients': ('', 'Recipient overrides, address=stack or @domain=stack, commas between; they win over the default hosts.'),
    'lmtp_hostname': ('', 'The host name the LMTP greeting gives (default: this machine\'s).'),
    'lmtp_socket_mode': ('', 'The file mode of the LMTP Unix socket (octal): the user of the MTA must be able to write to it.'),
    'lmtp_max_msg_bytes': ('size', 'The largest message accepted over LMTP; a larger one gets 552 5.3.4.'),
    'lmtp_max_recipients': ('count', 'Recipients per LMTP delivery; more get 452 4.5.3.'),
    'lmtp_read_timeout': ('duration', 'An LMTP session idle this long between commands is closed.'),
    'lmtp_data_timeout': ('duration', 'The longest an LMTP client may take to send a message\'s data.'),
    'lmtp_resp_timeout': ('duration', 'The longest a delivery\'s walk may take before the recipients get 451 4.3.0 (try again).'),
    'scheduled_retention': ('duration', 'Fired, failed and cancelled events are kept this long (their keys stay spent).'),
}


def _format_ms(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _format_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def default_text(key: str) -> str:
    """A setting's default as a person writes it (`5s`, `30MiB`, `off`, `none`)."""
    unit = SETTING_HELP.get(key, ("", ""))[0]
    default = _FIELDS[key][1]
    if default is None or default == ():
        return "none"
    if isinstance(default, bool):
        return "on" if default else "off"
    if unit == "duration":
        return _format_ms(default)
    if unit == "size":
        return _format_bytes(default)
    return str(default)


def setting_help(key: str) -> str:
    """`--help` text of a setting: its meaning and default."""
    text = SETTING_HELP[key][1]
    default = default_text(key)
    if isinstance(_FIELDS[key][1], bool) or default == "none":
        return text
    return f"{text} [default: {default}]"


def settings_keys() -> list[str]:
    return list(_FIELDS)


def _parse(key: str, value: Any, source: str) -> Any:
    parser = _FIELDS[key][0]
    try:
        return parser(value)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"invalid setting {key.replace('_', '-')} ({source}): {exc}") from None


def find_config_file(workspace: Path) -> tuple[Path, dict[str, Any]] | None:
    """The nearest txcl.toml or pyproject.toml with [tool.txcl], searched upward."""
    for directory in (workspace.resolve(), *workspace.resolve().parents):
        for name in ("txcl.toml", "pyproject.toml"):
            path = directory / name
            if not path.is_file():
                continue
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"{path}: cannot read configuration: {exc}") from None
            if name == "txcl.toml":
                return path, data
            tool = data.get("tool", {}).get("txcl")
            if isinstance(tool, dict):
                return path, tool
    return None


def load_settings(workspace: Path | None = None, flags: Mapping[str, Any] | None = None,
                  env: Mapping[str, str] | None = None, validate: bool = True) -> Settings:
    """Build Settings from (in increasing precedence) defaults, file, environment, flags.

    `flags` holds only options the user gave (None values are ignored)."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    routes: list[Any] = []
    if workspace is not None:
        found = find_config_file(workspace)
        if found is not None:
            path, table = found
            from txcl.configfile import top_level_problem

            problem = top_level_problem(table, f"{path} [tool.txcl]" if path.name == "pyproject.toml" else str(path))
            if problem is not None:
                raise ConfigError(problem)
            serve = table.get("serve", {})
            if not isinstance(serve, dict):
                raise ConfigError(f"{path}: [serve] must be a table")
            for name in ("egress", "lmtp"):  # tables whose keys are settings named <table>_<key>
                sub = table.get(name, {})
                if not isinstance(sub, dict):
                    raise ConfigError(f"{path}: [{name}] must be a table")
                for raw_key, value in sub.items():
                    key = name + "_" + raw_key.replace("-", "_")
                    if name == "lmtp" and raw_key == "listen":
                        key = "lmtp"
                    if key not in _FIELDS:
                        expected = ", ".join(k[len(name) + 1:] for k in _FIELDS if k.startswith(name + "_"))
                        raise ConfigError(f"{path}: unknown setting {raw_key!r} in [{name}] (expected {expected})")
                    values[key] = _parse(key, value, f"{path} [{name}]")
                    sources[key] = f"{path} [{name}]"
            for raw_key, value in serve.items():
                key = raw_key.replace("-", "_")
                if key == "routes":
                    routes = list(value) if isinstance(value, list) else []
                    continue
                if key not in _FIELDS:
                    from txcl.suggest import did_you_mean

                    close = did_you_mean(raw_key.replace("_", "-"), [k.replace("_", "-") for k in _FIELDS])
                    hint = f" (did you mean {close!r}?)" if close else ""
                    raise ConfigError(f"{path}: unknown setting {raw_key!r} in [serve]{hint}")
                values[key] = _parse(key, value, str(path))
                sources[key] = str(path)
    for key in _FIELDS:
        env_name = "TXCL_" + key.upper()
        if env_name in env:
            values[key] = _parse(key, env[env_name], f"environment {env_name}")
            sources[key] = f"environment {env_name}"
    for key, value in (flags or {}).items():
        if value is None:
            continue
        key = key.replace("-", "_")
        if key not in _FIELDS:
            raise ConfigError(f"unknown setting {key!r}")
        values[key] = _parse(key, value, f"--{key.replace('_', '-')}")
        sources[key] = f"--{key.replace('_', '-')}"
    settings = Settings(**values, sources=sources, routes=routes)
    return settings.validate() if validate else settings
