package push

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"
	"github.com/grafana/pyroscope-go/upstream"
	collpb "go.opentelemetry.io/proto/slim/otlp/collector/profiles/v1development"
	"google.golang.org/protobuf/proto"

	"github.com/wallprof/wallprof/internal/profile"
)

// testWindow is a window with two threads of a process, inlined frames,
// an unknown frame, every state, and n extra small stacks.
func testWindow(n int) *Window {
	exe := &profile.Mapping{ID: 1, Start: 0x400000, Limit: 0x500000, File: "/usr/bin/api", BuildID: "0123456789abcdef0123456789abcdef01234567"}
	kern := &profile.Mapping{ID: 2, Kernel: true}
	main := &profile.Location{ID: 1, Mapping: exe, Address: 0x401000, Frames: []profile.Frame{{Function: "main", File: "main.c", Line: 10}}}
	work := &profile.Location{ID: 2, Mapping: exe, Address: 0x402000, Frames: []profile.Frame{
		{Function: "inner", File: "w.c", Line: 3}, {Function: "work", File: "w.c", Line: 20}}}
	unknown := &profile.Location{ID: 3, Mapping: exe, Address: 0x403000}
	sched := &profile.Location{ID: 4, Mapping: kern, Address: 0xffffffff81000000, Frames: []profile.Frame{{Function: "schedule"}}}
	p := &profile.Profile{Start: time.Unix(1700000000, 0), Duration: 2 * time.Second, Period: int64(time.Second) / 99,
		Command: "api --port 80", Program: "/usr/bin/api", Mappings: []*profile.Mapping{exe, kern},
		Locs: []*profile.Location{main, work, unknown, sched}, Notes: []string{"a note"}}
	add := func(tid int, name string, st profile.State, v int64, stack ...*profile.Location) {
		p.Samples = append(p.Samples, &profile.Sample{Stack: stack, PID: 100, TID: tid, Thread: name, State: st, Value: v})
	}
	add(100, "api", profile.OnCPU, 700e6, work, main)
	add(100, "api", profile.Runnable, 300e6, unknown, main)
	add(100, "api", profile.Sleeping, 1000e6, sched, main)
	add(101, "worker", profile.Disk, 1500e6, sched, work, main)
	add(101, "worker", profile.Other, 500e6, main)
	for i := range n {
		loc := &profile.Location{ID: uint64(10 + i), Mapping: exe, Address: 0x410000 + uint64(i), Frames: []profile.Frame{{Function: fmt.Sprintf("f%d", i)}}}
		p.Locs = append(p.Locs, loc)
		add(102+i%3, "extra", profile.State(i%int(profile.NumStates)), int64(1000+i), loc, main)
	}
	threads := map[int]*profile.Thread{}
	for _, s := range p.Samples {
		th := threads[s.TID]
		if th == nil {
			th = &profile.Thread{PID: s.PID, TID: s.TID, Name: s.Thread, End: p.Duration}
			threads[s.TID] = th
			p.Threads = append(p.Threads, th)
		}
		th.Time[s.State] += time.Duration(s.Value)
	}
	return &Window{Profile: p, Meta: Meta{Host: "host1", Service: "checkout", PID: 100, Comm: "api", Exe: "/usr/bin/api",
		BuildID: exe.BuildID, Command: "api --port 80", Cgroup: "/system.slice/docker-" + strings.Repeat("ab", 32) + ".scope",
		ContainerID: strings.Repeat("ab", 32), Started: time.Unix(1699999990, 0), Seq: 7,
		Start: time.Unix(1700000000, 0), End: time.Unix(1700000002, 0)}}
}

