package tool

import "context"

type progressKey struct{}

// WithProgress returns a context whose ReportProgress calls go to fn. The
// kernel installs one for every tool call; the plugin SDK installs one that
// streams the reports to the host; tests may install their own.
func WithProgress(ctx context.Context, fn func(text string)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// ReportProgress tells whoever runs the tool how a long call is going. The
// kernel turns it into a tool.progress event. Without a receiver it does
// nothing.
func ReportProgress(ctx context.Context, text string) {
	if fn, ok := ctx.Value(progressKey{}).(func(string)); ok {
		fn(text)
	}
}
