// Package telemetry turns the kernel's runs into OpenTelemetry traces and
// Prometheus metrics, following the GenAI semantic conventions
// (SchemaURL). It observes the kernel without the kernel importing it:
// cmd/kernel wires a Telemetry in from outside, at four seams.
//
//   - Observe is kernel.Config.Observe: the kernel hands it each run's
//     context and events, and it records the run, turn, generation
//     ("chat"), tool and approval spans and the metrics
//     (docs/observability.md has their names and attributes).
//   - Hook is the outermost tool-call hook: the call's span is the context
//     every tool source continues (plugins over gRPC metadata, MCP servers
//     in _meta, run_command through TRACEPARENT when traces.command_env
//     is set).
//   - Provider wraps the model provider, and Transport its HTTP client, so
//     a model call is a span with its request's trace context.
//   - ImportSpans takes the spans a plugin recorded for a call and exports
//     them with the run's trace.
//
// The lifecycle:
//
//  1. New(ctx, cfg) resolves the configuration with the OTEL_* variables
//     it reads and starts nothing when traces and metrics are both off:
//     check Enabled and wire nothing then, so telemetry that is off costs
//     nothing.
//  2. With traces on, spans go to the configured exporter (OTLP over HTTP
//     or gRPC, or the console) through a batch processor; with metrics on,
//     MetricsHandler serves them (behind a key in `kernel serve`, or on
//     ServeMetrics' own listener with a bearer token).
//  3. Flush exports what is buffered; Shutdown flushes and stops.
//
// Content (prompts, arguments, results) is never recorded unless the
// configuration opts in, and then only scrubbed. NewLogHandler and
// HCLogger put the trace id of the context on every log line. A Telemetry
// is safe for concurrent use.
package telemetry
