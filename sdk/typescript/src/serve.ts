// serve(): go-plugin's plugin side, for the kernel's host. In order:
//
//  1. Check the tools and the magic cookie the host sets (a plugin run by
//     hand says what it is and exits 1).
//  2. AutoMTLS: trust only the client certificate the host put in
//     PLUGIN_CLIENT_CERT, and serve with the key and certificate the host
//     made for this process (PLUGIN_SERVER_KEY, PLUGIN_SERVER_CERT; taken
//     out of the environment at once), or, from a host that hands none, a
//     certificate of our own.
//  3. Listen on a fresh unix socket in PLUGIN_UNIX_SOCKET_DIR and serve the
//     tool service, gRPC health ("plugin": SERVING) and go-plugin's
//     controller, stdio and broker services.
//  4. Print the handshake line, CORE|APP|unix|ADDR|grpc|CERT, on stdout,
//     then send whatever the program writes to stdout to stderr.
//  5. Run until the host asks us to stop (GRPCController.Shutdown), our
//     parent goes away (polled every half second), or SIGTERM.

import * as grpc from "@grpc/grpc-js";
import { randomInt } from "node:crypto";
import { writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newServerCert, ServerCert } from "./cert";
import {
  BrokerService,
  ControllerService,
  CoreProtocolVersion,
  HealthService,
  HooksService,
  MagicCookieKey,
  MagicCookieValue,
  ProtocolVersion,
  StdioService,
  ToolsService,
} from "./protocol";
import { toolsByName, toolsService } from "./service";
import { type Hook, hooksByName, hooksService } from "./hook";
import type { Tool } from "./tool";

/** The gRPC health service name go-plugin's host checks. */
const healthServiceName = "plugin";
// The largest arguments the plugin accepts (the Go SDK's maxArgsBytes).
const maxArgsBytes = 16 << 20;
const parentPoll = 500;

/**
 * serve serves tools to the kernel that started this process and exits
 * when the kernel is done with it. Call it last, once, at the top level of
 * the plugin's script, and print nothing to stdout before: the first line
 * on stdout must be go-plugin's handshake. From then on what the program
 * writes with console.log goes to stderr, which the kernel logs under the
 * plugin's name. A bad tool list, or a plugin run by hand rather than by
 * the kernel, is reported on stderr and the process exits with status 1.
 */
export function serve(tools: readonly Tool[], hooks: readonly Hook[] = []): Promise<never> {
  return new Promise<never>(() => {
    try {
      start(tools, hooks);
    } catch (e) {
      fail(e instanceof Error ? e.message : String(e));
    }
  });
}

function fail(message: string): never {
  writeSync(2, `${message}\n`);
  process.exit(1);
}

