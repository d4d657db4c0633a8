package push

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/grafana/pyroscope-go/upstream"

	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

// PyroscopePath is Pyroscope's push API.
const PyroscopePath = "/ingest"

// Pyroscope's default limits on one profile.
const (
	PyroscopeMaxBytes   = 4 << 20 // uncompressed pprof
	PyroscopeMaxSamples = 16000
)

// OtherFunction names the stack the smallest stacks of a state are merged
// into when a profile is over Pyroscope's limits.
const OtherFunction = "[other]"

// LabelMerged is the sample label of a merged "[other]" stack: how many
// stacks it stands for.
const LabelMerged = "merged_stacks"

// PyroscopeSampleTypes tell Pyroscope how to read wallprof's sample types:
// each is a sum of nanoseconds over the window (not a running total), and
// it shows them as wall, cpu and off_cpu. The type is the one of
// Pyroscope's own Go client (its sample_type_config entries).
var PyroscopeSampleTypes = map[string]*upstream.SampleType{
	"wall":   {Units: "nanoseconds", Aggregation: "sum", DisplayName: "wall"},
	"cpu":    {Units: "nanoseconds", Aggregation: "sum", DisplayName: "cpu"},
	"offcpu": {Units: "nanoseconds", Aggregation: "sum", DisplayName: "off_cpu"},
}

// Limits bound one Pyroscope profile.
type Limits struct {
	MaxBytes   int // uncompressed pprof bytes
	MaxSamples int
}

// PyroscopeRequest is one push: the query string and the multipart body.
type PyroscopeRequest struct {
	Query       string
	ContentType string
	Body        []byte
	// Merged is how many stacks were merged into "[other]" stacks to fit
	// the limits (0: none).
	Merged int
}

// EncodePyroscope encodes w for Pyroscope's /ingest: name
// "SERVICE{service_name=…,hostname=…,pid=…,process=…[,container_id=…]}",
// from and until in Unix nanoseconds (as Pyroscope's Go client sends
// them), format=pprof, sampleRate the sampling frequency, spyName wallprof;
// the body is a multipart form with the gzipped pprof profile (sample
// types wall, cpu and offcpu, as wallprof writes them) in "profile" and
// PyroscopeSampleTypes in "sample_type_config".
//
// A profile over the limits keeps its largest stacks and merges the
// smallest of each state into one "[other]" stack per state, labelled
// merged_stacks=N, thread "[other]": each state's total is unchanged, the
// merged stacks' threads are not kept.
func EncodePyroscope(w *Window, lim Limits) (*PyroscopeRequest, error) {
	if w.Profile == nil {
		return nil, fmt.Errorf("encode Pyroscope: nil profile")
	}
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = PyroscopeMaxBytes
	}
	if lim.MaxSamples <= 0 {
		lim.MaxSamples = PyroscopeMaxSamples
	}
	p, merged := w.Profile, 0
	keep := len(p.Samples)
	// Room for the "[other]" stacks: one per state.
	if keep > lim.MaxSamples {
		keep = lim.MaxSamples - int(profile.NumStates)
	}
	var pprofBytes []byte
	for {
		q, n := p, 0
		if keep < len(p.Samples) {
			q, n = mergeTail(p, keep)
		}
		var buf bytes.Buffer
		if err := present.WritePprof(&buf, q); err != nil {
			return nil, fmt.Errorf("encode Pyroscope: %w", err)
		}
		size, err := gunzipSize(buf.Bytes())
		if err != nil {
			return nil, err
		}
		if size <= lim.MaxBytes {
			pprofBytes, merged = buf.Bytes(), n
			break
		}
		if keep == 0 {
			return nil, fmt.Errorf("encode Pyroscope: %d bytes without any stack, over the limit of %d", size, lim.MaxBytes)
		}
		keep /= 2
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("profile", "profile.pprof")
	if err != nil {
		return nil, err
	}
	fw.Write(pprofBytes)
	fw, err = mw.CreateFormFile("sample_type_config", "sample_type_config.json")
	if err != nil {
		return nil, err
	}
	cfg, _ := json.Marshal(PyroscopeSampleTypes)
	fw.Write(cfg)
	if err := mw.Close(); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Set("name", PyroscopeName(w.Meta))
	q.Set("from", strconv.FormatInt(w.Meta.Start.UnixNano(), 10))
	q.Set("until", strconv.FormatInt(w.Meta.End.UnixNano(), 10))
	q.Set("format", "pprof")
	q.Set("spyName", "wallprof")
	if p.Period > 0 {
		q.Set("sampleRate", strconv.FormatInt(1e9/p.Period, 10))
	}
	return &PyroscopeRequest{Query: q.Encode(), ContentType: mw.FormDataContentType(), Body: body.Bytes(), Merged: merged}, nil
}

