// Package anthropic is the kernel.Provider for Anthropic's Messages API
// (Claude), with extended thinking replayed exactly and prompt caching.
//
// It is built on the official Go SDK (anthropic-sdk-go v2), which builds,
// authenticates and sends the request and decodes each event. The package
// frames the server-sent events itself, as the openai provider does, so it
// can tell a finished response (message_stop, or at least its stop reason)
// from one cut mid-way.
//
// One call to Provider.Stream is:
//
//  1. Map the kernel.Request to a streaming Messages request: system
//     messages become system blocks (the compaction summary a block of its
//     own); user messages text blocks; an assistant message its text, its
//     tool_use blocks and, where they were, its reasoning blocks (signed
//     thinking and redacted_thinking), sent back with exactly the values
//     they came with; tool messages tool_result blocks (is_error on a
//     failure), one user message per round. Offered tools go out with
//     their schemas as written, names encoded for the wire ("fs.read"
//     becomes "fs__read"); none offered, no tools field. max_tokens,
//     thinking, output_config.effort and tool_choice come from Config.
//     Cache breakpoints go on the last tool, the system prompt, the
//     summary and the latest user messages: four at most.
//  2. Send it once. The SDK's own retries, environment defaults and
//     telemetry are off: the kernel owns retries, configuration and spans.
//     An HTTP error status becomes a *kernel.ProviderError at once.
//  3. Read the events: text and thinking deltas are passed to emit as they
//     arrive; signatures, redacted data and tool input (input_json_delta)
//     are assembled per block; ping and unknown events are skipped; an
//     error event ends the stream with its error.
//  4. At message_stop, return the assembled message: its text, its
//     thinking text (Reasoning) and its blocks (ReasoningBlocks, opaque to
//     the kernel), its tool calls, the usage (cache reads and writes
//     included in the input, and counted apart) and the stop reason. A
//     pause_turn stop is continued at once into the same message; a
//     refusal is an error the kernel does not retry.
//
// Every error Stream returns is a *kernel.ProviderError whose Retryable
// field says whether the same request may succeed later (docs/providers.md).
package anthropic
