// @agentkernel/plugin-sdk: agentkernel tool plugins in TypeScript.
//
//   import { serve, tool } from "@agentkernel/plugin-sdk";
//   serve([tool({ name: "greet", tier: "read_only", schema: {...}, async handler(args, ctx) { ... } })]);
//   serve(tools, [hook({ name: "guard", points: ["before_model"], handler(input) { ... } })]);
//
// docs/plugins.md has the tutorial; @agentkernel/plugin-sdk/testing the test harness.

export { Code, ToolError, tool, truncateOutput, truncationMarker } from "./tool";
export type { CallContext, JSONSchema, SideEffect, SideEffectAnswer, Tier, Tool, ToolResult, ToolSpec } from "./tool";
export { serve } from "./serve";
export { HookPoints, block, hook } from "./hook";
export type { Hook, HookInput, HookPoint, HookReply, HookSpec } from "./hook";
export { SDKVersion } from "./service";
export { ProtocolVersion } from "./protocol";
