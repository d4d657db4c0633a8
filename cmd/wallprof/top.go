//go:build linux && amd64

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/wallprof/wallprof/internal/collect"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/outfile"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/record"
)

const topUsage = `Usage:
  wallprof top [flags] -p PID

Shows, live, where a running process's time goes: its functions (or its
threads) by wall time over a sliding window, refreshed every second, with
each one's share on a CPU (CPU%), waiting for a CPU (RUNQ%) and blocked
(SLEEP%: sleeping and other waits; DISK%: uninterruptible, mostly disk I/O).
WALL% is a function's own time, at the top of the stack, and the sum of the
four; TOTAL% also counts the functions it called. Shares are of the window's
wall time, all threads together. Each thread's times are exact, from the
scheduler's own counters, as in 'wallprof record'.

On a terminal it is full-screen, with these keys:
  s, S      sort by the next or the previous column (1 to 6: WALL% to TOTAL%)
  /         show only the names that match a regular expression (Enter
            applies it, Esc clears it)
  v         switch between functions and threads
  c         split each function's total time (TOTAL%), not its own, by state
  space     pause the display (the recording goes on)
  w         write the window as a pprof profile (wallprof-top-TIME.pb.gz)
  q         quit (also Ctrl-C)
With --plain, or when stdout is not a terminal, it prints the table every
interval instead.

Needs root, or CAP_BPF and CAP_PERFMON, and a kernel (5.18+) with BTF.

Flags:
`

func init() {
	commands["top"] = command{order: 15, run: runTop,
		usage: "  wallprof top [flags] -p PID               live: functions by wall time, on-CPU, runnable and blocked\n"}
}

type topFlags struct {
	pid                        int
	freq, top                  int
	window, interval, duration time.Duration
	plain, cum                 bool
	sort, view, filter         string
}

func parseTopFlags(args []string, stdout, stderr io.Writer) (*topFlags, int, bool) {
	f := &topFlags{}
	fs := newCmdFlags("top", topUsage, stdout, stderr)
	fs.IntVar(&f.pid, "p", 0, "show the running process `PID`")
	fs.IntVar(&f.pid, "pid", 0, "same as -p")
	fs.IntVar(&f.freq, "F", collect.DefaultFreq, "sampling frequency in `Hz` of on-CPU stacks (1 to 20000)")
	fs.DurationVar(&f.window, "window", 10*time.Second, "show the last `DURATION` of time")
	fs.DurationVar(&f.interval, "interval", time.Second, "refresh this often")
	fs.DurationVar(&f.duration, "duration", 0, "stop after this long (default: until q, Ctrl-C or the target exits)")
	fs.BoolVar(&f.plain, "plain", false, "print the table every interval instead of a full-screen view")
	fs.IntVar(&f.top, "top", 20, "with --plain, print this many rows")
	fs.StringVar(&f.sort, "sort", "wall", "sort by `COLUMN`: "+strings.Join(present.StateColumns, ", "))
	fs.StringVar(&f.view, "view", "functions", "show functions or threads")
	fs.StringVar(&f.filter, "filter", "", "show only the names that match this regular expression")
	fs.BoolVar(&f.cum, "cum", false, "split each function's total time (TOTAL%), not its own, into CPU%, RUNQ%, SLEEP% and DISK% (key c)")
	if code, done := fs.parse(args); done {
		return nil, code, true
	}
	switch {
	case len(fs.Args()) > 0:
		return nil, fs.usageError("unexpected argument %q: top takes -p PID", fs.Args()[0]), true
	case f.pid == 0:
		return nil, fs.usageError("say which process to show with -p PID (top of the whole system is not supported yet)"), true
	case f.pid < 0:
		return nil, fs.usageError("-p %d is not a process ID", f.pid), true
	case f.freq < 1 || f.freq > collect.MaxFreq:
		return nil, fs.usageError("-F %d is out of range: use 1 to %d Hz", f.freq, collect.MaxFreq), true
	case f.interval < 100*time.Millisecond:
		return nil, fs.usageError("--interval %s is too short: use 100ms or more", f.interval), true
	case f.window < f.interval:
		return nil, fs.usageError("--window %s is shorter than --interval %s", f.window, f.interval), true
	case f.duration < 0:
		return nil, fs.usageError("--duration must be positive"), true
	case f.view != "functions" && f.view != "threads":
		return nil, fs.usageError("unknown --view %q: use functions or threads", f.view), true
	case columnIndex(f.sort) < 0:
		return nil, fs.usageError("unknown --sort %q: use %s", f.sort, strings.Join(present.StateColumns, ", ")), true
	}
	if _, err := regexp.Compile(f.filter); err != nil {
		return nil, fs.usageError("bad --filter: %v", err), true
	}
	return f, exitOK, false
}

func columnIndex(c string) int {
	for i, n := range present.StateColumns {
		if n == c {
			return i
		}
	}
	return -1
}

