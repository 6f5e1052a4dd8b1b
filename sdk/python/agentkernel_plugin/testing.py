"""The test harness: serves tools in-process through the SDK's real gRPC
tool service (on a unix socket in a private temporary directory, without
TLS) and calls them as the kernel does, so a test sees progress,
cancellation, deadlines, truncation and error codes exactly as they cross
the wire. It does not check arguments against the schema (the kernel
does, before a call reaches the plugin); `kernel plugins verify` and the
kernel's conformance suite run the real plugin through the real host.

    class TestGreet(unittest.IsolatedAsyncioTestCase):
        async def test_greet(self):
            async with Harness([greet]) as h:
                out = await h.call("greet", {"name": "Ada"})
                self.assertEqual(out.content, "Hello, Ada!")
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import grpc

from ._proto import plugin_pb2 as pb
from ._service import DEADLINE_METADATA, ToolsServicer, tools_by_name
from ._tool import SideEffect, Tier, Tool

__all__ = ["CallOutcome", "DescribedTool", "Harness"]


@dataclasses.dataclass(frozen=True)
class DescribedTool:
    """A tool as the kernel sees it in the plugin's Describe answer."""

    name: str
    description: str
    schema: dict[str, Any]
    tier: Tier
    tags: tuple[str, ...]
    timeout: float
    checks_side_effects: bool


@dataclasses.dataclass
class CallOutcome:
    """What one call returned."""

    #: The text the model would read ("" for an error).
    content: str
    is_error: bool
    #: The error's code, when the call failed.
    code: str | None = None
    message: str = ""
    #: The progress reports, in order.
    progress: list[str] = dataclasses.field(default_factory=list)
    #: The content's length in bytes before the plugin cut it, or 0.
    truncated_from: int = 0


class Harness:
    """Serves tools for a test; use it as an async context manager."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._by_name = tools_by_name(tools)
        self.tools: list[DescribedTool] = []

    async def __aenter__(self) -> Harness:
        self._dir = tempfile.mkdtemp(prefix="agentkernel-harness-")
        target = f"unix:{self._dir}/plugin.sock"
        self._server = grpc.aio.server()
        self._server.add_generic_rpc_handlers((ToolsServicer(self._by_name).handler(),))
        self._server.add_insecure_port(target)
        await self._server.start()
        self._channel = grpc.aio.insecure_channel(target)
        svc = "/agentkernel.plugin.v1.Tools/"
        self._describe = self._channel.unary_unary(svc + "Describe", pb.DescribeRequest.SerializeToString, pb.DescribeResponse.FromString)
        self._call = self._channel.unary_stream(svc + "Call", pb.CallRequest.SerializeToString, pb.CallEvent.FromString)
        self._check = self._channel.unary_unary(
            svc + "CheckSideEffect", pb.CheckSideEffectRequest.SerializeToString, pb.CheckSideEffectResponse.FromString
        )
        desc = await self._describe(pb.DescribeRequest())
        self.tools = [
            DescribedTool(
                name=t.name,
                description=t.description,
                schema=json.loads(t.schema),
                tier=Tier(t.tier),
                tags=tuple(t.tags),
                timeout=t.timeout_ms / 1000,
                checks_side_effects=t.checks_side_effects,
            )
            for t in desc.tools
        ]
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self._channel.close()
        await self._server.stop(grace=None)
        shutil.rmtree(self._dir, ignore_errors=True)

    async def call(
        self,
        name: str,
        args: Any,
        *,
        timeout: float | None = None,
        max_output_bytes: int = 0,
        cancel: asyncio.Event | None = None,
    ) -> CallOutcome:
        """Calls a tool by name. A tool's error is in the outcome, not
        raised. ``timeout`` is the call's deadline (seconds) as the kernel
        sends it; setting ``cancel`` cancels the call, as the kernel does
        when a run is cancelled: the outcome's code is then "cancelled"
        (or "timeout" past the deadline)."""
        req = pb.CallRequest(tool=name, args=json.dumps(args).encode(), max_output_bytes=max_output_bytes)
        # As the kernel does: grpc's deadline, and the same deadline as an
        # absolute time, so that the plugin tells it from a cancel.
        metadata = None if timeout is None else ((DEADLINE_METADATA, str(int((time.time() + timeout) * 1000))),)
        stream = self._call(req, timeout=timeout, metadata=metadata)
        out = CallOutcome(content="", is_error=False)
        watcher = asyncio.create_task(_cancel_when(cancel, stream)) if cancel is not None else None
        try:
            async for ev in stream:
                if ev.HasField("progress"):
                    out.progress.append(ev.progress.text)
                elif ev.HasField("result"):
                    r = ev.result
                    out.content, out.is_error, out.truncated_from = r.content, r.is_error, r.truncated_from
                    if r.HasField("error"):
                        out.code, out.message = r.error.code, r.error.message
                    return out
        except (grpc.aio.AioRpcError, asyncio.CancelledError) as e:
            code = e.code() if isinstance(e, grpc.aio.AioRpcError) else grpc.StatusCode.CANCELLED
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                out.is_error, out.code = True, "timeout"
                return out
            if code == grpc.StatusCode.CANCELLED and cancel is not None and cancel.is_set():
                out.is_error, out.code = True, "cancelled"
                return out
            raise
        finally:
            if watcher is not None:
                watcher.cancel()
        raise RuntimeError(f"tool {name}: the stream ended without a result")

    async def check_side_effect(self, name: str, args: Any, since: datetime) -> tuple[SideEffect, str]:
        """Asks a tool's side-effect check about a call started at since."""
        resp = await self._check(
            pb.CheckSideEffectRequest(tool=name, args=json.dumps(args).encode(), since_unix_nano=int(since.timestamp() * 1e9))
        )
        effect = {pb.SIDE_EFFECT_COMPLETED: SideEffect.COMPLETED, pb.SIDE_EFFECT_NOT_RUN: SideEffect.NOT_RUN}.get(resp.effect, SideEffect.UNKNOWN)
        return effect, resp.detail


async def _cancel_when(event: asyncio.Event, stream: Any) -> None:
    await event.wait()
    stream.cancel()
