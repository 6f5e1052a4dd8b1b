// Hooks a plugin serves (docs/hooks.md, kind plugin): code the kernel runs
// at the hook points a configuration rule names. The documents are the
// command hooks': a hook reads the input a command hook reads on stdin and
// answers the reply a command hook prints (schemas/hook-input.schema.json,
// schemas/hook-output.schema.json). The concepts are the Go SDK's (sdk.Hook).

import type * as grpc from "@grpc/grpc-js";
import type { ListHooksResponseMsg, RunHookRequestMsg, RunHookResponseMsg } from "./protocol";
import { Code, ToolError, truncateOutput } from "./tool";
import { classify, SDKVersion } from "./service";

/** The hook points, in the order a run meets them (the kernel's HookPoints). */
export const HookPoints = ["run_start", "before_compact", "before_model", "after_model", "before", "after", "run_end"] as const;
export type HookPoint = (typeof HookPoints)[number];

/**
 * HookInput is the document a hook reads: phase (the point), hook, session_id,
 * run, turn, and the point's own fields (prompt, messages, answer, output,
 * stop_reason, args, result, ...).
 */
export interface HookInput {
  phase: HookPoint;
  hook: string;
  session_id: string;
  run: number;
  turn: number;
  [field: string]: unknown;
}

/** HookReply is a hook's answer; empty (or undefined) allows. Which fields a point takes is docs/hooks.md's. */
export interface HookReply {
  decision?: "allow" | "block";
  reason?: string;
  prompt?: string;
  context?: string;
  edits?: { seq: number; content: string }[];
  text?: string;
  reasoning?: string;
  refuse?: { call_id: string; reason?: string }[];
  note?: string;
  instructions?: string;
  updated_args?: Record<string, unknown>;
  updated_result?: { content: string; is_error?: boolean };
  additional_context?: string;
}

/** block is a reply that blocks with reason. */
export function block(reason: string): HookReply {
  return { decision: "block", reason };
}

/** HookSpec is what a plugin author writes for a hook. */
export interface HookSpec {
  name: string;
  description?: string;
  /** The hook points it runs at. */
  points: HookPoint[];
  /** Runs the hook; a thrown ToolError's code crosses to the kernel, which applies the hook's fail mode. */
  handler(input: HookInput, ctx: { signal: AbortSignal }): Promise<HookReply | undefined> | HookReply | undefined;
}

/** Hook is a checked HookSpec, ready to serve. Make it with hook(). */
export interface Hook {
  readonly name: string;
  readonly description: string;
  readonly points: readonly HookPoint[];
  /** run runs the hook on an input document and returns the reply document ("" allows). */
  readonly run: (input: string, signal: AbortSignal) => Promise<string>;
}

const nameRE = /^[A-Za-z0-9_-]{1,63}$/;
const maxErrorMessage = 64 << 10;

/** hook checks spec and returns the hook; a bad spec throws a TypeError naming it. */
export function hook(spec: HookSpec): Hook {
  const where = `agentkernel plugin: hook ${JSON.stringify(spec?.name)}`;
  if (typeof spec?.name !== "string" || !nameRE.test(spec.name)) {
    throw new TypeError(`${where}: the name must be 1-63 characters of A-Z a-z 0-9 _ -`);
  }
  if (typeof spec.handler !== "function") throw new TypeError(`${where}: no handler`);
  if (!Array.isArray(spec.points) || spec.points.length === 0) {
    throw new TypeError(`${where}: no points (want some of ${HookPoints.join(", ")})`);
  }
  for (const p of spec.points) {
    if (!HookPoints.includes(p)) throw new TypeError(`${where}: ${JSON.stringify(p)} is not a hook point`);
  }
  const points = [...spec.points];
  return {
    name: spec.name,
    description: spec.description ?? "",
    points,
    async run(input: string, signal: AbortSignal): Promise<string> {
      let doc: HookInput;
      try {
        doc = JSON.parse(input) as HookInput;
      } catch (e) {
        throw new ToolError(Code.InvalidArgs, `the hook input is not JSON: ${(e as Error).message}`);
      }
      if (doc === null || typeof doc !== "object" || !points.includes(doc.phase)) {
        throw new ToolError(Code.InvalidArgs, `hook ${spec.name} does not run at ${JSON.stringify(doc?.phase)} (it runs at ${points.join(", ")})`);
      }
      const rep = await spec.handler(doc, { signal });
      if (rep === undefined || rep === null || Object.keys(rep).length === 0) return "";
      return JSON.stringify({ decision: "allow", ...rep });
    },
  };
}

/** hooksByName checks that hooks are distinct hooks. */
export function hooksByName(hooks: readonly Hook[]): Map<string, Hook> {
  const byName = new Map<string, Hook>();
  for (const h of hooks) {
    if (!h || typeof h.run !== "function") throw new TypeError("agentkernel plugin: not a hook (make hooks with hook())");
    if (byName.has(h.name)) throw new TypeError(`agentkernel plugin: hook ${h.name}: defined twice`);
    byName.set(h.name, h);
  }
  return byName;
}

/** hooksService implements the hook service (agentkernel.plugin.v1.Hooks) for hooks. */
export function hooksService(byName: Map<string, Hook>): grpc.UntypedServiceImplementation {
  return {
    ListHooks(_call: grpc.ServerUnaryCall<unknown, ListHooksResponseMsg>, callback: grpc.sendUnaryData<ListHooksResponseMsg>) {
      callback(null, {
        sdk_version: SDKVersion,
        hooks: [...byName.values()].map((h) => ({ name: h.name, description: h.description, points: [...h.points] })),
      });
    },
    RunHook(call: grpc.ServerUnaryCall<RunHookRequestMsg, RunHookResponseMsg>, callback: grpc.sendUnaryData<RunHookResponseMsg>) {
      void runHook(byName, call).then((r) => callback(null, r));
    },
  };
}

async function runHook(byName: Map<string, Hook>, call: grpc.ServerUnaryCall<RunHookRequestMsg, RunHookResponseMsg>): Promise<RunHookResponseMsg> {
  const h = byName.get(call.request.hook);
  if (!h) return { reply: Buffer.alloc(0), error: { code: Code.NotFound, message: `no hook ${JSON.stringify(call.request.hook)}` } };
  const ac = new AbortController();
  const onCancel = () => ac.abort(new ToolError(Code.Cancelled, "the hook was cancelled"));
  call.on("cancelled", onCancel);
  try {
    const reply = await h.run(call.request.input.toString("utf8"), ac.signal);
    return { reply: Buffer.from(reply, "utf8"), error: null };
  } catch (e) {
    const { code, message } = classify(e, ac.signal);
    return { reply: Buffer.alloc(0), error: { code, message: truncateOutput(message, maxErrorMessage) } };
  } finally {
    call.off("cancelled", onCancel);
  }
}
