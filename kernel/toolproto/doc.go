// Package toolproto is the text tool protocol: how a model that cannot take
// a "tools" parameter is offered tools in its system prompt, writes its
// calls as text, and reads their results back as text. It owns the
// syntax: nothing else in the kernel writes or parses tool calls in text.
//
// A Codec is one syntax (a Format): "hermes", the <tool_call> tags of the
// Hermes and Qwen chat templates, or "json", the one-object-per-line JSON
// of Llama 3.x. For a generation the kernel
//
//  1. puts Codec.Instructions (the rules and this turn's tools, with their
//     JSON Schemas) at the end of the system prompt;
//  2. writes the history in text: an assistant message as it was written
//     (or, for calls that came natively, Codec.FormatCalls), and each
//     round of results as one user message (Codec.FormatResults), each
//     result tagged with its call's id so parallel calls stay paired;
//  3. streams the answer through a Decoder: text before the first call is
//     passed on as it arrives, a possible tag is held back until it is
//     known not to be one, and a call counts once its closing tag (or
//     closing brace) has arrived; any split of the stream into chunks
//     gives the same text, calls and violation;
//  4. acts on the Answer: its calls go through the same pipeline as native
//     calls; a Violation (a malformed call, an unknown tool, a result the
//     model wrote itself, prose after a call, too many or too large calls)
//     is answered with Codec.Correction and the model asked again.
//
// A Decoder's memory is bounded by DecoderConfig (MaxCalls, MaxCallBytes):
// after the first violation it only counts bytes. The package uses the
// standard library only and imports nothing of the kernel.
//
// Why these two formats: RATIONALE.md, "The text tool protocol".
package toolproto
