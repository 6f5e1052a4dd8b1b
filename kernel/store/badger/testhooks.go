package badger

// noSocket, set by tests, makes a read-only Open skip the writer's socket
// and read a snapshot (the path a crashed writer's store takes).
var noSocket bool
