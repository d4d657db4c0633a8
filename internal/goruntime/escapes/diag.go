// Package escapes joins the Go compiler's escape analysis with an allocation
// profile: it ranks the lines of a program that allocate the most (by bytes
// or objects) and says, for each, why the value lives on the heap.
//
// The pipeline is three steps, each usable alone:
//   - ParseDiagnostics reads the compiler's -m=2 output (Analyze runs
//     'go build -gcflags=-m=2' to get it) into Diagnostic records;
//   - Sites reads a pprof allocation profile into allocation sites, keyed
//     by the first frame in the user's code;
//   - Join ranks the sites and attaches to each a readable reason.
//
// Nothing here panics on malformed input: unparsable lines are skipped.
package escapes

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Diagnostic is one line of the compiler's -m output, with the flow
// explanation the compiler printed for it at -m=2.
type Diagnostic struct {
	File    string   `json:"file"`           // as printed, relative to the build directory when inside it ("./" removed)
	Line    int      `json:"line"`           // 1-based
	Col     int      `json:"col"`            // 1-based
	Message string   `json:"message"`        // "moved to heap: p", "n escapes to heap", "leaking param: s", ...
	Func    string   `json:"func,omitempty"` // the function named by the explanation's header, if any
	Flow    []string `json:"flow,omitempty"` // the explanation lines, trimmed: "flow: ~r0 ← &p:", "from &p (address-of) at ./main.go:19:9"
}

// Kind classifies a diagnostic.
type Kind int

// The kinds of diagnostics.
const (
	KindOther    Kind = iota // inlining decisions and everything else
	KindMoved                // "moved to heap: x"
	KindEscapes              // "x escapes to heap"
	KindNoEscape             // "x does not escape"
	KindLeak                 // "leaking param: x", "leaking param content: x"
)

// Kind reports what the diagnostic says about allocation.
func (d Diagnostic) Kind() Kind {
	m := d.Message
	switch {
	case strings.HasPrefix(m, "moved to heap: "):
		return KindMoved
	case strings.HasSuffix(m, " escapes to heap") || strings.Contains(m, " escapes to heap:"):
		return KindEscapes
	case strings.HasSuffix(m, " does not escape"):
		return KindNoEscape
	case strings.HasPrefix(m, "leaking param"):
		return KindLeak
	}
	return KindOther
}

// Allocates reports whether the diagnostic says a heap allocation happens at
// its position.
func (d Diagnostic) Allocates() bool {
	k := d.Kind()
	return k == KindMoved || k == KindEscapes
}

// Subject is the value the diagnostic is about: "p" in "moved to heap: p",
// "make([]byte, n)" in "make([]byte, n) escapes to heap".
func (d Diagnostic) Subject() string {
	m := d.Message
	switch d.Kind() {
	case KindMoved:
		return strings.TrimPrefix(m, "moved to heap: ")
	case KindEscapes:
		i := strings.Index(m, " escapes to heap")
		return m[:i]
	case KindNoEscape:
		return strings.TrimSuffix(m, " does not escape")
	case KindLeak:
		if i := strings.LastIndex(m, ": "); i >= 0 {
			return m[i+2:]
		}
	}
	return ""
}

// posRE matches "file:line:col: message". The file may contain colons on
// other systems, so the numbers are matched from the message side.
var posRE = regexp.MustCompile(`^(.+?):(\d+):(\d+): (.*)$`)

// block is an explanation being read: "x escapes to heap in f:" or
// "parameter s leaks to {heap} for f with derefs=0:" and its indented lines.
type block struct {
	file      string
	line, col int
	subject   string
	fn        string
	flow      []string
}

// ParseDiagnostics reads the output of 'go build -gcflags=-m=2' (or -m):
// "# package" headers, diagnostic lines and their indented explanations.
// Each explanation is attached to the diagnostic at the same position about
// the same value ("moved to heap: p" gets the flow of "p escapes to heap in
// newPoint:"). Lines that are not diagnostics are skipped. The result is in
// input order.
func ParseDiagnostics(r io.Reader) ([]Diagnostic, error) {
	var out []Diagnostic
	var cur *block
	pending := map[string]*block{} // by file:line:col subject, explanations not yet claimed
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		m := posRE.FindStringSubmatch(sc.Text())
		if m == nil {
			cur = nil
			continue
		}
		line, err1 := strconv.Atoi(m[2])
		col, err2 := strconv.Atoi(m[3])
		if err1 != nil || err2 != nil {
			cur = nil
			continue
		}
		file, msg := cleanPath(m[1]), m[4]
		if strings.HasPrefix(msg, " ") {
			if cur != nil && cur.file == file && cur.line == line && cur.col == col {
				cur.flow = append(cur.flow, strings.TrimSpace(msg))
			}
			continue
		}
		if b := header(file, line, col, msg); b != nil {
			cur = b
			pending[blockKey(file, line, col, b.subject)] = b
			continue
		}
		cur = nil
		d := Diagnostic{File: file, Line: line, Col: col, Message: msg}
		if d.Kind() != KindOther {
			key := blockKey(file, line, col, d.Subject())
			if b := pending[key]; b != nil {
				d.Func, d.Flow = b.fn, b.flow
				delete(pending, key)
			}
		}
		out = append(out, d)
	}
	return out, sc.Err()
}

func blockKey(file string, line, col int, subject string) string {
	return file + ":" + strconv.Itoa(line) + ":" + strconv.Itoa(col) + " " + subject
}

// header recognises the first line of an explanation.
func header(file string, line, col int, msg string) *block {
	if !strings.HasSuffix(msg, ":") {
		return nil
	}
	body := strings.TrimSuffix(msg, ":")
	if i := strings.LastIndex(body, " escapes to heap in "); i > 0 {
		return &block{file: file, line: line, col: col, subject: body[:i], fn: body[i+len(" escapes to heap in "):]}
	}
	if rest, ok := strings.CutPrefix(body, "parameter "); ok {
		if i := strings.Index(rest, " leaks to "); i > 0 {
			fn := ""
			if j := strings.LastIndex(rest, " for "); j > i {
				fn = strings.TrimSuffix(rest[j+len(" for "):], "")
				if k := strings.Index(fn, " with derefs="); k >= 0 {
					fn = fn[:k]
				}
			}
			// Matched with "leaking param: s": the subject is the short name.
			name := rest[:i]
			if k := strings.LastIndex(name, "."); k >= 0 {
				name = name[k+1:]
			}
			return &block{file: file, line: line, col: col, subject: name, fn: fn}
		}
	}
	return nil
}

// cleanPath removes the "./" the go command puts before paths in the
// current directory.
func cleanPath(p string) string {
	return strings.TrimPrefix(p, "./")
}
