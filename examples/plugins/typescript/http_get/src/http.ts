// http_get and http_download: HTTP GET for the model, limited to an
// allowlist of hosts. The kernel's sandbox decides which TCP ports the
// plugin may reach (Landlock filters ports, not hosts); this plugin
// decides which hosts, and checks every redirect too.

import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { request as httpRequest, IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { dirname, isAbsolute, join, normalize, sep } from "node:path";
import { CallContext, Code, Tool, ToolError, tool } from "@agentkernel/plugin-sdk";

/** Options of the plugin, from its command line. */
export interface Options {
  /** Allowed hosts: "example.com" (any port), "example.com:8080", "*.example.com" (its subdomains). */
  allow: string[];
  /** Where http_download saves files; without it the tool is not offered. */
  dir?: string;
}

const defaultMaxBytes = 1 << 20;
const maxMaxBytes = 16 << 20;
const maxRedirects = 5;

interface GetArgs {
  url: string;
  max_bytes?: number;
}

interface DownloadArgs {
  url: string;
  path: string;
}

/** tools returns the plugin's tools for opts. */
export function tools(opts: Options): Tool[] {
  if (opts.allow.length === 0) {
    throw new Error("http_get: no host is allowed: pass --allow HOST[:PORT] (repeatable)");
  }
  const allowed = (u: URL) => opts.allow.some((a) => matches(a, u));
  const out: Tool[] = [
    tool<GetArgs>({
      name: "http_get",
      description:
        `Fetches a URL with HTTP GET and returns the status, the content type and the body as text. ` +
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
    out.push(
      tool<DownloadArgs>({
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
          if (res.status >= 400) return { content: `HTTP ${res.status} ${res.statusText}: nothing saved`, isError: true };
          if (res.cut) throw new ToolError("too_large", `the body is larger than ${maxMaxBytes} bytes: nothing saved`);
          mkdirSync(dirname(target), { recursive: true });
          // Written next to the target, then renamed: the file appears whole or not at all.
          const part = join(dirname(target), `.${randomBytes(6).toString("hex")}.part`);
          try {
            writeFileSync(part, res.body, { flag: "wx", mode: 0o644 });
            renameSync(part, target);
          } finally {
            rmSync(part, { force: true });
          }
          const sum = createHash("sha256").update(res.body).digest("hex");
          return `saved ${res.body.length} bytes to ${args.path} (sha256 ${sum})`;
        },
        // The file appears whole when the download completed: it is there
        // and newer than the round, or it is not.
        checkSideEffect(args, since) {
          const target = inside(dir, args.path);
          let mtime: Date;
          try {
            mtime = statSync(target).mtime;
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code === "ENOENT") return { effect: "not_run", detail: `${args.path} does not exist` };
            return { effect: "unknown" };
          }
          if (mtime.getTime() >= since.getTime()) return { effect: "completed", detail: `${args.path} was written at ${mtime.toISOString()}` };
          return { effect: "not_run", detail: `${args.path} is unchanged since ${since.toISOString()}` };
        },
      }),
    );
  }
  return out;
}

interface Response {
  status: number;
  statusText: string;
  contentType: string;
  body: Buffer;
  cut: boolean;
}

// get fetches url, following redirects on allowed hosts, reading at most
// max bytes of the body. The call's signal aborts it.
async function get(raw: string, allowed: (u: URL) => boolean, max: number, ctx: CallContext): Promise<Response> {
  let url = parse(raw);
  for (let hop = 0; ; hop++) {
    if (!allowed(url)) {
      throw new ToolError(Code.PermissionDenied, `${url.host} is not an allowed host (allowed: see the tool's description)`);
    }
    ctx.progress(`GET ${url.href}`);
    const res = await send(url, ctx.signal);
    const location = res.headers.location;
    if (res.statusCode && [301, 302, 303, 307, 308].includes(res.statusCode) && location) {
      res.resume();
      if (hop === maxRedirects) throw new ToolError(Code.Unavailable, `more than ${maxRedirects} redirects`);
      url = parse(new URL(location, url).href);
      continue;
    }
    const { body, cut } = await read(res, max, ctx.signal);
    ctx.progress(`${res.statusCode} ${res.statusMessage}, ${body.length} bytes`);
    return { status: res.statusCode ?? 0, statusText: res.statusMessage ?? "", contentType: res.headers["content-type"] ?? "", body, cut };
  }
}

function parse(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ToolError(Code.InvalidArgs, `${JSON.stringify(raw)} is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ToolError(Code.InvalidArgs, `${url.protocol} URLs are not supported: use http:// or https://`);
  }
  return url;
}

function send(url: URL, signal: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = (url.protocol === "https:" ? httpsRequest : httpRequest)(url, { method: "GET", signal, headers: { "user-agent": "agentkernel-http-get/0.1" } }, resolve);
    req.on("error", (e) => reject(failure(e, signal)));
    req.end();
  });
}

function read(res: IncomingMessage, max: number, signal: AbortSignal): Promise<{ body: Buffer; cut: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on("data", (chunk: Buffer) => {
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
function failure(e: Error, signal: AbortSignal): Error {
  if (signal.aborted) return signal.reason instanceof Error ? signal.reason : e;
  return new ToolError(Code.Unavailable, e.message);
}

// matches reports whether the allowlist entry a allows url.
export function matches(a: string, url: URL): boolean {
  const entry = new URL(`http://${a}`);
  const host = url.hostname.toLowerCase();
  const want = entry.hostname.toLowerCase();
  const hostOK = want.startsWith("*.") ? host.endsWith(want.slice(1)) : host === want;
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  return hostOK && (entry.port === "" || entry.port === port);
}

// inside resolves p under dir, refusing paths that leave it.
function inside(dir: string, p: string): string {
  const rel = normalize(p);
  if (p === "" || isAbsolute(p) || rel === ".." || rel.startsWith(`..${sep}`)) {
    throw new ToolError(Code.InvalidArgs, `${JSON.stringify(p)} is not a path inside the downloads directory`);
  }
  return join(dir, rel);
}
