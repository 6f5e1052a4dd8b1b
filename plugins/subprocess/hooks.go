package subprocess

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentkernel/agentkernel/sdk"
	"github.com/agentkernel/agentkernel/sdk/pluginpb"
)

// maxHookReply bounds a plugin hook's reply, as a command hook's stdout.
const maxHookReply = 8 << 20

// HasPlugin reports whether a plugin named name is loaded.
func (h *Host) HasPlugin(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.plugins[name] != nil
}

// RunHook runs the hook named hook of the plugin named plugin (its hook
// service; docs/hooks.md, kind plugin) on input, the JSON document a
// command hook reads, and returns the reply document (empty: allow),
// starting the plugin if needed. ctx bounds the call. A plugin that serves
// no hooks, a hook it does not have and a hook that fails are errors; the
// hook's own failure is an *sdk.Error with its code.
func (h *Host) RunHook(ctx context.Context, plugin, hook string, input []byte) ([]byte, error) {
	inst, err := h.running(ctx, plugin)
	if err != nil {
		return nil, err
	}
	resp, err := inst.hooks.RunHook(withTraceContext(ctx), &pluginpb.RunHookRequest{Hook: hook, Input: input})
	switch {
	case err == nil:
	case status.Code(err) == codes.Unimplemented:
		return nil, fmt.Errorf("plugin %s serves no hooks (it registers none, or its SDK predates hooks)", plugin)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case status.Code(err) == codes.DeadlineExceeded:
		// The plugin ended the call at the deadline it was sent, a moment
		// before ctx's own timer fired: the same end.
		return nil, context.DeadlineExceeded
	default:
		if stop, crash := inst.status(); crash != "" || stop != "" {
			return nil, fmt.Errorf("plugin %s: hook %s: the plugin stopped (%w): %s", plugin, hook, ErrCrashed, cut(crash+stop, 2048))
		}
		return nil, fmt.Errorf("plugin %s: hook %s: %w", plugin, hook, err)
	}
	if e := resp.GetError(); e != nil {
		return nil, &sdk.Error{Code: e.GetCode(), Message: cut(e.GetMessage(), 4096)}
	}
	if len(resp.GetReply()) > maxHookReply {
		return nil, errors.New("the reply is larger than 8 MiB")
	}
	return resp.GetReply(), nil
}

// HookSpec is a hook a plugin serves, as it describes it.
type HookSpec struct {
	Name        string
	Description string
	// Points are the hook points it runs at.
	Points []string
}

// ListHooks asks the plugin named plugin for its hooks, starting it if
// needed; a plugin that serves none has none.
func (h *Host) ListHooks(ctx context.Context, plugin string) ([]HookSpec, error) {
	inst, err := h.running(ctx, plugin)
	if err != nil {
		return nil, err
	}
	resp, err := inst.hooks.ListHooks(ctx, &pluginpb.ListHooksRequest{})
	if status.Code(err) == codes.Unimplemented {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("plugin %s: list its hooks: %w", plugin, err)
	}
	var out []HookSpec
	for _, hs := range resp.GetHooks() {
		out = append(out, HookSpec{Name: hs.GetName(), Description: hs.GetDescription(), Points: hs.GetPoints()})
	}
	return out, nil
}

// running returns the running process of the plugin named plugin,
// starting it if needed.
func (h *Host) running(ctx context.Context, plugin string) (*instance, error) {
	h.mu.Lock()
	s := h.plugins[plugin]
	h.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("no plugin %q is loaded (tools.plugins)", plugin)
	}
	inst, err := s.acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("plugin %s: %w", plugin, err)
	}
	return inst, nil
}
