// Package serve is `kernel serve`: the kernel as an HTTP service for many
// sessions and many clients at once. It is a second front end on
// kernel.Kernel beside the CLI: a JSON API under /v1 (sessions, runs,
// steering, approvals, tools, policy), Server-Sent Events per session that
// resume from the store's event log (kernel.EventLog) after a disconnect
// or a restart, API keys with scopes (KeyStore), and an approvals inbox
// page embedded in the binary.
//
// Keys and tenants are checked here, at the edge: the kernel sees a
// session id and the key's name, which it records as the principal of an
// approval decision. Runs go through Kernel.With, one view per run, with
// the session's event sink and the drain's stop-at-a-boundary signal.
//
// Only cmd/kernel imports this package. docs/serve.md is the user's guide
// and serve/openapi.json the API's contract.
package serve
