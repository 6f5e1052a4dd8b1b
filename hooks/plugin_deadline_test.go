package hooks

import (
	"context"
	"strings"
	"testing"
	"time"
)

// lateHost answers every hook at the call's deadline, without looking at
// its context: a plugin whose handler returns (allow) when its own
// deadline ends it, a moment before the kernel's timer goroutine runs.
type lateHost struct{ err error }

func (lateHost) HasPlugin(string) bool { return true }

func (h lateHost) RunHook(ctx context.Context, _, _ string, _ []byte) ([]byte, error) {
	dl, _ := ctx.Deadline()
	time.Sleep(time.Until(dl))
	return []byte(`{}`), h.err
}

// TestPluginHookAnswerAtTheDeadlineIsLate: an answer that comes at or
// past the hook's deadline did not come in time, whatever it says, so
// the hook fails closed instead of allowing. (TestConformance/go/hooks
// saw a run complete when a hang hook's empty reply beat the timer.)
func TestPluginHookAnswerAtTheDeadlineIsLate(t *testing.T) {
	for _, h := range []lateHost{{}, {err: context.Canceled}} {
		p := &pluginHook{host: h, plugin: "p", hook: "h", timeout: 20 * time.Millisecond}
		reply, err := p.run(context.Background(), []byte(`{}`))
		if err == nil || !strings.Contains(err.Error(), "did not answer within 20ms") {
			t.Errorf("host error %v: reply %q, %v; want the hook's time limit", h.err, reply, err)
		}
	}
	// In time, it is an answer.
	p := &pluginHook{host: quickHost{}, plugin: "p", hook: "h", timeout: time.Hour}
	if reply, err := p.run(context.Background(), nil); err != nil || string(reply) != `{}` {
		t.Errorf("an answer in time: %q, %v", reply, err)
	}
}

type quickHost struct{}

func (quickHost) HasPlugin(string) bool { return true }

func (quickHost) RunHook(context.Context, string, string, []byte) ([]byte, error) {
	return []byte(`{}`), nil
}
