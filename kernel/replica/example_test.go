package replica_test

import (
	"encoding/json"
	"fmt"

	"github.com/agentkernel/agentkernel/kernel/replica"
)

// A notice is a small JSON object: what changed, and where. Replicas send
// it with every change the others may be waiting for; it only wakes them,
// they read the change from the store.
func ExampleNotice() {
	b, _ := json.Marshal(replica.Notice{Kind: replica.NoticeCancel, Run: "run_06h1f0"})
	fmt.Println(string(b))
	var n replica.Notice
	json.Unmarshal([]byte(`{"k":"events","s":"06h1ez","q":42}`), &n)
	fmt.Println(n.Kind, n.Session, n.Seq)
	// Output:
	// {"k":"cancel","r":"run_06h1f0"}
	// events 06h1ez 42
}