function start(tools: readonly Tool[], hooks: readonly Hook[]): void {
  // The parent to watch, taken before the handshake: a host may be gone
  // as soon as it has read it.
  const ppid = process.ppid;
  const hookByName = hooksByName(hooks);
  const byName = toolsByName(tools, hookByName.size > 0);
  if (process.env[MagicCookieKey] !== MagicCookieValue) {
    fail(
      "This program is an agentkernel tool plugin; it is started by the kernel, not by hand.\n" +
        "Lock its directory (`kernel plugins lock DIR`), pin it in kernel.yaml under tools.plugins\n" +
        "with its interpreter (see docs/plugins.md) and run `kernel plugins verify`.",
    );
  }
  installCrashReport();
  // go-plugin's server ignores SIGINT: a Ctrl-C in the kernel's terminal
  // reaches the plugin's process group too, and the kernel stops it.
  process.on("SIGINT", () => {});

  // AutoMTLS: without a client certificate go-plugin's host speaks plain
  // gRPC (the agentkernel host always sends one).
  const clientCert = process.env.PLUGIN_CLIENT_CERT;
  const handed = takeServerTLS();
  let creds = grpc.ServerCredentials.createInsecure();
  let certField = "";
  if (clientCert) {
    // The host's key for this process saves a key and a signature (7-9 ms
    // of CPU in a fresh node); an older host hands none.
    const cert = handed ?? newServerCert();
    creds = grpc.ServerCredentials.createSsl(
      Buffer.from(clientCert),
      [{ private_key: Buffer.from(cert.keyPem), cert_chain: Buffer.from(cert.certPem) }],
      true,
    );
    // go-plugin's host reads the DER in unpadded standard base64.
    certField = cert.der.toString("base64").replace(/=+$/, "");
  }

  const server = new grpc.Server({ "grpc.max_receive_message_length": maxArgsBytes });
  server.addService(ToolsService, toolsService(byName));
  if (hookByName.size > 0) server.addService(HooksService, hooksService(hookByName));
  server.addService(HealthService, {
    Check(call: grpc.ServerUnaryCall<{ service: string }, unknown>, cb: grpc.sendUnaryData<unknown>) {
      const s = call.request.service;
      if (s === "" || s === healthServiceName) cb(null, { status: "SERVING" });
      else cb({ code: grpc.status.NOT_FOUND, details: `unknown service ${JSON.stringify(s)}` });
    },
    Watch(call: grpc.ServerWritableStream<{ service: string }, unknown>) {
      call.write({ status: call.request.service === "" || call.request.service === healthServiceName ? "SERVING" : "SERVICE_UNKNOWN" });
    },
  });
  server.addService(ControllerService, {
    Shutdown(_call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) {
      cb(null, {});
      // Once the host has the answer it closes the connection, which ends
      // the stdio and broker streams and lets tryShutdown finish.
      setTimeout(() => process.exit(0), 1000).unref();
      server.tryShutdown(() => process.exit(0));
    },
  });
  server.addService(StdioService, {
    // Kept open, empty: stderr reaches the host through the process's pipe.
    StreamStdio() {},
  });
  server.addService(BrokerService, {
    // go-plugin's connection broker is unused: read until the host hangs up.
    StartStream(call: grpc.ServerDuplexStream<unknown, unknown>) {
      call.on("data", () => {});
      call.on("end", () => call.end());
      call.on("error", () => {});
    },
  });

  const dir = process.env.PLUGIN_UNIX_SOCKET_DIR || tmpdir();
  const socket = join(dir, `plugin${randomInt(1e9)}`);
  server.bindAsync(`unix:${socket}`, creds, (err) => {
    if (err) fail(`agentkernel plugin: listen on ${socket}: ${err.message}`);
    // The tool protocol version is ours whatever PLUGIN_PROTOCOL_VERSIONS
    // lists: go-plugin's server does the same, and the host reports a
    // mismatch.
    watchParent(ppid);
    handshake(`${CoreProtocolVersion}|${ProtocolVersion}|unix|${socket}|grpc|${certField}`);
  });
}

// handshake writes the line go-plugin's host waits for, then points
// process.stdout at stderr: from now on stdout belongs to nobody.
function handshake(line: string): void {
  writeSync(1, `${line}\n`);
  const toStderr = process.stderr.write.bind(process.stderr);
  process.stdout.write = toStderr as typeof process.stdout.write;
}

// watchParent exits when the process that started us is gone. In the
// kernel's sandbox the plugin is its launcher's child and dies with it;
// this covers a plugin run by another host.
function watchParent(ppid: number): void {
  if (ppid <= 1) return;
  setInterval(() => {
    if (process.ppid !== ppid) {
      try {
        process.kill(-process.pid, "SIGKILL"); // our process group, if we lead one
      } catch {
        // not a group leader
      }
      process.exit(1);
    }
  }, parentPoll).unref();
}

// installCrashReport makes a crash readable in the kernel: its crash text
// starts at a "fatal error:" line, as a Go plugin's does.
function installCrashReport(): void {
  const report = (what: string) => (e: unknown) => {
    writeSync(2, `fatal error: ${what} in the plugin: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(2);
  };
  process.on("uncaughtException", report("uncaught exception"));
  process.on("unhandledRejection", report("unhandled promise rejection"));
}

/**
 * takeServerTLS returns the key and certificate the host made for this
 * process (PLUGIN_SERVER_KEY, PLUGIN_SERVER_CERT, PEM), if it made them,
 * and removes them from the environment so that the plugin's child
 * processes do not inherit the key.
 */
export function takeServerTLS(): ServerCert | undefined {
  const keyPem = process.env.PLUGIN_SERVER_KEY;
  const certPem = process.env.PLUGIN_SERVER_CERT;
  delete process.env.PLUGIN_SERVER_KEY;
  delete process.env.PLUGIN_SERVER_CERT;
  if (!keyPem || !certPem) return undefined;
  const m = /-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]+)-----END CERTIFICATE-----/.exec(certPem);
  if (!m) return undefined;
  return { keyPem, certPem, der: Buffer.from(m[1].replace(/\s+/g, ""), "base64") };
}
