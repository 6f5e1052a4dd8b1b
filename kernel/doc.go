// Package kernel is the agent turn loop and the contracts it consumes.
//
// The kernel sends a conversation to a Provider, receives tool calls, runs
// each through one pipeline, and loops until the model answers, a hard cap
// or a budget stops it, a call needs a human's approval, or the run is
// cancelled. Everything a team customises lives outside this package and
// plugs into its interfaces: Provider (models), Tool (built-ins, subprocess
// plugins, WASM modules, MCP servers), Policy (surfaces, decisions,
// budgets), Hook (middleware around every call), Points (hooks at the
// run's lifecycle points) and Store (sessions).
// This package imports none of their implementations.
//
// # Glossary
//
// One vocabulary is used everywhere: in this package, the policy
// environment, the hooks environment, events, the CLI, config keys and the
// docs.
//
//   - A session is a stored conversation (Session, SessionMeta).
//   - A run answers one user prompt: Run or Resolve, from the prompt to a
//     stop reason. Runs are numbered from 1 in their session (State.Run,
//     SessionMeta.Runs; run.number in policy, run in hooks). A run that
//     stops for an approval is the same run when Resolve continues it.
//   - A turn is one model generation inside a run, with the tool calls it
//     asks for. Turns are numbered from 1 in their run (State.Turn;
//     run.turn in policy, turn in hooks, events and command-hook input;
//     a scripted model's file lists turns) and capped by
//     Config.MaxTurns (limits.max_turns, run.max_turns, DefaultMaxTurns).
//     SessionMeta.Turns and session.turns count the turns of the whole
//     session. Progress reads "[turn/max_turns]".
//   - A round is the tool calls of one turn, dispatched together and
//     persisted as one Step; budgets are checked after each round
//     (AfterTools).
//   - A step is one atomic, durable write to the Store (Step).
//
// What the loop counts lives in one State (Totals for the session and for
// the run); WalkState rebuilds it at any point of a stored session, which
// is how Kernel resumes a session and how policy replay sees history.
//
// # A run, step by step
//
//  1. Open the session: load it from the Store (or start a new one) and
//     complete any tool call left without a result by a crash with an
//     "interrupted" result, made durable first.
//  2. Run the run_start hooks (Points): they may refuse the run (stop
//     reason guardrail), rewrite the prompt or add context. Persist the
//     user message, with that context.
//  3. Check budgets (Policy.Budget); stop, optionally after one last
//     turn with no tools, when one is exhausted. Stop at MaxTurns.
//  4. Start a turn; choose the tools offered in it (Policy.Surface).
//  5. Build the request (compacting the context when it is full, after
//     the before_compact hooks); run the before_model hooks on it (they may
//     block it, add context or edit messages; a guardrail may run beside
//     the call and cancel it). Stream one generation from the Provider,
//     emitting deltas (held while an after_model hook may change them);
//     account tokens and cost; run the after_model hooks (block, change the
//     text, refuse calls); persist the assistant message with what the
//     hooks did. No tool calls: the run_end hooks may continue the run with
//     a message (loop to 3); else done.
//     A model on the text tool protocol (ToolProtocol) gets its tools in
//     the system prompt and its calls are read from the streamed text
//     (package toolproto); an answer that breaks the protocol is stored
//     with a correction and the model asked again (loop to 3).
//  6. Run the tool calls through the pipeline, contiguous read-only calls
//     concurrently and every other call alone, in document order:
//     parse the arguments, check the tool was offered, validate against
//     its JSON Schema, then the hook chain around the policy decision and
//     the execution. Every failure becomes a tool message the model reads.
//  7. Persist all results of the round as one step. A call policy sent to a
//     human is persisted as the session's pending approval and the run
//     stops as awaiting_approval; Resolve continues it.
//  8. Check budgets again and loop to 3.
//
// Every step is committed to the Store before the loop moves on, so a crash
// loses at most the step in flight. A run asked to stop at its next step
// boundary (RunOptions.Interrupt, a server's drain) ends there with
// StopInterrupted; Continue resumes it, or a session a crash left running,
// from its last stored step. A front end serving many sessions runs each
// through Kernel.With, which carries the run's event sink and the principal
// recorded with approval decisions. On a store several processes share (a
// Leaser), the run also carries the session's lease (RunOptions.Lease):
// every step it commits carries the lease's fencing token (Step.Fence), and
// once the lease is lost the run ends at its next step boundary, writing
// nothing more. Cancellation through ctx reaches the
// provider stream and every tool; tool calls left without a result get a
// "cancelled" result so the history stays valid.
//
// Everything observable is an Event, a closed set of types rendered as JSON
// with a "type" field by MarshalEvent.
//
// # Closed sets
//
// Stop reasons, event types, outcomes and effects are closed sets with one
// list each: StopReasons (a budget stop, "budget:<id>", besides),
// EventTypes, Outcomes and Effects (tiers: tool.Tiers). The JSON Schemas
// under schemas/ are generated from these lists and the docs are held to
// them by tests; docs/architecture.md, "Closed sets", says how to add a
// member.
package kernel
