"""The tool service (agentkernel.plugin.v1.Tools) over a set of tools:
what serve() registers on its gRPC server and the harness on its own."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from ._proto import plugin_pb2 as pb
from ._tool import (
    CallContext,
    Code,
    SideEffect,
    Tool,
    ToolError,
    ToolResult,
    parse_args,
    since_datetime,
    truncate_output,
)

#: Reported by Describe, for diagnostics (`kernel plugins verify` prints it).
SDK_VERSION = "python/0.1.0"

# Caps, as the Go SDK's: an error message when the call has no output cap,
# a side-effect check's detail.
_MAX_ERROR_MESSAGE = 64 << 10
_MAX_SIDE_EFFECT_DETAIL = 1 << 10
# How long past the kernel's deadline a call waits for grpc to cancel it.
_GRACE = 0.5


def tools_by_name(tools: Sequence[Tool], hooks: bool = False) -> dict[str, Tool]:
    """Checks that tools is a list of distinct tools, non-empty unless the
    plugin serves hooks."""
    if not tools and not hooks:
        raise TypeError("agentkernel plugin: no tools to serve")
    by_name: dict[str, Tool] = {}
    for t in tools:
        if not isinstance(t, Tool):
            raise TypeError(f"agentkernel plugin: {t!r} is not a tool (make tools with @tool(...))")
        if t.name in by_name:
            raise TypeError(f"agentkernel plugin: tool {t.name}: defined twice")
        by_name[t.name] = t
    return by_name


class ToolsServicer:
    """Implements the tool service for a set of tools."""

    def __init__(self, by_name: Mapping[str, Tool]) -> None:
        self._tools = by_name

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            "agentkernel.plugin.v1.Tools",
            {
                "Describe": grpc.unary_unary_rpc_method_handler(
                    self.describe,
                    request_deserializer=pb.DescribeRequest.FromString,
                    response_serializer=pb.DescribeResponse.SerializeToString,
                ),
                "Call": grpc.unary_stream_rpc_method_handler(
                    self.call,
                    request_deserializer=pb.CallRequest.FromString,
                    response_serializer=pb.CallEvent.SerializeToString,
                ),
                "CheckSideEffect": grpc.unary_unary_rpc_method_handler(
                    self.check_side_effect,
                    request_deserializer=pb.CheckSideEffectRequest.FromString,
                    response_serializer=pb.CheckSideEffectResponse.SerializeToString,
                ),
            },
        )

    async def describe(self, _request: pb.DescribeRequest, _context: Any) -> pb.DescribeResponse:
        return pb.DescribeResponse(
            sdk_version=SDK_VERSION,
            tools=[
                pb.ToolSpec(
                    name=t.name,
                    description=t.description,
                    schema=t.schema.encode(),
                    tier=str(t.tier),
                    tags=list(t.tags),
                    timeout_ms=round(t.timeout * 1000),
                    checks_side_effects=t.checks_side_effects,
                )
                for t in self._tools.values()
            ],
        )

    async def call(self, request: pb.CallRequest, context: grpc.aio.ServicerContext) -> None:
        """Runs one call: progress events while the handler runs, then one
        result. The handler runs as a task of its own, cancelled when the
        call's deadline passes or the kernel cancels the call."""
        t = self._tools.get(request.tool)
        if t is None:
            await _send(context, _result_event(_error_result(Code.UNKNOWN_TOOL, f"unknown tool {request.tool!r}", 0)))
            return
        max_out = request.max_output_bytes
        deadline, own = _deadline(context, t.timeout)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        done = False

        def report(text: str) -> None:
            if not done:
                loop.call_soon_threadsafe(queue.put_nowait, text)

        ctx = CallContext(deadline, report)

        async def writer() -> None:
            while (text := await queue.get()) is not None:
                await _send(context, pb.CallEvent(progress=pb.Progress(text=text)))

        writing = asyncio.create_task(writer())
        work = asyncio.create_task(_run(t, request.args, ctx))
        try:
            # The tool's own timeout is ours to enforce; at the kernel's
            # deadline grpc cancels this coroutine (the grace is in case
            # it does not), and a result written then would go nowhere.
            timeout = None if deadline is None else max(0.0, deadline - time.time()) + (0 if own else _GRACE)
            finished, _ = await asyncio.wait({work}, timeout=timeout)
            if not finished:
                ctx._cancel(Code.TIMEOUT)
                work.cancel()
            result = await _outcome(work, ctx, max_out)
        except asyncio.CancelledError:
            # The kernel cancelled the call, or its deadline (which grpc
            # enforces too) passed: stop the handler, answer nothing.
            ctx._cancel(Code.TIMEOUT if deadline is not None and time.time() >= deadline - 0.005 else Code.CANCELLED)
            work.cancel()
            done = True
            writing.cancel()
            raise
        done = True
        queue.put_nowait(None)
        await writing
        await _send(context, _result_event(result))

    async def check_side_effect(self, request: pb.CheckSideEffectRequest, _context: Any) -> pb.CheckSideEffectResponse:
        t = self._tools.get(request.tool)
        if t is None:
            return pb.CheckSideEffectResponse(detail=f"unknown tool {request.tool!r}")
        if t._check is None:
            return pb.CheckSideEffectResponse()
        try:
            args = t.decode_args(parse_args(request.args))
            fn = t._check
            since = since_datetime(request.since_unix_nano)
            answer = await fn(args, since) if inspect.iscoroutinefunction(fn) else await asyncio.to_thread(fn, args, since)
            if isinstance(answer, tuple):
                effect, detail = answer
            else:
                effect, detail = answer, ""
            effect = SideEffect(effect)
        except Exception as e:  # noqa: BLE001 - a failed check is an unknown answer
            effect, detail = SideEffect.UNKNOWN, f"the check failed: {e}"
        detail = truncate_output(str(detail or ""), _MAX_SIDE_EFFECT_DETAIL)
        effects = {SideEffect.COMPLETED: pb.SIDE_EFFECT_COMPLETED, SideEffect.NOT_RUN: pb.SIDE_EFFECT_NOT_RUN}
        return pb.CheckSideEffectResponse(effect=effects.get(effect, pb.SIDE_EFFECT_UNKNOWN), detail=detail)


