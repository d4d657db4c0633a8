// Package otelcoltest runs a real OpenTelemetry Collector for the agent's
// tests: the one internal/agent/testdata/otelcol/build.sh builds with the
// collector builder (OTLP receiver over HTTP and gRPC, file exporter, all
// at push.CollectorRelease), with profiles enabled, writing what it
// receives to a file; and reads that file back with the Collector's own
// pdata (pprofile's JSON unmarshaler), not with wallprof's decoder.
package otelcoltest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/wallprof/wallprof/internal/linux"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds the Collector once (build.sh keeps it in a cache
// directory, so later runs reuse it) and returns its path. When it cannot
// be built the test is skipped, or fails under CI=true, where .ci/run has
// built it.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		script := filepath.Join(filepath.Dir(file), "..", "testdata", "otelcol", "build.sh")
		var stderr bytes.Buffer
		cmd := exec.Command("bash", script)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			buildErr = fmt.Errorf("%s: %v\n%s", script, err, lastLines(stderr.String(), 20))
			return
		}
		binPath = strings.TrimSpace(string(out))
	})
	if buildErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but the OpenTelemetry Collector could not be built: %v", buildErr)
		}
		t.Skipf("cannot build the OpenTelemetry Collector here: %v", buildErr)
	}
	return binPath
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Collector is a running (or stopped) Collector: OTLP on HTTP and gRPC,
// profiles to a JSON-lines file.
type Collector struct {
	t          testing.TB
	bin, dir   string
	HTTP, GRPC string // the receivers' addresses, host:port
	Out        string // the file exporter's file
	cmd        *exec.Cmd
	exited     chan struct{}
	log        *os.File
}

