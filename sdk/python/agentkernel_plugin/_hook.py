"""Hooks a plugin serves (docs/hooks.md, kind plugin): code the kernel
runs at the hook points a configuration rule names. The documents are the
command hooks': a hook reads the input a command hook reads on stdin and
answers the reply a command hook prints (schemas/hook-input.schema.json,
schemas/hook-output.schema.json). The concepts are the Go SDK's (sdk.Hook).

    from agentkernel_plugin import block, hook

    @hook(name="guard", points=["before_model"])
    async def guard(doc: dict) -> dict | None:
        if any("BLOCK" in m.get("content", "") for m in doc["messages"]):
            return block("no")
        return None
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import grpc

from ._proto import plugin_pb2 as pb
from ._tool import Code, ToolError, truncate_output

#: The hook points, in the order a run meets them (the kernel's HookPoints).
HOOK_POINTS = ("run_start", "before_compact", "before_model", "after_model", "before", "after", "run_end")

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,63}$")
_MAX_ERROR_MESSAGE = 64 << 10

HookFunc = Callable[[dict[str, Any]], Awaitable[Mapping[str, Any] | None] | Mapping[str, Any] | None]


def block(reason: str) -> dict[str, Any]:
    """A reply that blocks with reason."""
    return {"decision": "block", "reason": reason}


class Hook:
    """A checked hook, ready to serve. Make it with @hook(...)."""

    def __init__(self, name: str, description: str, points: Sequence[str], fn: HookFunc) -> None:
        where = f"agentkernel plugin: hook {name!r}"
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise TypeError(f"{where}: the name must be 1-63 characters of A-Z a-z 0-9 _ -")
        if not callable(fn):
            raise TypeError(f"{where}: no function")
        if not points:
            raise TypeError(f"{where}: no points (want some of {', '.join(HOOK_POINTS)})")
        for p in points:
            if p not in HOOK_POINTS:
                raise TypeError(f"{where}: {p!r} is not a hook point")
        self.name, self.description, self.points, self._fn = name, description, list(points), fn

    async def run(self, document: bytes) -> bytes:
        """Runs the hook on an input document; returns the reply document (b"" allows)."""
        try:
            doc = json.loads(document)
        except ValueError as e:
            raise ToolError(Code.INVALID_ARGS, f"the hook input is not JSON: {e}") from None
        if not isinstance(doc, dict) or doc.get("phase") not in self.points:
            raise ToolError(Code.INVALID_ARGS, f"hook {self.name} does not run at {doc.get('phase') if isinstance(doc, dict) else None!r} (it runs at {', '.join(self.points)})")
        rep = self._fn(doc)
        if inspect.isawaitable(rep):
            rep = await rep
        if not rep:
            return b""
        out = {"decision": "allow", **dict(rep)}
        return json.dumps(out, ensure_ascii=False).encode()


def hook(*, name: str, points: Sequence[str], description: str = "") -> Callable[[HookFunc], Hook]:
    """Makes a function (sync or async, taking the input document as a dict
    and returning the reply as a dict, or None to allow) a hook. A bad
    name or point raises TypeError at once."""

    def wrap(fn: HookFunc) -> Hook:
        return Hook(name, description, points, fn)

    return wrap


def hooks_by_name(hooks: Sequence[Hook]) -> dict[str, Hook]:
    """Checks that hooks are distinct hooks."""
    by_name: dict[str, Hook] = {}
    for h in hooks:
        if not isinstance(h, Hook):
            raise TypeError(f"agentkernel plugin: {h!r} is not a hook (make hooks with @hook(...))")
        if h.name in by_name:
            raise TypeError(f"agentkernel plugin: hook {h.name}: defined twice")
        by_name[h.name] = h
    return by_name


class HooksServicer:
    """Implements the hook service (agentkernel.plugin.v1.Hooks)."""

    def __init__(self, by_name: Mapping[str, Hook], sdk_version: str) -> None:
        self._hooks, self._version = by_name, sdk_version

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            "agentkernel.plugin.v1.Hooks",
            {
                "ListHooks": grpc.unary_unary_rpc_method_handler(
                    self.list_hooks,
                    request_deserializer=pb.ListHooksRequest.FromString,
                    response_serializer=pb.ListHooksResponse.SerializeToString,
                ),
                "RunHook": grpc.unary_unary_rpc_method_handler(
                    self.run_hook,
                    request_deserializer=pb.RunHookRequest.FromString,
                    response_serializer=pb.RunHookResponse.SerializeToString,
                ),
            },
        )

    async def list_hooks(self, _request: pb.ListHooksRequest, _context: Any) -> pb.ListHooksResponse:
        return pb.ListHooksResponse(
            sdk_version=self._version,
            hooks=[pb.HookSpec(name=h.name, description=h.description, points=h.points) for h in self._hooks.values()],
        )

    async def run_hook(self, request: pb.RunHookRequest, _context: Any) -> pb.RunHookResponse:
        h = self._hooks.get(request.hook)
        if h is None:
            return pb.RunHookResponse(error=pb.Error(code=Code.NOT_FOUND, message=f"no hook {request.hook!r}"))
        try:
            return pb.RunHookResponse(reply=await h.run(request.input))
        except ToolError as e:
            return pb.RunHookResponse(error=pb.Error(code=e.code, message=truncate_output(e.message, _MAX_ERROR_MESSAGE)))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - the hook's failure, for its fail mode
            return pb.RunHookResponse(error=pb.Error(code=Code.TOOL_ERROR, message=truncate_output(f"{type(e).__name__}: {e}", _MAX_ERROR_MESSAGE)))
