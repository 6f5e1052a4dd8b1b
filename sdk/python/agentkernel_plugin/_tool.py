"""What a plugin author writes: tools.

The concepts are the Go SDK's (sdk): a name, a description, a JSON
Schema for the arguments, a tier, an optional timeout, an async handler
that reports progress and stops when its call is cancelled, and an
optional side-effect check.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import re
import threading
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any


class Tier(enum.StrEnum):
    """How much harm a tool can do. Every tool declares one."""

    READ_ONLY = "read_only"
    SIDE_EFFECTING = "side_effecting"
    PRIVILEGED = "privileged"


class Code:
    """The error codes the kernel knows. A tool may use codes of its own
    too: any string of a-z 0-9 _ (1 to 32 characters)."""

    INVALID_ARGS = "invalid_args"
    NOT_FOUND = "not_found"
    PERMISSION_DENIED = "permission_denied"
    UNAVAILABLE = "unavailable"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    PANIC = "panic"
    UNKNOWN_TOOL = "unknown_tool"
    TOOL_ERROR = "tool_error"


_CODE_RE = re.compile(r"^[a-z0-9_]{1,32}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,63}$")


class ToolError(Exception):
    """An error whose code crosses the process boundary: on the kernel's
    side errors.Is(err, sdk.ErrNotFound) holds for a
    ToolError(Code.NOT_FOUND, ...). Any other exception gets the code
    tool_error (or timeout / cancelled when the call's end stopped it)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code if _CODE_RE.match(code or "") else Code.TOOL_ERROR
        self.message = message

    def __str__(self) -> str:
        return self.message


class SideEffect(enum.StrEnum):
    """What a side-effect check found out about an interrupted call."""

    UNKNOWN = "unknown"
    COMPLETED = "completed"
    NOT_RUN = "not_run"


@dataclasses.dataclass(frozen=True)
class ToolResult:
    """A handler's result when it is more than text."""

    content: str
    is_error: bool = False


class CallContext:
    """What a handler gets besides its arguments.

    An async handler is cancelled (asyncio.CancelledError at its next
    await) when the call's deadline passes or the kernel cancels the call;
    a plain function, run in a thread, must poll ``cancelled``. Both can
    read ``deadline`` and report ``progress``. Safe to use from any thread.
    """

    def __init__(self, deadline: float | None, report: Callable[[str], None]) -> None:
        #: When the call's deadline passes (time.time() seconds), if it has one.
        self.deadline = deadline
        self._report = report
        self._cancelled = threading.Event()
        self._reason: str | None = None

    def progress(self, text: str) -> None:
        """Reports progress; the kernel shows it as a tool.progress event.
        Reports after the handler returned are dropped."""
        self._report(str(text))

    @property
    def cancelled(self) -> bool:
        """Whether the call ended: its deadline passed or it was cancelled."""
        return self._cancelled.is_set()

    @property
    def reason(self) -> str | None:
        """Code.TIMEOUT or Code.CANCELLED once the call ended, else None."""
        return self._reason

    def _cancel(self, reason: str) -> None:
        if not self._cancelled.is_set():
            self._reason = reason
            self._cancelled.set()


Handler = Callable[..., "Awaitable[str | ToolResult] | str | ToolResult"]
SideEffectCheck = Callable[..., "Awaitable[tuple[SideEffect, str] | SideEffect] | tuple[SideEffect, str] | SideEffect"]


class Tool:
    """A checked tool, ready to serve. Make it with the :func:`tool` decorator."""

    def __init__(
        self,
        *,
        name: str,
        tier: Tier | str,
        handler: Handler,
        description: str = "",
        schema: Mapping[str, Any] | str | None = None,
        tags: Sequence[str] = (),
        timeout: float | None = None,
    ) -> None:
        where = f"agentkernel plugin: tool {name!r}"
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise TypeError(f"{where}: the name must be 1-63 characters of A-Z a-z 0-9 _ -")
        try:
            tier = Tier(tier)
        except ValueError:
            raise TypeError(f"{where}: tier {tier!r} is not one of read_only, side_effecting, privileged") from None
        if not callable(handler):
            raise TypeError(f"{where}: no handler")
        if timeout is not None and not timeout >= 0:
            raise TypeError(f"{where}: timeout must be a non-negative number of seconds, got {timeout!r}")
        self.name = name
        self.tier = tier
        self.description = description or inspect.getdoc(handler) or ""
        self.schema = _schema_text(schema, where)
        self.tags = tuple(tags)
        self.timeout = timeout or 0.0
        self.handler = handler
        self._args_type = _args_type(handler)
        self._check: SideEffectCheck | None = None

    def check_side_effect(self, fn: SideEffectCheck) -> SideEffectCheck:
        """Decorates the tool's side-effect check: after the kernel crashed,
        it tells whether an interrupted call of the tool completed. It gets
        the call's arguments and ``since`` (a datetime: when the call's
        round started), must only read, and returns a SideEffect and a
        short detail naming what it checked (a path, a hash; never
        contents); SideEffect.UNKNOWN unless sure."""
        if not callable(fn):
            raise TypeError(f"agentkernel plugin: tool {self.name!r}: the side-effect check must be callable")
        self._check = fn
        return fn

    @property
    def checks_side_effects(self) -> bool:
        return self._check is not None

    def decode_args(self, raw: Mapping[str, Any]) -> Any:
        """Turns the validated JSON arguments into what the handler's first
        parameter is annotated with: a dataclass (fields by name; other keys
        are ignored), or the dict itself (a TypedDict, dict, or no
        annotation)."""
        t = self._args_type
        if t is not None and dataclasses.is_dataclass(t):
            names = {f.name for f in dataclasses.fields(t) if f.init}
            try:
                return t(**{k: v for k, v in raw.items() if k in names})
            except TypeError as e:
                raise ToolError(Code.INVALID_ARGS, f"the arguments do not fit {t.__name__}: {e}") from e
        return dict(raw)


def tool(
    *,
    name: str,
    tier: Tier | str,
    description: str = "",
    schema: Mapping[str, Any] | str | None = None,
    tags: Sequence[str] = (),
    timeout: float | None = None,
) -> Callable[[Handler], Tool]:
    """Makes a tool of the decorated handler.

    The handler takes the arguments (a dataclass, a TypedDict or a dict,
    after the kernel validated them against ``schema``) and a CallContext,
    and returns the text the model reads or a ToolResult; it raises
    ToolError to fail with a code. ``description`` defaults to the
    handler's docstring. ``timeout`` (seconds) bounds one call. A bad spec
    raises TypeError at once, naming the tool.
    """

    def wrap(handler: Handler) -> Tool:
        return Tool(name=name, tier=tier, handler=handler, description=description, schema=schema, tags=tags, timeout=timeout)

    return wrap


def _schema_text(schema: Mapping[str, Any] | str | None, where: str) -> str:
    """The schema as JSON, after the check the SDK makes without a JSON
    Schema library (the kernel compiles it in full): one JSON object whose
    "type", if any, is "object"."""
    if schema is None:
        return '{"type":"object"}'
    value: Any = schema
    if isinstance(schema, str):
        try:
            value = json.loads(schema)
        except ValueError as e:
            raise TypeError(f"{where}: schema is not JSON: {e}") from None
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}: schema must be a JSON object")
    if "type" in value and value["type"] != "object":
        raise TypeError(f'{where}: schema type must be "object" (tool arguments are a JSON object), got {value["type"]!r}')
    try:
        return json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise TypeError(f"{where}: schema is not JSON: {e}") from None


