// Package kerneltest has hand-written fakes of the kernel's contracts and
// the conformance suites every implementation must pass: TestStore for a
// kernel.Store, TestTool for a kernel.Tool.
package kerneltest