// Start starts a Collector on free loopback ports; it is stopped at the
// end of the test.
func Start(t testing.TB) *Collector {
	t.Helper()
	c := &Collector{t: t, bin: Binary(t), dir: t.TempDir()}
	c.HTTP, c.GRPC = freePort(t), freePort(t)
	c.Out = filepath.Join(c.dir, "profiles.jsonl")
	conf := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
      grpc:
        endpoint: %s
exporters:
  file:
    path: %s
    append: true
    flush_interval: 100ms
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [file]
`, c.HTTP, c.GRPC, c.Out)
	if err := os.WriteFile(filepath.Join(c.dir, "config.yaml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Restart()
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(c.dir, "collector.log"))
			t.Logf("the Collector's log:\n%s", lastLines(string(b), 40))
		}
	})
	return c
}

func freePort(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Restart starts the stopped Collector again, on the same ports and file,
// and waits until both receivers accept connections.
func (c *Collector) Restart() {
	c.t.Helper()
	if c.cmd != nil {
		c.t.Fatal("otelcoltest: the Collector is running")
	}
	log, err := os.OpenFile(filepath.Join(c.dir, "collector.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.bin, "--config", filepath.Join(c.dir, "config.yaml"), "--feature-gates=+service.profilesSupport")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		c.t.Fatal(err)
	}
	c.cmd, c.log, c.exited = cmd, log, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(c.exited)
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range []string{c.HTTP, c.GRPC} {
		for {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
				break
			}
			select {
			case <-c.exited:
				b, _ := os.ReadFile(filepath.Join(c.dir, "collector.log"))
				c.cmd = nil
				c.t.Fatalf("the Collector exited at start:\n%s", lastLines(string(b), 40))
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("the Collector does not listen on %s after 30 s", addr)
			}
		}
	}
}

// Stop stops the Collector (SIGTERM: it flushes its file) and waits for it.
func (c *Collector) Stop() {
	if c.cmd == nil {
		return
	}
	_ = linux.Terminate(c.cmd.Process)
	select {
	case <-c.exited:
	case <-time.After(20 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
	}
	c.log.Close()
	c.cmd = nil
}

// Log is what the Collector wrote to its standard output and error.
func (c *Collector) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "collector.log"))
	return string(b)
}

// Sample is one sample of a received profile, its dictionary resolved.
type Sample struct {
	TID    int64
	Thread string
	State  string
	Value  int64
	Stack  []string // function names, leaf first, inlined frames innermost first
}

// Window is one received profile.
type Window struct {
	Resource   map[string]any // string, int64, ...: pcommon's AsRaw
	Attributes map[string]any // the profile's
	SampleType string         // type/unit
	Time       time.Time
	Duration   time.Duration
	Samples    []Sample
}

// ReadFile reads the file exporter's output: one OTLP JSON export request
// per line, each decoded by pdata's JSON unmarshaler.
func ReadFile(path string) ([]Window, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Window
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 256<<20)
	var u pprofile.JSONUnmarshaler
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		pd, err := u.UnmarshalProfiles(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		ws, err := Read(pd)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		out = append(out, ws...)
	}
	return out, sc.Err()
}

// Read resolves the profiles of pd through its dictionary, with pdata's
// accessors; an index out of range is an error.
func Read(pd pprofile.Profiles) ([]Window, error) {
	d := pd.Dictionary()
	strs, attrs := d.StringTable(), d.AttributeTable()
	str := func(i int32) (string, error) {
		if i < 0 || int(i) >= strs.Len() {
			return "", fmt.Errorf("string index %d out of range", i)
		}
		return strs.At(int(i)), nil
	}
	attrMap := func(idx pcommon.Int32Slice) (map[string]any, error) {
		m := map[string]any{}
		for _, i := range idx.All() {
			if i < 0 || int(i) >= attrs.Len() {
				return nil, fmt.Errorf("attribute index %d out of range", i)
			}
			k, err := str(attrs.At(int(i)).KeyStrindex())
			if err != nil {
				return nil, err
			}
			m[k] = attrs.At(int(i)).Value().AsRaw()
		}
		return m, nil
	}
	var out []Window
	for _, rp := range pd.ResourceProfiles().All() {
		res := rp.Resource().Attributes().AsRaw()
		for _, sp := range rp.ScopeProfiles().All() {
			for _, p := range sp.Profiles().All() {
				w := Window{Resource: res, Time: p.Time().AsTime(), Duration: time.Duration(p.DurationNano())}
				var err error
				if w.Attributes, err = attrMap(p.AttributeIndices()); err != nil {
					return nil, err
				}
				typ, err1 := str(p.SampleType().TypeStrindex())
				unit, err2 := str(p.SampleType().UnitStrindex())
				if err1 != nil || err2 != nil {
					return nil, fmt.Errorf("sample type: string index out of range")
				}
				w.SampleType = typ + "/" + unit
				for si, s := range p.Samples().All() {
					if s.Values().Len() != 1 {
						return nil, fmt.Errorf("sample %d has %d values", si, s.Values().Len())
					}
					a, err := attrMap(s.AttributeIndices())
					if err != nil {
						return nil, fmt.Errorf("sample %d: %v", si, err)
					}
					smp := Sample{Value: s.Values().At(0)}
					smp.TID, _ = a["thread.id"].(int64)
					smp.Thread, _ = a["thread.name"].(string)
					smp.State, _ = a["wallprof.state"].(string)
					if int(s.StackIndex()) >= d.StackTable().Len() || s.StackIndex() < 0 {
						return nil, fmt.Errorf("sample %d: stack index %d out of range", si, s.StackIndex())
					}
					for _, li := range d.StackTable().At(int(s.StackIndex())).LocationIndices().All() {
						if li < 0 || int(li) >= d.LocationTable().Len() {
							return nil, fmt.Errorf("sample %d: location index %d out of range", si, li)
						}
						for _, ln := range d.LocationTable().At(int(li)).Lines().All() {
							if ln.FunctionIndex() < 0 || int(ln.FunctionIndex()) >= d.FunctionTable().Len() {
								return nil, fmt.Errorf("sample %d: function index %d out of range", si, ln.FunctionIndex())
							}
							name, err := str(d.FunctionTable().At(int(ln.FunctionIndex())).NameStrindex())
							if err != nil {
								return nil, err
							}
							smp.Stack = append(smp.Stack, name)
						}
					}
					w.Samples = append(w.Samples, smp)
				}
				out = append(out, w)
			}
		}
	}
	return out, nil
}
