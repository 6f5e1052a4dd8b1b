// Package egress is the one way the kernel itself reaches the network on
// behalf of a tool: declared HTTP tools today, and any later network client
// of the kernel (embeddings, an OpenAPI document fetched by URL). It is a
// dialer and an HTTP client built on it that only connect where a Config
// allows:
//
//  1. The host must be one the Config names (exact, or "*.example.com"),
//     on a port it names (a host without a port allows 80 and 443).
//  2. The name is resolved once, by the Dialer's Resolver, and the dialer
//     connects to the addresses of that answer only: nothing resolves the
//     name again between the check and the connection.
//  3. A name that resolved to public addresses before and now resolves to
//     an internal one, or resolves to both at once, is refused as DNS
//     rebinding (rule "rebinding").
//  4. Every connection's address is checked in net.Dialer.Control, after
//     the socket exists and before connect(2): loopback, private,
//     link-local, cloud metadata and the other non-public ranges are
//     refused unless Config.Networks grants them (a metadata address only
//     when granted by itself, as a /32 or /128).
//  5. Redirects are followed by the same client, so every hop dials
//     through the same checks; a client also caps the hops, refuses a
//     redirect from https to http and drops the sensitive headers when a
//     redirect leaves the host.
//  6. TLS certificates are verified unless Config.InsecureSkipVerify, a
//     setting the caller names in its configuration and logs.
//
// A refusal is a *RefusedError naming the rule (errors.Is(err,
// ErrRefused)). Proxies from the environment (HTTP_PROXY) are never used:
// a proxy would make the connection, and the checks, somewhere else.
//
// Why the kernel's client is guarded here rather than confined by the
// sandbox's net grant: RATIONALE.md, "Egress is one owner (internal/egress)".
package egress
