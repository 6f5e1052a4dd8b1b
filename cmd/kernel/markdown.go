package main

import (
	"os"
	"regexp"
	"strings"

	"github.com/charmbracelet/glamour"
	"github.com/charmbracelet/glamour/styles"
	"github.com/muesli/termenv"
	"golang.org/x/term"
)

// Markdown on a terminal. The answer streams as deltas, and Markdown can
// only be rendered by the block: "**hel" is not yet bold, a list item may
// go on, a code fence is open until it closes. So a terminal gets the
// answer one block at a time: text is held until its block is complete (a
// blank line outside a code fence, or the end of the message), then that
// block is rendered (glamour, RATIONALE.md "Markdown on a terminal") and
// printed. Anywhere else — a pipe, a file, NO_COLOR set, TERM=dumb — the
// text streams as the model wrote it, delta by delta.

// markdownStream renders a streamed message block by block. It is used by
// one goroutine (the renderer, under its lock).
type markdownStream struct {
	tr  *glamour.TermRenderer
	buf strings.Builder // text of blocks not yet complete
}

// markdownStyleEnv names the variable that picks one of glamour's
// standard styles (dark, light, notty, ascii, dracula, pink, tokyo-night);
// default dark. The style is never detected by asking the terminal for
// its background: that query's answer arrives on stdin, which chat reads.
const markdownStyleEnv = "KERNEL_MARKDOWN_STYLE"

// newMarkdownStream returns a stream rendering for a terminal of width
// columns, or nil when w is not a terminal, NO_COLOR is set or TERM is
// dumb: then the text is written as it comes.
func newMarkdownStream(w any) *markdownStream {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return nil
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil || width <= 0 {
		width = 80
	}
	style := styles.DarkStyle
	if s := os.Getenv(markdownStyleEnv); s != "" {
		if _, ok := styles.DefaultStyles[s]; ok {
			style = s
		}
	}
	tr, err := glamour.NewTermRenderer(
		glamour.WithStandardStyle(style),
		glamour.WithWordWrap(min(width, 120)),
		glamour.WithColorProfile(termenv.EnvColorProfile()),
	)
	if err != nil {
		return nil
	}
	return &markdownStream{tr: tr}
}

// write adds streamed text and returns the rendered blocks it completed.
func (m *markdownStream) write(text string) string {
	m.buf.WriteString(text)
	s := m.buf.String()
	end := completeBlocks(s)
	if end == 0 {
		return ""
	}
	m.buf.Reset()
	m.buf.WriteString(s[end:])
	return m.render(s[:end])
}

// flush returns the rest of the message, rendered: the message ended.
func (m *markdownStream) flush() string {
	s := m.buf.String()
	m.buf.Reset()
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return m.render(s)
}

// pending reports whether text is held that is not shown yet.
func (m *markdownStream) pending() bool { return m != nil && m.buf.Len() > 0 }

// reset drops the text held: the message it belonged to was discarded (a
// retry after a partial answer).
func (m *markdownStream) reset() { m.buf.Reset() }

// render renders complete blocks: one blank line before them, none after,
// so that blocks rendered one by one read as one document.
func (m *markdownStream) render(s string) string {
	out, err := m.tr.Render(s)
	if err != nil {
		return s // never lose the model's text
	}
	// glamour pads every line to the wrap width with styled spaces: they
	// cost bytes, and a copied line would carry them.
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if pad := trailingPad.FindStringIndex(l); pad != nil {
			lines[i] = l[:pad[0]]
			if lines[i] != "" {
				lines[i] += ansiReset
			}
		}
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return ""
	}
	return "\n" + strings.Join(lines, "\n") + "\n"
}

// trailingPad matches the styled spaces glamour ends a line with, and
// ansiReset ends the styles they would have ended.
var trailingPad = regexp.MustCompile(`(?:\x1b\[[0-9;]*m| )+$`)

const ansiReset = "\x1b[0m"

// completeBlocks returns the length of the prefix of s that holds only
// complete Markdown blocks: up to the last blank line that is not inside
// a fenced code block. A fence opens with ``` or ~~~ (after at most
// three spaces) and closes with a line of the same character at least
// as long.
func completeBlocks(s string) int {
	end, fence := 0, ""
	for off := 0; off < len(s); {
		nl := strings.IndexByte(s[off:], '\n')
		if nl < 0 {
			break // the last line is still streaming
		}
		line := s[off : off+nl]
		off += nl + 1
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		switch {
		case fence != "":
			if indent <= 3 && strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" \t") == "" {
				fence = ""
			}
		case indent <= 3 && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			for len(fence) < len(trimmed) && trimmed[len(fence)] == fence[0] {
				fence += fence[:1]
			}
		case strings.TrimSpace(line) == "":
			end = off
		}
	}
	return end
}
