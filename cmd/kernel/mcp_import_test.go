package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPImportGolden: what `kernel mcp import` makes of a Claude Desktop
// file: an npx server with its cache, HTTPS and the directories its
// arguments name (the workspace as {workspace}); a credential in env or a
// header never copied into the configuration; an HTTP server's ${VAR} as
// ${env:VAR}; a name the kernel does not take renamed; an SSE server and a
// command whose variable is unset skipped with why, and an entry of the
// wrong JSON type named by its path in the file; tiers left to the
// operator, said so.
func TestMCPImportGolden(t *testing.T) {
	dir := t.TempDir()
	ws, data := filepath.Join(dir, "ws"), filepath.Join(dir, "data")
	for _, d := range []string{ws, data} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	src, err := os.ReadFile("testdata/mcp-import/claude_desktop_config.json")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "claude_desktop_config.json")
	writeFiles(t, dir, map[string]string{
		"claude_desktop_config.json": strings.NewReplacer("WORKSPACE", ws, "DATA", data).Replace(string(src)),
		"kernel.yaml":                "workspace: " + ws + "\n",
		"data/gh.js":                 "", "data/slack.js": "",
	})
	t.Setenv("NOTES_BIN", "")
	os.Unsetenv("NOTES_BIN")
	t.Setenv("HOME", filepath.Join(dir, "home")) // where uvx's missing cache is made
	out, errOut, err := cli(t, "mcp", "import", file, "--config", filepath.Join(dir, "kernel.yaml"))
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	got := strings.ReplaceAll("stdout:\n"+out+"stderr:\n"+errOut, dir, "DIR")
	golden(t, "mcp-import/claude_desktop_config.golden", got)
	for _, secret := range importSecrets {
		if strings.Contains(got, secret) {
			t.Errorf("a credential from the file (%s) reached the output:\n%s", secret, got)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "home", ".cache", "uv")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("uvx's missing cache was not created 0700 for its grant: %v, %v", fi, err)
	}
}

// importSecrets are the credentials in testdata/mcp-import's file.
var importSecrets = []string{
	"ghp_not_a_real_token", "abc123", "ghp_R8xk2LmQ9vT4wZ7pN3sYc6bJ1hF5dG0aE2uK", "sk-live-7f3a9c2e81b04d6fa5e2",
	"xoxb-2048576813-4096153062417-Qm7sLx2RkV9pWn4TbZ8cYe3D", "q9Zr4Tk7Wm2Xp8Lv", "Yh3Nc6Bd9Fs1Gj5K",
}

// TestMCPImportKeepsSecretsOut is the attack of issue 36's finding 5: an
// MCP client's file passes credentials as arguments (--token ghp_…,
// --api-key=…, a Slack token on its own) and in a URL's query
// (?api_key=…, ?accessToken=…). After `kernel mcp import --write`, the
// kernel.yaml holds none of them, every one is a ${env:NAME} the import
// told the operator to export, and the file loads; with the variables
// exported, the kernel gives the server the values (the argv the kernel
// would start it with).
func TestMCPImportKeepsSecretsOut(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("testdata/mcp-import/claude_desktop_config.json")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{
		"claude_desktop_config.json": strings.NewReplacer("WORKSPACE", dir, "DATA", data).Replace(string(src)),
		"data/gh.js":                 "", "data/slack.js": "",
		"kernel.yaml": "# mine\nworkspace: " + dir + "\n",
	})
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("NOTES_BIN", "/bin/true")
	conf := filepath.Join(dir, "kernel.yaml")
	_, errOut, err := cli(t, "mcp", "import", filepath.Join(dir, "claude_desktop_config.json"), "--write", conf)
	if err != nil {
		t.Fatalf("import: %v\n%s", err, errOut)
	}
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range importSecrets {
		if strings.Contains(string(b), secret) || strings.Contains(errOut, secret) {
			t.Errorf("the credential %s was copied:\n%s\n%s", secret, b, errOut)
		}
	}
	exports := map[string]string{
		"MCP_GH_CLI_TOKEN": "ghp_R8xk2LmQ9vT4wZ7pN3sYc6bJ1hF5dG0aE2uK", "MCP_GH_CLI_API_KEY": "sk-live-7f3a9c2e81b04d6fa5e2",
		"MCP_SLACK_SLACK_TOKEN": "xoxb-2048576813-4096153062417-Qm7sLx2RkV9pWn4TbZ8cYe3D",
		"MCP_SEARCH_API_KEY":    "q9Zr4Tk7Wm2Xp8Lv", "MCP_SEARCH_ACCESS_TOKEN": "Yh3Nc6Bd9Fs1Gj5K",
	}
	for name := range exports {
		if !strings.Contains(string(b), "${env:"+name+"}") || !strings.Contains(errOut, "export "+name+" with its value") {
			t.Errorf("no ${env:%s} in kernel.yaml, or no line telling to export it:\n%s\n%s", name, b, errOut)
		}
	}
	for name, v := range exports {
		t.Setenv(name, v)
	}
	t.Setenv("GH_ORG", "acme")
	cfg, err := loadConfig(conf)
	if err != nil {
		t.Fatalf("the imported kernel.yaml does not load: %v", err)
	}
	entries, err := cfg.mcpEntries()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.err != nil {
			t.Errorf("server %s: %v", e.sc.Name, e.err)
		}
		if e.sc.Name != "gh-cli" {
			continue
		}
		argv, err := e.sc.Argv()
		want := []string{"node", filepath.Join(data, "gh.js"), "--token", exports["MCP_GH_CLI_TOKEN"], "--api-key=" + exports["MCP_GH_CLI_API_KEY"], "--org", "acme", "--timeout", "30"}
		if err != nil || strings.Join(argv, " ") != strings.Join(want, " ") {
			t.Errorf("the server would start as %q (%v), want %q", argv, err, want)
		}
	}
}

