package sdk_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	"github.com/agentkernel/agentkernel/sdk"
	"github.com/agentkernel/agentkernel/sdk/pluginpb"
)

// TestKernelDeadlineIsNotACancel: the plugin reads a call late, as on a
// loaded machine, so that grpc's deadline (a duration counted from the
// read) is well after the kernel's, and the kernel cancels the stream at
// its own deadline. The handler must see that as the deadline (code
// timeout), not as a cancellation: the kernel sent its deadline as an
// absolute time (sdk.DeadlineMetadata). Without it the handler says
// cancelled. A cancel before the deadline stays a cancellation.
func TestKernelDeadlineIsNotACancel(t *testing.T) {
	seen := make(chan string, 1)
	wait := sdk.Text(sdk.Spec{Name: "wait", Tier: sdk.ReadOnly}, func(ctx context.Context, _ struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := handler(srv, &recordingStream{ServerStream: ss, seen: seen})
		return err
	}))
	if err := sdk.Register(srv, wait); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient("passthrough:///deadline",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rpc := pluginpb.NewToolsClient(conn)

	for _, tc := range []struct {
		name     string
		kernelAt time.Duration // the kernel's deadline, from now
		cancelAt time.Duration // when the kernel cancels the stream
		want     string
	}{
		{"the kernel's deadline", 200 * time.Millisecond, 200 * time.Millisecond, sdk.CodeTimeout},
		{"the kernel's cancel", time.Hour, 200 * time.Millisecond, sdk.CodeCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// grpc's own deadline is a minute away: the read was "late".
			ctx, cancelGRPC := context.WithTimeout(context.Background(), time.Minute)
			defer cancelGRPC()
			at := time.Now().Add(tc.kernelAt)
			ctx = metadata.AppendToOutgoingContext(ctx, sdk.DeadlineMetadata, strconv.FormatInt(at.UnixMilli(), 10))
			ctx, cancel := context.WithCancel(ctx)
			stream, err := rpc.Call(ctx, &pluginpb.CallRequest{Tool: "wait", Args: []byte(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			// The kernel cancels at (never before) its deadline.
			time.AfterFunc(time.Until(time.Now().Add(tc.cancelAt)), cancel)
			for {
				if _, err := stream.Recv(); err != nil {
					break
				}
			}
			select {
			case code := <-seen:
				if code != tc.want {
					t.Fatalf("the plugin ended the call as %q, want %q", code, tc.want)
				}
			case <-time.After(time.Minute):
				t.Fatal("the plugin never ended the call")
			}
		})
	}
}

// recordingStream records the error code of the result the plugin sends.
type recordingStream struct {
	grpc.ServerStream
	seen chan<- string
}

func (s *recordingStream) SendMsg(m any) error {
	if ev, ok := m.(*pluginpb.CallEvent); ok {
		if r := ev.GetResult(); r != nil {
			s.seen <- r.GetError().GetCode()
		}
	}
	return s.ServerStream.SendMsg(m)
}
