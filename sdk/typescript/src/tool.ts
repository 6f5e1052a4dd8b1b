// What a plugin author writes: tools. The concepts are the Go SDK's
// (sdk): a name, a description, a JSON Schema for the arguments, a
// tier, an optional timeout, an async handler that reports progress and
// stops when its AbortSignal fires, and an optional side-effect check.

/** How much harm a tool can do. Every tool declares one. */
export type Tier = "read_only" | "side_effecting" | "privileged";

const tiers: readonly Tier[] = ["read_only", "side_effecting", "privileged"];

/**
 * The error codes the kernel knows. A tool may use codes of its own too:
 * any string of a-z 0-9 _ (1 to 32 characters).
 */
export const Code = {
  InvalidArgs: "invalid_args",
  NotFound: "not_found",
  PermissionDenied: "permission_denied",
  Unavailable: "unavailable",
  Timeout: "timeout",
  Cancelled: "cancelled",
  Panic: "panic",
  UnknownTool: "unknown_tool",
  ToolError: "tool_error",
} as const;

const codeRE = /^[a-z0-9_]{1,32}$/;

/**
 * ToolError is an error whose code crosses the process boundary: on the
 * kernel's side, errors.Is(err, sdk.ErrNotFound) holds for a
 * `new ToolError(Code.NotFound, ...)`. Any other thrown value gets the code
 * tool_error (or timeout / cancelled when the call's signal ended it).
 */
export class ToolError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ToolError";
    this.code = codeRE.test(code) ? code : Code.ToolError;
  }
}

/** A JSON Schema for a tool's arguments: an object schema. */
export type JSONSchema = { type?: "object"; [keyword: string]: unknown };

/** What a handler gets besides its arguments. */
export interface CallContext {
  /**
   * Aborted when the call's deadline passes (the tool's timeoutMs, or the
   * kernel's) or the kernel cancels the call. Its reason is a ToolError
   * with code timeout or cancelled: pass the signal on (fetch, http.get,
   * child_process) or check it, and return promptly.
   */
  readonly signal: AbortSignal;
  /** When the call's deadline passes, if it has one. */
  readonly deadline: Date | undefined;
  /** Reports progress; the kernel shows it as a tool.progress event. Reports after the handler returned are dropped. */
  progress(text: string): void;
}

/** A handler's result when it is more than text. */
export interface ToolResult {
  /** The text the model reads. */
  content: string;
  /** Marks a result that reports a failure the model should see as such. */
  isError?: boolean;
}

/** What a side-effect check found out about an interrupted call. */
export type SideEffect = "completed" | "not_run" | "unknown";

/** A side-effect check's answer: its finding and what it checked (a path, a hash; never contents). */
export interface SideEffectAnswer {
  effect: SideEffect;
  detail?: string;
}

/** ToolSpec describes a tool. The kernel shows it to the model as "<plugin>.<name>". */
export interface ToolSpec<A> {
  /** 1 to 63 characters of A-Z a-z 0-9 _ -. */
  name: string;
  /** Tells the model what the tool does and when to use it. */
  description?: string;
  /**
   * The JSON Schema of the arguments, an object schema (default: any
   * object). The kernel compiles it when it loads the plugin and checks
   * every call against it before the plugin sees the call: the handler's
   * arguments are valid.
   */
  schema?: JSONSchema | string;
  /** Required: read_only (calls may run in parallel), side_effecting or privileged (policy can ask a human first). */
  tier: Tier;
  /** Free-form labels policy rules can match on. */
  tags?: string[];
  /** Bounds one call; 0 or absent leaves it to the kernel's configuration. */
  timeoutMs?: number;
  /** Runs one call. Return the text the model reads, or a ToolResult; throw a ToolError to fail with a code. */
  handler(args: A, ctx: CallContext): Promise<string | ToolResult> | string | ToolResult;
  /**
   * Tells the kernel, after it crashed, whether an interrupted call of this
   * tool completed. It must only read, and answer "unknown" unless sure;
   * since is when the call's round started. See docs/plugins.md, "Crash repair".
   */
  checkSideEffect?(args: A, since: Date, ctx: { signal: AbortSignal }): Promise<SideEffectAnswer> | SideEffectAnswer;
}

