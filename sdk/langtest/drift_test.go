package langtest

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/agentkernel/agentkernel/internal/config/names"
	_ "github.com/agentkernel/agentkernel/plugins/subprocess" // registers go-plugin's and gRPC health's descriptors
)

// TestPythonProtocolMatchesGo: the Python SDK's committed *_pb2.py (made by
// `make proto`) describe the same wire protocol as the Go code: the tool
// protocol (sdk/pluginpb: Tools and Hooks), and the go-plugin and gRPC health
// services the host calls (which the Go host links). A change to
// plugin.proto without `make proto` fails here. (The TypeScript SDK reads
// the .proto files when it is built.)
func TestPythonProtocolMatchesGo(t *testing.T) {
	needPython(t)
	cmd := exec.Command(python, "-B", "-c", `
import base64
from agentkernel_plugin._proto import plugin_pb2, goplugin_pb2, health_pb2
for m in (plugin_pb2, goplugin_pb2, health_pb2):
    print(base64.b64encode(m.DESCRIPTOR.serialized_pb).decode())
`)
	cmd.Dir = filepath.Join(root, "sdk/python")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var fds descriptorpb.FileDescriptorSet
	for _, line := range strings.Fields(string(out)) {
		b, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			t.Fatal(err)
		}
		var fd descriptorpb.FileDescriptorProto
		if err := proto.Unmarshal(b, &fd); err != nil {
			t.Fatal(err)
		}
		fds.File = append(fds.File, &fd)
	}
	files, err := protodesc.NewFiles(&fds)
	if err != nil {
		t.Fatal(err)
	}
	services := 0
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			py := fd.Services().Get(i)
			d, err := protoregistry.GlobalFiles.FindDescriptorByName(py.FullName())
			if err != nil {
				t.Errorf("%s: the Python SDK serves %s, which the Go side does not know: %v", fd.Path(), py.FullName(), err)
				continue
			}
			services++
			if diff := sameService(py, d.(protoreflect.ServiceDescriptor)); diff != "" {
				t.Errorf("%s: %s (run `make proto`)", fd.Path(), diff)
			}
		}
		// Every message of the tool protocol, used by a service or not.
		if fd.Package() == "agentkernel.plugin.v1" {
			for i := 0; i < fd.Messages().Len(); i++ {
				py := fd.Messages().Get(i)
				d, err := protoregistry.GlobalFiles.FindDescriptorByName(py.FullName())
				if err != nil {
					t.Errorf("message %s is not in the Go code", py.FullName())
					continue
				}
				if diff := sameMessage(py, d.(protoreflect.MessageDescriptor), 0); diff != "" {
					t.Errorf("%s (run `make proto`)", diff)
				}
			}
		}
		return true
	})
	if services != 6 {
		t.Fatalf("compared %d services, want 6 (Tools, Hooks, Health, GRPCController, GRPCStdio, GRPCBroker)", services)
	}
}

func sameService(a, b protoreflect.ServiceDescriptor) string {
	if a.Methods().Len() < b.Methods().Len() && a.ParentFile().Package() == "agentkernel.plugin.v1" {
		return fmt.Sprintf("service %s has %d methods, the Go one %d", a.FullName(), a.Methods().Len(), b.Methods().Len())
	}
	for i := 0; i < a.Methods().Len(); i++ {
		am := a.Methods().Get(i)
		bm := b.Methods().ByName(am.Name())
		switch {
		case bm == nil:
			return fmt.Sprintf("method %s is not in the Go service", am.FullName())
		case am.IsStreamingClient() != bm.IsStreamingClient() || am.IsStreamingServer() != bm.IsStreamingServer():
			return fmt.Sprintf("method %s streams differently", am.FullName())
		}
		if d := sameMessage(am.Input(), bm.Input(), 0); d != "" {
			return string(am.FullName()) + " input: " + d
		}
		if d := sameMessage(am.Output(), bm.Output(), 0); d != "" {
			return string(am.FullName()) + " output: " + d
		}
	}
	return ""
}

// sameMessage compares what the wire sees: field numbers, names, kinds,
// cardinalities and, inside, the same for messages and enums.
func sameMessage(a, b protoreflect.MessageDescriptor, depth int) string {
	if depth > 8 {
		return ""
	}
	if a.Fields().Len() != b.Fields().Len() {
		return fmt.Sprintf("message %s has %d fields, %s %d", a.FullName(), a.Fields().Len(), b.FullName(), b.Fields().Len())
	}
	for i := 0; i < a.Fields().Len(); i++ {
		af := a.Fields().Get(i)
		bf := b.Fields().ByNumber(af.Number())
		switch {
		case bf == nil:
			return fmt.Sprintf("field %s (%d) is not in %s", af.FullName(), af.Number(), b.FullName())
		case af.Name() != bf.Name() || af.Kind() != bf.Kind() || af.Cardinality() != bf.Cardinality() ||
			(af.ContainingOneof() == nil) != (bf.ContainingOneof() == nil):
			return fmt.Sprintf("field %s differs from %s", af.FullName(), bf.FullName())
		case af.Kind() == protoreflect.MessageKind:
			if d := sameMessage(af.Message(), bf.Message(), depth+1); d != "" {
				return d
			}
		case af.Kind() == protoreflect.EnumKind:
			ae, be := af.Enum().Values(), bf.Enum().Values()
			for j := 0; j < ae.Len(); j++ {
				if bv := be.ByNumber(ae.Get(j).Number()); bv == nil || bv.Name() != ae.Get(j).Name() {
					return fmt.Sprintf("enum value %s differs", ae.Get(j).FullName())
				}
			}
		}
	}
	return ""
}

// TestSDKRulesMatchTheKernel: the TypeScript and Python SDKs check a
// tool's name with the kernel's rule, and use the kernel's handshake
// constants (a wrong cookie or version would fail every conformance run;
// this names the file to fix).
func TestSDKRulesMatchTheKernel(t *testing.T) {
	rule := strings.TrimSuffix(strings.TrimPrefix(names.PluginToolName.Pattern(), "^"), "$")
	for _, c := range []struct{ file, want string }{
		{"sdk/typescript/src/tool.ts", rule},
		{"sdk/python/agentkernel_plugin/_tool.py", rule},
		{"sdk/typescript/src/protocol.ts", `"7c0b3f4e-agentkernel-tools"`},
		{"sdk/python/agentkernel_plugin/_serve.py", `"7c0b3f4e-agentkernel-tools"`},
		{"sdk/typescript/src/protocol.ts", "ProtocolVersion = 1;"},
		{"sdk/python/agentkernel_plugin/_serve.py", "PROTOCOL_VERSION = 1\n"},
	} {
		b, err := os.ReadFile(filepath.Join(root, c.file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), c.want) {
			t.Errorf("%s does not contain %q: keep it in line with the kernel", c.file, c.want)
		}
	}
}
