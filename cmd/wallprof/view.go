package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/driver"
	pprof "github.com/google/pprof/profile"

	"github.com/wallprof/wallprof/internal/present"
)

func init() {
	commands["view"] = command{order: 40, run: runView, usage: "  wallprof view [flags] FILE                open a profile in the pprof web UI, on localhost\n"}
}

// defaultViewAddr binds the web UI to the loopback interface, on a free port.
const defaultViewAddr = "localhost:0"

const viewUsage = `Usage: wallprof view [flags] FILE [-- PPROF-FLAGS...]

Serves google/pprof's web UI (flame graph, top, graph, source, peek) for
FILE, a profile written by 'wallprof record' or any pprof file ('-' for
stdin, the URL of a pprof endpoint, or anything 'wallprof convert' reads),
and prints its URL. It listens on localhost unless --http names another
address, opens a browser when one is available (a graphical session with
xdg-open), and runs until Ctrl-C. The wall sample type is shown first when
the file has one. Flags after -- go to pprof's driver as they are:

  wallprof view app.pb.gz -- -tagfocus=state=runnable -sample_index=cpu

Flags:
`

func runView(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("view", viewUsage, stdout, stderr)
	addr := fs.String("http", defaultViewAddr, "serve the web UI on this host:port (port 0: a free one)")
	noBrowser := fs.Bool("no-browser", false, "do not open a browser, only print the URL")
	gview := fs.Bool("goroutines", false, "show the goroutine view of a Go program (its goroutines' time: running as on-cpu, runnable, waiting as sleeping; labels gstate, wait_reason, created_by); the default for a profile that has one (--goroutines=false shows its threads)")
	// What follows "--" is pprof's own flags, passed to its driver.
	var pprofFlags []string
	for i, a := range args {
		if a == "--" {
			args, pprofFlags = args[:i], args[i+1:]
			break
		}
	}
	if code, done := fs.parse(args); done {
		return code
	}
	if fs.NArg() != 1 {
		return fs.usageError("give exactly one profile file, e.g. 'wallprof view app.pb.gz'.")
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		return fs.usageError("--http %q is not a host:port address (try localhost:8080).", *addr)
	}
	if host == "" {
		host = "localhost"
	}
	path := fs.Arg(0)
	// Read it ourselves first, for wallprof's one-sentence errors, and
	// any format convert reads.
	in, err := readInputFor("view", path, stderr)
	if err != nil {
		return exitError
	}
	if in.p != nil && len(in.p.Goroutines) > 0 && (*gview || !fs.isSet("goroutines")) {
		if !fs.isSet("goroutines") {
			fmt.Fprintf(stderr, "wallprof view: a Go program: showing its goroutines (--goroutines=false shows its threads).\n")
		}
		in.p, in.pprof = present.GoroutineView(in.p, nil), nil
	} else if *gview {
		fmt.Fprintf(stderr, "wallprof view: %s: %v.\n", inputName(path), present.ErrNoGoroutines)
		return exitError
	}
	pp, err := in.pprofProfile()
	if err != nil {
		fmt.Fprintf(stderr, "wallprof view: cannot read %s: %v.\n", inputName(path), err)
		return exitError
	}
	s := &viewServer{
		ctx: ctx, stdout: stdout, stderr: stderr,
		browser: !*noBrowser && browserAvailable(),
	}
	flags := []string{"-http=" + net.JoinHostPort(host, port), "-symbolize=none", "-no_browser"}
	// Always say which sample type: pprof's driver keeps its settings in
	// package state, so a second view in one process (tests) would inherit
	// the first one's. Its own default is the last type.
	if hasSampleType(pp, "wall") {
		flags = append(flags, "-sample_index=wall")
	} else if n := len(pp.SampleType); n > 0 {
		flags = append(flags, "-sample_index="+pp.SampleType[n-1].Type)
	}
	// The filters too, for the same reason, then pprof's flags after ours:
	// the last of a flag given twice wins.
	flags = append(flags, "-focus=", "-ignore=", "-hide=", "-show=", "-tagfocus=", "-tagignore=")
	flags = append(flags, pprofFlags...)
	err = driver.PProf(&driver.Options{
		Flagset:    newInjectedFlags(append(flags, path)),
		Fetch:      profileFetcher{path: path, p: pp},
		UI:         &viewUI{stderr: stderr},
		HTTPServer: s.serve,
	})
	if err != nil {
		fmt.Fprintf(stderr, "wallprof view: %v.\n", strings.TrimSuffix(err.Error(), "."))
		return exitError
	}
	return exitOK
}

// pprofProfile is the input as pprof's driver takes it: the pprof file as
// it was, or the profile converted from another format.
func (in *input) pprofProfile() (*pprof.Profile, error) {
	data := in.pprof
	if data == nil {
		var b bytes.Buffer
		if err := present.WritePprof(&b, in.p); err != nil {
			return nil, err
		}
		data = b.Bytes()
	}
	return pprof.ParseData(data)
}

func hasSampleType(p *pprof.Profile, name string) bool {
	for _, st := range p.SampleType {
		if st.Type == name {
			return true
		}
	}
	return false
}

// viewServer is the HTTP server behind pprof's web UI: pprof gives it the
// handlers and it serves them until ctx is done.
type viewServer struct {
	ctx            context.Context
	stdout, stderr io.Writer
	browser        bool
	// ready, when set, is called with the URL once the server listens.
	ready func(url string)
}