// The OTLP request decodes as the collector's ExportProfilesServiceRequest,
// and each thread's time per state is the profile's.
func TestAgentOTLPRoundTrip(t *testing.T) {
	w := testWindow(0)
	b, err := EncodeOTLP(w)
	if err != nil {
		t.Fatal(err)
	}
	var req collpb.ExportProfilesServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		t.Fatalf("not an ExportProfilesServiceRequest: %v", err)
	}
	// Re-encode through the collector's type: the same bytes.
	b2, err := proto.MarshalOptions{Deterministic: true}.Marshal(&req)
	if err != nil || !bytes.Equal(b, b2) {
		t.Errorf("the request does not re-encode to the same bytes as an ExportProfilesServiceRequest (err %v)", err)
	}
	data, err := DecodeOTLP(b)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := ReadOTLP(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 {
		t.Fatalf("%d profiles, want 1", len(ws))
	}
	got := ws[0]
	for _, th := range w.Profile.Threads {
		for st, d := range th.Time {
			if d == 0 {
				continue
			}
			name := profile.State(st).String()
			if g := got.Time[int64(th.TID)][name]; g != int64(d) {
				t.Errorf("thread %d %s: %d ns in OTLP, %d in the profile", th.TID, name, g, d)
			}
		}
	}
	if got.Seq != 7 || got.Start != w.Meta.Started.UnixNano() || got.Duration != int64(2*time.Second) {
		t.Errorf("seq %d, recording %d, duration %d", got.Seq, got.Start, got.Duration)
	}
	for k, want := range map[string]any{KeyService: "checkout", KeyHost: "host1", KeyPID: int64(100), KeyExeName: "api",
		KeyExePath: "/usr/bin/api", KeyBuildIDGNU: w.Meta.BuildID, KeyContainerID: w.Meta.ContainerID, KeyCgroup: w.Meta.Cgroup} {
		if got.Resource[k] != want {
			t.Errorf("resource %s = %v, want %v", k, got.Resource[k], want)
		}
	}
	// The dictionary: the inlined frames in order, the unknown frame named.
	d := data.Dictionary
	p := data.ResourceProfiles[0].ScopeProfiles[0].Profiles[0]
	names := func(s int) []string {
		var out []string
		for _, li := range d.StackTable[p.Samples[s].StackIndex].LocationIndices {
			for _, ln := range d.LocationTable[li].Lines {
				out = append(out, d.StringTable[d.FunctionTable[ln.FunctionIndex].NameStrindex])
			}
		}
		return out
	}
	if g := strings.Join(names(0), ";"); g != "inner;work;main" {
		t.Errorf("stack 0 = %s, want inner;work;main", g)
	}
	if g := strings.Join(names(1), ";"); !strings.HasPrefix(g, "api+0x") {
		t.Errorf("stack 1 = %s, want the unknown frame named after its module", g)
	}
	if d.StringTable[p.SampleType.TypeStrindex] != "wall" || d.StringTable[p.PeriodType.TypeStrindex] != "wall" || p.Period != int64(time.Second)/99 {
		t.Errorf("sample types %v, period %v %d", p.SampleType, p.PeriodType, p.Period)
	}
	if len(p.ProfileId) != 16 {
		t.Errorf("profile id of %d bytes", len(p.ProfileId))
	}
	again, _ := EncodeOTLP(testWindow(0))
	if !bytes.Equal(b, again) {
		t.Error("the same window encodes to different bytes")
	}
}

