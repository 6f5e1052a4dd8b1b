// Package hooks runs code at every hook point of the kernel's loop
// (kernel.HookPoints): before the policy decision and after the tool, on
// every call from every tool source (built-in, subprocess, WASM, MCP)
// alike, and at the run's lifecycle points — run_start, before_compact,
// before_model (also as a guardrail beside the model call), after_model,
// run_end — through kernel.Points. One ordering and failure model holds at
// every point: hooks run in configuration order, each fails closed or
// open, within a time limit, reloadable, every decision an event.
//
// # Lifecycle points
//
// A hook at a lifecycle point is a PointHook: a Go function (At), or a rule
// of the configuration — a command hook (the point's input as JSON on
// stdin, a Reply as JSON on stdout: PointDocument, ParseReply), block_when,
// set_context or redact. Chain.Points gives the kernel the configured ones
// (and Go ones after them); Points builds kernel.Points from Go hooks
// alone. At each point:
//
//  1. The hooks run in order, each on the input as the hooks before it
//     left it (a rewritten prompt, context, edits, a replaced answer); a
//     matcher (When, match:) selects the inputs a hook sees.
//  2. The first block ends the point: the kernel stops the run as
//     guardrail (at run_end: continues a completed run with the reason).
//  3. A hook that fails (hangs past its timeout, crashes, answers garbage
//     or a field its point does not take) stops the run (fail_closed, a
//     *kernel.GuardrailError naming it) or steps aside (fail_open).
//  4. At before_model, concurrent hooks then run beside the model call
//     (kernel.BeforeModelReply.Guard): the first block cancels the call.
//
// Every hook run is a kernel.HookCompleted event, with hook.blocked,
// hook.rewrote or hook.failed for what it did.
//
// # Tool calls
//
// A tool hook is a kernel.Hook, func(next kernel.Handler) kernel.Handler.
//
// Three kinds produce one:
//
//   - Go hooks for programs that embed the kernel: Before and After wrap a
//     BeforeFunc or AfterFunc, optionally restricted by a Matcher (When) and
//     with a failure mode (Fail).
//   - Command hooks: an external program reads the call as JSON on stdin
//     (Input, schemas/hook-input.schema.json) and answers with JSON on
//     stdout (Output, schemas/hook-output.schema.json), or exits with code 2
//     to block with its stderr as the reason. It runs with a timeout, in its
//     own process group, with only the allowlisted environment.
//   - Declarative hooks from kernel.yaml: block_when, set_args, redact and
//     truncate.
//
// A Chain compiles the hooks: section of kernel.yaml (Config) into one
// kernel.Hook that also holds the built-ins, on by default: the credential
// Scrubber and the output limiter. Reload swaps a new configuration in
// atomically, or keeps the old one when the new one is invalid.
//
// # One call through a Chain
//
//  1. The call's matcher (an expr expression over Env: tool, tier, source,
//     tags, args, ...) decides whether each hook applies.
//  2. Before hooks run in configuration order. Each may let the call
//     through, block it (the model reads the reason; policy is not asked and
//     the tool does not run), answer it with its own result
//     (short-circuit), or rewrite its arguments, which are validated against
//     the tool's schema again.
//  3. Policy decides on the final arguments; the tool runs.
//  4. When any after hook is configured, the scrubber cleans the result
//     first, so after hooks never see a credential.
//  5. After hooks run in reverse order. Each may rewrite, redact, truncate
//     or label the result, or withhold it (the model reads the reason).
//  6. The scrubber cleans the final result and the error text, whatever
//     produced them; the output limiter keeps its head and tail.
//
// A hook that fails (its matcher errs, its command times out or answers
// something invalid, its rewrite does not fit the schema) fails closed by
// default: the call is not run, or its result is withheld. fail_open makes
// it step aside instead. Every block, rewrite and failure is an event
// (kernel.HookBlocked, kernel.HookRewrote, kernel.HookFailed) naming the
// hook. A call waiting for approval (*kernel.ApprovalRequiredError) passes
// through every hook untouched.
//
// See docs/hooks.md for the configuration and the command protocol.
package hooks