// PyroscopeName is the application name with its labels, label names
// sorted, as Pyroscope's Go client writes it: "SERVICE{container_id=…,
// hostname=…,pid=…,process=…,service_name=…}".
func PyroscopeName(m Meta) string {
	service := m.Service
	if service == "" {
		service = m.Comm
	}
	labels := [][2]string{{"service_name", service}, {"hostname", m.Host}, {"pid", strconv.Itoa(m.PID)}, {"process", m.Comm}}
	if m.ContainerID != "" {
		labels = append(labels, [2]string{"container_id", m.ContainerID})
	}
	sort.Slice(labels, func(i, j int) bool { return labels[i][0] < labels[j][0] })
	var b strings.Builder
	b.WriteString(labelValue(service))
	b.WriteString("{")
	for i, l := range labels {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(l[0] + "=" + labelValue(l[1]))
	}
	b.WriteString("}")
	return b.String()
}

// labelValue keeps what Pyroscope's name syntax allows in a value.
func labelValue(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '{', '}', ',', '=', '"', ' ':
			return '_'
		}
		return r
	}, s)
}

// mergeTail returns a copy of p with its keep largest samples and, for
// each state, the others merged into one "[other]" sample; n is how many
// samples were merged.
func mergeTail(p *profile.Profile, keep int) (*profile.Profile, int) {
	keep = max(keep, 0)
	order := make([]*profile.Sample, len(p.Samples))
	copy(order, p.Samples)
	sort.SliceStable(order, func(i, j int) bool { return order[i].Value > order[j].Value })
	q := *p
	q.Samples = append([]*profile.Sample(nil), order[:keep]...)
	q.Goroutines = nil // the goroutine view is not pushed
	var maxID uint64
	for _, l := range p.Locs {
		maxID = max(maxID, l.ID)
	}
	other := &profile.Location{ID: maxID + 1, Frames: []profile.Frame{{Function: OtherFunction}}}
	// Only the locations the kept stacks use.
	used := map[*profile.Location]bool{}
	for _, s := range q.Samples {
		for _, l := range s.Stack {
			used[l] = true
		}
	}
	q.Locs = nil
	for _, l := range p.Locs {
		if used[l] {
			q.Locs = append(q.Locs, l)
		}
	}
	q.Locs = append(q.Locs, other)
	var merged [profile.NumStates]*profile.Sample
	var count [profile.NumStates]int
	for _, s := range order[keep:] {
		m := merged[s.State]
		if m == nil {
			m = &profile.Sample{Stack: []*profile.Location{other}, PID: s.PID, Thread: OtherFunction, State: s.State}
			merged[s.State] = m
		}
		m.Value += s.Value
		count[s.State]++
	}
	for st, m := range merged {
		if m != nil {
			m.Labels = map[string]string{LabelMerged: strconv.Itoa(count[st])}
			q.Samples = append(q.Samples, m)
		}
	}
	return &q, len(order) - keep
}

func gunzipSize(b []byte) (int, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, zr)
	return int(n), err
}
