package sdktest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sdk"
)

// The conformance hooks every SDK's conformance plugin serves (Hooks in
// Conformance), the same in every language:
//
//   - "conformance" at before_model, after_model and before. At
//     before_model it blocks ("conformance: blocked") when a message of
//     the request contains BLOCK-ME, else adds the context
//     "conformance: seen N messages"; at after_model it replaces the
//     answer's text with the text in upper case; at before it blocks
//     ("conformance: denied") a call whose arguments have a key "deny",
//     else adds the note "conformance".
//   - "conformance_fail" at run_end: fails with code hook_broken.

// runHooks checks the plugin's hook service through the kernel's host and
// through a run whose hooks are the plugin's.
func (c Conformance) runHooks(t *testing.T, host *subprocess.Host, cfg subprocess.PluginConfig) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	specs, err := host.ListHooks(ctx, cfg.Name)
	if err != nil {
		t.Fatalf("list hooks: %v", err)
	}
	points := map[string][]string{}
	for _, s := range specs {
		points[s.Name] = s.Points
	}
	if !slices.Equal(points["conformance"], []string{"before_model", "after_model", "before"}) || !slices.Equal(points["conformance_fail"], []string{"run_end"}) {
		t.Fatalf("the plugin lists hooks %+v", specs)
	}
	run := func(hook string, in hooks.PointInput) (*hooks.Reply, error) {
		doc, err := hooks.PointDocument(hook, in, false)
		if err != nil {
			t.Fatal(err)
		}
		reply, err := host.RunHook(ctx, cfg.Name, hook, doc)
		if err != nil {
			return nil, err
		}
		return hooks.ParseReply(in.Info().Point, reply)
	}
	st := &kernel.State{SessionID: "s", Run: 1, Turn: 1}
	request := func(text string) *kernel.BeforeModelInput {
		return &kernel.BeforeModelInput{PointInfo: kernel.NewPointInfo(kernel.PointBeforeModel, st, nil), Model: "m",
			Messages: []kernel.Message{{Role: kernel.RoleSystem, Content: "sys"}, {Seq: 1, Role: kernel.RoleUser, Content: text}}}
	}
	rep, err := run("conformance", request("please BLOCK-ME now"))
	if err != nil || rep.Decision != hooks.Block || rep.Reason != "conformance: blocked" {
		t.Errorf("before_model, a request to block: %+v, %v", rep, err)
	}
	rep, err = run("conformance", request("hello"))
	if err != nil || rep.Decision == hooks.Block || rep.Context != "conformance: seen 2 messages" {
		t.Errorf("before_model, a plain request: %+v, %v", rep, err)
	}
	answer := &kernel.AfterModelInput{PointInfo: kernel.NewPointInfo(kernel.PointAfterModel, st, nil), Model: "m",
		Answer: kernel.Message{Role: kernel.RoleAssistant, Content: "quiet answer"}}
	rep, err = run("conformance", answer)
	if err != nil || rep.Text == nil || *rep.Text != "QUIET ANSWER" {
		t.Errorf("after_model: %+v, %v", rep, err)
	}
	end := &kernel.RunEndInput{PointInfo: kernel.NewPointInfo(kernel.PointRunEnd, st, nil), StopReason: kernel.StopCompleted}
	if _, err := run("conformance_fail", end); !errors.Is(err, &sdk.Error{Code: "hook_broken"}) {
		t.Errorf("a failing hook: %v, want an error with code hook_broken", err)
	}
	if _, err := run("conformance", end); !errors.Is(err, &sdk.Error{Code: sdk.CodeInvalidArgs}) {
		t.Errorf("a hook at a point it does not run at: %v, want invalid_args", err)
	}
	if _, err := run("no_such_hook", end); !errors.Is(err, &sdk.Error{Code: sdk.CodeNotFound}) {
		t.Errorf("an unknown hook: %v, want not_found", err)
	}

	// The same hooks in a run: the plugin's before hook denies a call, its
	// after_model hook rewrites the answer, its before_model hook blocks.
	chain, err := hooks.NewChain(hooks.Config{Rules: []hooks.Rule{
		{Name: "plug-before", Phase: hooks.PhaseBefore, Plugin: &hooks.PluginConfig{Name: cfg.Name, Hook: "conformance"}},
		{Name: "plug-model", Phase: kernel.PointBeforeModel, Plugin: &hooks.PluginConfig{Name: cfg.Name, Hook: "conformance"}},
		{Name: "plug-answer", Phase: kernel.PointAfterModel, Plugin: &hooks.PluginConfig{Name: cfg.Name, Hook: "conformance"}},
	}}, hooks.Options{Plugins: host})
	if err != nil {
		t.Fatal(err)
	}
	echo := kerneltest.NewRecorder("echo", kernel.TierReadOnly, "echoed")
	reg := kernel.NewRegistry()
	if err := reg.Register(echo); err != nil {
		t.Fatal(err)
	}
	prov := kerneltest.NewProvider(kerneltest.Reply{Calls: []kernel.ToolCall{{ID: "c1", Name: "echo", Arguments: `{"text":"x","deny":1}`}}},
		kerneltest.Text("done"), kerneltest.Text("never"))
	k, err := kernel.New(kernel.Config{Provider: prov, Store: memory.New(), Model: "m", Tools: reg,
		Hooks: []kernel.Hook{chain.Hook()}, Points: chain.Points()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, "", "go")
	if err != nil || res.Output != "DONE" || res.Calls[0].Outcome != kernel.OutcomeBlocked ||
		!strings.Contains(prov.Requests()[0].Messages[len(prov.Requests()[0].Messages)-1].Content, "conformance: seen") {
		t.Errorf("a run with the plugin's hooks: %+v, %v", res, err)
	}
	res, err = k.Run(ctx, res.SessionID, "now BLOCK-ME")
	if err != nil || res.StopReason != kernel.StopGuardrail || res.Blocked == nil || res.Blocked.Hook != "plug-model" {
		t.Errorf("a run the plugin's before_model hook blocks: %+v, %v", res, err)
	}
}
