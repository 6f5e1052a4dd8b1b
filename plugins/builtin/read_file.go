package builtin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentkernel/agentkernel/kernel"
)

// Read limits of read_file.
const (
	// readDefaultLines is how many lines read_file shows without a limit.
	readDefaultLines = 2000
	// readMaxLines is the largest limit a call may ask for.
	readMaxLines = 10000
	// maxLineBytes caps one displayed line of read_file and search.
	maxLineBytes = 2000
)

// ReadFile is the read_file tool: it shows a text file of the workspace
// with line numbers, a window of lines at a time. It is safe for
// concurrent use.
type ReadFile struct{ ws *workspace }

type readFileArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

// Spec describes read_file.
func (t *ReadFile) Spec() kernel.ToolSpec {
	return kernel.ToolSpec{
		Name: NameReadFile,
		Description: "Read a text file in the workspace. Returns the lines prefixed with their 1-based line numbers " +
			"(number, tab, text). Long files are shown a window at a time: the output ends with a marker saying how many " +
			"lines were left out and which offset to pass to read the rest. Binary files are refused.",
		Schema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File path relative to the workspace root, e.g. \"src/main.go\"."},
    "offset": {"type": "integer", "minimum": 1, "description": "First line to show, 1-based. Default 1."},
    "limit": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Number of lines to show. Default %d. The output is also capped at %d bytes."}
  },
  "required": ["path"],
  "additionalProperties": false
}`, readMaxLines, readDefaultLines, t.ws.maxRead)),
		Tier:   kernel.TierReadOnly,
		Tags:   []string{"fs", "read"},
		Source: Source,
	}
}

// Call reads the file.
func (t *ReadFile) Call(ctx context.Context, raw json.RawMessage) (kernel.Result, error) {
	var a readFileArgs
	if err := decodeArgs(raw, &a); err != nil {
		return kernel.Result{}, err
	}
	switch {
	case a.Path == "":
		return kernel.Result{}, invalidArg("path", "is required")
	case a.Offset < 0:
		return kernel.Result{}, invalidArg("offset", "must be >= 1")
	case a.Limit < 0 || a.Limit > readMaxLines:
		return kernel.Result{}, invalidArg("limit", "must be between 1 and %d", readMaxLines)
	}
	if a.Offset == 0 {
		a.Offset = 1
	}
	if a.Limit == 0 {
		a.Limit = readDefaultLines
	}
	p, err := clean(a.Path)
	if err != nil {
		return kernel.Result{}, err
	}
	f, fi, err := t.ws.openRegular("read", p)
	if err != nil {
		return kernel.Result{}, err
	}
	defer f.Close()

	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(sniffLen)
	if looksBinary(head) {
		return kernel.Result{}, fmt.Errorf("read %q: it looks like a binary file (%s, contains NUL bytes); read_file only shows text", p, humanSize(fi.Size()))
	}
	if fi.Size() == 0 {
		return kernel.Result{Content: fmt.Sprintf("[read_file: %q is empty]", p)}, nil
	}

	lr := lineReader{ctx: ctx, br: br, max: min(maxLineBytes, t.ws.maxRead), countCap: int64(t.ws.maxFile)}
	var out strings.Builder
	var entry []byte
	line, shown := 0, 0
	reason := ""
	for {
		if line%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return kernel.Result{}, fmt.Errorf("read %q: %w", p, err)
			}
		}
		if line+1 >= a.Offset && shown == a.Limit {
			reason = fmt.Sprintf("limit of %d lines", a.Limit)
			break
		}
		text, cut, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return kernel.Result{}, fmt.Errorf("read %q: %w", p, cerr)
			}
			return kernel.Result{}, fsError("read", p, err)
		}
		line++
		if line < a.Offset {
			continue
		}
		entry = appendNumbered(entry[:0], line, text, cut)
		if shown > 0 && out.Len()+len(entry) > t.ws.maxRead {
			lr.unread = true
			line--
			reason = fmt.Sprintf("output cap of %d bytes", t.ws.maxRead)
			break
		}
		out.Write(entry)
		shown++
	}
	if shown == 0 {
		return kernel.Result{}, fmt.Errorf("read %q: offset %d is past the end of the file, which has %d lines", p, a.Offset, line)
	}
	if reason == "" {
		return kernel.Result{Content: out.String()}, nil
	}
	rest, err := lr.countRest(ctx)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return kernel.Result{}, fmt.Errorf("read %q: %w", p, cerr)
		}
		return kernel.Result{}, fsError("read", p, err)
	}
	if rest == 0 {
		return kernel.Result{Content: out.String()}, nil
	}
	last := a.Offset + shown - 1
	if rest < 0 { // not counted to the end: the file is larger than the count cap
		fmt.Fprintf(&out, "[read_file: showed lines %d-%d; the file goes on (more than %s left, lines not counted; reached the %s). Call read_file with offset=%d to continue.]",
			a.Offset, last, humanSize(int64(t.ws.maxFile)), reason, last+1)
		return kernel.Result{Content: out.String()}, nil
	}
	fmt.Fprintf(&out, "[read_file: showed lines %d-%d of %d; %d more lines not shown (reached the %s). Call read_file with offset=%d to continue.]",
		a.Offset, last, last+rest, rest, reason, last+1)
	return kernel.Result{Content: out.String()}, nil
}

// appendNumbered appends one displayed line: the number right-aligned in
// six columns, a tab, the text (invalid UTF-8 replaced) and the cut marker.
func appendNumbered(b []byte, n int, text []byte, cut int) []byte {
	var num [20]byte
	d := strconv.AppendInt(num[:0], int64(n), 10)
	for range 6 - len(d) {
		b = append(b, ' ')
	}
	b = append(append(b, d...), '\t')
	if utf8.Valid(text) {
		b = append(b, text...)
	} else {
		b = append(b, validText(text)...)
	}
	if cut > 0 {
		b = fmt.Appendf(b, " … [line truncated: %d more bytes]", cut)
	}
	return append(b, '\n')
}

// lineReader reads lines of at most max bytes, counting what it cuts.
type lineReader struct {
	// ctx is checked for every chunk read, so a single huge line does not
	// outlive the call's deadline.
	ctx context.Context
	br  *bufio.Reader
	max int
	// countCap is how many bytes countRest reads before giving up.
	countCap int64
	buf      []byte
	// unread makes the line last returned count again in countRest.
	unread bool
}

// next returns the next line without its line ending, at most max bytes of
// it, and how many bytes were cut. It returns io.EOF after the last line.
func (lr *lineReader) next() (line []byte, cut int, err error) {
	lr.buf = lr.buf[:0]
	started := false
	for {
		if lr.ctx != nil {
			if err := lr.ctx.Err(); err != nil {
				return nil, 0, err
			}
		}
		chunk, err := lr.br.ReadSlice('\n')
		if len(chunk) > 0 {
			started = true
		}
		end := err == nil
		if end {
			chunk = chunk[:len(chunk)-1]
		}
		room := lr.max - len(lr.buf)
		if room >= len(chunk) {
			lr.buf = append(lr.buf, chunk...)
		} else {
			lr.buf = append(lr.buf, chunk[:max(room, 0)]...)
			cut += len(chunk) - max(room, 0)
		}
		switch {
		case end:
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if !started {
				return nil, 0, io.EOF
			}
		default:
			return nil, 0, err
		}
		if cut == 0 {
			lr.buf = bytes.TrimSuffix(lr.buf, []byte("\r"))
		}
		return lr.buf, cut, nil
	}
}

// countRest counts the lines left after the last one next returned (plus
// that one if unread is set), without keeping them. It reads at most
// countCap bytes (when set) and returns -1 when the file goes on beyond.
func (lr *lineReader) countRest(ctx context.Context) (int, error) {
	var read int64
	n := 0
	if lr.unread {
		n = 1
	}
	buf := make([]byte, 64<<10)
	var last byte = '\n'
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if lr.countCap > 0 && read >= lr.countCap {
			return -1, nil
		}
		k, err := lr.br.Read(buf)
		read += int64(k)
		if k > 0 {
			n += bytes.Count(buf[:k], []byte("\n"))
			last = buf[k-1]
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if last != '\n' {
		n++ // a last line without a newline
	}
	return n, nil
}

var _ kernel.Tool = (*ReadFile)(nil)