func runTop(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, code, done := parseTopFlags(args, stdout, stderr)
	if done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "wallprof top: "+format+"\n", a...)
		return exitError
	}
	if msg := preflight(); msg != "" {
		return fail("%s", msg)
	}
	if !linux.ProcessExists(f.pid) {
		return fail("no process with PID %d is running.", f.pid)
	}
	keep := int((f.window + f.interval - 1) / f.interval)
	rec, err := record.Start(f.pid, record.Options{Freq: f.freq, Live: keep, Plan: setPlanFromEnv})
	if errors.Is(err, record.ErrExited) {
		return fail("process %d exited before recording started.", f.pid)
	} else if err != nil {
		return fail("%s", startError(err))
	}
	defer rec.Close()
	if ctx == nil {
		ctx = context.Background()
	}
	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	v := &topView{rec: rec, pid: f.pid, keep: keep, interval: f.interval, sort: columnIndex(f.sort),
		threads: f.view == "threads", cum: f.cum, start: time.Now()}
	v.setFilter(f.filter)
	if f.plain || !isTerminal(stdout) {
		return v.plain(ctx, stdout, stderr, f.top)
	}
	return v.full(ctx, stdout, stderr)
}

// topView is what top shows: the latest window and how to show it.
type topView struct {
	rec      *record.Recording
	pid      int
	keep     int
	interval time.Duration
	start    time.Time

	p       *profile.Profile // the latest window
	sort    int              // index in present.StateColumns
	threads bool
	cum     bool // the state columns split TOTAL%, not WALL%
	filter  *regexp.Regexp
	filterS string
	exited  bool
}

func (v *topView) setFilter(s string) error {
	if s == "" {
		v.filter, v.filterS = nil, ""
		return nil
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return err
	}
	v.filter, v.filterS = re, s
	return nil
}

// refresh closes a bucket and takes the new window.
func (v *topView) refresh() error {
	if !linux.ProcessExists(v.pid) {
		v.exited = true
	}
	if err := v.rec.Tick(); err != nil {
		return err
	}
	v.p = v.rec.Window(v.keep)
	return nil
}

// table is the window's table, sorted and filtered.
func (v *topView) table() present.StateTable {
	if v.p == nil {
		return present.StateTable{}
	}
	var t present.StateTable
	if v.threads {
		t = present.ThreadStates(v.p)
	} else {
		t = present.FunctionStates(v.p)
		if v.cum {
			t.Cumulative()
		}
	}
	t.Sort(present.StateColumns[v.sort], v.filter)
	return t
}

// title says what is shown.
func (v *topView) title() string {
	what := "functions"
	if v.threads {
		what = "threads"
	}
	span := time.Duration(v.keep) * v.interval
	if v.p != nil && v.p.Duration < span {
		span = v.p.Duration
	}
	if v.cum && !v.threads {
		what = "functions, states of their total"
	}
	s := fmt.Sprintf("wallprof top · %s · by %s%% · last %s", what, strings.ToUpper(present.StateColumns[v.sort]),
		span.Round(100*time.Millisecond))
	if v.filter != nil {
		s += fmt.Sprintf(" · /%s/", v.filterS)
	}
	// Last: a long command line is cut at the screen's edge.
	return s + fmt.Sprintf(" · pid %d (%s)", v.pid, v.rec.Command())
}

// summary is the window's time by state.
func (v *topView) summary() string {
	if v.p == nil {
		return "waiting for the first " + v.interval.String() + "…"
	}
	var totals [profile.NumStates]int64
	for _, th := range v.p.Threads {
		for i, d := range th.Time {
			totals[i] += int64(d)
		}
	}
	return fmt.Sprintf("%d threads · %s", len(v.p.Threads), present.StateSummary(totals))
}

// plain prints the table every interval until ctx ends or the target
// exits.
func (v *topView) plain(ctx context.Context, stdout, stderr io.Writer, rows int) int {
	tick := time.NewTicker(v.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case <-tick.C:
		}
		if err := v.refresh(); err != nil {
			fmt.Fprintf(stderr, "wallprof top: %v.\n", err)
			return exitError
		}
		fmt.Fprintf(stdout, "%s · %s\n%s\n", v.title(), time.Now().Format("15:04:05"), v.summary())
		present.WriteStateRows(stdout, v.table(), rows, 0)
		fmt.Fprintln(stdout)
		if v.exited {
			fmt.Fprintf(stderr, "wallprof top: process %d exited.\n", v.pid)
			return exitOK
		}
	}
}

// writeWindow writes the window as a pprof profile in the current
// directory and returns its name.
func (v *topView) writeWindow() (string, error) {
	if v.p == nil {
		return "", errors.New("nothing recorded yet")
	}
	name := "wallprof-top-" + time.Now().Format("20060102-150405") + ".pb.gz"
	return name, outfile.Write(name, func(w io.Writer) error { return present.WritePprof(w, v.p) })
}

