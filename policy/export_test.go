package policy

// FromSnapshot reports whether p was built from the test cache's snapshot
// (for the tests of package policy_test).
func FromSnapshot(p *Policy) bool { return p.snapshotSrc != nil }
