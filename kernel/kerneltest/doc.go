// Package kerneltest has hand-written fakes of the kernel's contracts and
// the conformance suites every implementation must pass: TestStore for a
// kernel.Store, TestTool for a kernel.Tool; and NewCall, a validated call
// built outside the loop for tests of hooks and policies.
package kerneltest
