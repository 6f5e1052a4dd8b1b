package wasm

import "os"

// oDSYNC: FreeBSD has no O_DSYNC; O_SYNC (data and metadata) is the
// stronger promise a guest's O_DSYNC open gets there.
const oDSYNC = os.O_SYNC
