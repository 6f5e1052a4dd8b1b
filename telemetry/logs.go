package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"
)

// NewLogHandler returns the kernel's structured log handler: log/slog JSON
// records on w at level and above, each carrying trace_id and span_id when
// it is logged with the context of a traced run or call. scrub, when not
// nil, redacts the message and every string value.
func NewLogHandler(w io.Writer, level slog.Leveler, scrub func(string) string) slog.Handler {
	opts := &slog.HandlerOptions{Level: level}
	if scrub != nil {
		opts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindString {
				a.Value = slog.StringValue(scrub(a.Value.String()))
			}
			return a
		}
	}
	j := slog.NewJSONHandler(w, opts)
	return &traceHandler{next: j, base: j}
}

// traceHandler adds the trace and span ids of the record's context, at
// the top level of the record even under WithGroup, where log pipelines
// look for them.
type traceHandler struct {
	next slog.Handler
	// base is next before any WithGroup, and goas what was applied to it
	// since (attributes and groups, in order): a traced record under a
	// group is handled by base with the ids, then goas replayed.
	base    slog.Handler
	goas    []groupOrAttrs
	grouped bool
}

// groupOrAttrs is one WithGroup (group set) or WithAttrs.
type groupOrAttrs struct {
	group string
	attrs []slog.Attr
}

func (h *traceHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *traceHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return h.next.Handle(ctx, r)
	}
	ids := []slog.Attr{slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String())}
	if !h.grouped {
		r = r.Clone()
		r.AddAttrs(ids...)
		return h.next.Handle(ctx, r)
	}
	next := h.base.WithAttrs(ids)
	for _, g := range h.goas {
		if g.group != "" {
			next = next.WithGroup(g.group)
		} else {
			next = next.WithAttrs(g.attrs)
		}
	}
	return next.Handle(ctx, r)
}

func (h *traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return h.with(groupOrAttrs{attrs: as}, h.next.WithAttrs(as))
}

func (h *traceHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(groupOrAttrs{group: name}, h.next.WithGroup(name))
}

func (h *traceHandler) with(g groupOrAttrs, next slog.Handler) *traceHandler {
	return &traceHandler{next: next, base: h.base, goas: append(h.goas[:len(h.goas):len(h.goas)], g), grouped: h.grouped || g.group != ""}
}

// HCLogger returns an hclog.Logger that writes into h: the kernel's hosts
// and go-plugin (which relays each plugin's own hclog lines through its
// host's logger) log through one handler. Sub-loggers (Named, With) keep
// writing into h, with their name as the "logger" field.
func HCLogger(h slog.Handler, name string, level hclog.Level) hclog.Logger {
	l := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: name, Level: level, Output: io.Discard})
	l.RegisterSink(&slogSink{h: h})
	return l
}

// slogSink is an hclog sink writing slog records.
type slogSink struct{ h slog.Handler }

func (s *slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	lv := SlogLevel(level)
	ctx := context.Background()
	if !s.h.Enabled(ctx, lv) {
		return
	}
	r := slog.NewRecord(time.Now(), lv, msg, 0)
	if name != "" {
		r.AddAttrs(slog.String("logger", name))
	}
	for i := 0; i < len(args); i += 2 {
		key := fmt.Sprint(args[i])
		if i+1 >= len(args) {
			r.AddAttrs(slog.Any("EXTRA_VALUE", args[i]))
			break
		}
		switch v := args[i+1].(type) {
		case error:
			r.AddAttrs(slog.String(key, v.Error()))
		case fmt.Stringer:
			r.AddAttrs(slog.String(key, v.String()))
		default:
			r.AddAttrs(slog.Any(key, v))
		}
	}
	_ = s.h.Handle(ctx, r)
}

// SlogLevel is the slog level of an hclog level. Trace is below debug
// (slog's DEBUG-4), so a debug handler drops it as hclog would.
func SlogLevel(l hclog.Level) slog.Level {
	switch {
	case l <= hclog.Trace:
		return slog.LevelDebug - 4
	case l == hclog.Debug:
		return slog.LevelDebug
	case l == hclog.Info:
		return slog.LevelInfo
	case l == hclog.Warn:
		return slog.LevelWarn
	}
	return slog.LevelError
}
