// Unit tests of the TypeScript SDK, through the harness (the SDK's real
// gRPC tool service) and, for serve()'s lifecycle, through real processes.
// The kernel's conformance suite runs the same SDK through the real host.

import { strict as assert } from "node:assert";
import { spawn, spawnSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { integer, newServerCert } from "../src/cert";
import { Code, ToolError, block, hook, tool, truncateOutput } from "../src/index";
import { takeServerTLS } from "../src/serve";
import { startHarness } from "../src/testing";

const echo = tool<{ text: string }>({
  name: "echo",
  description: "Returns its text.",
  schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  tier: "read_only",
  tags: ["demo"],
  handler(args, ctx) {
    ctx.progress("one");
    ctx.progress("two");
    return args.text;
  },
});

describe("tool()", () => {
  const base = ok();
  for (const [what, spec, want] of [
    ["a bad name", { ...base, name: "a.b" }, /the name must be/],
    ["a long name", { ...base, name: "x".repeat(64) }, /the name must be/],
    ["a bad tier", { ...base, tier: "harmless" }, /tier "harmless" is not one of/],
    ["no handler", { ...base, handler: undefined }, /no handler/],
    ["a negative timeout", { ...base, timeoutMs: -1 }, /timeoutMs/],
    ["a schema that is not an object schema", { ...base, schema: { type: "array" } }, /type must be "object"/],
    ["a schema that is not JSON", { ...base, schema: "{" }, /schema is not JSON/],
    ["a schema that is not an object", { ...base, schema: "[1]" }, /must be a JSON object/],
  ] as const) {
    it(`refuses ${what}, naming the tool`, () => {
      assert.throws(() => tool(spec as never), (e: Error) => e instanceof TypeError && want.test(e.message) && e.message.includes("agentkernel plugin: tool"));
    });
  }
  it("defaults the schema to any object", () => {
    assert.equal(tool(base).schema, '{"type":"object"}');
  });
});

describe("the tool service", () => {
  it("describes the tools as the kernel reads them", async () => {
    const checked = tool({ ...ok(), name: "checked", tier: "side_effecting", checkSideEffect: () => ({ effect: "unknown" }) });
    const h = await startHarness([echo, checked]);
    try {
      assert.deepEqual(
        h.tools.map((t) => [t.name, t.tier, t.tags, t.checksSideEffects]),
        [
          ["echo", "read_only", ["demo"], false],
          ["checked", "side_effecting", [], true],
        ],
      );
      assert.equal(h.tools[0].schema.type, "object");
    } finally {
      await h.close();
    }
  });

  it("streams progress in order, then the result", async () => {
    const h = await startHarness([echo]);
    try {
      const out = await h.call("echo", { text: "hi" });
      assert.deepEqual([out.content, out.isError, out.progress], ["hi", false, ["one", "two"]]);
    } finally {
      await h.close();
    }
  });

  it("keeps a ToolError's code, gives other errors tool_error, checks the arguments are an object", async () => {
    const h = await startHarness([
      tool({ ...ok(), name: "missing", handler: () => Promise.reject(new ToolError(Code.NotFound, "no such file x")) }),
      tool({ ...ok(), name: "mine", handler: () => { throw new ToolError("quota_exceeded", "over"); } }),
      tool({ ...ok(), name: "plain", handler: () => { throw new RangeError("bad range"); } }),
      tool({ ...ok(), name: "badcode", handler: () => { throw new ToolError("Not A Code", "x"); } }),
      tool({ ...ok(), name: "wrongtype", handler: () => 42 as never }),
    ]);
    try {
      const cases: [string, unknown, string, string][] = [
        ["missing", {}, "not_found", "no such file x"],
        ["mine", {}, "quota_exceeded", "over"],
        ["plain", {}, "tool_error", "bad range"],
        ["badcode", {}, "tool_error", "x"],
        ["wrongtype", {}, "tool_error", "not a string"],
        ["missing", [1, 2], "invalid_args", "arguments must be a JSON object"],
        ["nosuch", {}, "unknown_tool", 'unknown tool "nosuch"'],
      ];
      for (const [name, args, code, msg] of cases) {
        const out = await h.call(name, args);
        assert.equal(out.isError, true, name);
        assert.equal(out.error?.code, code, name);
        assert.ok(out.error?.message.includes(msg), `${name}: ${out.error?.message}`);
      }
    } finally {
      await h.close();
    }
  });

  it("cuts output at max_output_bytes on a UTF-8 boundary, with the kernel's marker", async () => {
    const h = await startHarness([tool({ ...ok(), name: "big", handler: () => "é".repeat(10) })]);
    try {
      const out = await h.call("big", {}, { maxOutputBytes: 5 });
      assert.equal(out.content, "éé\n[output truncated: 20 bytes, limit 5]");
      assert.equal(out.truncatedFrom, 20);
      const whole = await h.call("big", {}, { maxOutputBytes: 20 });
      assert.equal(whole.content, "é".repeat(10));
    } finally {
      await h.close();
    }
  });

  for (const [what, opts, spec, code] of [
    ["the tool's own timeout", {}, { timeoutMs: 50 }, "timeout"],
    ["the kernel's deadline", { timeoutMs: 200 }, {}, "timeout"],
    // Read late, as on a loaded machine: grpc's deadline a minute away, the
    // kernel's absolute one 200 ms, the kernel cancelling at its own.
    ["the kernel's deadline, read late", { timeoutMs: 200, readLateMs: 60_000 }, {}, "timeout"],
    ["the kernel's cancel", { cancel: true }, {}, "cancelled"],
  ] as const) {
    it(`aborts the handler's signal on ${what}, with reason ${code}`, async () => {
      let seen: unknown;
      let started!: () => void;
      const running = new Promise<void>((r) => (started = r));
      const h = await startHarness([
        tool({
          ...ok(),
          name: "wait",
          ...spec,
          handler: (_a, ctx) =>
            new Promise<string>((_, reject) => {
              started();
              ctx.signal.addEventListener("abort", () => {
                seen = ctx.signal.reason;
                reject(ctx.signal.reason);
              });
            }),
        }),
      ]);
      try {
        const ac = new AbortController();
        const call = h.call("wait", {}, {
          ...("timeoutMs" in opts ? { timeoutMs: opts.timeoutMs } : {}),
          ...("readLateMs" in opts ? { readLateMs: opts.readLateMs } : {}),
          signal: ac.signal,
        });
        await running;
        if ("cancel" in opts) ac.abort();
        const out = await call;
        assert.equal(out.error?.code, code);
        // The handler saw it, with a reason that carries the code.
        for (let i = 0; i < 100 && seen === undefined; i++) await new Promise((r) => setTimeout(r, 10));
        assert.ok(seen instanceof ToolError && seen.code === code, `signal reason ${String(seen)}`);
      } finally {
        await h.close();
      }
    });
  }

  it("answers side-effect checks", async () => {
    const h = await startHarness([
      tool<{ answer: string }>({
        ...ok(),
        name: "mark",
        tier: "side_effecting",
        checkSideEffect: (args, since) => {
          if (args.answer === "throw") throw new Error("cannot read");
          return { effect: args.answer as never, detail: `since ${since.toISOString()}` };
        },
      }),
      echo,
    ]);
    try {
      const since = new Date("2026-01-02T03:04:05.678Z");
      assert.deepEqual(await h.checkSideEffect("mark", { answer: "completed" }, since), { effect: "completed", detail: "since 2026-01-02T03:04:05.678Z" });
      assert.equal((await h.checkSideEffect("mark", { answer: "not_run" }, since)).effect, "not_run");
      assert.equal((await h.checkSideEffect("mark", { answer: "maybe" }, since)).effect, "unknown");
      assert.deepEqual(await h.checkSideEffect("mark", { answer: "throw" }, since), { effect: "unknown", detail: "the check failed: cannot read" });
      assert.equal((await h.checkSideEffect("echo", {}, since)).effect, "unknown");
      assert.deepEqual(await h.checkSideEffect("nosuch", {}, since), { effect: "unknown", detail: 'unknown tool "nosuch"' });
    } finally {
      await h.close();
    }
  });
});

describe("hook()", () => {
  const guard = hook({
    name: "guard",
    points: ["before_model", "run_end"],
    handler(input, ctx) {
      if (input.phase === "run_end") return { note: `ended in session ${input.session_id}` };
      const first = (input.messages as { content: string }[])[0]?.content;
      if (first === "BLOCK") return block("no");
      if (first === "wait") {
        return new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason)));
      }
      return undefined;
    },
  });
  it("answers the reply documents: nothing allows, a block, a change with the decision filled in", async () => {
    const signal = new AbortController().signal;
    assert.equal(await guard.run(`{"phase":"before_model","messages":[{"content":"hi"}]}`, signal), "");
    assert.equal(await guard.run(`{"phase":"before_model","messages":[{"content":"BLOCK"}]}`, signal), `{"decision":"block","reason":"no"}`);
    assert.equal(await guard.run(`{"phase":"run_end","session_id":"s1"}`, signal), `{"decision":"allow","note":"ended in session s1"}`);
  });
  it("refuses an input at a point it does not run at, or not JSON, as invalid_args", async () => {
    const signal = new AbortController().signal;
    await assert.rejects(guard.run(`{"phase":"after_model"}`, signal), (e: ToolError) => e.code === Code.InvalidArgs && /does not run at "after_model"/.test(e.message));
    await assert.rejects(guard.run(`{`, signal), (e: ToolError) => e.code === Code.InvalidArgs && /not JSON/.test(e.message));
  });
  it("gives the handler the end of its call through its signal", async () => {
    const ac = new AbortController();
    const running = guard.run(`{"phase":"before_model","messages":[{"content":"wait"}]}`, ac.signal);
    ac.abort(new ToolError(Code.Cancelled, "the hook was cancelled"));
    await assert.rejects(running, (e: ToolError) => e.code === Code.Cancelled);
  });
  it("refuses a bad hook naming it", () => {
    const handler = () => undefined;
    assert.throws(() => hook({ name: "a b", points: ["before"], handler }), /hook "a b": the name must be/);
    assert.throws(() => hook({ name: "g", points: [], handler }), /hook "g": no points/);
    assert.throws(() => hook({ name: "g", points: ["before_tool" as "before"], handler }), /hook "g": "before_tool" is not a hook point/);
  });
});

