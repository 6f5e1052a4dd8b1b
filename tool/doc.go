// Package tool is the contract between the kernel and the tools it calls:
// the spec a tool declares (name, schema, tier), the result it returns, the
// progress it reports, the error codes that cross a process boundary, and
// two optional capabilities: the side-effect check of an interrupted call
// (SideEffectChecker) and the preview of a call a person is asked to
// approve (Previewer).
//
// Both the kernel and the Go plugin SDK (package sdk) import it, and it imports
// nothing but the standard library, so a plugin binary links neither the
// kernel nor a JSON Schema library: the kernel validates every call's
// arguments against the tool's schema before the tool sees them.
//
// The kernel re-exports these names (kernel.ToolSpec is tool.Spec,
// kernel.Result is tool.Result, ...), so code written against the kernel
// keeps working unchanged. Why the plugin side does not validate arguments
// itself: RATIONALE.md, "The tool contract package and one schema set-up".
package tool
