"""Unit tests of the Python SDK, through the harness (the SDK's real gRPC
tool service) and, for serve()'s lifecycle, through real processes. The
kernel's conformance suite runs the same SDK through the real host.

Run with Debian's Python, which has grpcio, protobuf and cryptography:
    /usr/bin/python3 -m unittest discover -s sdk/python/tests -t sdk/python
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from dataclasses import dataclass
from datetime import datetime, timezone

import grpc
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from agentkernel_plugin import CallContext, Code, SideEffect, Tier, ToolError, ToolResult, block, hook, tool, truncate_output
from agentkernel_plugin import _serve
from agentkernel_plugin._cert import new_server_cert
from agentkernel_plugin._proto import plugin_pb2 as pb
from agentkernel_plugin._service import DEADLINE_METADATA
from agentkernel_plugin.testing import Harness

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)


@dataclass
class EchoArgs:
    text: str


@tool(name="echo", tier="read_only", tags=["demo"], schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
async def echo(args: EchoArgs, ctx: CallContext) -> str:
    """Returns its text."""
    ctx.progress("one")
    ctx.progress("two")
    return args.text


def noop(args, ctx):
    return ""


class TestTool(unittest.TestCase):
    def test_bad_specs_are_refused_naming_the_tool(self):
        cases = [
            ({"name": "a.b", "tier": "read_only"}, "the name must be"),
            ({"name": "x" * 64, "tier": "read_only"}, "the name must be"),
            ({"name": "t", "tier": "harmless"}, "tier 'harmless' is not one of"),
            ({"name": "t", "tier": "read_only", "timeout": -1}, "timeout"),
            ({"name": "t", "tier": "read_only", "schema": {"type": "array"}}, 'type must be "object"'),
            ({"name": "t", "tier": "read_only", "schema": "{"}, "schema is not JSON"),
            ({"name": "t", "tier": "read_only", "schema": "[1]"}, "must be a JSON object"),
        ]
        for spec, want in cases:
            with self.subTest(spec=spec):
                with self.assertRaises(TypeError) as cm:
                    tool(**spec)(noop)
                self.assertIn(want, str(cm.exception))
                self.assertIn("agentkernel plugin: tool", str(cm.exception))

    def test_defaults(self):
        t = tool(name="t", tier=Tier.PRIVILEGED)(echo.handler)
        self.assertEqual(t.schema, '{"type":"object"}')
        self.assertEqual(t.description, "Returns its text.")  # the docstring
        self.assertFalse(t.checks_side_effects)

    def test_truncate_counts_utf8_bytes(self):
        self.assertEqual(truncate_output("aé", 2), "a\n[output truncated: 3 bytes, limit 2]")
        self.assertEqual(truncate_output("abc", 0), "abc")


@hook(name="guard", points=["before_model", "run_end"])
async def guard(doc: dict) -> dict | None:
    if doc["phase"] == "run_end":
        return {"note": f"ended in session {doc['session_id']}"}
    first = doc["messages"][0]["content"] if doc.get("messages") else ""
    if first == "BLOCK":
        return block("no")
    if first == "wait":
        await asyncio.Event().wait()
    return None


class TestHook(unittest.IsolatedAsyncioTestCase):
    async def test_reply_documents(self):
        # Nothing allows, a block, a change with the decision filled in.
        self.assertEqual(await guard.run(b'{"phase":"before_model","messages":[{"content":"hi"}]}'), b"")
        self.assertEqual(await guard.run(b'{"phase":"before_model","messages":[{"content":"BLOCK"}]}'), b'{"decision": "block", "reason": "no"}')
        self.assertEqual(await guard.run(b'{"phase":"run_end","session_id":"s1"}'), b'{"decision": "allow", "note": "ended in session s1"}')

    async def test_bad_inputs_are_invalid_args(self):
        for doc, want in [(b'{"phase":"after_model"}', "does not run at 'after_model'"), (b"{", "not JSON")]:
            with self.subTest(doc=doc):
                with self.assertRaises(ToolError) as cm:
                    await guard.run(doc)
                self.assertEqual(cm.exception.code, Code.INVALID_ARGS)
                self.assertIn(want, cm.exception.message)

    async def test_the_end_of_a_call_cancels_the_hook(self):
        task = asyncio.ensure_future(guard.run(b'{"phase":"before_model","messages":[{"content":"wait"}]}'))
        await asyncio.sleep(0)
        self.assertFalse(task.done())
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task

    def test_bad_hooks_are_refused_naming_them(self):
        for kwargs, want in [
            ({"name": "a b", "points": ["before"]}, "hook 'a b': the name must be"),
            ({"name": "g", "points": []}, "hook 'g': no points"),
            ({"name": "g", "points": ["before_tool"]}, "hook 'g': 'before_tool' is not a hook point"),
        ]:
            with self.subTest(kwargs=kwargs):
                with self.assertRaises(TypeError) as cm:
                    hook(**kwargs)(lambda doc: None)
                self.assertIn(want, str(cm.exception))


class TestService(unittest.IsolatedAsyncioTestCase):
    async def test_describe(self):
        checked = tool(name="checked", tier="side_effecting")(noop)
        checked.check_side_effect(lambda args, since: SideEffect.UNKNOWN)
        async with Harness([echo, checked]) as h:
            self.assertEqual(
                [(t.name, t.tier, t.tags, t.checks_side_effects) for t in h.tools],
                [("echo", Tier.READ_ONLY, ("demo",), False), ("checked", Tier.SIDE_EFFECTING, (), True)],
            )
            self.assertEqual(h.tools[0].schema["type"], "object")
            self.assertEqual(h.tools[0].description, "Returns its text.")

    async def test_progress_then_result(self):
        async with Harness([echo]) as h:
            out = await h.call("echo", {"text": "hi"})
            self.assertEqual((out.content, out.is_error, out.progress), ("hi", False, ["one", "two"]))

    async def test_errors_keep_their_codes(self):
        def raises(exc):
            async def handler(args, ctx):
                raise exc

            return handler

        tools = [
            tool(name="missing", tier="read_only")(raises(ToolError(Code.NOT_FOUND, "no such file x"))),
            tool(name="mine", tier="read_only")(raises(ToolError("quota_exceeded", "over"))),
            tool(name="plain", tier="read_only")(raises(ValueError("bad value"))),
            tool(name="badcode", tier="read_only")(raises(ToolError("Not A Code", "x"))),
            tool(name="wrongtype", tier="read_only")(lambda a, c: 42),
            tool(name="typed", tier="read_only")(echo.handler),
        ]
        cases = [
            ("missing", {}, "not_found", "no such file x"),
            ("mine", {}, "quota_exceeded", "over"),
            ("plain", {}, "tool_error", "bad value"),
            ("badcode", {}, "tool_error", "x"),
            ("wrongtype", {}, "tool_error", "not str or ToolResult"),
            ("typed", {}, "invalid_args", "do not fit EchoArgs"),
            ("missing", [1, 2], "invalid_args", "arguments must be a JSON object"),
            ("nosuch", {}, "unknown_tool", "unknown tool 'nosuch'"),
        ]
        async with Harness(tools) as h:
            for name, args, code, msg in cases:
                with self.subTest(tool=name, args=args):
                    out = await h.call(name, args)
                    self.assertTrue(out.is_error)
                    self.assertEqual(out.code, code)
                    self.assertIn(msg, out.message)

    async def test_result_and_sync_handler(self):
        t = tool(name="sync", tier="read_only")(lambda args, ctx: ToolResult("failed politely", is_error=True))
        async with Harness([t]) as h:
            out = await h.call("sync", {})
            self.assertEqual((out.content, out.is_error, out.code), ("failed politely", True, None))

    async def test_output_cut_on_a_utf8_boundary(self):
        t = tool(name="big", tier="read_only")(lambda args, ctx: "é" * 10)
        async with Harness([t]) as h:
            out = await h.call("big", {}, max_output_bytes=5)
            self.assertEqual(out.content, "éé\n[output truncated: 20 bytes, limit 5]")
            self.assertEqual(out.truncated_from, 20)
            whole = await h.call("big", {}, max_output_bytes=20)
            self.assertEqual(whole.content, "é" * 10)

    async def test_the_end_of_a_call_reaches_the_handler(self):
        for what, spec_timeout, call_timeout, cancel, code in [
            ("the tool's own timeout", 0.05, None, False, "timeout"),
            ("the kernel's deadline", None, 0.3, False, "timeout"),
            ("the kernel's cancel", None, None, True, "cancelled"),
        ]:
            with self.subTest(what):
                started, stopped = asyncio.Event(), asyncio.Event()
                seen: list[str | None] = []

                async def wait(args, ctx: CallContext) -> str:
                    started.set()
                    try:
                        await asyncio.Event().wait()
                    except asyncio.CancelledError:
                        seen.append(ctx.reason)
                        stopped.set()
                        raise
                    return ""

                t = tool(name="wait", tier="read_only", timeout=spec_timeout)(wait)
                async with Harness([t]) as h:
                    ev = asyncio.Event()
                    call = asyncio.create_task(h.call("wait", {}, timeout=call_timeout, cancel=ev))
                    await started.wait()
                    if cancel:
                        ev.set()
                    out = await call
                    self.assertEqual(out.code, code)
                    await asyncio.wait_for(stopped.wait(), 10)
                    self.assertEqual(seen, [code])

    async def test_a_late_read_still_tells_the_deadline(self):
        # The plugin reads the call late, as on a loaded machine: grpc's
        # deadline (a duration counted from the read) is a minute away, the
        # kernel's (sent as an absolute time) 0.2 s, and the kernel cancels
        # the stream at its own. The handler must see a timeout; without
        # the absolute deadline it sees a cancellation.
        started, stopped = asyncio.Event(), asyncio.Event()
        seen: list[str | None] = []

        async def wait(args, ctx: CallContext) -> str:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                seen.append(ctx.reason)
                stopped.set()
                raise
            return ""

        async with Harness([tool(name="wait", tier="read_only")(wait)]) as h:
            at = time.time() + 0.2
            stream = h._call(
                pb.CallRequest(tool="wait", args=b"{}"),
                timeout=60,
                metadata=((DEADLINE_METADATA, str(int(at * 1000))),),
            )

            async def drain() -> None:
                try:
                    async for _ in stream:
                        pass
                except (grpc.aio.AioRpcError, asyncio.CancelledError):
                    pass

            reading = asyncio.create_task(drain())
            await started.wait()
            await asyncio.sleep(max(0.0, at - time.time()) + 0.01)
            stream.cancel()
            await reading
            await asyncio.wait_for(stopped.wait(), 10)
            self.assertEqual(seen, [Code.TIMEOUT])

    async def test_a_blocking_handler_sees_cancelled(self):
        running, saw = threading.Event(), threading.Event()

        def poll(args, ctx: CallContext) -> str:
            running.set()
            while not ctx.cancelled:
                time.sleep(0.01)
            saw.set()
            return "late"

        async with Harness([tool(name="poll", tier="read_only")(poll)]) as h:
            ev = asyncio.Event()
            call = asyncio.create_task(h.call("poll", {}, cancel=ev))
            await asyncio.to_thread(running.wait, 10)
            ev.set()
            self.assertEqual((await call).code, "cancelled")
            self.assertTrue(await asyncio.to_thread(saw.wait, 10))

    async def test_side_effect_checks(self):
        mark = tool(name="mark", tier="side_effecting")(noop)

        @mark.check_side_effect
        def check(args, since):
            if args["answer"] == "throw":
                raise OSError("cannot read")
            return args["answer"], f"since {since.isoformat()}"

        async with Harness([mark, echo]) as h:
            since = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
            self.assertEqual(await h.check_side_effect("mark", {"answer": "completed"}, since), (SideEffect.COMPLETED, "since 2026-01-02T03:04:05.678000+00:00"))
            self.assertEqual((await h.check_side_effect("mark", {"answer": "not_run"}, since))[0], SideEffect.NOT_RUN)
            self.assertEqual((await h.check_side_effect("mark", {"answer": "maybe"}, since))[0], SideEffect.UNKNOWN)
            self.assertEqual(await h.check_side_effect("mark", {"answer": "throw"}, since), (SideEffect.UNKNOWN, "the check failed: cannot read"))
            self.assertEqual((await h.check_side_effect("echo", {}, since))[0], SideEffect.UNKNOWN)
            self.assertEqual(await h.check_side_effect("nosuch", {}, since), (SideEffect.UNKNOWN, "unknown tool 'nosuch'"))


class TestCertificate(unittest.TestCase):
    def test_self_signed_ca_for_localhost(self):
        c = new_server_cert()
        x = x509.load_der_x509_certificate(c.der)
        self.assertEqual(x.subject, x.issuer)
        self.assertEqual(x.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName), ["localhost"])
        self.assertTrue(x.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
        eku = x.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        self.assertEqual(set(eku), {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH})
        self.assertGreaterEqual(x.not_valid_after.year, datetime.now().year + 29)
        self.assertEqual(x509.load_pem_x509_certificate(c.cert_pem), x)


class TestServe(unittest.TestCase):
    fixture = os.path.join(HERE, "conformance", "plugin.py")

    def env(self, **extra):
        return {"PYTHONPATH": SDK, "PYTHONDONTWRITEBYTECODE": "1", **extra}

    def test_run_by_hand(self):
        r = subprocess.run([sys.executable, self.fixture], env=self.env(), capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("agentkernel tool plugin; it is started by the kernel", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_handshake_then_exit_when_the_parent_dies(self):
        with tempfile.TemporaryDirectory() as d:
            parent = os.path.join(d, "parent.py")
            with open(parent, "w") as f:
                # A parent that starts the plugin, passes its handshake line
                # and pid on, and exits: the plugin is orphaned.
                f.write(
                    "import subprocess, sys\n"
                    f"c = subprocess.Popen([sys.executable, {self.fixture!r}], stdout=subprocess.PIPE, start_new_session=True)\n"
                    "print(c.pid, c.stdout.readline().decode().strip(), flush=True)\n"
                )
            env = self.env(
                AGENTKERNEL_PLUGIN="7c0b3f4e-agentkernel-tools",
                PLUGIN_CLIENT_CERT=new_server_cert().cert_pem.decode(),
                PLUGIN_UNIX_SOCKET_DIR=d,
                PLUGIN_PROTOCOL_VERSIONS="1",
            )
            out = subprocess.run([sys.executable, parent], env=env, capture_output=True, text=True, timeout=60)
            pid, line = out.stdout.split()
            parts = line.split("|")
            self.assertEqual(parts[:3], ["1", "1", "unix"])
            self.assertTrue(parts[3].startswith(os.path.join(d, "plugin")), parts[3])
            self.assertEqual(parts[4], "grpc")
            cert = x509.load_der_x509_certificate(base64.b64decode(parts[5] + "=" * (-len(parts[5]) % 4)))
            self.assertEqual(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName), ["localhost"])
            deadline = time.monotonic() + 20
            while _running(int(pid)) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertFalse(_running(int(pid)), "the orphaned plugin is still running")

    def test_serves_with_the_key_the_host_made(self):
        # A host that hands the process its key and certificate
        # (PLUGIN_SERVER_KEY, PLUGIN_SERVER_CERT): the handshake line
        # announces exactly that certificate, and the SDK makes none.
        made = new_server_cert()
        with tempfile.TemporaryDirectory() as d:
            env = self.env(
                AGENTKERNEL_PLUGIN="7c0b3f4e-agentkernel-tools",
                PLUGIN_CLIENT_CERT=new_server_cert().cert_pem.decode(),
                PLUGIN_SERVER_CERT=made.cert_pem.decode(),
                PLUGIN_SERVER_KEY=made.key_pem.decode(),
                PLUGIN_UNIX_SOCKET_DIR=d,
                PLUGIN_PROTOCOL_VERSIONS="1",
            )
            p = subprocess.Popen([sys.executable, self.fixture], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                parts = p.stdout.readline().decode().strip().split("|")
            finally:
                p.kill()
                p.wait()
                p.stdout.close()
                p.stderr.close()
            self.assertEqual(len(parts), 6, parts)
            self.assertEqual(base64.b64decode(parts[5] + "=" * (-len(parts[5]) % 4)), made.der)


class TestServerKeyHandOver(unittest.TestCase):
    def test_taken_out_of_the_environment(self):
        # The key is the process's alone: neither os.environ nor a child
        # process still has it once serve() has taken it.
        made = new_server_cert()
        saved = {k: os.environ.get(k) for k in ("PLUGIN_SERVER_KEY", "PLUGIN_SERVER_CERT")}
        os.environ["PLUGIN_SERVER_KEY"] = made.key_pem.decode()
        os.environ["PLUGIN_SERVER_CERT"] = made.cert_pem.decode()
        try:
            self.assertEqual(_serve._take_server_tls(), (made.key_pem, made.cert_pem))
            self.assertNotIn("PLUGIN_SERVER_KEY", os.environ)
            child = subprocess.run(
                [sys.executable, "-c", "import os; print(sorted(k for k in os.environ if k.startswith('PLUGIN_SERVER')))"],
                capture_output=True, text=True, timeout=60, check=True,
            )
            self.assertEqual(child.stdout.strip(), "[]")
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.assertIsNone(_serve._take_server_tls())

    def test_pem_der(self):
        made = new_server_cert()
        self.assertEqual(_serve._pem_der(made.cert_pem), made.der)
        with self.assertRaises(IndexError):
            _serve._pem_der(b"no certificate here")


def _running(pid: int) -> bool:
    """Whether pid is a live process (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


if __name__ == "__main__":
    unittest.main()