describe("truncateOutput", () => {
  it("counts bytes, not UTF-16 units", () => {
    assert.equal(truncateOutput("aé", 2), "a\n[output truncated: 3 bytes, limit 2]");
    assert.equal(truncateOutput("abc", 0), "abc");
  });
});

describe("the AutoMTLS certificate", () => {
  it("is a self-signed CA for localhost, for server and client auth", () => {
    const c = newServerCert();
    const x = new X509Certificate(c.der);
    assert.equal(x.subject.includes("CN=localhost"), true);
    assert.equal(x.subjectAltName, "DNS:localhost");
    assert.equal(x.ca, true);
    assert.equal(x.verify(x.publicKey), true);
    assert.deepEqual(x.keyUsage?.sort(), ["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"]);
    assert.ok(new Date(x.validTo).getFullYear() >= new Date().getFullYear() + 29);
    assert.equal(new X509Certificate(c.certPem).fingerprint256, x.fingerprint256);
  });

  it("encodes every serial number as DER wants (one start in 512 drew a padded one)", () => {
    const serial = (head: number[]) => Buffer.concat([Buffer.from(head), Buffer.alloc(16 - head.length, 0x11)]);
    for (const [head, want] of [
      [[0x00, 0x05], "05" + "11".repeat(14)], // a leading zero byte OpenSSL calls illegal padding
      [[0x00, 0x00, 0x00], "11".repeat(13)],
      [[0x80], "80" + "11".repeat(15)], // the top bit set: a zero byte keeps it positive
      [[0x00, 0x80], "80" + "11".repeat(14)],
      [[0x7f], "7F" + "11".repeat(15)],
    ] as const) {
      const c = newServerCert(new Date(), serial([...head]));
      const x = new X509Certificate(c.der);
      assert.equal(x.serialNumber.toLowerCase().replace(/^00/, ""), want.toLowerCase(), `serial ${Buffer.from(head).toString("hex")}…`);
      assert.equal(x.verify(x.publicKey), true);
    }
    assert.deepEqual(integer(Buffer.alloc(3)), Buffer.from([0x02, 0x01, 0x00]));
    assert.deepEqual(integer(Buffer.from([0x00, 0x00, 0xff])), Buffer.from([0x02, 0x02, 0x00, 0xff]));
  });
});

