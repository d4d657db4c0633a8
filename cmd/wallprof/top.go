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
  wallprof top [flags]

Shows, live, where a running process's time goes: its functions (or its
threads) by wall time over a sliding window, refreshed every second, with
each one's share on a CPU (CPU%), waiting for a CPU (RUNQ%) and blocked
(SLEEP%: sleeping and other waits; DISK%: uninterruptible, mostly disk I/O).
WALL% is a function's own time, at the top of the stack, and the sum of the
four; TOTAL% also counts the functions it called. Shares are of the window's
wall time, all threads together. Each thread's times are exact, from the
scheduler's own counters, as in 'wallprof record'.

Without -p, it shows every process of the machine (but its own) instead,
by the share of one CPU each spent on a CPU, waiting for one and blocked
(100% is one thread for the whole window; RUNQ% is how many of its threads
waited for a CPU, on average): who computes, and who waits for a CPU.
Up and down select a process, Enter shows its functions, Esc goes back.

On a terminal it is full-screen, with these keys:
  s, S      sort by the next or the previous column (1 to 6: WALL% to TOTAL%)
  /         show only the names that match a regular expression (Enter
            applies it, Esc clears it)
  v         switch between functions, threads and, for a Go program, its
            goroutine groups (by creation site; SLEEP% is their waiting)
  c         split each function's total time (TOTAL%), not its own, by state
  space     pause the display (the recording goes on)
  w         write the window as a pprof profile (wallprof-top-TIME.pb.gz)
  up, down  select a process (without -p); Enter shows it, Esc goes back
  q         quit (also Ctrl-C)
With --plain, or when stdout is not a terminal, it prints the table every
interval instead.

Needs root, or CAP_BPF and CAP_PERFMON, and a kernel (5.18+) with BTF.

