//go:build linux && amd64

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wallprof/wallprof/internal/agent"
	"github.com/wallprof/wallprof/internal/agent/push"
	"github.com/wallprof/wallprof/internal/collect"
	"github.com/wallprof/wallprof/internal/record"
)

const agentUsage = `Usage:
  wallprof agent [flags] --otlp URL|--pyroscope URL -p PID|--process NAME
  wallprof agent --config FILE

Records processes continuously and pushes one wall-clock profile per
process every --period to the profile stores teams already run:
  --otlp URL       OpenTelemetry profiles, over HTTP (protobuf, POST
                   URL/v1development/profiles; URL is http(s)://HOST:4318)
                   or, with --otlp-protocol grpc, over gRPC
                   (ProfilesService.Export; URL is http(s)://HOST:4317,
                   https for TLS), encoded with the official protobufs
                   ` + push.OTLPModule + `
                   ` + push.OTLPVersion + `, the profiles protocol of the OpenTelemetry
                   Collector ` + push.CollectorRelease + `, whose OTLP receiver takes them
                   with --feature-gates=+service.profilesSupport
  --pyroscope URL  Pyroscope's push API (URL/ingest, format=pprof)
Both may be given. Profiles are wall time in nanoseconds (Pyroscope's also
split into cpu and offcpu), samples have the labels thread.id, thread.name
and the state (on-cpu, runnable, sleeping, disk, other), and the process is
described by host, service, pid, name, executable, build ID and, in a
container, its cgroup and container id.

-p PID and --process NAME may be repeated; processes named NAME are looked
for every window, recorded while they run. Without either, every process
that runs a program (not kernel threads, not the agent) is recorded, by one
system-wide recording whose windows are split by process.

While an endpoint is down, profiles wait in the spool (--spool DIR on disk,
kept across restarts; else in memory), up to --spool-max bytes, oldest
dropped and counted; pushes are retried with exponential backoff and
jitter. SIGTERM or Ctrl-C closes the current window, pushes what it can
within --flush-timeout, and exits 0. The agent's own CPU, memory, pushes,
spool, drops and retries are Prometheus metrics on --metrics, and its own
Go profiles (heap, CPU) are at /debug/pprof/ on the same address.

The configuration file (YAML, keys named after the flags: otlp,
otlp_protocol, pyroscope, service, host, pids, processes, period,
frequency, spool, spool_max, metrics, ca, token_file, basic_auth: {user,
password_file}) must be owned by the user running the agent and not
writable by others; token and password files not readable by others
either. Flags win over the file.

Needs root, or CAP_BPF and CAP_PERFMON, and a kernel (5.18+) with BTF.

Flags:
`

func init() {
	commands["agent"] = command{order: 17, run: runAgent,
		usage: "  wallprof agent [flags] --otlp URL -p PID  continuous profiling, pushed to OTLP or Pyroscope\n"}
}

// listFlag is a flag that may be repeated.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

type agentFlags struct {
	pids, processes                listFlag
	period, flushTimeout           time.Duration
	freq                           int
	otlp, pyroscope, service, host string
	protocol                       string
	spool, metrics, ca             string
	spoolMax                       int64
	tokenFile, user, passwordFile  string
	config                         string
	pidList                        []int
}

