package push

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pyroscope "github.com/grafana/pyroscope-go"
	"github.com/grafana/pyroscope-go/upstream"
	"github.com/grafana/pyroscope-go/upstream/remote"
)

// capture is a local server that keeps the requests it is sent.
type capture struct {
	mu   sync.Mutex
	reqs []captured
}

type captured struct {
	path  string
	query url.Values
	parts map[string]formPart
}

type formPart struct {
	file string
	data []byte
}

func (c *capture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	parts, err := formParts(r.Header.Get("Content-Type"), body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, captured{path: r.URL.Path, query: r.URL.Query(), parts: parts})
	c.mu.Unlock()
}

func (c *capture) first(t *testing.T, within time.Duration) captured {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		c.mu.Lock()
		n := len(c.reqs)
		c.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Pyroscope's client sent nothing in %v", within)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reqs[0]
}

func formParts(contentType string, body []byte) (map[string]formPart, error) {
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, err
	}
	out := map[string]formPart{}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		b, _ := io.ReadAll(p)
		out[p.FormName()] = formPart{file: p.FileName(), data: b}
	}
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Debugf(string, ...any) {}
func (quietLogger) Errorf(string, ...any) {}

// The push is the request Pyroscope's own Go client (pyroscope-go, whose
// uploader the Pyroscope project maintains) sends for the same upload: its
// upstream/remote uploader is given the window as an UploadJob and sends
// it to a local server; the path, every query parameter it sets, and the
// multipart parts (names, file names, contents; the sample type
// configuration decoded as the client's own type) are the same as ours.
// wallprof adds only format=pprof, which the ingest API documents.
func TestAgentPyroscopeMatchesClient(t *testing.T) {
	w := testWindow(0)
	r, err := EncodePyroscope(w, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	oursQuery, _ := url.ParseQuery(r.Query)
	oursParts, err := formParts(r.ContentType, r.Body)
	if err != nil {
		t.Fatal(err)
	}
	rate, _ := strconv.Atoi(oursQuery.Get("sampleRate"))

	c := &capture{}
	srv := httptest.NewServer(c)
	defer srv.Close()
	up, err := remote.NewRemote(remote.Config{Address: srv.URL, Threads: 1, Timeout: 5 * time.Second, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	up.Start()
	up.Upload(&upstream.UploadJob{Name: PyroscopeName(w.Meta), StartTime: w.Meta.Start, EndTime: w.Meta.End,
		SpyName: "wallprof", SampleRate: uint32(rate), Format: upstream.FormatPprof,
		Profile: oursParts["profile"].data, SampleTypeConfig: PyroscopeSampleTypes})
	up.Flush()
	up.Stop()
	theirs := c.first(t, 5*time.Second)

	if theirs.path != PyroscopePath {
		t.Errorf("the client posts to %s, we to %s", theirs.path, PyroscopePath)
	}
	for k := range theirs.query {
		if v := theirs.query.Get(k); v != "" && oursQuery.Get(k) != v {
			t.Errorf("query %s: the client sends %q, we %q", k, v, oursQuery.Get(k))
		}
	}
	for k := range oursQuery {
		if theirs.query.Get(k) == "" && k != "format" {
			t.Errorf("query %s=%q: the client has no such parameter", k, oursQuery.Get(k))
		}
	}
	if len(theirs.parts) != len(oursParts) {
		t.Errorf("the client sends parts %v, we %v", keys(theirs.parts), keys(oursParts))
	}
	for name, tp := range theirs.parts {
		op, ok := oursParts[name]
		if !ok || op.file != tp.file {
			t.Errorf("part %s (file %q): ours is %+v", name, tp.file, op.file)
			continue
		}
		if name == "sample_type_config" {
			var a, b map[string]*upstream.SampleType
			if err := json.Unmarshal(tp.data, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(op.data, &b); err != nil {
				t.Fatalf("our sample_type_config is not the client's type: %v", err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("sample_type_config: the client's %s, ours %s", tp.data, op.data)
			}
		} else if !bytes.Equal(op.data, tp.data) {
			t.Errorf("part %s differs", name)
		}
	}
}

// The application name and labels are written as Pyroscope's Go client
// writes them: its profiler, started with the same application name and
// labels, names its uploads "APP{labels, sorted}"; without the labels the
// client adds of its own (session, runtime, scope), that is our name.
func TestAgentPyroscopeNameAsClient(t *testing.T) {
	m := testWindow(0).Meta
	tags := map[string]string{"hostname": m.Host, "pid": strconv.Itoa(m.PID), "process": m.Comm,
		"container_id": m.ContainerID, "service_name": m.Service}
	c := &capture{}
	srv := httptest.NewServer(c)
	defer srv.Close()
	p, err := pyroscope.Start(pyroscope.Config{ApplicationName: m.Service, Tags: tags, ServerAddress: srv.URL,
		UploadRate: 100 * time.Millisecond, Logger: quietLogger{},
		ProfileTypes: []pyroscope.ProfileType{pyroscope.ProfileInuseSpace}})
	if err != nil {
		t.Fatal(err)
	}
	got := c.first(t, 10*time.Second)
	p.Stop()
	name := got.query.Get("name")
	app, rest, ok := strings.Cut(strings.TrimSuffix(name, "}"), "{")
	if !ok {
		t.Fatalf("the client's name %q has no labels", name)
	}
	var kept []string
	for _, l := range strings.Split(rest, ",") {
		if k, _, _ := strings.Cut(l, "="); tags[k] != "" {
			kept = append(kept, l)
		}
	}
	if !sort.StringsAreSorted(kept) {
		t.Errorf("the client's labels are not sorted: %q", name)
	}
	if want, ours := app+"{"+strings.Join(kept, ",")+"}", PyroscopeName(m); ours != want {
		t.Errorf("our name %q; the client's, without its own labels, %q (from %q)", ours, want, name)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
