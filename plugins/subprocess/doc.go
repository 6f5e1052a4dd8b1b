// Package subprocess is the host side of tool plugins: binaries built with
// the Go SDK (package sdk) that serve tools over hashicorp/go-plugin (gRPC only,
// go-plugin's AutoMTLS protocol on P-256 keys (mtls.go), a unix socket in a
// private directory).
//
// A Host owns every plugin of a kernel. For each configured plugin:
//
//  1. Load checks the configuration, then copies the binary into the
//     host's private 0700 directory while hashing the bytes it copies; a
//     missing or wrong sha256 pin is refused with the actual hash. Only
//     the copy is ever executed, so replacing the original after the check
//     changes nothing (go-plugin's SecureConfig hashes a path and then
//     executes the path).
//  2. The plugin's tools come from the Describe cache (keyed by the
//     binary's sha256) or from starting it. They are named "plugin.tool"
//     with Source "subprocess:<plugin>".
//  3. A lazy plugin starts on its first call. The process gets an empty
//     stdin, only the allowed environment variables plus go-plugin's, its
//     own process group and a parent-death signal (SIGKILL, Linux).
//  4. A call streams progress, then the result; the output is capped. A
//     call still running at its deadline gets the whole process group
//     killed. A crash is returned to the model with the plugin's panic
//     text; the next call restarts the plugin after a backoff; after
//     MaxCrashes crashes in a row the plugin's tools answer "unavailable"
//     until the cooldown has passed.
//  5. Close stops every plugin and kills each process group.
//
// docs/plugins.md is the operator's guide.
package subprocess
