// The wire protocol: sdk/pluginpb/plugin.proto (the tool
// protocol), go-plugin's GRPCController/GRPCStdio/GRPCBroker and gRPC's
// health service, loaded with @grpc/proto-loader from the descriptor
// scripts/embed-proto.mjs embeds at build time (see RATIONALE.md,
// "TypeScript SDK: @grpc/grpc-js and proto-loader, not generated code").

import * as grpc from "@grpc/grpc-js";
import { fromJSON } from "@grpc/proto-loader";
import { descriptor } from "./protocol.generated";

/** ProtocolVersion is the tool protocol version, negotiated in go-plugin's handshake (sdk.ProtocolVersion). */
export const ProtocolVersion = 1;

/** CoreProtocolVersion is go-plugin's own protocol version (its CoreProtocolVersion). */
export const CoreProtocolVersion = 1;

/** The magic cookie the kernel sets for its plugins (sdk.MagicCookieKey and MagicCookieValue). */
export const MagicCookieKey = "AGENTKERNEL_PLUGIN";
export const MagicCookieValue = "7c0b3f4e-agentkernel-tools";

// Field names as in the .proto files; 64-bit integers as decimal strings,
// enums as their names, bytes as Buffers.
const loaderOptions = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loaded = any;
const loaded: Loaded = grpc.loadPackageDefinition(
  fromJSON(descriptor as unknown as Parameters<typeof fromJSON>[0], loaderOptions),
);

export const ToolsService: grpc.ServiceDefinition = loaded.agentkernel.plugin.v1.Tools.service;
export const ToolsClient: grpc.ServiceClientConstructor = loaded.agentkernel.plugin.v1.Tools;
export const HooksService: grpc.ServiceDefinition = loaded.agentkernel.plugin.v1.Hooks.service;
export const HooksClient: grpc.ServiceClientConstructor = loaded.agentkernel.plugin.v1.Hooks;
export const HealthService: grpc.ServiceDefinition = loaded.grpc.health.v1.Health.service;
export const ControllerService: grpc.ServiceDefinition = loaded.plugin.GRPCController.service;
export const StdioService: grpc.ServiceDefinition = loaded.plugin.GRPCStdio.service;
export const BrokerService: grpc.ServiceDefinition = loaded.plugin.GRPCBroker.service;

/** The messages, as proto-loader decodes and encodes them. */
export interface ToolSpecMsg {
  name: string;
  description: string;
  schema: Buffer;
  tier: string;
  tags: string[];
  timeout_ms: string | number;
  checks_side_effects: boolean;
}

export interface DescribeResponseMsg {
  tools: ToolSpecMsg[];
  sdk_version: string;
}

export interface CallRequestMsg {
  tool: string;
  args: Buffer;
  max_output_bytes: string | number;
}

export interface ErrorMsg {
  code: string;
  message: string;
}

export interface ResultMsg {
  content: string;
  is_error: boolean;
  error?: ErrorMsg | null;
  truncated_from: string | number;
}

export interface CallEventMsg {
  progress?: { text: string } | null;
  result?: ResultMsg | null;
  event?: "progress" | "result";
}

export type SideEffectMsg = "SIDE_EFFECT_UNKNOWN" | "SIDE_EFFECT_COMPLETED" | "SIDE_EFFECT_NOT_RUN";

export interface CheckSideEffectRequestMsg {
  tool: string;
  args: Buffer;
  since_unix_nano: string | number;
}

export interface CheckSideEffectResponseMsg {
  effect: SideEffectMsg;
  detail: string;
}

export interface HookSpecMsg {
  name: string;
  description: string;
  points: string[];
}

export interface ListHooksResponseMsg {
  hooks: HookSpecMsg[];
  sdk_version: string;
}

export interface RunHookRequestMsg {
  hook: string;
  input: Buffer;
}

export interface RunHookResponseMsg {
  reply: Buffer;
  error?: ErrorMsg | null;
}
