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

import importlib.util as _importlib_util
import sys as _sys

# The SDK's three dependencies, and Debian's packages of them. A python3
# that comes first in PATH (pyenv's, a virtual environment's) does not see
# Debian's packages; say so, naming the interpreter, instead of a bare
# "No module named 'grpc'" from deep inside the SDK.
_DEPENDENCIES = (
    ("grpc", "python3-grpcio"),
    ("google.protobuf", "python3-protobuf"),
    ("cryptography", "python3-cryptography"),
)


def _missing_dependencies() -> list:
    missing = []
    for module, _package in _DEPENDENCIES:
        try:
            found = _importlib_util.find_spec(module) is not None
        except ImportError:  # the parent package (google) is missing
            found = False
        if not found:
            missing.append(module)
    return missing


_missing = _missing_dependencies()
if _missing:
    raise ImportError(
        "agentkernel_plugin needs grpcio, protobuf and cryptography, and "
        f"{_sys.executable} (Python {_sys.version.split()[0]}) cannot import "
        f"{', '.join(_missing)}. Debian packages them for its own Python: run "
        "the plugin, and its tests, with /usr/bin/python3 after\n"
        "    sudo apt-get install -y "
        + " ".join(package for _module, package in _DEPENDENCIES)
        + "\n(a python3 that comes first in PATH, such as pyenv's or a virtual "
        "environment's, does not see them; docs/plugins.md, \"Python\")",
        name=_missing[0],
    )

from ._hook import HOOK_POINTS, Hook, block, hook  # noqa: E402
from ._serve import PROTOCOL_VERSION, serve  # noqa: E402
from ._service import SDK_VERSION  # noqa: E402
from ._tool import (  # noqa: E402
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