func parseAgentFlags(args []string, stdout, stderr io.Writer) (*agentFlags, int, bool) {
	f := &agentFlags{}
	fs := newCmdFlags("agent", agentUsage, stdout, stderr)
	fs.Var(&f.pids, "p", "record the running process `PID` (repeatable)")
	fs.Var(&f.pids, "pid", "same as -p")
	fs.Var(&f.processes, "process", "record every process named `NAME` (comm or executable), looked for every window (repeatable)")
	fs.DurationVar(&f.period, "period", 10*time.Second, "push one profile per process this often")
	fs.IntVar(&f.freq, "F", collect.DefaultFreq, "sampling frequency in `Hz` of on-CPU stacks (1 to 20000)")
	fs.StringVar(&f.otlp, "otlp", "", "push OTLP profiles to this `URL` (http:// or https://)")
	fs.StringVar(&f.protocol, "otlp-protocol", "http/protobuf", "send OTLP over `PROTOCOL`: http/protobuf or grpc (as OTEL_EXPORTER_OTLP_PROTOCOL)")
	fs.StringVar(&f.pyroscope, "pyroscope", "", "push to Pyroscope at this `URL`")
	fs.StringVar(&f.service, "service", "", "the service name (default: each process's name)")
	fs.StringVar(&f.host, "host", "", "the host name (default: this machine's)")
	fs.StringVar(&f.spool, "spool", "", "keep unsent profiles in this `DIR` (default: in memory)")
	fs.Int64Var(&f.spoolMax, "spool-max", 256<<20, "spool at most this many `BYTES` per endpoint")
	fs.StringVar(&f.metrics, "metrics", "127.0.0.1:9464", "serve Prometheus metrics at `ADDR`/metrics (\"off\": none)")
	fs.StringVar(&f.ca, "ca", "", "trust the PEM certificates in `FILE` for https endpoints")
	fs.StringVar(&f.tokenFile, "token-file", "", "send the bearer token in `FILE`")
	fs.StringVar(&f.user, "user", "", "basic auth user (with --password-file)")
	fs.StringVar(&f.passwordFile, "password-file", "", "basic auth password in `FILE`")
	fs.StringVar(&f.config, "config", "", "read the configuration from `FILE` (YAML)")
	fs.DurationVar(&f.flushTimeout, "flush-timeout", 10*time.Second, "at exit, try this long to push what is not sent yet")
	if code, done := fs.parse(args); done {
		return nil, code, true
	}
	if len(fs.Args()) > 0 {
		return nil, fs.usageError("unexpected argument %q: agent takes -p PID or --process NAME", fs.Args()[0]), true
	}
	if f.config != "" {
		c, err := agent.LoadConfig(f.config)
		if err != nil {
			return nil, fs.usageError("--config: %v", err), true
		}
		f.merge(c, fs)
	}
	for _, s := range f.pids {
		pid, err := strconv.Atoi(s)
		if err != nil || pid <= 0 {
			return nil, fs.usageError("-p %s is not a process ID", s), true
		}
		f.pidList = append(f.pidList, pid)
	}
	switch {
	case f.otlp == "" && f.pyroscope == "":
		return nil, fs.usageError("say where to push with --otlp URL or --pyroscope URL"), true
	case f.protocol != "http/protobuf" && f.protocol != "grpc":
		return nil, fs.usageError("--otlp-protocol %s: use http/protobuf or grpc", f.protocol), true
	case f.period < time.Second:
		return nil, fs.usageError("--period %s is too short: use 1s or more", f.period), true
	case f.freq < 1 || f.freq > collect.MaxFreq:
		return nil, fs.usageError("-F %d is out of range: use 1 to %d Hz", f.freq, collect.MaxFreq), true
	case f.spoolMax < 1<<20:
		return nil, fs.usageError("--spool-max %d is too small: use 1048576 bytes or more", f.spoolMax), true
	case f.tokenFile != "" && f.user != "":
		return nil, fs.usageError("give --token-file or --user, not both"), true
	case (f.user == "") != (f.passwordFile == ""):
		return nil, fs.usageError("basic auth needs both --user and --password-file"), true
	}
	return f, exitOK, false
}

// merge takes from the file what the command line did not set.
func (f *agentFlags) merge(c *agent.FileConfig, fs *cmdFlags) {
	str := func(flag string, dst *string, v string) {
		if !fs.isSet(flag) && v != "" {
			*dst = v
		}
	}
	str("otlp", &f.otlp, c.OTLP)
	str("otlp-protocol", &f.protocol, c.Protocol)
	str("pyroscope", &f.pyroscope, c.Pyroscope)
	str("service", &f.service, c.Service)
	str("host", &f.host, c.Host)
	str("spool", &f.spool, c.Spool)
	str("ca", &f.ca, c.CA)
	str("token-file", &f.tokenFile, c.TokenFile)
	str("user", &f.user, c.BasicAuth.User)
	str("password-file", &f.passwordFile, c.BasicAuth.PasswordFile)
	if c.Metrics != nil && !fs.isSet("metrics") {
		f.metrics = *c.Metrics
	}
	if !fs.isSet("p") && !fs.isSet("pid") {
		for _, p := range c.PIDs {
			f.pids = append(f.pids, strconv.Itoa(p))
		}
	}
	if !fs.isSet("process") {
		f.processes = append(f.processes, c.Processes...)
	}
	if !fs.isSet("period") && c.Period > 0 {
		f.period = c.Period
	}
	if !fs.isSet("F") && c.Frequency > 0 {
		f.freq = c.Frequency
	}
	if !fs.isSet("spool-max") && c.SpoolMax > 0 {
		f.spoolMax = c.SpoolMax
	}
}

