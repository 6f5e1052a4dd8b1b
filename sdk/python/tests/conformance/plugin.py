"""The Python conformance plugin: the tool set every SDK's conformance
plugin serves (sdk/README.md lists it), run by the kernel's conformance
suite (sdk/sdktest.Conformance) through the real host. The test
puts it in a directory with the SDK and locks it."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass

from agentkernel_plugin import CallContext, Code, SideEffect, ToolError, hook, serve, tool
from agentkernel_plugin import block as block_reply

TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False}
PATH = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": False}


@dataclass
class Text:
    text: str


@dataclass
class Path:
    path: str


@dataclass
class Fail:
    code: str
    message: str


@tool(name="echo", tier="read_only", schema=TEXT)
async def echo(args: Text, ctx: CallContext) -> str:
    """Returns its text."""
    return args.text


@tool(name="fail", tier="read_only", schema={"type": "object", "required": ["code", "message"]})
async def fail(args: Fail, ctx: CallContext) -> str:
    """Fails with a code."""
    raise ToolError(args.code, args.message)


@tool(name="progress", tier="read_only", schema={"type": "object", "properties": {"count": {"type": "integer", "minimum": 1}}, "required": ["count"]})
async def progress(args: dict, ctx: CallContext) -> str:
    """Reports progress count times."""
    n = args["count"]
    for i in range(1, n + 1):
        ctx.progress(f"step {i}/{n}")
    return "done"


@tool(name="block", tier="read_only", schema=PATH)
async def block(args: Path, ctx: CallContext) -> str:
    """Reports progress, then waits until its call ends; writes why to path."""
    ctx.progress("blocking")
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        with open(args.path, "w") as f:
            f.write(f"stopped: {ctx.reason}")
        raise
    return "unreachable"


@tool(name="big", tier="read_only", schema={"type": "object", "properties": {"bytes": {"type": "integer", "minimum": 0}}, "required": ["bytes"]})
async def big(args: dict, ctx: CallContext) -> str:
    """Returns that many bytes."""
    return "x" * args["bytes"]


@tool(name="mark", tier="side_effecting", schema=PATH)
async def mark(args: Path, ctx: CallContext) -> str:
    """Writes "marked" to path."""
    with open(args.path, "w") as f:
        f.write("marked")
    return "marked"


@mark.check_side_effect
async def _mark_ran(args: Path, since) -> tuple[SideEffect, str]:
    try:
        with open(args.path) as f:
            if f.read() == "marked":
                return SideEffect.COMPLETED, f"{args.path} has the mark"
    except FileNotFoundError:
        return SideEffect.NOT_RUN, f"{args.path} does not exist"
    return SideEffect.UNKNOWN, ""


@tool(name="crash", tier="read_only", schema=TEXT)
async def crash(args: Text, ctx: CallContext) -> str:
    """Dies: the process exits at once, as after a fatal error."""
    os.write(2, f"dying: {args.text}\n".encode())
    os._exit(3)


@tool(name="ignore", tier="read_only")
def ignore(args: dict, ctx: CallContext) -> str:
    """Reports progress, then never answers, ignoring its cancellation (a
    blocking function in its thread)."""
    ctx.progress("ignoring")
    while True:
        time.sleep(3600)


@tool(name="noop", tier="read_only")
async def noop(args: dict, ctx: CallContext) -> str:
    """Does nothing."""
    return ""


# The sandbox's attack tools: each reports what it managed.


@tool(name="read", tier="read_only", schema=PATH)
async def read(args: Path, ctx: CallContext) -> str:
    """Reads a file."""
    try:
        with open(args.path) as f:
            return f.read()
    except OSError as e:
        raise ToolError(Code.PERMISSION_DENIED, str(e)) from e


@dataclass
class Dial:
    network: str
    address: str


@tool(name="dial", tier="read_only", schema={"type": "object", "required": ["network", "address"]})
async def dial(args: Dial, ctx: CallContext) -> str:
    """Connects to an address."""
    try:
        if args.network == "unix":
            conn = asyncio.open_unix_connection(args.address)
        else:
            host, _, port = args.address.rpartition(":")
            conn = asyncio.open_connection(host, int(port))
        _, writer = await asyncio.wait_for(conn, 5)
    except (OSError, asyncio.TimeoutError) as e:
        raise ToolError(Code.PERMISSION_DENIED, str(e) or type(e).__name__) from e
    writer.close()
    return f"connected to {args.address}"


# The conformance hooks (sdk/sdktest, conformance_hooks.go).


@hook(name="conformance", points=["before_model", "after_model", "before"],
      description="Blocks BLOCK-ME, counts messages, shouts answers, denies deny.")
def conformance(doc: dict) -> dict | None:
    if doc["phase"] == "before_model":
        if any("BLOCK-ME" in m.get("content", "") for m in doc["messages"]):
            return block_reply("conformance: blocked")
        return {"context": f"conformance: seen {len(doc['messages'])} messages"}
    if doc["phase"] == "after_model":
        return {"text": doc["answer"].get("content", "").upper()}
    if "deny" in doc["args"]:
        return block_reply("conformance: denied")
    return {"additional_context": "conformance"}


@hook(name="conformance_fail", points=["run_end"], description="Always fails.")
async def conformance_fail(doc: dict) -> dict | None:
    raise ToolError("hook_broken", "broken on purpose")


@hook(name="conformance_hang", points=["before_model"],
      description="Answers only when its call ends, then writes stopped to the file the request's last message names.")
async def conformance_hang(doc: dict) -> dict | None:
    path = doc["messages"][-1]["content"]
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        with open(path, "w") as f:
            f.write("stopped")
        raise
    return None


@hook(name="conformance_garbage", points=["after_model"], description="Answers with a field its point does not take.")
def conformance_garbage(doc: dict) -> dict | None:
    return {"note": "a run_end field"}


if __name__ == "__main__":
    serve([echo, fail, progress, block, big, mark, crash, ignore, noop, read, dial], [conformance, conformance_fail, conformance_hang, conformance_garbage])
