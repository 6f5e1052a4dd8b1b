// The http_get plugin's tests, with the SDK's harness and a local server.

import { strict as assert } from "node:assert";
import { mkdtempSync, readFileSync } from "node:fs";
import { createServer, Server } from "node:http";
import { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startHarness, Harness } from "@agentkernel/plugin-sdk/testing";
import { matches, tools } from "../src/http";

let server: Server;
let base: string;
let port: number;
let closedSlow: () => void;
let slowClosed: Promise<void>;

before(async () => {
  slowClosed = new Promise((r) => (closedSlow = r));
  server = createServer((req, res) => {
    switch (req.url) {
      case "/hello":
        res.setHeader("content-type", "text/plain");
        res.end("hello");
        return;
      case "/redirect-away":
        res.writeHead(302, { location: "http://elsewhere.invalid/" }).end();
        return;
      case "/redirect-home":
        res.writeHead(302, { location: "/hello" }).end();
        return;
      case "/missing":
        res.writeHead(404).end("no");
        return;
      case "/slow":
        res.writeHead(200);
        res.write("start");
        req.socket.on("close", () => closedSlow());
        return;
    }
    res.writeHead(200).end("x".repeat(100));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});

after(() => server.close());

async function withHarness(fn: (h: Harness, dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "http-get-"));
  const h = await startHarness(tools({ allow: [`127.0.0.1:${port}`], dir }));
  try {
    await fn(h, dir);
  } finally {
    await h.close();
  }
}

describe("http_get", () => {
  it("fetches an allowed URL, reporting progress", async () => {
    await withHarness(async (h) => {
      const out = await h.call("http_get", { url: `${base}/hello` });
      assert.equal(out.content, "HTTP 200 OK\ncontent-type: text/plain\n\nhello");
      assert.deepEqual(out.progress, [`GET ${base}/hello`, "200 OK, 5 bytes"]);
    });
  });

  it("refuses hosts and ports off the allowlist, redirects included", async () => {
    await withHarness(async (h) => {
      for (const url of [`http://localhost:${port}/hello`, `http://127.0.0.1:${port + 1}/`, `${base}/redirect-away`]) {
        const out = await h.call("http_get", { url });
        assert.equal(out.error?.code, "permission_denied", url);
      }
      assert.equal((await h.call("http_get", { url: `${base}/redirect-home` })).content.endsWith("hello"), true);
      assert.equal((await h.call("http_get", { url: "file:///etc/passwd" })).error?.code, "invalid_args");
    });
  });

  it("marks HTTP errors and cuts long bodies", async () => {
    await withHarness(async (h) => {
      assert.equal((await h.call("http_get", { url: `${base}/missing` })).isError, true);
      const out = await h.call("http_get", { url: `${base}/long`, max_bytes: 10 });
      assert.match(out.content, /\n\nx{10}\n\[body cut at 10 bytes/);
    });
  });

  it("stops the request when the call is cancelled", async () => {
    await withHarness(async (h) => {
      const ac = new AbortController();
      const call = h.call("http_get", { url: `${base}/slow` }, { signal: ac.signal });
      setTimeout(() => ac.abort(), 100);
      assert.equal((await call).error?.code, "cancelled");
      await slowClosed; // the server saw the connection go
    });
  });
});

describe("http_download", () => {
  it("saves the body under the directory, and its check sees it", async () => {
    await withHarness(async (h, dir) => {
      const since = new Date(Date.now() - 1000);
      const args = { url: `${base}/hello`, path: "sub/hello.txt" };
      assert.equal((await h.checkSideEffect("http_download", args, since)).effect, "not_run");
      const out = await h.call("http_download", args);
      assert.match(out.content, /^saved 5 bytes to sub\/hello.txt \(sha256 2cf24dba/);
      assert.equal(readFileSync(join(dir, "sub/hello.txt"), "utf8"), "hello");
      assert.equal((await h.checkSideEffect("http_download", args, since)).effect, "completed");
      assert.equal((await h.checkSideEffect("http_download", args, new Date(Date.now() + 60_000))).effect, "not_run");
      assert.equal((await h.call("http_download", { url: `${base}/hello`, path: "../escape" })).error?.code, "invalid_args");
    });
  });
});

describe("the allowlist", () => {
  it("matches hosts, ports and subdomains", () => {
    const u = (s: string) => new URL(s);
    assert.equal(matches("example.com", u("https://example.com/x")), true);
    assert.equal(matches("example.com", u("https://EXAMPLE.com:8443/x")), true);
    assert.equal(matches("example.com:443", u("https://example.com/")), true);
    assert.equal(matches("example.com:443", u("http://example.com/")), false);
    assert.equal(matches("*.example.com", u("https://api.example.com/")), true);
    assert.equal(matches("*.example.com", u("https://example.com.evil/")), false);
    assert.equal(matches("example.com", u("https://example.com.evil/")), false);
  });
});