func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, code, done := parseAgentFlags(args, stdout, stderr)
	if done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "wallprof agent: "+format+"\n", a...)
		return exitError
	}
	if msg := preflight(); msg != "" {
		return fail("%s", msg)
	}
	// The agent runs for days: the collector keeps its heap near what is
	// live (64 MiB) instead of letting it grow to twice that between
	// collections (system-wide, 180 MB of RSS after a minute without it,
	// 119 MB with it). GOMEMLIMIT overrides it. What it holds is small
	// (20 MB after ten minutes system-wide) and each window's profiles
	// live briefly: collected at 1.5 times the live heap rather than
	// twice (GOGC overrides it), the resident memory was 6 MB lower (80
	// against 86 MB after five minutes, bench/agentmem.sh).
	softMemoryLimitAfter(2 * time.Second)
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	var auth push.Auth
	var err error
	if f.tokenFile != "" {
		if auth.Token, err = agent.ReadSecret(f.tokenFile); err != nil {
			return fail("--token-file: %v.", err)
		}
	}
	if f.user != "" {
		auth.User = f.user
		if auth.Password, err = agent.ReadSecret(f.passwordFile); err != nil {
			return fail("--password-file: %v.", err)
		}
	}
	if f.host == "" {
		f.host, _ = os.Hostname()
	}
	logger := log.New(stderr, "wallprof agent: ", 0)
	metrics := agent.NewMetrics()
	o := record.Options{Freq: f.freq, Plan: setPlanFromEnv}
	var targets agent.Resolver = agent.Selector{PIDs: f.pidList, Names: f.processes}
	start := agent.RecordStart(o)
	if len(f.pidList) == 0 && len(f.processes) == 0 {
		all := agent.NewSystemWide(o, f.period)
		targets, start = all, all.Start
	}
	c := agent.Config{
		Targets: targets,
		Start:   start,
		Period:  f.period, Host: f.host, Service: f.service,
		FlushTimeout: f.flushTimeout, Metrics: metrics, Log: logger,
	}
	for _, e := range []struct{ kind, url string }{{"otlp", f.otlp}, {"pyroscope", f.pyroscope}} {
		if e.url == "" {
			continue
		}
		var ep *push.Endpoint
		if e.kind == "otlp" && f.protocol == "grpc" {
			ep, err = push.NewGRPCEndpoint(e.url, f.ca, auth, 30*time.Second)
		} else {
			ep, err = push.NewEndpoint(e.kind, e.url, f.ca, auth, 30*time.Second)
		}
		if err != nil {
			return fail("%v.", err)
		}
		defer ep.Close()
		dir := ""
		if f.spool != "" {
			dir = filepath.Join(f.spool, e.kind)
		}
		sp, err := agent.OpenSpool(dir, f.spoolMax)
		if err != nil {
			return fail("%v.", err)
		}
		if n := sp.Len(); n > 0 {
			logger.Printf("%s: %d profiles left in %s by a previous run will be sent first", ep, n, dir)
		}
		c.Sinks = append(c.Sinks, agent.Sink{Endpoint: ep, Spool: sp})
		logger.Printf("pushing to %s (%s, %s)", ep, ep.Protocol(), auth)
	}
	if f.metrics != "" && f.metrics != "off" {
		ln, err := net.Listen("tcp", f.metrics)
		if err != nil {
			return fail("--metrics %s: %v.", f.metrics, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
		// The agent's own profiles, for when its cost needs explaining.
		mux.HandleFunc("/debug/pprof/", httppprof.Index)
		mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", httppprof.Symbol)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		logger.Printf("metrics at http://%s/metrics", ln.Addr())
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := agent.Run(ctx, c); err != nil {
		if errors.Is(err, record.ErrExited) {
			return fail("%v.", err)
		}
		return fail("%s", startError(err))
	}
	return exitOK
}