/** Tool is a checked ToolSpec, ready to serve. Make it with tool(). */
export interface Tool {
  readonly name: string;
  readonly description: string;
  /** The schema as JSON text. */
  readonly schema: string;
  readonly tier: Tier;
  readonly tags: readonly string[];
  readonly timeoutMs: number;
  /** @internal */
  readonly run: (args: unknown, ctx: CallContext) => Promise<string | ToolResult>;
  /** @internal */
  readonly check: ((args: unknown, since: Date, ctx: { signal: AbortSignal }) => Promise<SideEffectAnswer>) | undefined;
}

const nameRE = /^[A-Za-z0-9_-]{1,63}$/;

/**
 * tool checks spec and returns the tool. A bad spec (a name the kernel
 * would refuse, no tier, a schema that is not an object schema) throws a
 * TypeError at once, naming the tool. The arguments' type A is yours to
 * keep in line with the schema: the kernel validates against the schema.
 */
export function tool<A = Record<string, unknown>>(spec: ToolSpec<A>): Tool {
  const where = `agentkernel plugin: tool ${JSON.stringify(spec?.name)}`;
  if (typeof spec?.name !== "string" || !nameRE.test(spec.name)) {
    throw new TypeError(`${where}: the name must be 1-63 characters of A-Z a-z 0-9 _ -`);
  }
  if (!tiers.includes(spec.tier)) {
    throw new TypeError(`${where}: tier ${JSON.stringify(spec.tier)} is not one of ${tiers.join(", ")}`);
  }
  if (typeof spec.handler !== "function") {
    throw new TypeError(`${where}: no handler`);
  }
  const timeoutMs = spec.timeoutMs ?? 0;
  if (!Number.isFinite(timeoutMs) || timeoutMs < 0) {
    throw new TypeError(`${where}: timeoutMs must be a non-negative number, got ${spec.timeoutMs}`);
  }
  if (spec.checkSideEffect !== undefined && typeof spec.checkSideEffect !== "function") {
    throw new TypeError(`${where}: checkSideEffect must be a function`);
  }
  const schema = schemaText(spec.schema, where);
  const handler = spec.handler.bind(spec);
  const check = spec.checkSideEffect?.bind(spec);
  return Object.freeze({
    name: spec.name,
    description: spec.description ?? "",
    schema,
    tier: spec.tier,
    tags: Object.freeze([...(spec.tags ?? [])]),
    timeoutMs,
    run: async (args: unknown, ctx: CallContext) => handler(args as A, ctx),
    check: check && (async (args: unknown, since: Date, ctx: { signal: AbortSignal }) => check(args as A, since, ctx)),
  });
}

// schemaText is the schema as JSON, after the check the SDK makes without
// a JSON Schema library (the kernel compiles it in full): one JSON object
// whose "type", if any, is "object".
function schemaText(schema: JSONSchema | string | undefined, where: string): string {
  if (schema === undefined) return '{"type":"object"}';
  let value: unknown = schema;
  if (typeof schema === "string") {
    try {
      value = JSON.parse(schema);
    } catch (e) {
      throw new TypeError(`${where}: schema is not JSON: ${(e as Error).message}`);
    }
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new TypeError(`${where}: schema must be a JSON object`);
  }
  const type = (value as Record<string, unknown>).type;
  if (type !== undefined && type !== "object") {
    throw new TypeError(`${where}: schema type must be "object" (tool arguments are a JSON object), got ${JSON.stringify(type)}`);
  }
  return JSON.stringify(value);
}

/** truncateOutput cuts s to at most max bytes of UTF-8 and appends the kernel's marker; unchanged when it fits or max <= 0. */
export function truncateOutput(s: string, max: number): string {
  const b = Buffer.from(s, "utf8");
  if (max <= 0 || b.length <= max) return s;
  let cut = max;
  while (cut > 0 && (b[cut] & 0xc0) === 0x80) cut--;
  return b.subarray(0, cut).toString("utf8") + truncationMarker(b.length, max);
}

/** truncationMarker is the line truncateOutput appends to output of total bytes cut to max (sdk.TruncationMarker). */
export function truncationMarker(total: number, max: number): string {
  return `\n[output truncated: ${total} bytes, limit ${max}]`;
}
