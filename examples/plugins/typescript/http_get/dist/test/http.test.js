"use strict";
// The http_get plugin's tests, with the SDK's harness and a local server.
Object.defineProperty(exports, "__esModule", { value: true });
const node_assert_1 = require("node:assert");
const node_fs_1 = require("node:fs");
const node_http_1 = require("node:http");
const node_os_1 = require("node:os");
const node_path_1 = require("node:path");
const node_test_1 = require("node:test");
const testing_1 = require("@agentkernel/plugin-sdk/testing");
const http_1 = require("../src/http");
let server;
let base;
let port;
let closedSlow;
let slowClosed;
(0, node_test_1.before)(async () => {
    slowClosed = new Promise((r) => (closedSlow = r));
    server = (0, node_http_1.createServer)((req, res) => {
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
    await new Promise((r) => server.listen(0, "127.0.0.1", r));
    port = server.address().port;
    base = `http://127.0.0.1:${port}`;
});
(0, node_test_1.after)(() => server.close());
async function withHarness(fn) {
    const dir = (0, node_fs_1.mkdtempSync)((0, node_path_1.join)((0, node_os_1.tmpdir)(), "http-get-"));
    const h = await (0, testing_1.startHarness)((0, http_1.tools)({ allow: [`127.0.0.1:${port}`], dir }));
    try {
        await fn(h, dir);
    }
    finally {
        await h.close();
    }
}
(0, node_test_1.describe)("http_get", () => {
    (0, node_test_1.it)("fetches an allowed URL, reporting progress", async () => {
        await withHarness(async (h) => {
            const out = await h.call("http_get", { url: `${base}/hello` });
            node_assert_1.strict.equal(out.content, "HTTP 200 OK\ncontent-type: text/plain\n\nhello");
            node_assert_1.strict.deepEqual(out.progress, [`GET ${base}/hello`, "200 OK, 5 bytes"]);
        });
    });
    (0, node_test_1.it)("refuses hosts and ports off the allowlist, redirects included", async () => {
        await withHarness(async (h) => {
            for (const url of [`http://localhost:${port}/hello`, `http://127.0.0.1:${port + 1}/`, `${base}/redirect-away`]) {
                const out = await h.call("http_get", { url });
                node_assert_1.strict.equal(out.error?.code, "permission_denied", url);
            }
            node_assert_1.strict.equal((await h.call("http_get", { url: `${base}/redirect-home` })).content.endsWith("hello"), true);
            node_assert_1.strict.equal((await h.call("http_get", { url: "file:///etc/passwd" })).error?.code, "invalid_args");
        });
    });
    (0, node_test_1.it)("marks HTTP errors and cuts long bodies", async () => {
        await withHarness(async (h) => {
            node_assert_1.strict.equal((await h.call("http_get", { url: `${base}/missing` })).isError, true);
            const out = await h.call("http_get", { url: `${base}/long`, max_bytes: 10 });
            node_assert_1.strict.match(out.content, /\n\nx{10}\n\[body cut at 10 bytes/);
        });
    });
    (0, node_test_1.it)("stops the request when the call is cancelled", async () => {
        await withHarness(async (h) => {
            const ac = new AbortController();
            const call = h.call("http_get", { url: `${base}/slow` }, { signal: ac.signal });
            setTimeout(() => ac.abort(), 100);
            node_assert_1.strict.equal((await call).error?.code, "cancelled");
            await slowClosed; // the server saw the connection go
        });
    });
});
(0, node_test_1.describe)("http_download", () => {
    (0, node_test_1.it)("saves the body under the directory, and its check sees it", async () => {
        await withHarness(async (h, dir) => {
            const since = new Date(Date.now() - 1000);
            const args = { url: `${base}/hello`, path: "sub/hello.txt" };
            node_assert_1.strict.equal((await h.checkSideEffect("http_download", args, since)).effect, "not_run");
            const out = await h.call("http_download", args);
            node_assert_1.strict.match(out.content, /^saved 5 bytes to sub\/hello.txt \(sha256 2cf24dba/);
            node_assert_1.strict.equal((0, node_fs_1.readFileSync)((0, node_path_1.join)(dir, "sub/hello.txt"), "utf8"), "hello");
            node_assert_1.strict.equal((await h.checkSideEffect("http_download", args, since)).effect, "completed");
            node_assert_1.strict.equal((await h.checkSideEffect("http_download", args, new Date(Date.now() + 60_000))).effect, "not_run");
            node_assert_1.strict.equal((await h.call("http_download", { url: `${base}/hello`, path: "../escape" })).error?.code, "invalid_args");
        });
    });
});
(0, node_test_1.describe)("the allowlist", () => {
    (0, node_test_1.it)("matches hosts, ports and subdomains", () => {
        const u = (s) => new URL(s);
        node_assert_1.strict.equal((0, http_1.matches)("example.com", u("https://example.com/x")), true);
        node_assert_1.strict.equal((0, http_1.matches)("example.com", u("https://EXAMPLE.com:8443/x")), true);
        node_assert_1.strict.equal((0, http_1.matches)("example.com:443", u("https://example.com/")), true);
        node_assert_1.strict.equal((0, http_1.matches)("example.com:443", u("http://example.com/")), false);
        node_assert_1.strict.equal((0, http_1.matches)("*.example.com", u("https://api.example.com/")), true);
        node_assert_1.strict.equal((0, http_1.matches)("*.example.com", u("https://example.com.evil/")), false);
        node_assert_1.strict.equal((0, http_1.matches)("example.com", u("https://example.com.evil/")), false);
    });
});
//# sourceMappingURL=http.test.js.map