package badger

// noSocket, set by tests, makes a read-only Open skip the writer's socket
// and read a snapshot (the path a crashed writer's store takes).
var noSocket bool

// beforeBatch, set by tests, runs when a leader has taken its batch of
// steps, before it commits them (group commit, commit.go).
var beforeBatch func(n int)
