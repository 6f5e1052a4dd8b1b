package serve

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

// routes registers every endpoint with the scopes it needs.
func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /healthz", s.healthz)
	m.HandleFunc("GET /readyz", s.readyz)
	m.HandleFunc("GET /v1/openapi.json", serveOpenAPI)
	s.pageRoutes()

	m.Handle("POST /v1/sessions", s.auth(s.createSession, ScopeRun))
	m.Handle("GET /v1/sessions", s.auth(s.listSessions, ScopeRead))
	m.Handle("GET /v1/sessions/{id}", s.auth(s.getSession, ScopeRead))
	m.Handle("DELETE /v1/sessions/{id}", s.auth(s.deleteSession, ScopeRun))
	m.Handle("GET /v1/sessions/{id}/messages", s.auth(s.listMessages, ScopeRead))
	m.Handle("POST /v1/sessions/{id}/messages", s.auth(s.postMessage, ScopeRun))
	m.Handle("GET /v1/sessions/{id}/export", s.auth(s.exportSession, ScopeRead))
	m.Handle("GET /v1/sessions/{id}/events", s.auth(s.streamEvents, ScopeRead))
	m.Handle("POST /v1/sessions/{id}/runs", s.auth(s.startRun, ScopeRun))
	m.Handle("GET /v1/sessions/{id}/runs", s.auth(s.listRuns, ScopeRead))
	m.Handle("GET /v1/sessions/{id}/runs/{run}", s.auth(s.getRun, ScopeRead))
	m.Handle("POST /v1/sessions/{id}/runs/{run}/cancel", s.auth(s.cancelRun, ScopeRun))
	m.Handle("POST /v1/sessions/{id}/resume", s.auth(s.resumeRun, ScopeRun))
	m.Handle("GET /v1/sessions/{id}/approval", s.auth(s.getApproval, ScopeRead, ScopeApprove))
	m.Handle("POST /v1/sessions/{id}/approval", s.auth(s.decide, ScopeApprove))
	m.Handle("GET /v1/approvals", s.auth(s.listApprovals, ScopeRead, ScopeApprove))
	m.Handle("GET /v1/approvals/stream", s.auth(s.streamApprovals, ScopeRead, ScopeApprove))
	m.Handle("GET /v1/tools", s.auth(s.listTools, ScopeRead))
	m.Handle("GET /v1/agents", s.auth(s.listAgents, ScopeRead))
	m.Handle("GET /v1/agents/{name}", s.auth(s.getAgent, ScopeRead))
	m.Handle("POST /v1/agents/{name}/runs", s.auth(s.startAgentRun(false), ScopeRun))
	m.Handle("POST /v1/pipelines/{name}/runs", s.auth(s.startAgentRun(true), ScopeRun))
	m.Handle("GET /v1/policy", s.auth(s.getPolicy, ScopeRead))
	m.Handle("POST /v1/policy/explain", s.auth(s.explainPolicy, ScopeRead))
	m.Handle("GET /v1/memory/search", s.auth(s.searchMemory, ScopeRead))
	m.Handle("GET /v1/whoami", s.auth(s.whoami, ScopeRead, ScopeRun, ScopeApprove))
	// Anything else under /v1 is a JSON 404, not the page.
	m.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, errorf(codeNotFound, "no endpoint %s %s (GET /v1/openapi.json lists them)", r.Method, r.URL.Path))
	})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "version": s.cfg.Version, "uptime": time.Since(s.started).Round(time.Second).String()})
}

// readyz answers 200 when the store answers, the tools are loaded and the
// server is not draining; else 503 naming what is not ready.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	checks := map[string]string{"store": "ok", "tools": "ok"}
	ready := true
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := s.cfg.Store.Load(ctx, "readyz-probe"); err != nil && !errors.Is(err, kernel.ErrSessionNotFound) {
		// The error may name the database (user@host:port/db): it goes
		// to the server's log, and the unauthenticated answer says only
		// that the store is unavailable.
		s.logError("readyz: the session store: %v", err)
		checks["store"], ready = "unavailable", false
		if errors.Is(err, kernel.ErrStoreUnavailable) || ctx.Err() != nil {
			checks["store"] = "database unavailable"
		}
	}
	if s.cfg.Kernel.Tools() == nil {
		checks["tools"], ready = "not loaded", false
	}
	status, code := "ready", http.StatusOK
	if s.draining.Load() || !ready {
		status, code = "not_ready", http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]any{"status": status, "checks": checks})
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request, k *Key) error {
	writeJSON(w, http.StatusOK, map[string]any{"name": k.Name, "scopes": k.Scopes, "tenant": k.Tenant})
	return nil
}

