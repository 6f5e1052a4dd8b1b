// Package openai is the kernel.Provider for OpenAI and every server that
// speaks OpenAI's Chat Completions API: vLLM, llama.cpp's server, Ollama,
// LM Studio, OpenRouter.
//
// It is built on openai-go (v3), which builds, authenticates and sends the
// request and decodes each chat.completion.chunk. The package itself frames
// the server-sent events, so it can tell a finished stream (one that ends
// with "data: [DONE]") from one cut mid-way, and assembles the streamed
// deltas into one kernel.Response.
//
// One call to Provider.Stream is:
//
//  1. Map the kernel.Request to a streaming chat completion request: system,
//     user, assistant (with tool_calls) and tool (with tool_call_id)
//     messages; the offered tools as functions, omitted entirely when none is
//     offered; stream_options.include_usage; parallel_tool_calls,
//     tool_choice and reasoning_effort only when configured (Config.Request,
//     per model in Config.Models). The reasoning of a tool-calling turn goes
//     back in the field it came in; invalid arguments go back as a JSON
//     object quoting them. Tool names are encoded for the wire ("fs.read"
//     becomes "fs__read").
//  2. Send it once. openai-go's own retries are off: the kernel owns retries.
//     An HTTP error status becomes a *kernel.ProviderError at once.
//  3. Read the event stream. Text deltas and reasoning deltas
//     ("reasoning_content" or "reasoning") are passed to emit as they arrive;
//     tool-call fragments are assembled by index, a new id starting a new
//     call even when the index repeats; the last usage seen is kept. Errors
//     sent inside the stream, in every known shape, end it. A JSON body
//     instead of a stream is read as a whole completion.
//  4. Return at "data: [DONE]" with the assembled message, usage, finish
//     reason and model, tool names decoded back to the kernel's names. A
//     stream that ends before [DONE] is an error, never a truncated success.
//
// Every error Stream returns is a *kernel.ProviderError whose Retryable field
// says whether the same request may succeed later (see docs/providers.md for
// the table).
package openai
