package tool

import "context"

// ProgressKey is the context key of a tool call's progress receiver: the
// func(text string) that WithProgress stores, or a Reporter. A host whose
// call contexts are of its own type can answer Value(ProgressKey{}) itself
// and spare a context.WithValue and a closure per call; the kernel does.
type ProgressKey struct{}

// A Reporter receives a tool call's progress reports.
type Reporter interface{ ReportProgress(text string) }

// WithProgress returns a context whose ReportProgress calls go to fn. The
// plugin SDK installs one that streams the reports to the host; tests may
// install their own.
func WithProgress(ctx context.Context, fn func(text string)) context.Context {
	return context.WithValue(ctx, ProgressKey{}, fn)
}

// ReportProgress tells whoever runs the tool how a long call is going. The
// kernel turns it into a tool.progress event. Without a receiver it does
// nothing.
func ReportProgress(ctx context.Context, text string) {
	switch r := ctx.Value(ProgressKey{}).(type) {
	case func(string):
		r(text)
	case Reporter:
		r.ReportProgress(text)
	}
}