// full runs the full-screen view.
func (v *topView) full(ctx context.Context, stdout, stderr io.Writer) int {
	m := &topModel{v: v, color: os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb", width: 80, height: 24}
	prog := tea.NewProgram(m, tea.WithOutput(stdout), tea.WithContext(ctx))
	_, err := prog.Run()
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "wallprof top: %v.\n", err)
		return exitError
	}
	if m.err != nil {
		fmt.Fprintf(stderr, "wallprof top: %v.\n", m.err)
		return exitError
	}
	if v.exited {
		fmt.Fprintf(stderr, "wallprof top: process %d exited.\n", v.pid)
	}
	return exitOK
}

// topModel is the full-screen view's state, for bubbletea.
type topModel struct {
	v             *topView
	color         bool
	width, height int
	paused        bool
	editing       bool   // typing a filter
	input         string // the filter being typed
	msg           string // the latest message (a file written, a bad filter)
	err           error
	shown         *profile.Profile // the window on screen (kept while paused)
}

// windowMsg says a new window is ready.
type windowMsg struct{ err error }

func (m *topModel) refresh() tea.Cmd {
	return tea.Tick(m.v.interval, func(time.Time) tea.Msg { return windowMsg{err: m.v.refresh()} })
}

func (m *topModel) Init() tea.Cmd { return m.refresh() }

func (m *topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case windowMsg:
		if msg.err != nil {
			m.err = msg.err
			return m, tea.Quit
		}
		if !m.paused {
			m.shown = m.v.p
		}
		if m.v.exited {
			m.msg = fmt.Sprintf("process %d exited; q to quit", m.v.pid)
			return m, nil
		}
		return m, m.refresh()
	case tea.KeyPressMsg:
		return m, m.key(msg)
	}
	return m, nil
}

// key handles one key press.
func (m *topModel) key(k tea.KeyPressMsg) tea.Cmd {
	s := k.String()
	if m.editing {
		switch s {
		case "enter":
			if err := m.v.setFilter(m.input); err != nil {
				m.msg = fmt.Sprintf("bad filter: %v", err)
			} else {
				m.msg = ""
			}
			m.editing = false
		case "esc":
			m.editing, m.input = false, ""
			m.v.setFilter("")
		case "backspace":
			if r := []rune(m.input); len(r) > 0 {
				m.input = string(r[:len(r)-1])
			}
		case "ctrl+c":
			return tea.Quit
		case "space":
			m.input += " "
		default:
			if k.Text != "" {
				m.input += k.Text
			}
		}
		return nil
	}
	n := len(present.StateColumns)
	switch s {
	case "q", "ctrl+c":
		return tea.Quit
	case "esc":
		m.v.setFilter("")
	case "s", "right", "tab":
		m.v.sort = (m.v.sort + 1) % n
	case "S", "left", "shift+tab":
		m.v.sort = (m.v.sort + n - 1) % n
	case "1", "2", "3", "4", "5", "6":
		m.v.sort = int(s[0] - '1')
	case "/":
		m.editing, m.input = true, m.v.filterS
	case "v":
		m.v.threads = !m.v.threads
	case "c":
		m.v.cum = !m.v.cum
	case "space", "p":
		m.paused = !m.paused
		if !m.paused {
			m.shown = m.v.p
		}
	case "w":
		v := *m.v
		v.p = m.shown
		if name, err := v.writeWindow(); err != nil {
			m.msg = fmt.Sprintf("cannot write the profile: %v", err)
		} else {
			m.msg = "wrote " + name
		}
	}
	return nil
}

func (m *topModel) View() tea.View {
	v := *m.v
	v.p = m.shown
	var b strings.Builder
	w := m.width
	title := v.title()
	if m.paused {
		title += " · PAUSED"
	}
	b.WriteString(m.style(clipLine(title, w), "\x1b[1m"))
	b.WriteString("\n")
	b.WriteString(clipLine(v.summary(), w))
	b.WriteString("\n\n")
	b.WriteString(m.style(present.StateHeader(w), "\x1b[7m"))
	b.WriteString("\n")
	t := v.table()
	rows := max(m.height-7, 1)
	for i, r := range t.Rows {
		if i >= rows {
			break
		}
		b.WriteString(present.StateLine(r, t.Wall, w))
		b.WriteString("\n")
	}
	for i := len(t.Rows); i < rows; i++ {
		b.WriteString("\n")
	}
	b.WriteString("\n")
	if m.editing {
		b.WriteString(clipLine("filter: /"+m.input+"▏  (Enter apply · Esc clear)", w))
	} else {
		b.WriteString(m.style(clipLine("q quit · s/S 1-6 sort · / filter · v functions/threads · c self/total · space pause · w write pprof", w), "\x1b[2m"))
		if m.msg != "" {
			b.WriteString("\n")
			b.WriteString(clipLine(m.msg, w))
		}
	}
	view := tea.NewView(b.String())
	view.AltScreen = true
	return view
}

// style wraps s in an SGR sequence, unless colours are off.
func (m *topModel) style(s, sgr string) string {
	if !m.color {
		return s
	}
	return sgr + s + "\x1b[0m"
}

func clipLine(s string, width int) string {
	if width <= 0 {
		return s
	}
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	return string(r[:width-1]) + "…"
}
