package sdktest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
//   - "conformance_hang" at before_model: does not answer until its call
//     ends, then writes "stopped" to the file the request's last message
//     names.
//   - "conformance_garbage" at after_model: answers {"note": ...}, a
//     field after_model does not take.

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
	if !slices.Equal(points["conformance"], []string{"before_model", "after_model", "before"}) || !slices.Equal(points["conformance_fail"], []string{"run_end"}) ||
		!slices.Equal(points["conformance_hang"], []string{"before_model"}) || !slices.Equal(points["conformance_garbage"], []string{"after_model"}) {
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
	// A reply with a field the point does not take reaches the kernel as
	// the plugin wrote it, and the kernel refuses it.
	if _, err := run("conformance_garbage", answer); err == nil || !strings.Contains(err.Error(), "hook-output.schema.json#/$defs/after_model") {
		t.Errorf("a reply with a field after_model does not take: %v, want it refused", err)
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

	// The plugin's hook as a guardrail beside a model call that would
	// never end: its block cancels the call.
	wait := kerneltest.NewProvider(kerneltest.Reply{Wait: true}, kerneltest.Text("never"))
	res, err = c.pointRun(t, host, wait, hooks.Rule{Name: "plug-guard", Phase: kernel.PointBeforeModel, Concurrent: true,
		Plugin: &hooks.PluginConfig{Name: cfg.Name, Hook: "conformance"}}, "please BLOCK-ME")
	if err != nil || res.StopReason != kernel.StopGuardrail || res.Blocked == nil || !res.Blocked.Concurrent ||
		res.Blocked.Reason != "conformance: blocked" || wait.Cancelled() != 1 || wait.Remaining() != 1 {
		t.Errorf("the plugin's guardrail: %+v, %v; model calls cancelled %d", res, err, wait.Cancelled())
	}

	// A hook that never answers: at its time limit the kernel ends its
	// call (the plugin's handler sees the end), the hook failed closed
	// and the run stops, naming it; the model was never asked. The plugin
	// serves on.
	if c.HookMarks == "" {
		t.Fatal("sdktest.Conformance: HookMarks is not set")
	}
	mark := filepath.Join(c.HookMarks, "hang")
	never := kerneltest.NewProvider(kerneltest.Text("never"))
	res, err = c.pointRun(t, host, never, hooks.Rule{Name: "plug-hang", Phase: kernel.PointBeforeModel,
		Plugin: &hooks.PluginConfig{Name: cfg.Name, Hook: "conformance_hang", Timeout: hooks.Duration(time.Second)}}, mark)
	var gerr *kernel.GuardrailError
	if !errors.As(err, &gerr) || gerr.Hook != "plug-hang" || !strings.Contains(err.Error(), "did not answer within 1s") ||
		res.StopReason != kernel.StopGuardrail || len(never.Requests()) != 0 {
		t.Errorf("a hook that never answers: %+v, %v; model requests %d", res, err, len(never.Requests()))
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(mark); string(b) == "stopped" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hang hook's handler did not see its call end (%s)", mark)
		}
	}
	if rep, err := run("conformance", request("hello")); err != nil || rep.Context == "" {
		t.Errorf("after a hook's time limit the plugin no longer serves: %+v, %v", rep, err)
	}
}

// pointRun runs prompt in a new session of a kernel whose only hook is
// the rule (a plugin's hook) and whose model is prov.
func (c Conformance) pointRun(t *testing.T, host *subprocess.Host, prov *kerneltest.Provider, rule hooks.Rule, prompt string) (*kernel.RunResult, error) {
	t.Helper()
	chain, err := hooks.NewChain(hooks.Config{Rules: []hooks.Rule{rule}}, hooks.Options{Plugins: host})
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{Provider: prov, Store: memory.New(), Model: "m", Points: chain.Points()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return k.Run(ctx, "", prompt)
}