// pyroscopeServer checks requests the way Pyroscope's /ingest reads them
// and returns the parsed pprof profiles.
func parsePyroscope(t *testing.T, r *PyroscopeRequest) (url.Values, *pprof.Profile, map[string]*upstream.SampleType) {
	t.Helper()
	q, err := url.ParseQuery(r.Query)
	if err != nil {
		t.Fatal(err)
	}
	mt, params, err := mime.ParseMediaType(r.ContentType)
	if err != nil || mt != "multipart/form-data" {
		t.Fatalf("content type %q", r.ContentType)
	}
	mr := multipart.NewReader(bytes.NewReader(r.Body), params["boundary"])
	var pp *pprof.Profile
	var cfg map[string]*upstream.SampleType
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(part)
		switch part.FormName() {
		case "profile":
			if pp, err = pprof.ParseData(b); err != nil {
				t.Fatal(err)
			}
		case "sample_type_config":
			if err := json.Unmarshal(b, &cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	if pp == nil || cfg == nil {
		t.Fatal("no profile or no sample_type_config part")
	}
	return q, pp, cfg
}

func TestAgentPyroscopePayload(t *testing.T) {
	w := testWindow(0)
	r, err := EncodePyroscope(w, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	q, pp, cfg := parsePyroscope(t, r)
	for k, want := range map[string]string{"format": "pprof", "spyName": "wallprof", "sampleRate": "99",
		"from": strconv.FormatInt(w.Meta.Start.UnixNano(), 10), "until": strconv.FormatInt(w.Meta.End.UnixNano(), 10),
		"name": "checkout{container_id=" + w.Meta.ContainerID + ",hostname=host1,pid=100,process=api,service_name=checkout}"} {
		if q.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, q.Get(k), want)
		}
	}
	// Every sample type of the profile is configured, so Pyroscope shows
	// wall, CPU and off-CPU.
	for _, st := range pp.SampleType {
		c := cfg[st.Type]
		if c == nil || c.Units != st.Unit || c.Aggregation != "sum" || c.Cumulative {
			t.Errorf("sample type %s/%s: config %+v", st.Type, st.Unit, c)
		}
	}
	if cfg["offcpu"] == nil || cfg["offcpu"].DisplayName != "off_cpu" {
		t.Errorf("offcpu config %+v", cfg["offcpu"])
	}
	if r.Merged != 0 || len(pp.Sample) != 5 {
		t.Errorf("merged %d, %d samples", r.Merged, len(pp.Sample))
	}
}

// Over the limits, the smallest stacks are merged per state; each state's
// total stays.
func TestAgentPyroscopeLimits(t *testing.T) {
	w := testWindow(3000)
	var want [profile.NumStates]int64
	for _, s := range w.Profile.Samples {
		want[s.State] += s.Value
	}
	for _, lim := range []Limits{{MaxSamples: 100}, {MaxBytes: 40 << 10}} {
		r, err := EncodePyroscope(w, lim)
		if err != nil {
			t.Fatal(err)
		}
		_, pp, _ := parsePyroscope(t, r)
		var got [profile.NumStates]int64
		merged := 0
		for _, s := range pp.Sample {
			st, _ := profile.ParseState(s.Label["state"][0])
			got[st] += s.Value[0]
			if m := s.Label[LabelMerged]; len(m) > 0 {
				n, _ := strconv.Atoi(m[0])
				merged += n
				if fn := s.Location[0].Line[0].Function.Name; fn != OtherFunction {
					t.Errorf("merged stack's leaf %q", fn)
				}
			}
		}
		if got != want {
			t.Errorf("%+v: totals by state %v, want %v", lim, got, want)
		}
		if merged != r.Merged || merged == 0 {
			t.Errorf("%+v: merged %d, labels say %d", lim, r.Merged, merged)
		}
		if lim.MaxSamples > 0 && len(pp.Sample) > lim.MaxSamples {
			t.Errorf("%d samples, limit %d", len(pp.Sample), lim.MaxSamples)
		}
		if lim.MaxBytes > 0 {
			var raw bytes.Buffer
			pp.WriteUncompressed(&raw)
			if raw.Len() > lim.MaxBytes+1024 { // pprof re-encodes the string table slightly differently
				t.Errorf("%d bytes uncompressed, limit %d", raw.Len(), lim.MaxBytes)
			}
		}
	}
}

func TestAgentBackoff(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second}
	for _, tc := range []struct {
		n        int
		lo, hi   time.Duration
		r        float64
		expected time.Duration
	}{{0, 50, 100, 0, 50 * time.Millisecond}, {1, 100, 200, 0.999, 0}, {3, 400, 800, 0.5, 600 * time.Millisecond}, {10, 1000, 2000, 0, time.Second}, {60, 1000, 2000, 0.999, 0}} {
		b.Rand = func() float64 { return tc.r }
		d := b.Delay(tc.n)
		if d < tc.lo*time.Millisecond || d > tc.hi*time.Millisecond {
			t.Errorf("Delay(%d) = %s, want in [%dms, %dms]", tc.n, d, tc.lo, tc.hi)
		}
		if tc.expected != 0 && d != tc.expected {
			t.Errorf("Delay(%d) with rand %v = %s, want %s", tc.n, tc.r, d, tc.expected)
		}
	}
	b.Rand = nil
	seen := map[time.Duration]bool{}
	for range 20 {
		seen[b.Delay(2)] = true
	}
	if len(seen) < 2 {
		t.Error("no jitter")
	}
}