def _args_type(handler: Handler) -> type | None:
    """The annotation of the handler's first parameter, if it is a class."""
    try:
        params = list(inspect.signature(handler).parameters.values())
        hints = typing.get_type_hints(handler)
    except (TypeError, ValueError, NameError):
        return None
    if not params:
        return None
    t = hints.get(params[0].name)
    return t if isinstance(t, type) else None


def parse_args(raw: bytes) -> dict[str, Any]:
    """What the SDK checks of the arguments itself: a JSON object."""
    if not raw or not raw.strip():
        return {}
    try:
        v = json.loads(raw)
    except ValueError as e:
        raise ToolError(Code.INVALID_ARGS, f"arguments are not valid JSON: {e}") from None
    if not isinstance(v, dict):
        raise ToolError(Code.INVALID_ARGS, "arguments must be a JSON object")
    return v


def truncate_output(s: str, max_bytes: int) -> str:
    """Cuts s to at most max_bytes of UTF-8 and appends the kernel's
    marker; unchanged when it fits or max_bytes <= 0."""
    b = s.encode("utf-8", "surrogatepass")
    if max_bytes <= 0 or len(b) <= max_bytes:
        return s
    cut = max_bytes
    while cut > 0 and (b[cut] & 0xC0) == 0x80:
        cut -= 1
    return b[:cut].decode("utf-8", "replace") + truncation_marker(len(b), max_bytes)


def truncation_marker(total: int, max_bytes: int) -> str:
    """The line truncate_output appends (sdk.TruncationMarker)."""
    return f"\n[output truncated: {total} bytes, limit {max_bytes}]"


def since_datetime(since_unix_nano: int) -> datetime:
    """The kernel's since_unix_nano as an aware datetime."""
    return datetime.fromtimestamp(since_unix_nano / 1e9, tz=timezone.utc)
