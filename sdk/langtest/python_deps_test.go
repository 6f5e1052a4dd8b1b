package langtest

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestPythonSDKNamesTheInterpreter: a Python that does not see Debian's
// grpcio, protobuf and cryptography (pyenv's, a virtual environment's, here
// Debian's own without its site packages, -S) gets, instead of a bare
// "No module named 'grpc'", a message naming the interpreter, what it
// cannot import and the packages to install.
func TestPythonSDKNamesTheInterpreter(t *testing.T) {
	needPython(t)
	cmd := exec.Command(python, "-S", "-c", "import agentkernel_plugin")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "sdk/python"), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the SDK imported without its dependencies:\n%s", out)
	}
	i := strings.Index(string(out), "ImportError: ")
	if i < 0 {
		t.Fatalf("no ImportError:\n%s", out)
	}
	msg := regexp.MustCompile(`\(Python [0-9.]+[^)]*\)`).ReplaceAllString(string(out[i:]), "(Python VERSION)")
	testutil.Golden(t, filepath.Join("testdata", "python-missing-dependencies.golden"), msg, *update)
}
