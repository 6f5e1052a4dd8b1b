package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/config/names"
)

// Delegation: an agent is configuration, a child run is a session. An
// Agent is a Kernel (its model, tools, policy, hooks, system prompt, turn
// cap and budget) under a name; AgentTool makes it a tool, "agent.<name>",
// that another agent's model calls like any other through the one
// pipeline (parse, surface, schema, hooks, policy, approvals). Calling it
// runs the agent's loop in a child session linked to the caller's
// (SessionMeta.Parent: the parent session, the call, the depth and the
// chain of agents), with its own context window; its events reach the
// caller's stream nested in AgentEvent, its spend is charged to every
// ancestor as it happens (Budget), and its approvals are surfaced as the
// caller's (Approval.Child). Why: RATIONALE.md, "Agents".

// DefaultMaxDepth is how deep delegation may go when Config.MaxDepth is
// zero: a top-level run is at depth 0, a run it delegates to at depth 1.
const DefaultMaxDepth = 4

// DefaultAgentTimeout bounds one call of an agent, its whole child run,
// when Agent.Timeout is zero.
const DefaultAgentTimeout = 30 * time.Minute

// DefaultAgentName is the name policy sees for a Kernel whose
// Config.Agent is empty: the configuration's top-level agent.
const DefaultAgentName = "default"

// AgentToolPrefix starts the name of every agent's tool.
const AgentToolPrefix = "agent."

// SourceAgent is the ToolSpec.Source of an agent's tool.
const SourceAgent = "agent"

// Agent is a named agent another agent may call as a tool.
type Agent struct {
	// Name is the agent's name (a tool name's characters, no dot); its tool
	// is "agent.<Name>".
	Name string
	// Description tells a calling model what the agent is for.
	Description string
	// Kernel runs the agent: provider and model, tools (a registry holding
	// the agent's surface), policy, hooks, system prompt, max turns and
	// Config.Budget. Its Config.Agent should be Name.
	Kernel *Kernel
	// Tier is the tier of the agent's tool as policy sees it: the highest
	// tier among the tools the agent may call (default side_effecting).
	Tier Tier
	// Timeout bounds one call of the agent: its whole child run (default
	// DefaultAgentTimeout).
	Timeout time.Duration
}

