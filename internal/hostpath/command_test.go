package hostpath

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestCommandPaths: what a command line runs, looked for through shell
// wrappers, interpreters and their inline code; a script that cannot be
// resolved is an error naming why.
func TestCommandPaths(t *testing.T) {
	const ws = "/ws"
	for _, tc := range []struct {
		name string
		argv []string
		dir  string
		want []string // must be among the paths
		not  []string // must not be
		err  string   // a ScriptError saying this
	}{
		{"the issue's wrapper", []string{"sh", "-c", "exec python3 /ws/srv.py"}, "", []string{"/ws/srv.py"}, nil, ""},
		{"cd then a relative script", []string{"sh", "-c", "cd /ws && python3 srv.py --port 1"}, "", []string{"/ws/srv.py"}, nil, ""},
		{"bash -lc, node", []string{"bash", "-lc", "node /ws/server.js --port 3"}, "", []string{"/ws/server.js"}, nil, ""},
		{"relative to the server's directory", []string{"sh", "-c", "python3 srv.py"}, ws, []string{"/ws/srv.py"}, nil, ""},
		{"input redirection", []string{"sh", "-c", "sh < /ws/x.sh"}, "", []string{"/ws/x.sh"}, nil, ""},
		{"sourced and run", []string{"sh", "-c", ". /ws/env.sh; exec /ws/bin/srv"}, "", []string{"/ws/env.sh", "/ws/bin/srv"}, nil, ""},
		{"env wrapper", []string{"env", "FOO=1", "sh", "-c", "python3 /ws/a.py"}, "", []string{"/ws/a.py"}, nil, ""},
		{"nested script", []string{"sh", "-c", "sh -c 'python3 /ws/inner.py'"}, "", []string{"/ws/inner.py"}, nil, ""},
		{"double quotes", []string{"sh", "-c", `python3 "/ws/with space.py"`}, "", []string{"/ws/with space.py"}, nil, ""},
		{"python inline code", []string{"python3", "-c", "import runpy; runpy.run_path('/ws/srv.py')"}, "", []string{"/ws/srv.py"}, nil, ""},
		{"node inline code", []string{"node", "-e", `require("./lib/x.js")`}, ws, []string{"/ws/lib/x.js"}, nil, ""},
		{"python -m", []string{"python3", "-m", "srvmod"}, ws, []string{"/ws/srvmod.py", "/ws/srvmod"}, nil, ""},
		{"a script not there yet", []string{"node", "/ws/missing.js"}, "", []string{"/ws/missing.js"}, nil, ""},
		{"node --require", []string{"node", "--require", "./hook.js", "/srv/main.js"}, ws, []string{"/ws/hook.js", "/srv/main.js"}, nil, ""},
		{"output redirection is data", []string{"sh", "-c", "echo hi > /ws/log 2>&1"}, "", nil, []string{"/ws/log"}, ""},
		{"a package name and a data directory", []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/ws"}, ws, nil, []string{"/ws", "/ws/@modelcontextprotocol/server-filesystem"}, ""},
		{"test brackets are not a glob", []string{"sh", "-c", "[ -f /etc/hosts ] && exec /srv/run"}, "", []string{"/srv/run"}, nil, ""},
		{"a variable", []string{"sh", "-c", "python3 $HOME/srv.py"}, "", nil, nil, "$HOME"},
		{"a variable in double quotes", []string{"sh", "-c", `python3 "${WS}/srv.py"`}, "", nil, nil, "${WS}"},
		{"command substitution", []string{"sh", "-c", "python3 `which srv`"}, "", nil, nil, "expands `"},
		{"$( )", []string{"bash", "-c", "exec $(cat /ws/cmd)"}, "", nil, nil, "$("},
		{"a glob", []string{"sh", "-c", "python3 /ws/*.py"}, "", nil, nil, "glob"},
		{"a here document", []string{"sh", "-c", "python3 <<EOF\nprint(1)\nEOF"}, "", nil, nil, "here document"},
		{"eval", []string{"sh", "-c", "eval x"}, "", nil, nil, "eval"},
		{"home", []string{"sh", "-c", "python3 ~/srv.py"}, "", nil, nil, "~"},
		{"cd to a variable place", []string{"sh", "-c", "cd && python3 srv.py"}, "", nil, nil, "cd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CommandPaths(tc.argv, tc.dir)
			if tc.err != "" {
				var se *ScriptError
				if !errors.As(err, &se) || !errors.Is(err, ErrUnresolvedScript) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want a ScriptError saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("%v lacks %s", got, w)
				}
			}
			for _, n := range tc.not {
				if slices.Contains(got, n) {
					t.Errorf("%v has %s", got, n)
				}
			}
		})
	}
}

// FuzzParseScript: any script either parses or is refused; never a panic.
func FuzzParseScript(f *testing.F) {
	for _, s := range []string{"exec python3 /ws/srv.py", "cd /a && b < c > d 2>&1", "a 'b' \"c\" \\d", "x <<EOF", "[ -f x ] || y", "a$(b)", "'unclosed"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = CommandPaths([]string{"sh", "-c", s}, "/ws")
	})
}
