// The test harness: serves tools in-process through the SDK's real gRPC
// tool service (on a unix socket in a private temporary directory, without
// TLS) and calls them as the kernel does, so a test sees progress,
// cancellation, deadlines, truncation and error codes exactly as they cross
// the wire. It does not check arguments against the schema (the kernel
// does, before a call reaches the plugin); `kernel plugins verify` and the
// kernel's conformance suite run the real plugin through the real host.

import * as grpc from "@grpc/grpc-js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CallEventMsg,
  CallRequestMsg,
  CheckSideEffectResponseMsg,
  DescribeResponseMsg,
  ToolsClient,
  ToolsService,
} from "./protocol";
import { deadlineMetadata, toolsByName, toolsService } from "./service";
import type { SideEffect, SideEffectAnswer, Tier, Tool } from "./tool";

/** A tool as the kernel sees it in the plugin's Describe answer. */
export interface DescribedTool {
  name: string;
  description: string;
  /** The schema, parsed. */
  schema: Record<string, unknown>;
  tier: Tier;
  tags: string[];
  timeoutMs: number;
  checksSideEffects: boolean;
}

/** What one call returned. */
export interface CallOutcome {
  /** The text the model would read ("" for an error). */
  content: string;
  isError: boolean;
  /** The error's code and message, when the call failed. */
  error?: { code: string; message: string };
  /** The progress reports, in order. */
  progress: string[];
  /** The content's length in bytes before the plugin cut it, or 0. */
  truncatedFrom: number;
}

/** Options of one call. */
export interface CallOptions {
  /** Cancels the call, as the kernel does when a run is cancelled. */
  signal?: AbortSignal;
  /** The call's deadline, as the kernel sends it. */
  timeoutMs?: number;
  /**
   * With timeoutMs: the plugin "reads the call late", as on a loaded
   * machine: grpc's deadline is this much later, the kernel's absolute
   * one is not, and the call is cancelled at the latter, as the kernel
   * cancels at its deadline. The outcome is then "timeout".
   */
  readLateMs?: number;
  /** The output cap the kernel sends (a plugin's max_output_bytes; 0: none). */
  maxOutputBytes?: number;
}

/** A running harness. Close it when the test ends. */
export interface Harness {
  /** The tools, from the plugin's Describe answer. */
  readonly tools: DescribedTool[];
  /** Calls a tool by name; a tool's error is in the outcome, not thrown. A cancelled call resolves with code "cancelled", a call past its deadline with "timeout". */
  call(name: string, args: unknown, options?: CallOptions): Promise<CallOutcome>;
  /** Asks a tool's side-effect check about a call started at since. */
  checkSideEffect(name: string, args: unknown, since: Date): Promise<SideEffectAnswer>;
  close(): Promise<void>;
}

/** startHarness serves tools and returns a client for them. A bad tool list throws, as serve() would refuse it. */
export async function startHarness(tools: readonly Tool[]): Promise<Harness> {
  const byName = toolsByName(tools);
  const dir = mkdtempSync(join(tmpdir(), "agentkernel-harness-"));
  const socket = join(dir, "plugin.sock");
  const server = new grpc.Server();
  server.addService(ToolsService, toolsService(byName));
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())),
  );
  const client = new ToolsClient(`unix:${socket}`, grpc.credentials.createInsecure()) as grpc.Client & Record<string, Function>;
  const desc = await new Promise<DescribeResponseMsg>((resolve, reject) =>
    client.Describe({}, (err: grpc.ServiceError | null, res: DescribeResponseMsg) => (err ? reject(err) : resolve(res))),
  );
  const described = desc.tools.map((t) => ({
    name: t.name,
    description: t.description,
    schema: JSON.parse(t.schema.toString("utf8")) as Record<string, unknown>,
    tier: t.tier as Tier,
    tags: t.tags,
    timeoutMs: Number(t.timeout_ms),
    checksSideEffects: t.checks_side_effects,
  }));

  return {
    tools: described,
    call(name, args, options = {}) {
      const req: CallRequestMsg = {
        tool: name,
        args: Buffer.from(JSON.stringify(args ?? {})),
        max_output_bytes: String(options.maxOutputBytes ?? 0),
      };
      const callOpts: grpc.CallOptions = {};
      const md = new grpc.Metadata();
      if (options.timeoutMs !== undefined) {
        // As the kernel does: grpc's deadline, and the same deadline as an
        // absolute time, so that the plugin tells it from a cancel.
        const at = Date.now() + options.timeoutMs;
        callOpts.deadline = new Date(at + (options.readLateMs ?? 0));
        md.set(deadlineMetadata, String(at));
      }
      return new Promise<CallOutcome>((resolve, reject) => {
        const stream: grpc.ClientReadableStream<CallEventMsg> = client.Call(req, md, callOpts);
        let deadlinePassed = false;
        const late =
          options.readLateMs && options.timeoutMs !== undefined
            ? setTimeout(() => {
                deadlinePassed = true;
                stream.cancel();
              }, options.timeoutMs)
            : undefined;
        const progress: string[] = [];
        let settled = false;
        const settle = (o: CallOutcome) => {
          if (late) clearTimeout(late);
          if (!settled) {
            settled = true;
            resolve(o);
          }
        };
        const onAbort = () => stream.cancel();
        options.signal?.addEventListener("abort", onAbort, { once: true });
        stream.on("data", (ev: CallEventMsg) => {
          if (ev.progress) progress.push(ev.progress.text);
          if (ev.result) {
            const r = ev.result;
            settle({
              content: r.content,
              isError: r.is_error,
              ...(r.error ? { error: { code: r.error.code, message: r.error.message } } : {}),
              progress,
              truncatedFrom: Number(r.truncated_from),
            });
          }
        });
        stream.on("error", (err: grpc.ServiceError) => {
          options.signal?.removeEventListener("abort", onAbort);
          const code =
            err.code === grpc.status.CANCELLED
              ? deadlinePassed
                ? "timeout"
                : "cancelled"
              : err.code === grpc.status.DEADLINE_EXCEEDED
                ? "timeout"
                : undefined;
          if (code) settle({ content: "", isError: true, error: { code, message: err.details }, progress, truncatedFrom: 0 });
          else if (!settled) {
            settled = true;
            reject(err);
          }
        });
        stream.on("end", () => {
          options.signal?.removeEventListener("abort", onAbort);
          if (!settled) {
            settled = true;
            reject(new Error(`tool ${name}: the stream ended without a result`));
          }
        });
      });
    },
    checkSideEffect(name, args, since) {
      const req = {
        tool: name,
        args: Buffer.from(JSON.stringify(args ?? {})),
        since_unix_nano: String(BigInt(since.getTime()) * 1_000_000n),
      };
      return new Promise<SideEffectAnswer>((resolve, reject) =>
        client.CheckSideEffect(req, (err: grpc.ServiceError | null, res: CheckSideEffectResponseMsg) => {
          if (err) return reject(err);
          const effect: SideEffect =
            res.effect === "SIDE_EFFECT_COMPLETED" ? "completed" : res.effect === "SIDE_EFFECT_NOT_RUN" ? "not_run" : "unknown";
          resolve({ effect, detail: res.detail });
        }),
      );
    },
    async close() {
      client.close();
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
