// Package declared builds the tools a configuration declares without
// code: kernel.yaml's tools.http (one HTTP request), tools.command (one
// program, confined) and tools.inline (a written answer). They are a tool
// source like the others — kernel.Tool values, registered in the kernel's
// registry and called through the one pipeline (schema, hooks, policy,
// approvals, events, sessions, telemetry).
//
// Use:
//
//  1. Decode the three configuration lists (Decode): errors name the
//     file, the line and the field.
//  2. Build them (Build) with Options: secrets are resolved from the
//     environment here, templates checked against each tool's argument
//     schema, and each HTTP tool gets its own guarded client
//     (internal/egress). Register Set.Tools by source; hand Set.Secrets to
//     the kernel's scrubbers.
//  3. Close the Set when its tools are replaced (a reload) or the kernel
//     stops.
//
// What each kind does with the call's arguments, how values are escaped,
// and why: docs/tools.md and RATIONALE.md, "Declared tools
// (plugins/declared)".
package declared
