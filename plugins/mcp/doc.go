// Package mcp is the kernel's MCP client: it makes the tools of the MCP
// servers an operator configures (tools.mcp, docs/mcp.md) kernel tools,
// named "<server>.<tool>" with source "mcp:<server>", so that every call
// takes the kernel's one pipeline (schema, hooks, policy, scrubber) like
// any other tool's. The other direction, the kernel's tools offered to an
// MCP client (`kernel mcp serve`), is cmd/kernel's.
//
// A Host owns every server of a kernel. Its lifecycle:
//
//  1. NewHost(cfg) starts nothing.
//  2. Load(ctx, server) checks the server's configuration and returns its
//     tools: from the cached tool list (HostConfig.CacheDir), so that a
//     stdio server starts only at its first call, or by connecting and
//     listing them. A tool the kernel cannot take (its schema does not
//     compile, is too large, or its name is invalid) is left out and
//     reported as a Problem, not an error.
//  3. A call connects when needed. A stdio server is a native process,
//     started confined through sandbox/proc with the grant StdioGrant
//     computes, never with more than its configuration grants; a
//     streamable HTTP server is reached with the headers its
//     configuration names (their values from the environment). A server
//     that dies is restarted at the next call, with backoff, and its
//     circuit breaker opens after repeated crashes (internal/supervise,
//     internal/backoff); Servers reports each one's state.
//  4. A server's notifications/tools/list_changed reaches
//     HostConfig.OnToolsChanged with the new list.
//  5. Close stops every server and waits for what the host started.
//
// The call's trace context travels in the request's _meta
// (MetaCarrier), as the MCP specification (SEP-414) says.
package mcp