// TestMCPImportRuns: a .mcp.json naming the npm filesystem server, as its
// README says, imported into a kernel.yaml with --write, starts and its
// tools work; the file's own comments and settings are still there.
func TestMCPImportRuns(t *testing.T) {
	root := artifacts(t, npmFilesystemServer)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed (make test installs it with the npm server): %v", err)
	}
	dir, ws := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"notes/a.txt": "imported from .mcp.json and read\n"})
	conf := filepath.Join(dir, "kernel.yaml")
	writeFiles(t, dir, map[string]string{
		".mcp.json": `{"mcpServers": {"filesystem": {"command": "node", "args": ["` + filepath.Join(root, npmFilesystemServer) + `", "` + ws + `"]}}}`,
		"script.yaml": "steps:\n" +
			"  - tool_calls:\n      - {name: filesystem.read_text_file, args: {path: " + filepath.Join(ws, "notes", "a.txt") + "}}\n" +
			"  - text: done\n",
		"kernel.yaml": "# the operator's own file\nmodel: {provider: scripted, name: m, script: script.yaml}\nworkspace: " + ws + "\n" +
			"tools:\n  builtin: {enable: [read_file]}  # read-only built-ins\n",
	})
	_, errOut, err := cli(t, "mcp", "import", filepath.Join(dir, ".mcp.json"), "--write", conf)
	if err != nil {
		t.Fatalf("import: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "added filesystem to tools.mcp") || !strings.Contains(errOut, "tiers are yours to set") {
		t.Errorf("import does not say what it added and that tiers are the operator's:\n%s", errOut)
	}
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# the operator's own file", "# read-only built-ins", "command: [node, " + filepath.Join(root, npmFilesystemServer) + ", '{workspace}']"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("kernel.yaml lacks %q:\n%s", want, b)
		}
	}
	if fi, err := os.Stat(conf); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("kernel.yaml mode %v, %v; want 0600", fi.Mode(), err)
	}
	out := runAndShow(t, conf, "read the notes")
	if strings.Contains(out, "✗") || !strings.Contains(out, "imported from .mcp.json and read") {
		t.Fatalf("the imported server's tool did not work:\n%s", out)
	}
	// A second import of the same servers is refused, the file unchanged.
	if _, errOut, err := cli(t, "mcp", "import", filepath.Join(dir, ".mcp.json"), "--write", conf); err == nil || !strings.Contains(errOut+err.Error(), "already has MCP servers named filesystem") {
		t.Errorf("a second import: %v\n%s", err, errOut)
	}
	if after, _ := os.ReadFile(conf); string(after) != string(b) {
		t.Errorf("a refused import changed the file:\n%s", after)
	}
}

func TestInsertMCP(t *testing.T) {
	items := "- name: new\n  url: http://127.0.0.1:1/mcp\n"
	for _, tc := range []struct{ name, src, want string }{
		{"empty file", "", "tools:\n  mcp:\n    - name: new\n      url: http://127.0.0.1:1/mcp\n"},
		{"no tools", "workspace: /w\n\n# comment of model\nmodel: {name: m}\n",
			"workspace: /w\n\n# comment of model\nmodel: {name: m}\ntools:\n  mcp:\n    - name: new\n      url: http://127.0.0.1:1/mcp\n"},
		{"tools without mcp", "tools:\n    builtin:\n        enable: [read_file]\n\n# next\nworkspace: /w\n",
			"tools:\n    builtin:\n        enable: [read_file]\n    mcp:\n      - name: new\n        url: http://127.0.0.1:1/mcp\n\n# next\nworkspace: /w\n"},
		{"mcp with items", "tools:\n  mcp:\n  - name: old   # keep me\n    url: http://127.0.0.1:2/mcp\n  builtin: {enable: []}\n",
			"tools:\n  mcp:\n  - name: old   # keep me\n    url: http://127.0.0.1:2/mcp\n  - name: new\n    url: http://127.0.0.1:1/mcp\n  builtin: {enable: []}\n"},
		{"mcp empty", "tools:\n  mcp:\n", "tools:\n  mcp:\n    - name: new\n      url: http://127.0.0.1:1/mcp\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := insertMCP([]byte(tc.src), items)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", out, tc.want)
			}
		})
	}
	if _, _, err := insertMCP([]byte("tools: {mcp: []}\n"), items); err == nil {
		t.Error("flow style was edited")
	}
}
