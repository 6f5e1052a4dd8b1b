package subprocess

import (
	"context"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/agentkernel/agentkernel/sdk"
)

// TestDeadlineMetadataNeverEarly: the absolute deadline sent to a plugin
// is rounded up to the millisecond, so a plugin never ends a call before
// the kernel's own deadline (a hook answering at its deadline then
// answers late, and fails closed, instead of a moment early).
func TestDeadlineMetadataNeverEarly(t *testing.T) {
	base := time.Now().Truncate(time.Millisecond).Add(time.Hour)
	for _, off := range []time.Duration{0, time.Nanosecond, 999 * time.Microsecond, 999_999} {
		dl := base.Add(off)
		ctx, cancel := context.WithDeadline(context.Background(), dl)
		md, _ := metadata.FromOutgoingContext(withDeadline(ctx))
		cancel()
		v := md.Get(sdk.DeadlineMetadata)
		if len(v) != 1 {
			t.Fatalf("metadata %v", md)
		}
		ms, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if sent := time.UnixMilli(ms); sent.Before(dl) || sent.Sub(dl) >= time.Millisecond {
			t.Errorf("deadline %v sent as %v: want the first millisecond at or after it", dl, sent)
		}
	}
}
