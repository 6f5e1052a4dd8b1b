"""serve(): go-plugin's plugin side, for the kernel's host. In order:

1. Check the tools and the magic cookie the host sets (a plugin run by
   hand says what it is and exits 1).
2. Take stdout over: the host's pipe is kept for the handshake line alone,
   and file descriptor 1 (print, child processes) points at stderr.
3. AutoMTLS: trust only the client certificate the host put in
   PLUGIN_CLIENT_CERT, and serve with the key and certificate the host
   made for this process (PLUGIN_SERVER_KEY, PLUGIN_SERVER_CERT; taken
   out of the environment at once), or, from a host that hands none, a
   certificate of our own.
4. Listen on a fresh unix socket in PLUGIN_UNIX_SOCKET_DIR and serve the
   tool service, gRPC health ("plugin": SERVING) and go-plugin's
   controller, stdio and broker services.
5. Print the handshake line, CORE|APP|unix|ADDR|grpc|CERT.
6. Run until the host asks us to stop (GRPCController.Shutdown), our
   parent goes away (polled every half second), or SIGTERM.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

import grpc

from ._proto import goplugin_pb2 as gp
from ._proto import health_pb2 as hp
from ._hook import Hook, HooksServicer, hooks_by_name
from ._service import SDK_VERSION, ToolsServicer, tools_by_name
from ._tool import Tool

#: The tool protocol version, negotiated in go-plugin's handshake
#: (sdk.ProtocolVersion).
PROTOCOL_VERSION = 1
#: go-plugin's own protocol version (its CoreProtocolVersion).
CORE_PROTOCOL_VERSION = 1
#: The magic cookie the kernel sets for its plugins (sdk).
MAGIC_COOKIE_KEY = "AGENTKERNEL_PLUGIN"
MAGIC_COOKIE_VALUE = "7c0b3f4e-agentkernel-tools"

# The gRPC health service name go-plugin's host checks, and what it says.
_HEALTH_SERVICE = "plugin"
HEALTH_STATUS = hp.HealthCheckResponse.SERVING
# The largest arguments the plugin accepts (the Go SDK's maxArgsBytes).
_MAX_ARGS_BYTES = 16 << 20
_PARENT_POLL = 0.5


def serve(tools: Sequence[Tool], hooks: Sequence[Hook] = ()) -> NoReturn:
    """Serves tools to the kernel that started this process and exits when
    the kernel is done with it. Call it last, once, from the plugin's main
    script, and print nothing before: the first line on stdout must be
    go-plugin's handshake. From then on what the program prints goes to
    stderr, which the kernel logs under the plugin's name. A bad tool list,
    or a plugin run by hand rather than by the kernel, is reported on
    stderr and the process exits with status 1."""
    # The parent to watch, taken before the handshake: a host may be gone
    # as soon as it has read it.
    ppid = os.getppid()
    try:
        hook_by_name = hooks_by_name(hooks)
        by_name = tools_by_name(tools, hooks=bool(hook_by_name))
    except TypeError as e:
        _fail(str(e))
    if os.environ.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        _fail(
            "This program is an agentkernel tool plugin; it is started by the kernel, not by hand.\n"
            "Lock its directory (`kernel plugins lock DIR`), pin it in kernel.yaml under tools.plugins\n"
            "with its interpreter (see docs/plugins.md) and run `kernel plugins verify`."
        )
    host = _take_stdout()
    server_tls = _take_server_tls()
    # go-plugin's server ignores SIGINT: a Ctrl-C in the kernel's terminal
    # reaches the plugin's process group too, and the kernel stops it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        asyncio.run(_main(by_name, hook_by_name, host, ppid, server_tls))
    except BaseException as e:  # noqa: BLE001 - the crash report
        if isinstance(e, SystemExit):
            raise
        # The kernel's crash text starts at a "fatal error:" line, as a Go
        # plugin's does.
        sys.stderr.write("fatal error: uncaught exception in the plugin: " + "".join(traceback.format_exception(e)))
        sys.stderr.flush()
        os._exit(2)
    sys.stderr.flush()
    # Not sys.exit: grpc's threads must not hold the process up.
    os._exit(0)


def _fail(message: str) -> NoReturn:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    raise SystemExit(1)


def _take_stdout() -> int:
    """Keeps the host's stdout pipe for the handshake line alone: moves it
    to a private descriptor and points fd 1 at stderr, so that print, the
    libraries and child processes write to the kernel's log instead."""
    sys.stdout.flush()
    host = os.dup(1)
    os.set_inheritable(host, False)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return host


def _take_server_tls() -> tuple[bytes, bytes] | None:
    """The key and certificate (PEM) the host made for this process, if
    it made them, removed from the environment so that the plugin's
    child processes do not inherit the key."""
    key = os.environ.pop("PLUGIN_SERVER_KEY", "")
    cert = os.environ.pop("PLUGIN_SERVER_CERT", "")
    if not key or not cert:
        return None
    return key.encode(), cert.encode()


def _tempdir() -> str:
    # tempfile (with shutil, random and the compression modules) is
    # imported only by a host that names no socket directory: the
    # kernel always names one.
    import tempfile

    return tempfile.gettempdir()


