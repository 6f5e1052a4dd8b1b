package serve

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// Agent is a named agent or pipeline the server runs besides the
// configuration's top-level agent (agents: and pipelines: in kernel.yaml).
// A session created with it (POST /v1/sessions with "agent") records its
// name (SessionMeta.Agent) and every run of that session goes through its
// Kernel.
type Agent struct {
	// Name is the name recorded in the sessions it runs: the agent's
	// name, or "pipeline:NAME" for a pipeline.
	Name string
	// Kind is "agent" or "pipeline".
	Kind        string
	Description string
	// Model is the model it runs on, as shown.
	Model  string
	Kernel *kernel.Kernel
}

// ScopeAgentPrefix starts a scope restricting a key to one named agent:
// a key carrying any "agent:NAME" scope creates and runs only sessions of
// the agents it names ("agent:pipeline:NAME" for a pipeline); a key with
// none is not restricted.
const ScopeAgentPrefix = "agent:"

type agentView struct {
	Name        string   `json:"name"`
	Kind        string   `json:"kind"`
	Description string   `json:"description"`
	Model       string   `json:"model"`
	Tools       []string `json:"tools"`
}

func (s *Server) agentView(a *Agent) agentView {
	v := agentView{Name: a.Name, Kind: a.Kind, Description: a.Description, Model: a.Model, Tools: []string{}}
	if a.Kernel != nil {
		if reg := a.Kernel.Tools(); reg != nil {
			for _, t := range reg.Specs() {
				v.Tools = append(v.Tools, t.Name)
			}
		}
	}
	return v
}

// agent finds a named agent; nil when the configuration has none so named.
func (s *Server) agent(name string) *Agent {
	for i := range s.cfg.Agents {
		if s.cfg.Agents[i].Name == name {
			return &s.cfg.Agents[i]
		}
	}
	return nil
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request, k *Key) error {
	out := struct {
		Agents []agentView `json:"agents"`
	}{Agents: []agentView{}}
	for i := range s.cfg.Agents {
		if agentAllowed(k, s.cfg.Agents[i].Name) {
			out.Agents = append(out.Agents, s.agentView(&s.cfg.Agents[i]))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request, k *Key) error {
	name := r.PathValue("name")
	a := s.agent(name)
	if a == nil || !agentAllowed(k, name) {
		return notFound("agent", name)
	}
	writeJSON(w, http.StatusOK, s.agentView(a))
	return nil
}

// agentAllowed reports whether key k may run sessions of agent name (""
// is the configuration's top-level agent).
func agentAllowed(k *Key, name string) bool {
	restricted := false
	for _, sc := range k.Scopes {
		if n, ok := strings.CutPrefix(string(sc), ScopeAgentPrefix); ok {
			restricted = true
			if n == name {
				return true
			}
		}
	}
	return !restricted
}

// checkAgent refuses (403) a run of a session of agent name by a key
// restricted to other agents.
func checkAgent(k *Key, name string) error {
	if agentAllowed(k, name) {
		return nil
	}
	shown := name
	if shown == "" || shown == kernel.DefaultAgentName {
		shown = "the top-level agent"
	}
	var allowed []string
	for _, sc := range k.Scopes {
		if n, ok := strings.CutPrefix(string(sc), ScopeAgentPrefix); ok {
			allowed = append(allowed, n)
		}
	}
	return errorf(codeForbidden, "key %s may run only the agents %s, not %s", k.Name, strings.Join(allowed, ", "), shown)
}

// sessionKernel is the kernel that runs session sid: the one of the named
// agent it records, else the configuration's.
func (s *Server) sessionKernel(ctx context.Context, sid string) *kernel.Kernel {
	if len(s.cfg.Agents) == 0 {
		return s.cfg.Kernel
	}
	sess, err := s.cfg.Store.Load(ctx, sid)
	if err != nil {
		return s.cfg.Kernel
	}
	if a := s.agent(sess.Meta.Agent); a != nil {
		return a.Kernel
	}
	return s.cfg.Kernel
}

// sessionAgent is the agent a session records, "" for the top-level one.
func sessionAgent(m *kernel.SessionMeta) string {
	if m.Agent == kernel.DefaultAgentName {
		return ""
	}
	return m.Agent
}

// agentNames lists the named agents, for errors.
func (s *Server) agentNames() string {
	var n []string
	for _, a := range s.cfg.Agents {
		n = append(n, a.Name)
	}
	if len(n) == 0 {
		return "(none)"
	}
	slices.Sort(n)
	return strings.Join(n, ", ")
}

type agentRunReq struct {
	Prompt string `json:"prompt"`
	Title  string `json:"title"`
}

// startAgentRun is POST /v1/agents/{name}/runs and POST
// /v1/pipelines/{name}/runs: a new session of the agent (or pipeline) and
// its first run, in one request.
func (s *Server) startAgentRun(pipeline bool) func(http.ResponseWriter, *http.Request, *Key) error {
	return func(w http.ResponseWriter, r *http.Request, k *Key) error {
		name := r.PathValue("name")
		if pipeline {
			name = "pipeline:" + name
		}
		if s.agent(name) == nil || !agentAllowed(k, name) {
			return notFound("agent", name)
		}
		var req agentRunReq
		if err := s.decodeBody(r, &req); err != nil {
			return err
		}
		if strings.TrimSpace(req.Prompt) == "" {
			return badField("prompt", "prompt is required and must not be blank")
		}
		if len(req.Title) > 200 {
			return badField("title", "title is %d bytes; at most 200", len(req.Title))
		}
		id := kernel.NewID()
		st, err := s.openRunStream(r, k, id) // the run's events in this response, if asked: before the session exists
		if err != nil {
			return err
		}
		if st != nil {
			defer st.close()
		}
		now := time.Now().UTC()
		meta := kernel.SessionMeta{ID: id, Title: s.cfg.Scrub(req.Title), Status: kernel.StatusIdle, Created: now, Updated: now,
			Labels: map[string]string{labelOwner: k.Owner(), labelPrincipal: k.Name}, Context: s.cfg.SessionContext, Agent: name}
		if err := s.cfg.Store.Commit(r.Context(), meta.ID, kernel.Step{Meta: meta}); err != nil {
			return err
		}
		sid, prompt := meta.ID, req.Prompt
		rec, err := s.runs.start(r.Context(), sid, k.Owner(), k, kindPrompt, func(ctx context.Context, kk *kernel.Kernel) (*kernel.RunResult, error) {
			return kk.Run(ctx, sid, prompt)
		})
		if err != nil {
			return err
		}
		s.answerRun(w, r, st, rec)
		return nil
	}
}