// Send: the OTLP path and content type, auth headers, status classes,
// Retry-After, partial success, https with --ca, and no secret in errors.
func TestAgentSend(t *testing.T) {
	var status int
	var got *http.Request
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		if status == 200 {
			// partial_success { rejected_profiles: 2, error_message: "x" }
			w.Write([]byte{0x0a, 0x05, 0x08, 0x02, 0x12, 0x01, 'x'})
			return
		}
		w.Header().Set("Retry-After", "3")
		http.Error(w, "no", status)
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pemOf(srv.Certificate().Raw), 0o600)
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("alice", "s3cret-pw")
	ep, err := NewEndpoint("otlp", u.String(), ca, Auth{}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ep.String(), "s3cret") {
		t.Errorf("endpoint shown as %s", ep)
	}
	req := Request{Path: OTLPPath, ContentType: OTLPContentType, Body: []byte{1}}
	status = 200
	rej, err := ep.Send(context.Background(), req)
	if err != nil || rej == nil || rej.Profiles != 2 || rej.Message != "x" {
		t.Fatalf("Send = %+v, %v", rej, err)
	}
	if got.URL.Path != "/v1development/profiles" || got.Header.Get("Content-Type") != "application/x-protobuf" {
		t.Errorf("request to %s as %s", got.URL.Path, got.Header.Get("Content-Type"))
	}
	if user, pw, ok := got.BasicAuth(); !ok || user != "alice" || pw != "s3cret-pw" {
		t.Errorf("basic auth %q %q %v", user, pw, ok)
	}
	for _, tc := range []struct {
		status    int
		retryable bool
	}{{503, true}, {429, true}, {500, true}, {400, false}, {401, false}, {413, false}} {
		status = tc.status
		_, err := ep.Send(context.Background(), req)
		pe, ok := err.(*Error)
		if !ok || pe.Retryable != tc.retryable || pe.Status != tc.status {
			t.Errorf("status %d: %v", tc.status, err)
		}
		if tc.retryable && pe.RetryAfter != 3*time.Second {
			t.Errorf("status %d: Retry-After %s", tc.status, pe.RetryAfter)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	// Bearer token; without --ca the test server's certificate is refused.
	ep, _ = NewEndpoint("otlp", srv.URL, ca, Auth{Token: "tok-123"}, 5*time.Second)
	status = 200
	ep.Send(context.Background(), req)
	if h := got.Header.Get("Authorization"); h != "Bearer tok-123" {
		t.Errorf("Authorization %q", h)
	}
	noCA, _ := NewEndpoint("otlp", srv.URL, "", Auth{Token: "tok-123"}, 5*time.Second)
	_, err = noCA.Send(context.Background(), req)
	if pe, ok := err.(*Error); !ok || !pe.Retryable || strings.Contains(err.Error(), "tok-123") {
		t.Errorf("without the CA: %v", err)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	ep, _ = NewEndpoint("pyroscope", closed.URL, "", Auth{Token: "tok-123"}, time.Second)
	_, err = ep.Send(context.Background(), Request{Path: PyroscopePath, Query: "name=a"})
	if pe, ok := err.(*Error); !ok || !pe.Retryable || pe.Status != 0 {
		t.Errorf("endpoint down: %v", err)
	}
}