// AgentArgsSchema is the JSON Schema of an agent tool's arguments.
var AgentArgsSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"task":{"type":"string","minLength":1,"description":"What the agent is to do: a complete instruction; the agent sees nothing of this conversation but the task and the context."},` +
	`"context":{"type":"string","description":"What the agent needs to know that the task does not say: file names, findings so far, constraints."}},` +
	`"required":["task"],"additionalProperties":false}`)

// agentArgs are an agent tool's arguments, validated against
// AgentArgsSchema before the tool sees them.
type agentArgs struct {
	Task    string `json:"task"`
	Context string `json:"context"`
}

// prompt is the child's first user message.
func (a agentArgs) prompt() string {
	if strings.TrimSpace(a.Context) == "" {
		return a.Task
	}
	return a.Task + "\n\nContext:\n" + a.Context
}

// AgentTool returns agent a as the tool "agent.<a.Name>" (Source
// "agent"). Register it in the registry of each agent that may call it.
func AgentTool(a Agent) (Tool, error) {
	if a.Kernel == nil {
		return nil, fmt.Errorf("agent %q: Agent.Kernel is required", a.Name)
	}
	if !names.ToolName.Valid(AgentToolPrefix+a.Name) || strings.Contains(a.Name, ".") || a.Name == "" {
		return nil, fmt.Errorf("agent %q: a name is 1–58 characters of [A-Za-z0-9_-]", a.Name)
	}
	if a.Tier == "" {
		a.Tier = TierSideEffecting
	}
	if !a.Tier.Valid() {
		return nil, fmt.Errorf("agent %q: tier %q is not one of read_only, side_effecting, privileged", a.Name, a.Tier)
	}
	if a.Timeout <= 0 {
		a.Timeout = DefaultAgentTimeout
	}
	desc := a.Description
	if desc == "" {
		desc = "Delegate a task to the " + a.Name + " agent."
	}
	return &agentTool{a: a, spec: ToolSpec{Name: AgentToolPrefix + a.Name, Description: desc, Schema: AgentArgsSchema,
		Tier: a.Tier, Timeout: a.Timeout, Source: SourceAgent, Tags: []string{"agent"}}}, nil
}

// agentTool is an Agent as a Tool.
type agentTool struct {
	a    Agent
	spec ToolSpec
}

func (t *agentTool) Spec() ToolSpec { return t.spec }

// Call runs the agent's child session for the call whose delegation the
// kernel put in ctx (only the kernel's pipeline calls an agent tool).
func (t *agentTool) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	d, _ := ctx.Value(delegationKey{}).(*delegation)
	if d == nil {
		return Result{}, &ToolError{Tool: t.spec.Name, Code: "tool_error", Err: errors.New("an agent runs only as a call of a kernel run")}
	}
	var in agentArgs
	if err := json.Unmarshal(args, &in); err != nil {
		return Result{}, &ToolError{Tool: t.spec.Name, Code: "invalid_args", Err: fmt.Errorf("%w: %v", ErrInvalidArgs, err)}
	}
	return d.run(ctx, t, in.prompt())
}

var _ Tool = (*agentTool)(nil)

// IsAgentTool reports whether t is an agent's tool (AgentTool).
func IsAgentTool(t Tool) bool {
	_, ok := t.(*agentTool)
	return ok
}

// AgentState is what policy and hooks see of the agent a run belongs to
// (State.Agent).
type AgentState struct {
	// Name is the agent the session runs (Config.Agent, or
	// DefaultAgentName).
	Name string
	// Depth is 0 for a top-level run, 1 for a run it delegated to, and so
	// on.
	Depth int
	// Parent is the calling agent's name; empty at depth 0.
	Parent string
	// Chain lists the agents from the top-level run down to this one, this
	// one last.
	Chain []string
}

// ParentLink ties a child session to the call that started it
// (SessionMeta.Parent).
type ParentLink struct {
	SessionID string `json:"session_id"`
	CallID    string `json:"call_id"`
	// Seq is the parent's assistant message that made the call.
	Seq uint64 `json:"seq"`
	// Agent is the calling agent.
	Agent string `json:"agent"`
	// Depth is the child's depth (1 for a child of a top-level run).
	Depth int `json:"depth"`
	// Chain lists the agents from the top-level run to the child, the
	// child last.
	Chain []string `json:"chain"`
}

// ChildRun is what the tool message answering an agent call records of
// the child run that answered it (Message.Child).
type ChildRun struct {
	SessionID  string     `json:"session_id"`
	Agent      string     `json:"agent"`
	StopReason StopReason `json:"stop_reason,omitempty"`
	// Usage and CostUSD are what the child spent for this call; they are
	// also in the caller's totals.
	Usage   Usage   `json:"usage,omitzero"`
	CostUSD float64 `json:"cost_usd,omitempty"`
	// Resumed is set when the child was resumed after the kernel stopped
	// while it ran.
	Resumed bool `json:"resumed,omitempty"`
}

// ChildSessionID is the id of the child session that call callID of
// assistant message seq of session parent runs in. It is derived, not
// drawn, so a resumed parent finds the child its crashed run started.
func ChildSessionID(parent string, seq uint64, callID string) string {
	h := sha256.New()
	h.Write([]byte(parent))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	h.Write(b[:])
	h.Write([]byte(callID))
	sum := h.Sum(nil)
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	var out [20]byte
	var acc uint64
	bits, j := 0, 0
	for _, x := range sum[:13] {
		acc = acc<<8 | uint64(x)
		bits += 8
		for bits >= 5 && j < len(out) {
			bits -= 5
			out[j] = alphabet[(acc>>uint(bits))&31]
			j++
		}
	}
	return "c" + string(out[:19])
}

// agentName is the name policy sees for k's agent.
func (k *Kernel) agentName() string {
	if k.cfg.Agent == "" {
		return DefaultAgentName
	}
	return k.cfg.Agent
}

// metaAgent is the AgentState of the session meta describes.
func metaAgent(meta *SessionMeta) AgentState {
	name := meta.Agent
	if name == "" {
		name = DefaultAgentName
	}
	if p := meta.Parent; p != nil {
		return AgentState{Name: name, Depth: p.Depth, Parent: p.Agent, Chain: slices.Clone(p.Chain)}
	}
	if name == DefaultAgentName {
		return AgentState{Name: name, Chain: defaultChain}
	}
	return AgentState{Name: name, Chain: []string{name}}
}

// defaultChain is the Chain of a root run of the default agent, shared by
// every such run: its capacity is its length, so an append copies it.
var defaultChain = []string{DefaultAgentName}[:1:1]

// maxDepth is the deepest child run k lets start.
func (k *Kernel) maxDepth() int {
	if k.cfg.MaxDepth > 0 {
		return k.cfg.MaxDepth
	}
	return DefaultMaxDepth
}
