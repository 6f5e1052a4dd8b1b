package serve_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	// RATIONALE.md, "github.com/chromedp/chromedp".
	"github.com/chromedp/chromedp"
)

// The payloads a hostile model or tool could slip into the page: they
// must show up as text, run nothing and create no element.
const xssArg = `<img src=x onerror="window.__pwned='arg'"><script>window.__pwned='arg-script'</script> javascript:window.__pwned='arg-link'`
const xssResult = `<img src=y onerror="window.__pwned='result'"><script>window.__pwned='result-script'</script> <a href="javascript:window.__pwned='result-link'">click</a>`

var browserScript = `
steps:
  - text: "Reading the notes."
    tool_calls:
      - name: read_file
        args: {path: notes.txt}
  - text: "Writing the notes."
    tool_calls:
      - name: write_file
        args:
          path: notes.txt
          content: ` + jsonString("hello\nsafe line\n"+xssArg+"\n") + `
  - text: "The notes are updated."
`

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// chromiumPath finds Debian's chromium (make test installs it).
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("AGENTKERNEL_REQUIRE_ARTIFACTS") != "" {
		t.Fatal("chromium is not installed (make test installs it: apt-get install -y chromium)")
	}
	t.Skip("chromium is not installed (make test installs it)")
	return ""
}

// TestBrowserApproval drives the approvals page in headless Chromium: sign
// in, see the pending write with its diff, approve it, watch the run
// complete; then the session's transcript. Payloads in a tool argument and
// a tool result stay text. A screenshot is saved as a test artifact.
func TestBrowserApproval(t *testing.T) {
	bin := chromiumPath(t)
	r := newRig(t, rigOpts{script: browserScript})
	if err := os.WriteFile(filepath.Join(r.ws, "notes.txt"), []byte("hello\n"+xssResult+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	approver := r.key("approver", "", "read", "approve", "run")
	sid := r.newSession(approver)
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", approver, map[string]any{"prompt": "update the notes"})
	r.waitStatus(approver, sid, "awaiting_approval")

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(412, 1400), // a phone's width
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	var diff, args, runState, pwned, transcript string
	var injected int
	var shot []byte
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	err := func() error {
		if err := chromedp.Do(ctx,
			chromedp.Navigate(r.url+"/"),
			chromedp.WaitVisible(chromedp.ID("key-input")),
			chromedp.SendKeys(chromedp.ID("key-input"), approver),
			chromedp.Click(chromedp.ID("signin-button")),
			chromedp.WaitVisible(css("article.approval")),
		); err != nil {
			return err
		}
		var err error
		if diff, err = chromedp.Run(ctx, chromedp.Text(css("article.approval pre.diff"))); err != nil {
			return err
		}
		if args, err = chromedp.Run(ctx, chromedp.Text(css("article.approval"))); err != nil {
			return err
		}
		if pending, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			saveArtifact(t, "serve-approval-pending.png", pending)
		}
		if err := chromedp.Do(ctx,
			chromedp.SendKeys(css("article.approval textarea"), "looks right"),
			chromedp.Click(css("article.approval button.approve")),
			chromedp.WaitVisible(css(".run-state.done")),
		); err != nil {
			return err
		}
		if runState, err = chromedp.Run(ctx, chromedp.Text(css(".run-state"))); err != nil {
			return err
		}
		if shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100)); err != nil {
			return err
		}
		if err := chromedp.Do(ctx,
			chromedp.Navigate(r.url+"/#/sessions/"+sid),
			chromedp.WaitVisible(css("#transcript li.tool pre.result")),
			chromedp.Sleep(300*time.Millisecond),
		); err != nil {
			return err
		}
		if transcript, err = chromedp.Run(ctx, chromedp.Text(chromedp.ID("transcript"))); err != nil {
			return err
		}
		if pwned, err = chromedp.Run(ctx, chromedp.Evaluate[string](`String(window.__pwned)`)); err != nil {
			return err
		}
		injected, err = chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('img, script:not([src]), a[href^="javascript"], iframe').length`))
		return err
	}()
	if len(shot) > 0 {
		saveArtifact(t, "serve-approvals.png", shot)
	}
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	if !strings.Contains(diff, "+safe line") || !strings.Contains(diff, "--- a/notes.txt") {
		t.Errorf("the page's diff = %q", diff)
	}
	if !strings.Contains(args, "rule ask-writes: write to notes.txt") || !strings.Contains(args, xssArg) {
		t.Errorf("the approval card does not show the rule and every argument as text:\n%s", args)
	}
	if runState != "Run completed." {
		t.Errorf("run state = %q", runState)
	}
	if !strings.Contains(transcript, xssResult) || !strings.Contains(transcript, "approved by approver: looks right") && !strings.Contains(transcript, "write_file → ok") {
		t.Errorf("the transcript does not show the tool result as text:\n%s", transcript)
	}
	if pwned != "undefined" || injected != 0 {
		t.Fatalf("XSS: window.__pwned = %s, %d injected elements", pwned, injected)
	}
	s := r.must(200, "GET", "/v1/sessions/"+sid, approver, nil)
	if s["status"] != "idle" {
		t.Fatalf("session after the page approved = %v", s["status"])
	}
	b, _ := os.ReadFile(filepath.Join(r.ws, "notes.txt"))
	if !strings.Contains(string(b), "safe line") {
		t.Fatalf("notes.txt = %q: the approved write did not happen", b)
	}
}

// saveArtifact writes a test artifact into $ARTIFACTS (default
// bin/test-artifacts).
func saveArtifact(t *testing.T, name string, b []byte) {
	dir := os.Getenv("ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "bin", "test-artifacts")
	}
	if os.MkdirAll(dir, 0o755) == nil {
		p := filepath.Join(dir, name)
		if os.WriteFile(p, b, 0o644) == nil {
			t.Logf("screenshot: %s", p)
		}
	}
}