async def _run(t: Tool, raw: bytes, ctx: CallContext) -> str | ToolResult:
    args = t.decode_args(parse_args(raw))
    if inspect.iscoroutinefunction(t.handler):
        return await t.handler(args, ctx)
    # A plain function runs in a thread, so the event loop keeps serving;
    # it sees the end of its call through ctx.cancelled.
    return await asyncio.to_thread(t.handler, args, ctx)


async def _outcome(work: asyncio.Task[str | ToolResult], ctx: CallContext, max_out: int) -> pb.Result:
    try:
        out = await work
    except asyncio.CancelledError:
        return _error_result(ctx.reason or Code.CANCELLED, "the call's deadline passed" if ctx.reason == Code.TIMEOUT else "the call was cancelled", max_out)
    except ToolError as e:
        return _error_result(e.code, e.message, max_out)
    except Exception as e:  # noqa: BLE001 - a failing handler is a tool error, not a crash
        return _error_result(ctx.reason or Code.TOOL_ERROR, str(e) or type(e).__name__, max_out)
    if isinstance(out, ToolResult):
        content, is_error = out.content, out.is_error
    elif isinstance(out, str):
        content, is_error = out, False
    else:
        return _error_result(Code.TOOL_ERROR, f"the handler returned {type(out).__name__}, not str or ToolResult", max_out)
    size = len(content.encode("utf-8", "surrogatepass"))
    if max_out > 0 and size > max_out:
        return pb.Result(content=truncate_output(content, max_out), is_error=is_error, truncated_from=size)
    return pb.Result(content=content, is_error=is_error)


async def _send(context: grpc.aio.ServicerContext, event: pb.CallEvent) -> None:
    """Writes an event of the call. grpc refuses the write once the call
    has ended on the host's side (its deadline passed, the kernel cancelled
    it, the connection went; the context does not say so yet): there is
    nobody left to tell, and the host reports the call's end itself."""
    try:
        await context.write(event)
    except Exception:  # noqa: BLE001 - grpc raises its internal ExecuteBatchError
        pass


# The metadata key of the kernel's deadline as an absolute time (Unix
# milliseconds). grpc sends a duration, counted here from when the call is
# read: later than the kernel counted from on a loaded machine, so that
# the kernel's cancel at its deadline could arrive before ours and look
# like a cancellation.
DEADLINE_METADATA = "agentkernel-deadline-ms"


def _deadline(context: Any, timeout: float) -> tuple[float | None, bool]:
    """The earlier of the kernel's deadline (its absolute one, else grpc's)
    and the tool's own timeout, as time.time() seconds, and whether it is
    the tool's own."""
    now = time.time()
    remaining = context.time_remaining() if context is not None else None
    deadline = None if remaining is None else now + remaining
    for key, value in (context.invocation_metadata() or ()) if context is not None else ():
        if key == DEADLINE_METADATA:
            try:
                at = int(value) / 1000
            except ValueError:
                break
            if deadline is None or at < deadline:
                deadline = at
            break
    if timeout > 0 and (deadline is None or now + timeout < deadline):
        return now + timeout, True
    return deadline, False


def _error_result(code: str, message: str, max_out: int) -> pb.Result:
    message = truncate_output(message, max_out if max_out > 0 else _MAX_ERROR_MESSAGE)
    return pb.Result(is_error=True, error=pb.Error(code=code, message=message))


def _result_event(r: pb.Result) -> pb.CallEvent:
    return pb.CallEvent(result=r)
