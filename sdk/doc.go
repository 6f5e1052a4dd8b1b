// Package sdk is what a tool-plugin author imports: a plugin is a separate
// binary that serves tools to the kernel over hashicorp/go-plugin (gRPC,
// AutoMTLS, a unix socket), and the kernel runs it as a pinned, supervised
// subprocess (see plugins/subprocess and docs/plugins.md).
//
// A plugin's life:
//
//  1. The kernel verifies the binary's sha256 against the pin in
//     kernel.yaml, copies the verified bytes to a private directory and
//     executes the copy, with only the environment variables the
//     configuration allows, in its own process group.
//  2. main calls Serve with the plugin's tools. Serve takes over standard
//     output (only the handshake line reaches the kernel; everything else
//     printed goes to standard error, which the kernel logs under the
//     plugin's name) and completes go-plugin's handshake.
//  3. The kernel asks for the tools (Describe) and shows them to the model
//     as "<plugin>.<tool>". It caches the answer, keyed by the binary's
//     sha256, so a lazy plugin is not started until its first call.
//  4. Each call runs the tool's handler with arguments the kernel validated
//     against its JSON Schema (the SDK checks only that they are a JSON
//     object: a plugin links neither the kernel nor a JSON Schema library,
//     only the contract package tool). The handler may
//     report progress (Progress) and returns text (Text), a value rendered
//     as JSON (JSON), or an error; an *Error's code survives the trip, so
//     errors.Is(err, sdk.ErrNotFound) holds on the kernel's side too. A
//     panic in a handler is recovered and returned with code "panic".
//  5. The kernel stops the plugin when it exits; the plugin exits by itself
//     if the kernel dies. A crash is reported to the model with its panic
//     text and the plugin is restarted on the next call.
//
// Test a plugin with package sdktest: in-process (sdktest.Start) or as a
// real subprocess through the kernel's host (sdktest.Build, sdktest.Exec).
// sdk/README.md walks through writing, pinning and loading one.
package sdk
