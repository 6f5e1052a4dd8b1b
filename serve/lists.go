package serve

import (
	"net/http"

	"github.com/agentkernel/agentkernel/kernel"
)

// The API's closed sets: the scopes a key may carry, the error codes it
// answers with, the statuses it shows a session in. Each has one list
// here, with what each member means. serve/openapi.json's enums and the
// tables of docs/serve.md are generated from these lists (`make
// generate`), and tests hold the code to them: every constant is in its
// list, every error the server writes uses a listed code
// (serve/lists_test.go, docs/architecture.md "Closed sets").

// Scope is what an API key may do.
type Scope string

// The scopes. Admin holds every other scope.
const (
	ScopeRun     Scope = "run"
	ScopeApprove Scope = "approve"
	ScopeRead    Scope = "read"
	ScopeMetrics Scope = "metrics"
	ScopeAdmin   Scope = "admin"
)

// scopes is the list, in the order they are shown, with what each allows.
var scopes = []struct {
	scope  Scope
	allows string
}{
	{ScopeRun, "create and delete sessions, start, cancel and resume runs, steer and queue messages"},
	{ScopeApprove, "see pending approvals and approve or reject them"},
	{ScopeRead, "list and read sessions, messages, exports, event streams, runs, the tools, the policy, explain; search memory (the key's own sessions)"},
	{ScopeMetrics, "reading `/metrics`, when `telemetry.metrics` is on ([observability.md](observability.md)); nothing else"},
	{ScopeAdmin, "all of the above"},
}

// Scopes returns every scope a key may carry, in the order they are shown.
func Scopes() []Scope {
	out := make([]Scope, len(scopes))
	for i, s := range scopes {
		out[i] = s.scope
	}
	return out
}

// errorCode is the code of an API error ({"error": {"code": ...}}).
type errorCode string

// The error codes.
const (
	codeInvalidRequest       errorCode = "invalid_request"
	codeUnauthorized         errorCode = "unauthorized"
	codeForbidden            errorCode = "forbidden"
	codeCrossOrigin          errorCode = "cross_origin"
	codeHostNotAllowed       errorCode = "host_not_allowed"
	codeNotFound             errorCode = "not_found"
	codeNoPolicy             errorCode = "no_policy"
	codeConflict             errorCode = "conflict"
	codeTooLarge             errorCode = "too_large"
	codeUnsupportedMediaType errorCode = "unsupported_media_type"
	codeTooManyRuns          errorCode = "too_many_runs"
	codeTooManyStreams       errorCode = "too_many_streams"
	codeInternal             errorCode = "internal"
	codeNotImplemented       errorCode = "not_implemented"
	codeDraining             errorCode = "draining"
	codeStoreUnavailable     errorCode = "store_unavailable"
)

// errorCodes is the list: each code's HTTP status and what it means.
var errorCodes = []struct {
	code   errorCode
	status int
	means  string
}{
	{codeInvalidRequest, http.StatusBadRequest, "the request is malformed, or a field or query parameter is wrong; `field` names it"},
	{codeUnauthorized, http.StatusUnauthorized, "no API key, or one that is unknown or revoked"},
	{codeForbidden, http.StatusForbidden, "the key lacks the scope the endpoint needs, or is restricted to other agents"},
	{codeCrossOrigin, http.StatusForbidden, "a browser request from another origin"},
	{codeHostNotAllowed, http.StatusForbidden, "the request's `Host` is not a name the server answers to (IP addresses, `localhost`, names under `.localhost`, `--allow-host`, the `--listen` name, the TLS certificate's names): DNS rebinding"},
	{codeNotFound, http.StatusNotFound, "no such endpoint, session, run or pending approval, or one the key may not see"},
	{codeNoPolicy, http.StatusNotFound, "no policy is in effect (`GET /v1/policy`, explain)"},
	{codeConflict, http.StatusConflict, "the session or run is not in a state that allows it; `state` says which it is in"},
	{codeTooLarge, http.StatusRequestEntityTooLarge, "the body is larger than `--max-body`"},
	{codeUnsupportedMediaType, http.StatusUnsupportedMediaType, "the body is not `application/json`"},
	{codeTooManyRuns, http.StatusTooManyRequests, "the server's or the key's runs in flight are at their limit; retry after `Retry-After`"},
	{codeTooManyStreams, http.StatusTooManyRequests, "the server's or the key's open event streams are at their limit (`--max-streams`, `--max-streams-per-key`; the last `--stream-reserve` of them are for keys with the `approve` scope); retry after `Retry-After`"},
	{codeInternal, http.StatusInternalServerError, "a server error; the server's log has the details"},
	{codeNotImplemented, http.StatusNotImplemented, "the server cannot do it (deleting, on a store without deletion; memory search, on a server without memory)"},
	{codeDraining, http.StatusServiceUnavailable, "the server is shutting down; retry on its successor"},
	{codeStoreUnavailable, http.StatusServiceUnavailable, "the session store cannot be reached; retry after `Retry-After`"},
}

// httpStatus is the code's HTTP status (500 for a code not in the list,
// which TestListsNameEveryConstant keeps from happening).
func (c errorCode) httpStatus() int {
	for _, e := range errorCodes {
		if e.code == c {
			return e.status
		}
	}
	return http.StatusInternalServerError
}

// statusInterrupted is the status the API shows for a session whose run
// stopped without ending (a drain, a crash) and that no run of this
// server continues. The store says running.
const statusInterrupted kernel.Status = "interrupted"

// sessionStatuses is the list of statuses the API shows a session in: the
// stored ones (kernel.Status), and interrupted.
var sessionStatuses = []struct {
	status kernel.Status
	means  string
}{
	{kernel.StatusIdle, "no run is in flight; a prompt starts one"},
	{kernel.StatusRunning, "a run is in flight"},
	{kernel.StatusAwaitingApproval, "a tool call waits for a person; approving or rejecting it continues the run"},
	{kernel.StatusFailed, "the last run ended with an error; a prompt starts a new run"},
	{statusInterrupted, "a run stopped without ending (a drain, a crash) and no run of this server continues it; `POST …/resume` does"},
}

// isSessionStatus reports whether s is a status the API shows.
func isSessionStatus(s string) bool {
	for _, st := range sessionStatuses {
		if string(st.status) == s {
			return true
		}
	}
	return false
}

// sessionStatusNames are the statuses, for messages.
func sessionStatusNames() []string {
	out := make([]string, len(sessionStatuses))
	for i, s := range sessionStatuses {
		out[i] = string(s.status)
	}
	return out
}
