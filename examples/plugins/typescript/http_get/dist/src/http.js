"use strict";
// http_get and http_download: HTTP GET for the model, limited to an
// allowlist of hosts. The kernel's sandbox decides which TCP ports the
// plugin may reach (Landlock filters ports, not hosts); this plugin
// decides which hosts, and checks every redirect too.
Object.defineProperty(exports, "__esModule", { value: true });
exports.tools = tools;
exports.matches = matches;
const node_crypto_1 = require("node:crypto");
const node_fs_1 = require("node:fs");
const node_http_1 = require("node:http");
const node_https_1 = require("node:https");
const node_path_1 = require("node:path");
const plugin_sdk_1 = require("@agentkernel/plugin-sdk");
const defaultMaxBytes = 1 << 20;
const maxMaxBytes = 16 << 20;
const maxRedirects = 5;
/** tools returns the plugin's tools for opts. */
function tools(opts) {
    if (opts.allow.length === 0) {
        throw new Error("http_get: no host is allowed: pass --allow HOST[:PORT] (repeatable)");
    }
    const allowed = (u) => opts.allow.some((a) => matches(a, u));
    const out = [
        (0, plugin_sdk_1.tool)({
            name: "http_get",
            description: `Fetches a URL with HTTP GET and returns the status, the content type and the body as text. ` +
                `Only these hosts are reachable: ${opts.allow.join(", ")}.`,
            schema: {
                type: "object",
                properties: {
                    url: { type: "string", description: "An http:// or https:// URL on an allowed host." },
                    max_bytes: { type: "integer", minimum: 1, maximum: maxMaxBytes, description: `Bytes of the body to read (default ${defaultMaxBytes}).` },
                },
                required: ["url"],
                additionalProperties: false,
            },
            tier: "read_only",
            tags: ["network"],
            async handler(args, ctx) {
                const max = args.max_bytes ?? defaultMaxBytes;
                const res = await get(args.url, allowed, max, ctx);
                const head = `HTTP ${res.status} ${res.statusText}\ncontent-type: ${res.contentType || "(none)"}\n`;
                const cut = res.cut ? `\n[body cut at ${max} bytes: raise max_bytes to read more]` : "";
                return { content: `${head}\n${res.body.toString("utf8")}${cut}`, isError: res.status >= 400 };
            },
        }),
    ];
    if (opts.dir !== undefined) {
        const dir = opts.dir;
        out.push((0, plugin_sdk_1.tool)({
            name: "http_download",
            description: `Downloads a URL with HTTP GET into a file under the downloads directory (replacing it). Only these hosts are reachable: ${opts.allow.join(", ")}.`,
            schema: {
                type: "object",
                properties: {
                    url: { type: "string", description: "An http:// or https:// URL on an allowed host." },
                    path: { type: "string", description: "Where to save it, relative to the downloads directory." },
                },
                required: ["url", "path"],
                additionalProperties: false,
            },
            tier: "side_effecting",
            tags: ["network", "write"],
            async handler(args, ctx) {
                const target = inside(dir, args.path);
                const res = await get(args.url, allowed, maxMaxBytes, ctx);
                if (res.status >= 400)
                    return { content: `HTTP ${res.status} ${res.statusText}: nothing saved`, isError: true };
                if (res.cut)
                    throw new plugin_sdk_1.ToolError("too_large", `the body is larger than ${maxMaxBytes} bytes: nothing saved`);
                (0, node_fs_1.mkdirSync)((0, node_path_1.dirname)(target), { recursive: true });
                // Written next to the target, then renamed: the file appears whole or not at all.
                const part = (0, node_path_1.join)((0, node_path_1.dirname)(target), `.${(0, node_crypto_1.randomBytes)(6).toString("hex")}.part`);
                try {
                    (0, node_fs_1.writeFileSync)(part, res.body, { flag: "wx", mode: 0o644 });
                    (0, node_fs_1.renameSync)(part, target);
                }
                finally {
                    (0, node_fs_1.rmSync)(part, { force: true });
                }
                const sum = (0, node_crypto_1.createHash)("sha256").update(res.body).digest("hex");
                return `saved ${res.body.length} bytes to ${args.path} (sha256 ${sum})`;
            },
            // The file appears whole when the download completed: it is there
            // and newer than the round, or it is not.
            checkSideEffect(args, since) {
                const target = inside(dir, args.path);
                let mtime;
                try {
                    mtime = (0, node_fs_1.statSync)(target).mtime;
                }
                catch (e) {
                    if (e.code === "ENOENT")
                        return { effect: "not_run", detail: `${args.path} does not exist` };
                    return { effect: "unknown" };
                }
                if (mtime.getTime() >= since.getTime())
                    return { effect: "completed", detail: `${args.path} was written at ${mtime.toISOString()}` };
                return { effect: "not_run", detail: `${args.path} is unchanged since ${since.toISOString()}` };
            },
        }));
    }
    return out;
}
// get fetches url, following redirects on allowed hosts, reading at most
// max bytes of the body. The call's signal aborts it.
async function get(raw, allowed, max, ctx) {
    let url = parse(raw);
    for (let hop = 0;; hop++) {
        if (!allowed(url)) {
            throw new plugin_sdk_1.ToolError(plugin_sdk_1.Code.PermissionDenied, `${url.host} is not an allowed host (allowed: see the tool's description)`);
        }
        ctx.progress(`GET ${url.href}`);
        const res = await send(url, ctx.signal);
        const location = res.headers.location;
        if (res.statusCode && [301, 302, 303, 307, 308].includes(res.statusCode) && location) {
            res.resume();
            if (hop === maxRedirects)
                throw new plugin_sdk_1.ToolError(plugin_sdk_1.Code.Unavailable, `more than ${maxRedirects} redirects`);
            url = parse(new URL(location, url).href);
            continue;
        }
        const { body, cut } = await read(res, max, ctx.signal);
        ctx.progress(`${res.statusCode} ${res.statusMessage}, ${body.length} bytes`);
        return { status: res.statusCode ?? 0, statusText: res.statusMessage ?? "", contentType: res.headers["content-type"] ?? "", body, cut };
    }
}
function parse(raw) {
    let url;
    try {
        url = new URL(raw);
    }
    catch {
        throw new plugin_sdk_1.ToolError(plugin_sdk_1.Code.InvalidArgs, `${JSON.stringify(raw)} is not a URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
        throw new plugin_sdk_1.ToolError(plugin_sdk_1.Code.InvalidArgs, `${url.protocol} URLs are not supported: use http:// or https://`);
    }
    return url;
}
function send(url, signal) {
    return new Promise((resolve, reject) => {
        const req = (url.protocol === "https:" ? node_https_1.request : node_http_1.request)(url, { method: "GET", signal, headers: { "user-agent": "agentkernel-http-get/0.1" } }, resolve);
        req.on("error", (e) => reject(failure(e, signal)));
        req.end();
    });
}
function read(res, max, signal) {
    return new Promise((resolve, reject) => {
        const chunks = [];
        let size = 0;
        res.on("data", (chunk) => {
            chunks.push(chunk);
            size += chunk.length;
            if (size > max) {
                resolve({ body: Buffer.concat(chunks).subarray(0, max), cut: true });
                res.destroy(); // enough read
            }
        });
        res.on("end", () => resolve({ body: Buffer.concat(chunks), cut: false }));
        res.on("error", (e) => reject(failure(e, signal)));
        res.on("aborted", () => reject(failure(new Error("the response was cut short"), signal)));
    });
}
// failure keeps the call's own end (timeout, cancelled) as the reason.
function failure(e, signal) {
    if (signal.aborted)
        return signal.reason instanceof Error ? signal.reason : e;
    return new plugin_sdk_1.ToolError(plugin_sdk_1.Code.Unavailable, e.message);
}
// matches reports whether the allowlist entry a allows url.
function matches(a, url) {
    const entry = new URL(`http://${a}`);
    const host = url.hostname.toLowerCase();
    const want = entry.hostname.toLowerCase();
    const hostOK = want.startsWith("*.") ? host.endsWith(want.slice(1)) : host === want;
    const port = url.port || (url.protocol === "https:" ? "443" : "80");
    return hostOK && (entry.port === "" || entry.port === port);
}
// inside resolves p under dir, refusing paths that leave it.
function inside(dir, p) {
    const rel = (0, node_path_1.normalize)(p);
    if (p === "" || (0, node_path_1.isAbsolute)(p) || rel === ".." || rel.startsWith(`..${node_path_1.sep}`)) {
        throw new plugin_sdk_1.ToolError(plugin_sdk_1.Code.InvalidArgs, `${JSON.stringify(p)} is not a path inside the downloads directory`);
    }
    return (0, node_path_1.join)(dir, rel);
}
//# sourceMappingURL=http.js.map