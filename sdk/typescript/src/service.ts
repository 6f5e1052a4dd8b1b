// The tool service (agentkernel.plugin.v1.Tools) over a set of tools: what
// serve() registers on its gRPC server and the harness on its own.

import * as grpc from "@grpc/grpc-js";
import type {
  CallEventMsg,
  CallRequestMsg,
  CheckSideEffectRequestMsg,
  CheckSideEffectResponseMsg,
  DescribeResponseMsg,
  ResultMsg,
} from "./protocol";
import { Code, SideEffectAnswer, Tool, ToolError, ToolResult, truncateOutput } from "./tool";

/** SDKVersion is reported by Describe, for diagnostics (`kernel plugins verify` prints it). */
export const SDKVersion = "typescript/0.1.0";

// Caps, as the Go SDK's: an error message when the call has no output cap,
// a side-effect check's detail.
const maxErrorMessage = 64 << 10;
const maxSideEffectDetail = 1 << 10;
// setTimeout's longest delay; a later deadline needs no timer.
const maxTimer = 2 ** 31 - 1;

/** toolsByName checks that tools is a list of distinct tools, non-empty unless the plugin serves hooks. */
export function toolsByName(tools: readonly Tool[], hooks = false): Map<string, Tool> {
  if (!Array.isArray(tools) || (tools.length === 0 && !hooks)) {
    throw new TypeError("agentkernel plugin: no tools to serve");
  }
  const byName = new Map<string, Tool>();
  for (const t of tools) {
    if (!t || typeof t.run !== "function") {
      throw new TypeError("agentkernel plugin: not a tool (make tools with tool())");
    }
    if (byName.has(t.name)) {
      throw new TypeError(`agentkernel plugin: tool ${t.name}: defined twice`);
    }
    byName.set(t.name, t);
  }
  return byName;
}

/** toolsService implements the tool service for tools. */
export function toolsService(byName: Map<string, Tool>): grpc.UntypedServiceImplementation {
  return {
    Describe(_call: grpc.ServerUnaryCall<unknown, DescribeResponseMsg>, callback: grpc.sendUnaryData<DescribeResponseMsg>) {
      callback(null, describe(byName));
    },
    Call(call: grpc.ServerWritableStream<CallRequestMsg, CallEventMsg>) {
      void runCall(byName, call);
    },
    CheckSideEffect(
      call: grpc.ServerUnaryCall<CheckSideEffectRequestMsg, CheckSideEffectResponseMsg>,
      callback: grpc.sendUnaryData<CheckSideEffectResponseMsg>,
    ) {
      void checkSideEffect(byName, call).then((r) => callback(null, r));
    },
  };
}

function describe(byName: Map<string, Tool>): DescribeResponseMsg {
  return {
    sdk_version: SDKVersion,
    tools: [...byName.values()].map((t) => ({
      name: t.name,
      description: t.description,
      schema: Buffer.from(t.schema),
      tier: t.tier,
      tags: [...t.tags],
      timeout_ms: String(Math.round(t.timeoutMs)),
      checks_side_effects: t.check !== undefined,
    })),
  };
}

// runCall runs one call: progress events while the handler runs, then one
// result, then the end of the stream.
async function runCall(byName: Map<string, Tool>, call: grpc.ServerWritableStream<CallRequestMsg, CallEventMsg>): Promise<void> {
  const req = call.request;
  const t = byName.get(req.tool);
  if (!t) {
    call.write({ result: errorResult(Code.UnknownTool, `unknown tool ${JSON.stringify(req.tool)}`, 0) });
    call.end();
    return;
  }
  const max = Number(req.max_output_bytes) || 0;
  const deadline = callDeadline(call.getDeadline(), kernelDeadline(call.metadata), t.timeoutMs);
  const ac = new AbortController();
  const onCancel = () => {
    // grpc-js cancels the call when its deadline passes too.
    const timedOut = deadline !== undefined && Date.now() >= deadline.getTime() - 5;
    ac.abort(timedOut ? deadlineError() : new ToolError(Code.Cancelled, "the call was cancelled"));
  };
  call.on("cancelled", onCancel);
  let timer: NodeJS.Timeout | undefined;
  if (deadline !== undefined) {
    const ms = Math.max(0, deadline.getTime() - Date.now());
    if (ms < maxTimer) timer = setTimeout(() => ac.abort(deadlineError()), ms);
  }
  let done = false;
  const progress = (text: string) => {
    if (!done && !call.cancelled) call.write({ progress: { text: String(text) } });
  };
  let result: ResultMsg;
  try {
    const args = parseArgs(req.args);
    const out = await t.run(args, { signal: ac.signal, deadline, progress });
    result = okResult(out, max);
  } catch (e) {
    const { code, message } = classify(e, ac.signal);
    result = errorResult(code, message, max);
  } finally {
    done = true;
    if (timer) clearTimeout(timer);
    call.off("cancelled", onCancel);
  }
  if (!call.cancelled) call.write({ result });
  call.end();
}

