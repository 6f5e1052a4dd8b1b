"""agentkernel_plugin: agentkernel tool plugins in Python (3.11+, asyncio).

    from dataclasses import dataclass
    from agentkernel_plugin import CallContext, serve, tool

    @dataclass
    class GreetArgs:
        name: str

    @tool(name="greet", tier="read_only", schema={...})
    async def greet(args: GreetArgs, ctx: CallContext) -> str:
        return f"Hello, {args.name}!"

    if __name__ == "__main__":
        serve([greet])      # serve([greet], [my_hook]) with hooks (@hook)

docs/plugins.md has the tutorial; agentkernel_plugin.testing the test
harness. It needs grpcio, protobuf and cryptography (Debian:
python3-grpcio python3-protobuf python3-cryptography).
"""

from ._hook import HOOK_POINTS, Hook, block, hook
from ._serve import PROTOCOL_VERSION, serve
from ._service import SDK_VERSION
from ._tool import (
    CallContext,
    Code,
    SideEffect,
    Tier,
    Tool,
    ToolError,
    ToolResult,
    tool,
    truncate_output,
    truncation_marker,
)

__all__ = [
    "HOOK_POINTS",
    "Hook",
    "PROTOCOL_VERSION",
    "SDK_VERSION",
    "CallContext",
    "Code",
    "SideEffect",
    "Tier",
    "Tool",
    "ToolError",
    "ToolResult",
    "block",
    "hook",
    "serve",
    "tool",
    "truncate_output",
    "truncation_marker",
]