describe("serve()", () => {
  const fixture = join(__dirname, "fixtures", "conformance.js");

  it("run by hand, says it is a plugin and exits 1", () => {
    const r = spawnSync(process.execPath, [fixture], { env: {}, encoding: "utf8" });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /agentkernel tool plugin; it is started by the kernel/);
    assert.equal(r.stdout, "");
  });

  it("prints go-plugin's handshake line with its certificate, then exits when its parent dies", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sdk-serve-"));
    const clientCert = newServerCert().certPem;
    // A parent that starts the plugin, passes its handshake line and pid
    // on, and exits: the plugin is orphaned.
    const parent = join(dir, "parent.js");
    writeFileSync(
      parent,
      `const { spawn } = require("node:child_process");
       const c = spawn(process.execPath, [${JSON.stringify(fixture)}], { stdio: ["ignore", "pipe", "inherit"], detached: true });
       c.stdout.once("data", (d) => { process.stdout.write(c.pid + " " + d); process.exit(0); });`,
    );
    const env = { AGENTKERNEL_PLUGIN: "7c0b3f4e-agentkernel-tools", PLUGIN_CLIENT_CERT: clientCert, PLUGIN_UNIX_SOCKET_DIR: dir, PLUGIN_PROTOCOL_VERSIONS: "1" };
    const out = await new Promise<string>((resolve, reject) => {
      const p = spawn(process.execPath, [parent], { env, stdio: ["ignore", "pipe", "inherit"] });
      let s = "";
      p.stdout.on("data", (d) => (s += d));
      p.on("exit", () => resolve(s));
      p.on("error", reject);
    });
    const [pid, line] = out.trim().split(" ");
    const parts = line.split("|");
    assert.deepEqual(parts.slice(0, 3), ["1", "1", "unix"]);
    assert.ok(parts[3].startsWith(join(dir, "plugin")), parts[3]);
    assert.equal(parts[4], "grpc");
    const cert = new X509Certificate(Buffer.from(parts[5], "base64"));
    assert.equal(cert.subjectAltName, "DNS:localhost");
    // The orphan notices within a few polls and exits.
    let alive = true;
    for (let i = 0; i < 400 && alive; i++) {
      await new Promise((r) => setTimeout(r, 50));
      alive = running(Number(pid));
    }
    assert.equal(alive, false, "the orphaned plugin is still running");
  });

  it("serves with the key the host made for it, and its children do not inherit the key", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sdk-serve-"));
    const made = newServerCert();
    const env = {
      AGENTKERNEL_PLUGIN: "7c0b3f4e-agentkernel-tools", PLUGIN_CLIENT_CERT: newServerCert().certPem,
      PLUGIN_SERVER_CERT: made.certPem, PLUGIN_SERVER_KEY: made.keyPem, PLUGIN_UNIX_SOCKET_DIR: dir, PLUGIN_PROTOCOL_VERSIONS: "1",
    };
    const line = await new Promise<string>((resolve, reject) => {
      const p = spawn(process.execPath, [fixture], { env, stdio: ["ignore", "pipe", "inherit"] });
      p.stdout.once("data", (d) => { p.kill("SIGKILL"); resolve(String(d)); });
      p.on("error", reject);
    });
    const parts = line.trim().split("|");
    assert.equal(parts.length, 6, line);
    assert.deepEqual(Buffer.from(parts[5], "base64"), made.der);

    process.env.PLUGIN_SERVER_KEY = made.keyPem;
    process.env.PLUGIN_SERVER_CERT = made.certPem;
    const got = takeServerTLS();
    assert.deepEqual(got, made);
    assert.equal(process.env.PLUGIN_SERVER_KEY, undefined);
    const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String('PLUGIN_SERVER_KEY' in process.env))"], { encoding: "utf8" });
    assert.equal(child.stdout, "false");
    assert.equal(takeServerTLS(), undefined);
  });
});

// running reports whether pid is a live process (a zombie is not).
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

function ok() {
  return { name: "t", tier: "read_only" as const, handler: () => "" };
}

describe("the SDK's start", () => {
  // What a plugin loads before its handshake is its start's cost (issue 45):
  // proto-loader built a file descriptor of every protocol file and loaded
  // protobufjs's descriptor extension and .proto parser to do it, a quarter
  // of a plugin's CPU to its handshake. The SDK makes its service
  // definitions from protobufjs's light build and needs none of them.
  it("loads neither proto-loader nor protobufjs's descriptor extension or parser", () => {
    const probe =
      `require(${JSON.stringify(join(__dirname, "..", "src", "index.js"))});` +
      "process.stdout.write(JSON.stringify(Object.keys(require.cache)));";
    const r = spawnSync(process.execPath, ["-e", probe], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    const loaded: string[] = JSON.parse(r.stdout);
    assert.ok(loaded.some((f) => f.includes("/protobufjs/")), "protobufjs is loaded (the probe sees the SDK's modules)");
    const heavy = loaded.filter((f) => /@grpc\/proto-loader|protobufjs\/ext\/descriptor|protobufjs\/src\/(parse|tokenize)\.js/.test(f));
    assert.deepEqual(heavy, []);
  });
});