/**
 * deadlineMetadata is the metadata key of the kernel's deadline as an
 * absolute time (Unix milliseconds). grpc sends a duration, counted here
 * from when the call is read: later than the kernel counted from on a
 * loaded machine, so the kernel's cancel at its deadline could arrive
 * before ours and look like a cancellation.
 */
export const deadlineMetadata = "agentkernel-deadline-ms";

// kernelDeadline is the absolute deadline the kernel sent, or Infinity.
function kernelDeadline(md: grpc.Metadata): number {
  const v = md.get(deadlineMetadata)[0];
  const ms = typeof v === "string" ? Number(v) : NaN;
  return Number.isFinite(ms) ? ms : Infinity;
}

// callDeadline is the earlier of the kernel's deadline (its absolute one,
// else grpc's) and the tool's own timeout.
function callDeadline(grpcDeadline: grpc.Deadline, kernelMs: number, timeoutMs: number): Date | undefined {
  let ms = grpcDeadline instanceof Date ? grpcDeadline.getTime() : grpcDeadline;
  ms = Math.min(ms, kernelMs);
  if (timeoutMs > 0) ms = Math.min(ms, Date.now() + timeoutMs);
  return Number.isFinite(ms) ? new Date(ms) : undefined;
}

function deadlineError(): ToolError {
  return new ToolError(Code.Timeout, "the call's deadline passed");
}

// parseArgs is what the SDK checks of the arguments itself: a JSON object.
function parseArgs(raw: Buffer): Record<string, unknown> {
  let v: unknown = {};
  if (raw && raw.length > 0 && raw.toString().trim() !== "") {
    try {
      v = JSON.parse(raw.toString("utf8"));
    } catch (e) {
      throw new ToolError(Code.InvalidArgs, `arguments are not valid JSON: ${(e as Error).message}`);
    }
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    throw new ToolError(Code.InvalidArgs, "arguments must be a JSON object");
  }
  return v as Record<string, unknown>;
}

function okResult(out: string | ToolResult, max: number): ResultMsg {
  let content: string;
  let isError = false;
  if (typeof out === "string") {
    content = out;
  } else if (out !== null && typeof out === "object" && typeof out.content === "string") {
    content = out.content;
    isError = out.isError === true;
  } else {
    throw new ToolError(Code.ToolError, `the handler returned ${typeof out}, not a string or {content: string}`);
  }
  const size = Buffer.byteLength(content, "utf8");
  if (max > 0 && size > max) {
    return { content: truncateOutput(content, max), is_error: isError, truncated_from: String(size) };
  }
  return { content, is_error: isError, truncated_from: "0" };
}

function errorResult(code: string, message: string, max: number): ResultMsg {
  return {
    content: "",
    is_error: true,
    error: { code, message: truncateOutput(message, max > 0 ? max : maxErrorMessage) },
    truncated_from: "0",
  };
}

// classify gives a thrown value its code: a ToolError's own; timeout or
// cancelled when the call's signal ended it; tool_error otherwise.
export function classify(e: unknown, signal: AbortSignal): { code: string; message: string } {
  if (e instanceof ToolError) return { code: e.code, message: e.message };
  const message = e instanceof Error ? e.message : String(e);
  if (signal.aborted && signal.reason instanceof ToolError) return { code: signal.reason.code, message };
  return { code: Code.ToolError, message };
}

async function checkSideEffect(
  byName: Map<string, Tool>,
  call: grpc.ServerUnaryCall<CheckSideEffectRequestMsg, CheckSideEffectResponseMsg>,
): Promise<CheckSideEffectResponseMsg> {
  const req = call.request;
  const t = byName.get(req.tool);
  if (!t) return { effect: "SIDE_EFFECT_UNKNOWN", detail: `unknown tool ${JSON.stringify(req.tool)}` };
  if (!t.check) return { effect: "SIDE_EFFECT_UNKNOWN", detail: "" };
  const ac = new AbortController();
  const onCancel = () => ac.abort(new ToolError(Code.Cancelled, "the check was cancelled"));
  call.on("cancelled", onCancel);
  let answer: SideEffectAnswer;
  try {
    const args = parseArgs(req.args);
    const since = new Date(Number(BigInt(req.since_unix_nano || 0) / 1_000_000n));
    answer = await t.check(args, since, { signal: ac.signal });
  } catch (e) {
    answer = { effect: "unknown", detail: `the check failed: ${e instanceof Error ? e.message : String(e)}` };
  } finally {
    call.off("cancelled", onCancel);
  }
  const detail = truncateOutput(String(answer?.detail ?? ""), maxSideEffectDetail);
  switch (answer?.effect) {
    case "completed":
      return { effect: "SIDE_EFFECT_COMPLETED", detail };
    case "not_run":
      return { effect: "SIDE_EFFECT_NOT_RUN", detail };
  }
  return { effect: "SIDE_EFFECT_UNKNOWN", detail };
}