type toolView struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Tier        string          `json:"tier"`
	Source      string          `json:"source"`
	Tags        []string        `json:"tags"`
	Timeout     string          `json:"timeout,omitempty"`
	Schema      json.RawMessage `json:"schema"`
}

func (s *Server) listTools(w http.ResponseWriter, r *http.Request, k *Key) error {
	out := struct {
		Tools []toolView `json:"tools"`
	}{Tools: []toolView{}}
	for _, t := range s.cfg.Kernel.Tools().Specs() {
		v := toolView{Name: t.Name, Description: t.Description, Tier: string(t.Tier), Source: t.Source, Tags: t.Tags, Schema: t.Schema}
		if v.Tags == nil {
			v.Tags = []string{}
		}
		if len(v.Schema) == 0 {
			v.Schema = json.RawMessage(`{}`)
		}
		if t.Timeout > 0 {
			v.Timeout = t.Timeout.String()
		}
		out.Tools = append(out.Tools, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type policyView struct {
	Name     string `json:"name"`
	File     string `json:"file"`
	Revision string `json:"revision"`
	SHA256   string `json:"sha256"`
}

func (s *Server) currentPolicy() (*policy.Policy, error) {
	if s.cfg.Policy == nil || s.cfg.Policy.Policy() == nil {
		return nil, errorf(codeNoPolicy, "no policy is in effect: every call is allowed")
	}
	return s.cfg.Policy.Policy(), nil
}

func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request, k *Key) error {
	p, err := s.currentPolicy()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, policyView{Name: p.Name(), File: p.File(), Revision: p.Revision(), SHA256: p.SHA256()})
	return nil
}

// explainView is policy.Explanation for the API.
type explainView struct {
	Policy   string           `json:"policy"`
	Revision string           `json:"revision"`
	SHA256   string           `json:"sha256"`
	Call     *callExplainView `json:"call,omitempty"`
	Offered  []string         `json:"offered,omitempty"`
	// Text is the explanation as `kernel policy explain` prints it.
	Text string `json:"text"`
}

type callExplainView struct {
	Tool     string            `json:"tool"`
	Args     string            `json:"args"`
	Decision kernel.Decision   `json:"decision"`
	Rules    []ruleExplainView `json:"rules"`
}

type ruleExplainView struct {
	ID     string `json:"id"`
	Effect string `json:"effect"`
	Mode   string `json:"mode,omitempty"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	Note   string `json:"note,omitempty"`
}

// explainPolicy evaluates the policy in effect on an input case (the
// keys of `kernel policy explain --input`, as JSON) and explains every
// rule.
func (s *Server) explainPolicy(w http.ResponseWriter, r *http.Request, k *Key) error {
	p, err := s.currentPolicy()
	if err != nil {
		return err
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return errorf(codeUnsupportedMediaType, "the body must be JSON (Content-Type: application/json), not %q", ct)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return jsonError(err)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil {
		return jsonError(err)
	}
	in, err := policy.ParseInput("request body", body)
	if err != nil {
		return badField("", "%s", strings.TrimSpace(err.Error()))
	}
	ex, err := p.Explain(in)
	if err != nil {
		return badField("", "%v", err)
	}
	var text strings.Builder
	if err := ex.Format(&text); err != nil {
		return err
	}
	v := explainView{Policy: ex.Policy, Revision: ex.Revision, SHA256: ex.SHA256, Text: text.String()}
	if ex.Call != nil {
		c := &callExplainView{Tool: ex.Call.Tool, Args: ex.Call.Args, Decision: ex.Call.Decision, Rules: []ruleExplainView{}}
		for _, re := range ex.Call.Rules {
			c.Rules = append(c.Rules, ruleExplainView{ID: re.ID, Effect: re.Effect, Mode: re.Mode, Status: string(re.Status), Error: re.Err, Note: re.Note})
		}
		v.Call = c
	}
	if ex.Surface != nil {
		v.Offered = ex.Surface.Offered
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
