package exectrace

import (
	"encoding/binary"
	"strings"

	"golang.org/x/exp/trace"
)

// Frame is one call site of an interned stack.
type Frame struct {
	PC   uint64 `json:"pc"`
	Func string `json:"func"`
	File string `json:"file"`
	Line uint64 `json:"line"`
}

// stackID names an interned stack; 0 is the empty stack.
type stackID int32

// stackTable interns the trace's stacks by their program counters. Its
// size grows with the number of distinct stacks (the program's code), not
// with the trace. The per-generation cache maps the parser's Stack handles
// (which keep their generation's tables alive) to IDs; it is dropped at
// every generation boundary so that old tables can be freed.
type stackTable struct {
	frames []Frame          // frame i
	byPC   map[uint64]int32 // PC -> frame index
	stacks [][]int32        // stack i: frame indexes, leaf first
	byKey  map[string]stackID
	cache  map[trace.Stack]stackID
	key    []byte
}

func newStackTable() *stackTable {
	return &stackTable{byPC: map[uint64]int32{}, stacks: [][]int32{nil},
		byKey: map[string]stackID{"": 0}, cache: map[trace.Stack]stackID{}}
}

// newGeneration forgets the parser's handles of the previous generation.
func (t *stackTable) newGeneration() { clear(t.cache) }

func (t *stackTable) intern(s trace.Stack) stackID {
	if s == trace.NoStack {
		return 0
	}
	if id, ok := t.cache[s]; ok {
		return id
	}
	t.key = t.key[:0]
	var idx []int32
	for f := range s.Frames() {
		t.key = binary.LittleEndian.AppendUint64(t.key, f.PC)
		fi, ok := t.byPC[f.PC]
		if !ok {
			fi = int32(len(t.frames))
			t.frames = append(t.frames, Frame{PC: f.PC, Func: strings.Clone(f.Func), File: strings.Clone(f.File), Line: f.Line})
			t.byPC[f.PC] = fi
		}
		idx = append(idx, fi)
	}
	id, ok := t.byKey[string(t.key)]
	if !ok {
		id = stackID(len(t.stacks))
		t.stacks = append(t.stacks, idx)
		t.byKey[string(t.key)] = id
	}
	t.cache[s] = id
	return id
}

// Frames returns a stack's frames, leaf first.
func (t *stackTable) Frames(id stackID) []Frame {
	out := make([]Frame, 0, len(t.stacks[id]))
	for _, fi := range t.stacks[id] {
		out = append(out, t.frames[fi])
	}
	return out
}

// root is the outermost function of a stack other than runtime.goexit: a
// goroutine's start function.
func (t *stackTable) root(id stackID) string {
	fs := t.stacks[id]
	for i := len(fs) - 1; i >= 0; i-- {
		if fn := t.frames[fs[i]].Func; fn != "runtime.goexit" && fn != "" {
			return fn
		}
	}
	return ""
}

// userFrame is the innermost frame outside the runtime (and runtime/trace,
// sync, time): where user code called in. Empty when there is none.
func (t *stackTable) userFrame(id stackID) *Frame {
	for _, fi := range t.stacks[id] {
		f := &t.frames[fi]
		if !isRuntime(f.Func) {
			return f
		}
	}
	return nil
}

func isRuntime(fn string) bool {
	for _, p := range []string{"runtime.", "runtime/", "internal/", "sync.", "sync/atomic.", "time.", "syscall.", "os.", "net.", "internal/poll."} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// String renders a stack, one frame a line, leaf first.
func (t *stackTable) lines(id stackID) []string {
	var out []string
	for _, fi := range t.stacks[id] {
		f := t.frames[fi]
		out = append(out, f.Func+" "+shortFile(f.File)+":"+itoa(f.Line))
	}
	return out
}

func shortFile(f string) string {
	if i := strings.LastIndexByte(f, '/'); i >= 0 {
		if j := strings.LastIndexByte(f[:i], '/'); j >= 0 {
			return f[j+1:]
		}
	}
	return f
}
