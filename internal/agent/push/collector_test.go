package push

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/agent/otelcoltest"
	"github.com/wallprof/wallprof/internal/profile"
)

// A real OpenTelemetry Collector (push.CollectorRelease, built with the
// collector builder, profiles enabled) accepts the window over OTLP/HTTP
// and OTLP/gRPC, and what its file exporter writes, read back with the
// Collector's pdata, is the window: its resource, sequence number, and
// each thread's time per state and stacks.
func TestAgentCollectorAcceptsOTLP(t *testing.T) {
	col := otelcoltest.Start(t)
	httpEP, err := NewEndpoint("otlp", "http://"+col.HTTP, "", Auth{Token: "t"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	grpcEP, err := NewGRPCEndpoint("http://"+col.GRPC, "", Auth{Token: "t"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer grpcEP.Close()
	for i, ep := range []*Endpoint{httpEP, grpcEP} {
		w := testWindow(3)
		w.Meta.Seq = uint64(i + 1)
		b, err := EncodeOTLP(w)
		if err != nil {
			t.Fatal(err)
		}
		rej, err := ep.Send(context.Background(), Request{Path: OTLPPath, ContentType: OTLPContentType, Body: b})
		if err != nil || rej != nil {
			t.Fatalf("%s: %v, rejected %+v\n%s", ep.Protocol(), err, rej, col.Log())
		}
	}
	col.Stop() // flushes the file
	ws, err := otelcoltest.ReadFile(col.Out)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 {
		t.Fatalf("the Collector wrote %d profiles, want 2 (HTTP, gRPC)", len(ws))
	}
	want := testWindow(3)
	for i, got := range ws {
		if seq := got.Attributes[KeySeq]; seq != int64(i+1) {
			t.Errorf("profile %d: %s = %v, want %d", i, KeySeq, seq, i+1)
		}
		if got.SampleType != "wall/nanoseconds" || got.Duration != 2*time.Second || !got.Time.Equal(want.Meta.Start) {
			t.Errorf("profile %d: sample type %s, time %v, duration %v", i, got.SampleType, got.Time, got.Duration)
		}
		for k, v := range map[string]any{KeyService: "checkout", KeyHost: "host1", KeyPID: int64(100),
			KeyContainerID: want.Meta.ContainerID, KeyBuildIDGNU: want.Meta.BuildID} {
			if got.Resource[k] != v {
				t.Errorf("profile %d: resource %s = %v, want %v", i, k, got.Resource[k], v)
			}
		}
		times := map[int64]map[string]int64{}
		for _, s := range got.Samples {
			if times[s.TID] == nil {
				times[s.TID] = map[string]int64{}
			}
			times[s.TID][s.State] += s.Value
		}
		for _, th := range want.Profile.Threads {
			for st, d := range th.Time {
				if g := times[int64(th.TID)][profile.State(st).String()]; g != int64(d) {
					t.Errorf("profile %d: thread %d %s: %d ns, want %d", i, th.TID, profile.State(st), g, d)
				}
			}
		}
		if s := got.Samples[0]; strings.Join(s.Stack, ";") != "inner;work;main" || s.Thread != "api" {
			t.Errorf("profile %d: sample 0 is %s in %s, want inner;work;main in api", i, strings.Join(s.Stack, ";"), s.Thread)
		}
	}
}
