// The wire protocol: sdk/pluginpb/plugin.proto (the tool
// protocol), go-plugin's GRPCController/GRPCStdio/GRPCBroker and gRPC's
// health service, as grpc-js service definitions made with protobufjs's
// reflection (its light build, no .proto parser) from the descriptor
// scripts/embed-proto.mjs embeds at build time (see RATIONALE.md,
// "TypeScript SDK: @grpc/grpc-js and protobufjs, not generated code", and
// "TypeScript plugin cold start (issue 45)" for why not proto-loader).

import * as grpc from "@grpc/grpc-js";
import * as protobuf from "protobufjs/light";
import { descriptor } from "./protocol.generated";

/** ProtocolVersion is the tool protocol version, negotiated in go-plugin's handshake (sdk.ProtocolVersion). */
export const ProtocolVersion = 1;

/** CoreProtocolVersion is go-plugin's own protocol version (its CoreProtocolVersion). */
export const CoreProtocolVersion = 1;

/** The magic cookie the kernel sets for its plugins (sdk.MagicCookieKey and MagicCookieValue). */
export const MagicCookieKey = "AGENTKERNEL_PLUGIN";
export const MagicCookieValue = "7c0b3f4e-agentkernel-tools";

// Field names as in the .proto files; 64-bit integers as decimal strings,
// enums as their names, bytes as Buffers, defaults filled in, a oneof's
// case named (what @grpc/proto-loader's options keepCase, longs: String,
// enums: String, defaults, oneofs gave).
const toObjectOptions: protobuf.IConversionOptions = { longs: String, enums: String, defaults: true, oneofs: true };

const root = protobuf.Root.fromJSON(descriptor as unknown as protobuf.INamespace);

// service makes the grpc-js definition of the service at path. Only the
// messages a call uses get their encoder and decoder built (protobufjs
// builds them on first use), and no file descriptor is made: a plugin's
// start builds those of Describe and health alone.
function service(path: string): grpc.ServiceDefinition {
  const svc = root.lookupService(path);
  const def: Record<string, grpc.MethodDefinition<object, object>> = {};
  for (const m of svc.methodsArray) {
    m.resolve();
    const req = m.resolvedRequestType as protobuf.Type;
    const res = m.resolvedResponseType as protobuf.Type;
    def[m.name] = {
      path: `/${path}/${m.name}`,
      requestStream: !!m.requestStream,
      responseStream: !!m.responseStream,
      requestSerialize: serializer(req),
      requestDeserialize: deserializer(req),
      responseSerialize: serializer(res),
      responseDeserialize: deserializer(res),
      // The client's lower-case alias (client.describe as client.Describe).
      originalName: m.name[0].toLowerCase() + m.name.slice(1),
    };
  }
  return def;
}

function serializer(t: protobuf.Type): (value: object) => Buffer {
  return (value) => Buffer.from(t.encode(t.fromObject(value as Record<string, unknown>)).finish());
}

function deserializer(t: protobuf.Type): (buf: Buffer) => object {
  return (buf) => t.toObject(t.decode(buf), toObjectOptions);
}

export const ToolsService = service("agentkernel.plugin.v1.Tools");
export const HooksService = service("agentkernel.plugin.v1.Hooks");
export const HealthService = service("grpc.health.v1.Health");
export const ControllerService = service("plugin.GRPCController");
export const StdioService = service("plugin.GRPCStdio");
export const BrokerService = service("plugin.GRPCBroker");
export const ToolsClient: grpc.ServiceClientConstructor = grpc.makeGenericClientConstructor(ToolsService, "agentkernel.plugin.v1.Tools");
export const HooksClient: grpc.ServiceClientConstructor = grpc.makeGenericClientConstructor(HooksService, "agentkernel.plugin.v1.Hooks");

/** The messages, as the deserializers above decode them and the serializers encode them. */
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
