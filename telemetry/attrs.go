package telemetry

import (
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/agentkernel/agentkernel/kernel"
)

// The kernel's own attributes, beside the gen_ai.* ones of the
// conventions. docs/observability.md lists them.
const (
	attrPrincipal  = attribute.Key("agentkernel.principal")
	attrResumed    = attribute.Key("agentkernel.run.resumed")
	attrNewSession = attribute.Key("agentkernel.run.new_session")
	// A child agent's run (an agent call's): the caller's session and
	// the child's depth.
	attrParentSession = attribute.Key("agentkernel.agent.parent_session")
	attrAgentDepth    = attribute.Key("agentkernel.agent.depth")
	attrStopReason    = attribute.Key("agentkernel.run.stop_reason")
	attrTurns         = attribute.Key("agentkernel.run.turns")
	attrCost          = attribute.Key("agentkernel.cost_usd")
	attrAttempts      = attribute.Key("agentkernel.model.attempts")
	attrToolsOffered  = attribute.Key("agentkernel.model.tools_offered")
	attrMessages      = attribute.Key("agentkernel.model.messages")
	attrSource        = attribute.Key("agentkernel.tool.source")
	attrOrigin        = attribute.Key("agentkernel.tool.origin")
	attrTier          = attribute.Key("agentkernel.tool.tier")
	attrOutcome       = attribute.Key("agentkernel.tool.outcome")
	attrBytesIn       = attribute.Key("agentkernel.tool.bytes_in")
	attrBytesOut      = attribute.Key("agentkernel.tool.bytes_out")
	attrLayers        = attribute.Key("agentkernel.sandbox.layers")
	attrEffect        = attribute.Key("agentkernel.policy.effect")
	attrRules         = attribute.Key("agentkernel.policy.rules")
	attrDecisionID    = attribute.Key("agentkernel.policy.decision_id")
	attrRevision      = attribute.Key("agentkernel.policy.revision")
	attrDefault       = attribute.Key("agentkernel.policy.default")
	attrWouldDeny     = attribute.Key("agentkernel.policy.would_deny")
	attrWouldAsk      = attribute.Key("agentkernel.policy.would_ask")
	attrEvalSeconds   = attribute.Key("agentkernel.policy.eval_seconds")
	attrHooksRewrote  = attribute.Key("agentkernel.hooks.rewrote")
	attrHooksBlocked  = attribute.Key("agentkernel.hooks.blocked")
	attrHookName      = attribute.Key("agentkernel.hook.name")
	attrHookPoint     = attribute.Key("agentkernel.hook.point")
	attrHookOutcome   = attribute.Key("agentkernel.hook.outcome")
	attrHookConc      = attribute.Key("agentkernel.hook.concurrent")
	attrApprovalID    = attribute.Key("agentkernel.approval.id")
	attrDecision      = attribute.Key("agentkernel.approval.decision")
	attrDecidedBy     = attribute.Key("agentkernel.approval.by")
	attrWait          = attribute.Key("agentkernel.approval.wait_seconds")
	attrCompactKind   = attribute.Key("agentkernel.compaction.kind")
	attrDropped       = attribute.Key("agentkernel.compaction.dropped")
	attrTokensBefore  = attribute.Key("agentkernel.compaction.tokens_before")
	attrTokensAfter   = attribute.Key("agentkernel.compaction.tokens_after")
	attrPurpose       = attribute.Key("agentkernel.model.purpose")
	attrPlugin        = attribute.Key("agentkernel.plugin")
	attrGenAISystem   = attribute.Key("gen_ai.system") // v1.36 and earlier; see legacy
	maxContentBytes   = 32 << 10
	truncationMarker  = "…[truncated]"
	operationInvoke   = "invoke_agent"
	operationChat     = "chat"
	operationTool     = "execute_tool"
	spanCompaction    = "compact_context"
	spanApprovalWait  = "await_approval"
	spanGuardrail     = "guardrail"
	toolTypeFunction  = "function"
	toolTypeExtension = "extension"
)

// provider returns gen_ai.provider.name, and the legacy gen_ai.system
// beside it unless OTEL_SEMCONV_STABILITY_OPT_IN asks for the latest
// conventions only.
func (t *Telemetry) provider() []attribute.KeyValue {
	name := t.cfg.Provider
	if name == "" {
		name = "_OTHER"
	}
	out := []attribute.KeyValue{semconv.GenAIProviderNameKey.String(name)}
	if !t.cfg.latestSemcov {
		out = append(out, attrGenAISystem.String(name))
	}
	return out
}

// capped cuts s to the content cap.
func capped(s string) string {
	if len(s) <= maxContentBytes {
		return s
	}
	return s[:maxContentBytes] + truncationMarker
}

// part is one part of a message in the conventions' JSON form.
type part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  string          `json:"response,omitempty"`
}

type chatMessage struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

// messagesJSON renders msgs as gen_ai.input.messages or
// gen_ai.output.messages, every text through the scrubber, cut to the cap.
func (t *Telemetry) messagesJSON(msgs []kernel.Message, finish string) string {
	out := make([]chatMessage, 0, len(msgs))
	for _, m := range msgs {
		cm := chatMessage{Role: string(m.Role), FinishReason: finish}
		switch m.Role {
		case kernel.RoleTool:
			cm.Parts = append(cm.Parts, part{Type: "tool_call_response", ID: m.ToolCallID, Response: t.scrub(m.Content)})
		default:
			if m.Content != "" {
				cm.Parts = append(cm.Parts, part{Type: "text", Content: t.scrub(m.Content)})
			}
			for _, c := range m.ToolCalls {
				args := t.scrub(c.Arguments)
				if !json.Valid([]byte(args)) {
					b, _ := json.Marshal(args)
					args = string(b)
				}
				cm.Parts = append(cm.Parts, part{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: json.RawMessage(args)})
			}
		}
		if cm.Role == string(kernel.RoleCompaction) {
			cm.Role = "system"
		}
		if cm.Parts == nil {
			cm.Parts = []part{}
		}
		out = append(out, cm)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return ""
	}
	return capped(string(b))
}
