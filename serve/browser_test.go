package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
  - text: "The project holds notes.txt."
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

// TestBrowserApproval drives the approvals page in headless Chromium, at a
// phone's width: before sign-in no navigation shows; signed in, the
// pending write shows under the prompt of the run that made it (the
// session's second) with the model's words and a link to the transcript
// there, its content once (as the diff, which wraps); a key without the
// approve scope sees the buttons disabled and why; approving it runs it
// to completion; the transcript formats arguments as the inbox does and
// rounds durations. Payloads in a tool argument and a tool result stay
// text. Screenshots are saved as test artifacts.
func TestBrowserApproval(t *testing.T) {
	bin := chromiumPath(t)
	r := newRig(t, rigOpts{script: browserScript})
	if err := os.WriteFile(filepath.Join(r.ws, "notes.txt"), []byte("hello\n"+xssResult+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Two keys of one tenant: both see the tenant's approvals.
	approver := r.key("approver", "team", "read", "approve", "run")
	reader := r.key("onlyreads", "team", "read")
	sid := r.newSession(approver)
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", approver, map[string]any{"prompt": "What is in this project?"})
	r.waitStatus(approver, sid, "idle")
	r.must(202, "POST", "/v1/sessions/"+sid+"/runs", approver, map[string]any{"prompt": "update the notes"})
	r.waitStatus(approver, sid, "awaiting_approval")
	ap := r.must(200, "GET", "/v1/sessions/"+sid+"/approval", approver, nil)
	atSeq := ap["context"].(map[string]any)["seq"].(float64)

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

	var diff, args, runState, pwned, transcript, atTurn, noScope string
	var injected int
	var navBeforeSignIn, diffWraps, buttonsOff bool
	var durations []string
	var shot []byte
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	err := func() error {
		// A key that may read but not approve: the card says why its
		// buttons are disabled. (A tab of its own: the key is per tab.)
		rctx, rcancel := chromedp.NewContext(ctx)
		defer rcancel()
		if err := chromedp.Do(rctx,
			chromedp.Navigate(r.url+"/"),
			chromedp.WaitVisible(chromedp.ID("key-input")),
			chromedp.SendKeys(chromedp.ID("key-input"), reader),
			chromedp.Click(chromedp.ID("signin-button")),
			chromedp.WaitVisible(css("article.approval .no-scope")),
		); err != nil {
			return err
		}
		var err error
		if noScope, err = chromedp.Run(rctx, chromedp.Text(css("article.approval .no-scope"))); err != nil {
			return err
		}
		if buttonsOff, err = chromedp.Run(rctx, chromedp.Evaluate[bool](`[...document.querySelectorAll('article.approval button')].every((b) => b.disabled)`)); err != nil {
			return err
		}
		rcancel()

		if err := chromedp.Do(ctx,
			chromedp.Navigate(r.url+"/"),
			chromedp.WaitVisible(chromedp.ID("key-input")),
		); err != nil {
			return err
		}
		// Before sign-in: neither the navigation nor "Sign out" shows.
		if navBeforeSignIn, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`getComputedStyle(document.getElementById('nav')).display !== 'none' || document.getElementById('signout').offsetParent !== null`)); err != nil {
			return err
		}
		if err := chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.ID("key-input"), approver),
			chromedp.Click(chromedp.ID("signin-button")),
			chromedp.WaitVisible(css("article.approval")),
		); err != nil {
			return err
		}
		if diff, err = chromedp.Run(ctx, chromedp.Text(css("article.approval pre.diff"))); err != nil {
			return err
		}
		// At a phone's width the diff wraps: nothing scrolls sideways.
		if diffWraps, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const p = document.querySelector('article.approval pre.diff'); return p.scrollWidth <= p.clientWidth; })()`)); err != nil {
			return err
		}
		if durations, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](`['422.248µs', '12.5ms', '1.49s', '1m2.5s', '3h0m0s'].map(fmtDuration)`)); err != nil {
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
		// The card's link opens the transcript at the call's turn.
		if err := chromedp.Do(ctx,
			chromedp.Navigate(r.url+"/#/approvals"),
			chromedp.Navigate(r.url+"/#/sessions/"+sid+"/"+fmt.Sprint(atSeq)),
			chromedp.WaitVisible(css("#transcript li.target")),
		); err != nil {
			return err
		}
		if atTurn, err = chromedp.Run(ctx, chromedp.Text(css("#transcript li.target"))); err != nil {
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
	if navBeforeSignIn {
		t.Errorf("the sign-in view shows the navigation or Sign out")
	}
	if !buttonsOff || !strings.Contains(noScope, "lacks the approve scope") {
		t.Errorf("a key without approve: buttons disabled %v, reason %q", buttonsOff, noScope)
	}
	if !strings.Contains(diff, "+safe line") || !strings.Contains(diff, "--- a/notes.txt") {
		t.Errorf("the page's diff = %q", diff)
	}
	if !diffWraps {
		t.Errorf("the diff scrolls sideways at a phone's width")
	}
	// The card's context is the run that made the call, not the
	// session's first prompt; the content shows once, as the diff.
	if !strings.Contains(args, "update the notes") || strings.Contains(args, "What is in this project?") || !strings.Contains(args, "Writing the notes.") {
		t.Errorf("the card does not show the call's run and the model's words:\n%s", args)
	}
	if n := strings.Count(args, "safe line"); n != 1 || !strings.Contains(args, "shown as the diff below") {
		t.Errorf("the written content shows %d times on the card:\n%s", n, args)
	}
	if !strings.Contains(atTurn, "Writing the notes.") {
		t.Errorf("the transcript at the call's turn = %q", atTurn)
	}
	if want := []string{"0.4 ms", "13 ms", "1.5 s", "1 min 3 s", "180 min 0 s"}; strings.Join(durations, "|") != strings.Join(want, "|") {
		t.Errorf("durations = %q, want %q", durations, want)
	}
	if strings.Contains(transcript, "µs") || !regexp.MustCompile(`read_file → ok in [0-9.]+ (ms|s)`).MatchString(transcript) {
		t.Errorf("the transcript's durations are not rounded:\n%s", transcript)
	}
	// Arguments read as in the inbox: a string's text, not JSON with \n.
	if strings.Contains(transcript, `safe line\n`) || !strings.Contains(transcript, "content") {
		t.Errorf("the transcript shows raw JSON arguments:\n%s", transcript)
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

// TestBrowserNestsChildTurns: the transcript page of a pipeline's session
// shows each step's child session under the step's result, with the
// child's own turns (its model's answer).
func TestBrowserNestsChildTurns(t *testing.T) {
	bin := chromiumPath(t)
	r := newRig(t, rigOpts{pipeline: true})
	run := r.must(202, "POST", "/v1/pipelines/review/runs", r.alice, map[string]any{"prompt": "review notes.txt"})["run"].(map[string]any)
	sid := run["session_id"].(string)
	r.waitStatus(r.alice, sid, "idle")

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	if err := chromedp.Do(ctx,
		chromedp.Navigate(r.url+"/"),
		chromedp.WaitVisible(chromedp.ID("key-input")),
		chromedp.SendKeys(chromedp.ID("key-input"), r.alice),
		chromedp.Click(chromedp.ID("signin-button")),
		chromedp.WaitVisible(chromedp.ID("nav")),
		chromedp.Navigate(r.url+"/#/sessions/"+sid),
		chromedp.WaitVisible(css("#transcript li.tool details.child li.assistant")),
	); err != nil {
		t.Fatal(err)
	}
	// Wait until all four steps' children have their turns.
	var n int
	for deadline := time.Now().Add(30 * time.Second); ; {
		var err error
		if n, err = chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#transcript li.tool details.child li.assistant').length`)); err != nil {
			t.Fatal(err)
		}
		if n >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n != 4 {
		t.Fatalf("%d children's answers nested in the transcript, want 4", n)
	}
	nested, err := chromedp.Run(ctx, chromedp.Text(css("#transcript")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"agent report", "REPORT: notes.txt is fine", "agent style", "STYLE: tidy", "agent plan", "PLAN: check notes.txt"} {
		if !strings.Contains(nested, want) {
			t.Errorf("the transcript lacks %q:\n%s", want, nested)
		}
	}
}