// serve listens on args.Hostport (port 0: a free one), prints the URL,
// opens a browser if wanted, and serves until the context is cancelled.
func (s *viewServer) serve(args *driver.HTTPServerArgs) error {
	ln, err := net.Listen("tcp", args.Hostport)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", args.Hostport, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	url := "http://" + net.JoinHostPort(args.Host, strconv.Itoa(port)) + "/ui/"
	local := isLoopback(args.Host)
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if local && !fromLoopback(r) {
			http.Error(w, "wallprof view only answers local clients", http.StatusForbidden)
			return
		}
		h := args.Handlers[r.URL.Path]
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", ui))
	mux.Handle("/", http.RedirectHandler("/ui/", http.StatusTemporaryRedirect))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	fmt.Fprintf(s.stdout, "%s\n", url)
	fmt.Fprintln(s.stderr, "wallprof view: serving the pprof web UI; press Ctrl-C to stop.")
	if s.browser {
		openBrowser(url, s.stderr)
	}
	if s.ready != nil {
		s.ready(url)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-s.ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close()
	}
	<-done
	fmt.Fprintln(s.stderr, "wallprof view: stopped.")
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	return err == nil && isLoopback(host)
}

// browserAvailable reports whether a browser can be opened: a graphical
// session (DISPLAY or WAYLAND_DISPLAY) with xdg-open installed.
func browserAvailable() bool {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return false
	}
	_, err := exec.LookPath("xdg-open")
	return err == nil
}

func openBrowser(url string, stderr io.Writer) {
	cmd := exec.Command("xdg-open", url)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "wallprof view: could not open a browser (%v); open %s yourself.\n", err, url)
		return
	}
	go cmd.Wait()
}

// profileFetcher hands pprof the profile already read, so that pprof
// neither reads the file again nor treats it as remote (and saves a copy).
type profileFetcher struct {
	path string
	p    *pprof.Profile
}

func (f profileFetcher) Fetch(src string, _, _ time.Duration) (*pprof.Profile, string, error) {
	if src != f.path {
		return nil, "", fmt.Errorf("unexpected source %q", src)
	}
	return f.p.Copy(), "", nil
}

// viewUI routes pprof's messages to stderr. There is no interactive
// prompt, and the browser is opened by viewServer, not pprof.
type viewUI struct {
	mu     sync.Mutex
	stderr io.Writer
}

func (u *viewUI) ReadLine(string) (string, error) { return "", io.EOF }
func (u *viewUI) Print(args ...any) {
	msg := fmt.Sprint(args...)
	// viewServer prints the URL with the real port.
	if strings.HasPrefix(msg, "Serving web UI on ") {
		return
	}
	u.write(msg)
}
func (u *viewUI) PrintErr(args ...any)                { u.write(fmt.Sprint(args...)) }
func (u *viewUI) IsTerminal() bool                    { return false }
func (u *viewUI) WantBrowser() bool                   { return false }
func (u *viewUI) SetAutoComplete(func(string) string) {}

func (u *viewUI) write(msg string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	fmt.Fprintf(u.stderr, "pprof: %s\n", strings.TrimSuffix(msg, "\n"))
}

// injectedFlags is pprof's FlagSet over a fixed command line: wallprof
// chooses pprof's flags and the file, the user never sees pprof's own.
type injectedFlags struct {
	fs    *flag.FlagSet
	args  []string
	extra []string
}

func newInjectedFlags(args []string) *injectedFlags {
	fs := flag.NewFlagSet("pprof", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &injectedFlags{fs: fs, args: args}
}

func (f *injectedFlags) Bool(name string, def bool, usage string) *bool {
	return f.fs.Bool(name, def, usage)
}
func (f *injectedFlags) Int(name string, def int, usage string) *int {
	return f.fs.Int(name, def, usage)
}
func (f *injectedFlags) Float64(name string, def float64, usage string) *float64 {
	return f.fs.Float64(name, def, usage)
}
func (f *injectedFlags) String(name string, def string, usage string) *string {
	return f.fs.String(name, def, usage)
}

// StringList is a repeatable flag; the default, if any, comes first until
// the flag is given.
func (f *injectedFlags) StringList(name string, def string, usage string) *[]*string {
	l := &stringList{}
	if def != "" {
		l.vals = []*string{&def}
		l.isDef = true
	}
	f.fs.Var(l, name, usage)
	return &l.vals
}

func (f *injectedFlags) ExtraUsage() string      { return strings.Join(f.extra, "\n") }
func (f *injectedFlags) AddExtraUsage(eu string) { f.extra = append(f.extra, eu) }

// Parse parses the injected command line; on an error, or without a file,
// it calls usage and returns nil, as pprof expects.
func (f *injectedFlags) Parse(usage func()) []string {
	if err := f.fs.Parse(f.args); err != nil || f.fs.NArg() == 0 {
		usage()
		return nil
	}
	return f.fs.Args()
}

type stringList struct {
	vals  []*string
	isDef bool
}

func (l *stringList) String() string {
	var s []string
	for _, v := range l.vals {
		s = append(s, *v)
	}
	return strings.Join(s, ",")
}

func (l *stringList) Set(v string) error {
	if l.isDef {
		l.vals, l.isDef = nil, false
	}
	l.vals = append(l.vals, &v)
	return nil
}