def _pem_der(pem: bytes) -> bytes:
    """The DER of the first PEM block in pem."""
    body = pem.split(b"-----BEGIN CERTIFICATE-----", 1)[1].split(b"-----END CERTIFICATE-----", 1)[0]
    return base64.b64decode(b"".join(body.split()), validate=True)


async def _main(by_name: dict[str, Tool], hook_by_name: dict[str, Hook], host: int, ppid: int, server_tls: tuple[bytes, bytes] | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    server = grpc.aio.server(options=[("grpc.max_receive_message_length", _MAX_ARGS_BYTES)])
    handlers = [ToolsServicer(by_name).handler(), _health(), *_goplugin(stop)]
    if hook_by_name:
        handlers.append(HooksServicer(hook_by_name, SDK_VERSION).handler())
    server.add_generic_rpc_handlers(tuple(handlers))

    cert_field = ""
    client_cert = os.environ.get("PLUGIN_CLIENT_CERT", "")
    socket = os.path.join(os.environ.get("PLUGIN_UNIX_SOCKET_DIR") or _tempdir(), f"plugin{int.from_bytes(os.urandom(4), 'big')}")
    if client_cert:
        # AutoMTLS: without a client certificate go-plugin's host speaks
        # plain gRPC (the agentkernel host always sends one).
        if server_tls is not None:
            key_pem, cert_pem = server_tls
        else:
            # An older host: make our own (the `cryptography` package,
            # imported only here: it is a third of the SDK's start).
            from ._cert import new_server_cert

            made = new_server_cert()
            key_pem, cert_pem = made.key_pem, made.cert_pem
        creds = grpc.ssl_server_credentials([(key_pem, cert_pem)], root_certificates=client_cert.encode(), require_client_auth=True)
        server.add_secure_port("unix:" + socket, creds)
        # go-plugin's host reads the DER in unpadded standard base64.
        cert_field = base64.b64encode(_pem_der(cert_pem)).decode().rstrip("=")
    else:
        server.add_insecure_port("unix:" + socket)
    await server.start()

    # The tool protocol version is ours whatever PLUGIN_PROTOCOL_VERSIONS
    # lists: go-plugin's server does the same, and the host reports a
    # mismatch.
    watch = asyncio.create_task(_watch_parent(ppid, stop))
    os.write(host, f"{CORE_PROTOCOL_VERSION}|{PROTOCOL_VERSION}|unix|{socket}|grpc|{cert_field}\n".encode())
    os.close(host)

    await stop.wait()
    watch.cancel()
    await server.stop(grace=1.0)


def _health() -> grpc.GenericRpcHandler:
    async def check(request: hp.HealthCheckRequest, context: grpc.aio.ServicerContext) -> hp.HealthCheckResponse:
        if request.service not in ("", _HEALTH_SERVICE):
            await context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        return hp.HealthCheckResponse(status=HEALTH_STATUS)

    return grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health",
        {
            "Check": grpc.unary_unary_rpc_method_handler(
                check, request_deserializer=hp.HealthCheckRequest.FromString, response_serializer=hp.HealthCheckResponse.SerializeToString
            )
        },
    )


def _goplugin(stop: asyncio.Event) -> tuple[grpc.GenericRpcHandler, ...]:
    async def shutdown(_request: gp.Empty, _context: Any) -> gp.Empty:
        # Stop once this answer is out; the host then closes the connection.
        asyncio.get_running_loop().call_later(0.05, stop.set)
        return gp.Empty()

    async def stream_stdio(_request: gp.Empty, _context: Any) -> None:
        # Kept open, empty: stderr reaches the host through the process's pipe.
        await stop.wait()

    async def start_stream(request_iterator: Any, _context: Any) -> None:
        # go-plugin's connection broker is unused: read until the host hangs up.
        async for _ in request_iterator:
            pass

    return (
        grpc.method_handlers_generic_handler(
            "plugin.GRPCController",
            {"Shutdown": grpc.unary_unary_rpc_method_handler(shutdown, request_deserializer=gp.Empty.FromString, response_serializer=gp.Empty.SerializeToString)},
        ),
        grpc.method_handlers_generic_handler(
            "plugin.GRPCStdio",
            {"StreamStdio": grpc.unary_stream_rpc_method_handler(stream_stdio, request_deserializer=gp.Empty.FromString, response_serializer=gp.StdioData.SerializeToString)},
        ),
        grpc.method_handlers_generic_handler(
            "plugin.GRPCBroker",
            {"StartStream": grpc.stream_stream_rpc_method_handler(start_stream, request_deserializer=gp.ConnInfo.FromString, response_serializer=gp.ConnInfo.SerializeToString)},
        ),
    )


async def _watch_parent(ppid: int, stop: asyncio.Event) -> None:
    """Exits when the process that started us (ppid) is gone. In the
    kernel's sandbox the plugin is its launcher's child and dies with it;
    this covers a plugin run by another host."""
    if ppid <= 1:
        return
    while not stop.is_set():
        await asyncio.sleep(_PARENT_POLL)
        if os.getppid() != ppid:
            if os.getpgrp() == os.getpid():
                os.killpg(os.getpid(), signal.SIGKILL)
            os._exit(1)