Flags:
`

func init() {
	commands["top"] = command{order: 15, run: runTop,
		usage: "  wallprof top [flags] [-p PID]             live: functions (or processes) by wall time, on-CPU, runnable and blocked\n"}
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
	fs.StringVar(&f.view, "view", "functions", "show functions, threads or goroutines (goroutine groups of a Go program, by creation site)")
	fs.StringVar(&f.filter, "filter", "", "show only the names that match this regular expression")
	fs.BoolVar(&f.cum, "cum", false, "split each function's total time (TOTAL%), not its own, into CPU%, RUNQ%, SLEEP% and DISK% (key c)")
	if code, done := fs.parse(args); done {
		return nil, code, true
	}
	switch {
	case len(fs.Args()) > 0:
		return nil, fs.usageError("unexpected argument %q: top takes -p PID", fs.Args()[0]), true
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
	case f.view != "functions" && f.view != "threads" && f.view != "goroutines":
		return nil, fs.usageError("unknown --view %q: use functions, threads or goroutines", f.view), true
	case f.view == "goroutines" && f.pid == 0:
		return nil, fs.usageError("--view goroutines needs -p PID"), true
	case columnIndex(f.sort) < 0:
		return nil, fs.usageError("unknown --sort %q: use %s", f.sort, strings.Join(present.StateColumns, ", ")), true
	}
	if _, err := regexp.Compile(f.filter); err != nil {
		return nil, fs.usageError("bad --filter: %v", err), true
	}
	if f.pid == 0 && !fs.isSet("sort") {
		f.sort = "cpu" // the machine's processes: who computes first
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
	if f.pid != 0 && !linux.ProcessExists(f.pid) {
		return fail("no process with PID %d is running.", f.pid)
	}
	keep := int((f.window + f.interval - 1) / f.interval)
	o := record.Options{Freq: f.freq, Live: keep, ForgetExited: true, Plan: setPlanFromEnv, Goroutines: true}
	var rec *record.Recording
	var err error
	if f.pid == 0 {
		rec, err = record.StartAll(o)
	} else {
		rec, err = record.Start(f.pid, o)
	}
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
	v := &topView{rec: rec, pid: f.pid, all: f.pid == 0, names: map[int]string{}, keep: keep, interval: f.interval, sort: columnIndex(f.sort),
		view: viewOf(f.view), cum: f.cum, start: time.Now()}
	v.setFilter(f.filter)
	if f.plain || !isTerminal(stdout) {
		return v.plain(ctx, stdout, stderr, f.top)
	}
	return v.full(ctx, stdout, stderr)
}

// topView is what top shows: the latest window and how to show it.
type topView struct {
	rec      *record.Recording
	pid      int  // the process shown (0: the process list)
	all      bool // system-wide: the process list, and one process at a time
	names    map[int]string
	procs    present.StateTable // the process list's latest window
	span     time.Duration      // the time the process list covers
	keep     int
	interval time.Duration
	start    time.Time

	p       *profile.Profile // the latest window
	sort    int              // index in present.StateColumns
	view    topViewKind
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
	if v.pid != 0 && !linux.ProcessExists(v.pid) {
		if !v.all {
			v.exited = true
		}
	}
	if err := v.rec.Tick(); err != nil {
		return err
	}
	switch {
	case !v.all:
		v.p = v.rec.Window(v.keep)
	case v.pid != 0:
		v.p = v.rec.WindowOf(v.keep, v.pid)
		v.procs = v.processes()
	default:
		v.p = nil
		v.procs = v.processes()
	}
	return nil
}

// processes is the table of the machine's processes in the window: each
// one's threads' time by state, as shares of the window's duration (100%
// is one thread for the whole window).
func (v *topView) processes() present.StateTable {
	threads, d := v.rec.WindowThreads(v.keep)
	v.span = d
	rows := map[int]*present.StateRow{}
	var order []int
	for _, t := range threads {
		pid := int(t.PID)
		if _, ok := v.names[pid]; !ok && int(t.TID) == pid && t.Name != "" {
			v.names[pid] = t.Name // it exited: its name as it left
		}
	}
	for _, t := range threads {
		pid := int(t.PID)
		r := rows[pid]
		if r == nil {
			r = &present.StateRow{Name: fmt.Sprintf("%s (%d)", v.name(pid), pid), ID: pid}
			rows[pid] = r
			order = append(order, pid)
		}
		for i, ns := range t.Time {
			r.Self[i] += int64(ns)
			r.Cum[i] += int64(ns)
			r.Total += int64(ns)
		}
	}
	tab := present.StateTable{Wall: int64(d)}
	for _, pid := range order {
		tab.Rows = append(tab.Rows, *rows[pid])
	}
	return tab
}

// name is a process's name (its main thread's), read once.
func (v *topView) name(pid int) string {
	n, ok := v.names[pid]
	if !ok {
		n = linux.ThreadName(pid, pid)
		if n == "" {
			n = "?"
		}
		v.names[pid] = n
	}
	return n
}

// table is the window's table, sorted and filtered.
func (v *topView) table() present.StateTable {
	if v.all && v.pid == 0 {
		t := v.procs
		t.Rows = append([]present.StateRow(nil), t.Rows...)
		t.Sort(present.StateColumns[v.sort], v.filter)
		return t
	}
	if v.p == nil {
		return present.StateTable{}
	}
	var t present.StateTable
	switch v.view {
	case viewThreads:
		t = present.ThreadStates(v.p)
	case viewGoroutines:
		t = goroutineStates(v.p)
	default:
		t = present.FunctionStates(v.p)
		if v.cum {
			t.Cumulative()
		}
	}
	t.Sort(present.StateColumns[v.sort], v.filter)
	return t
}

// topViewKind is what the rows of one process's table are.
type topViewKind int

const (
	viewFunctions topViewKind = iota
	viewThreads
	viewGoroutines
)

func viewOf(s string) topViewKind {
	switch s {
	case "threads":
		return viewThreads
	case "goroutines":
		return viewGoroutines
	}
	return viewFunctions
}

// next is the view the v key switches to: goroutines only for a Go
// program.
func (k topViewKind) next(goProgram bool) topViewKind {
	switch {
	case k == viewFunctions:
		return viewThreads
	case k == viewThreads && goProgram:
		return viewGoroutines
	}
	return viewFunctions
}

// goroutineStates is the table of a Go program's goroutine groups (by
// creation site) in the window: running (CPU%), runnable (RUNQ%) and
// waiting (SLEEP%), as shares of all goroutines' time.
func goroutineStates(p *profile.Profile) present.StateTable {
	r, err := present.NewGoroutineReport(p, nil)
	if err != nil {
		return present.StateTable{}
	}
	t := present.StateTable{Wall: r.TotalNs}
	for _, g := range r.Groups {
		row := present.StateRow{Name: fmt.Sprintf("%s (%d)", g.Group, g.Goroutines), Total: g.TimeNs}
		row.Self[profile.OnCPU] = int64(g.Running / 100 * float64(g.TimeNs))
		row.Self[profile.Runnable] = int64(g.Runnable / 100 * float64(g.TimeNs))
		row.Self[profile.Sleeping] = g.TimeNs - row.Self[profile.OnCPU] - row.Self[profile.Runnable]
		row.Cum = row.Self
		t.Rows = append(t.Rows, row)
	}
	return t
}

// title says what is shown.
func (v *topView) title() string {
	what := "functions"
	switch v.view {
	case viewThreads:
		what = "threads"
	case viewGoroutines:
		what = "goroutine groups (SLEEP% is waiting)"
	}
	if v.all && v.pid == 0 {
		what = "processes, % of one CPU"
	}
	span := time.Duration(v.keep) * v.interval
	if v.p != nil && v.p.Duration < span {
		span = v.p.Duration
	} else if v.p == nil && v.all && v.span > 0 && v.span < span {
		span = v.span
	}
	if v.cum && v.view == viewFunctions && !(v.all && v.pid == 0) {
		what = "functions, states of their total"
	}
	s := fmt.Sprintf("wallprof top · %s · by %s%% · last %s", what, strings.ToUpper(present.StateColumns[v.sort]),
		span.Round(100*time.Millisecond))
	if v.filter != nil {
		s += fmt.Sprintf(" · /%s/", v.filterS)
	}
	// Last: a long command line is cut at the screen's edge.
	switch {
	case v.all && v.pid == 0:
		return s + " · all processes"
	case v.all:
		return s + fmt.Sprintf(" · pid %d (%s)", v.pid, v.name(v.pid))
	}
	return s + fmt.Sprintf(" · pid %d (%s)", v.pid, v.rec.Command())
}

// summary is the window's time by state.
func (v *topView) summary() string {
	var totals [profile.NumStates]int64
	var threads int
	switch {
	case v.all && v.pid == 0:
		if len(v.procs.Rows) == 0 {
			return "waiting for the first " + v.interval.String() + "…"
		}
		for _, r := range v.procs.Rows {
			for i, ns := range r.Self {
				totals[i] += ns
			}
		}
		ts, _ := v.rec.WindowThreads(v.keep)
		return fmt.Sprintf("%d processes, %d threads · %s", len(v.procs.Rows), len(ts), present.StateSummary(totals))
	case v.p == nil:
		return "waiting for the first " + v.interval.String() + "…"
	}
	for _, th := range v.p.Threads {
		for i, d := range th.Time {
			totals[i] += int64(d)
		}
	}
	threads = len(v.p.Threads)
	return fmt.Sprintf("%d threads · %s", threads, present.StateSummary(totals))
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
	sel           int    // the selected row of the process list
	listFilter    string // the process list's filter, while one process is shown
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
	case "esc", "backspace":
		switch {
		case m.v.filter != nil && !(m.v.all && m.v.pid != 0 && s == "backspace"):
			m.v.setFilter("")
		case m.v.all && m.v.pid != 0:
			// Back to the list, with the list's filter.
			m.v.pid, m.v.p, m.shown = 0, nil, nil
			m.v.setFilter(m.listFilter)
		}
	case "up", "k":
		m.sel = max(m.sel-1, 0)
	case "down", "j":
		m.sel++
	case "enter":
		if m.v.all && m.v.pid == 0 {
			if rows := m.v.table().Rows; len(rows) > 0 {
				m.v.pid = rows[min(m.sel, len(rows)-1)].ID
				// The list's filter names processes: the process's
				// functions start unfiltered.
				m.listFilter = m.v.filterS
				m.v.setFilter("")
				m.v.p = m.v.rec.WindowOf(m.v.keep, m.v.pid)
				m.shown = m.v.p
			}
		}
	case "s", "right", "tab":
		m.v.sort = (m.v.sort + 1) % n
	case "S", "left", "shift+tab":
		m.v.sort = (m.v.sort + n - 1) % n
	case "1", "2", "3", "4", "5", "6":
		m.v.sort = int(s[0] - '1')
	case "/":
		m.editing, m.input = true, m.v.filterS
	case "v":
		m.v.view = m.v.view.next(m.shown != nil && m.shown.GoInfo != nil)
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
		if v.all && v.pid == 0 {
			m.msg = "select a process and press Enter to write its profile"
		} else if name, err := v.writeWindow(); err != nil {
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
	list := v.all && v.pid == 0
	if list {
		m.sel = min(m.sel, max(len(t.Rows)-1, 0))
	}
	first := 0
	if list && m.sel >= rows {
		first = m.sel - rows + 1
	}
	for i := first; i < len(t.Rows) && i < first+rows; i++ {
		line := present.StateLine(t.Rows[i], t.Wall, w)
		if list && i == m.sel {
			line = m.style(line, "\x1b[7m")
			if !m.color {
				line = ">" + strings.TrimPrefix(line, " ")
			}
		}
		b.WriteString(line)
		b.WriteString("\n")
	}
	for i := len(t.Rows) - first; i < rows; i++ {
		b.WriteString("\n")
	}
	b.WriteString("\n")
	if m.editing {
		b.WriteString(clipLine("filter: /"+m.input+"▏  (Enter apply · Esc clear)", w))
	} else {
		keys := "q quit · s/S 1-6 sort · / filter · v view · c self/total · space pause · w write pprof"
		switch {
		case v.all && v.pid == 0:
			keys = "q quit · ↑↓ select · Enter show · s/S 1-6 sort · / filter · space pause"
		case v.all:
			keys = "q quit · Esc back · s/S 1-6 sort · / filter · v view · c self/total · space pause · w write pprof"
		}
		b.WriteString(m.style(clipLine(keys, w), "\x1b[2m"))
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
