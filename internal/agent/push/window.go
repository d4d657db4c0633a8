// Package push turns one window of a wall-clock profile into the requests
// the stores teams already run accept, and sends them:
//
//   - OTLP profiles (the official OpenTelemetry protobufs, OTLPModule at
//     OTLPVersion, profiles/v1development), POSTed as protobuf to
//     /v1development/profiles or sent over gRPC (ProfilesService.Export);
//   - Pyroscope's push API (/ingest?format=pprof), a pprof body in a
//     multipart form with its sample type configuration.
//
// Encoding is pure: a Window gives the same bytes every time (apart from
// nothing: even the OTLP profile id is derived from the window's identity),
// so that a window spooled, replayed and sent twice can be recognised. The
// sender (Endpoint.Send) classifies failures as retryable or not; retrying,
// spooling and backoff belong to the caller (internal/agent).
package push

import (
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// OTLPModule, at OTLPVersion, is the Go module of the official
// OpenTelemetry protobufs whose profiles/v1development messages OTLP
// requests are encoded with (its collector/profiles/v1development module,
// at the same version, has the request). CollectorRelease is the
// OpenTelemetry Collector release that speaks the same profiles protocol
// (its pdata/pprofile pins these modules and tests its own encoding
// against them), the one the tests push to.
const (
	OTLPModule       = "go.opentelemetry.io/proto/slim/otlp/profiles/v1development"
	OTLPVersion      = "v0.4.0"
	CollectorRelease = "v0.161.0"
)

// Meta is what a window is labelled with: where its profile comes from.
type Meta struct {
	Host    string
	Service string
	PID     int
	Comm    string // the process's name (/proc/PID/comm)
	Exe     string // the path of its main executable
	BuildID string // the main executable's build ID (GNU, hex; or Go's)
	Command string // its command line
	// Cgroup is the process's cgroup v2 path; ContainerID the container
	// id found in it ("" when the process is not in a container).
	Cgroup      string
	ContainerID string
	// Started identifies the recording (when the agent started it);
	// Seq numbers its windows from 1, so that a receiver sees any window
	// missing or repeated.
	Started time.Time
	Seq     uint64
	// Start and End are the window's wall-clock bounds.
	Start, End time.Time
}

// A Window is the profile of one process over one period.
type Window struct {
	Meta    Meta
	Profile *profile.Profile
}

// Attribute and label keys. The resource keys follow the OpenTelemetry
// semantic conventions; wallprof's own keys start with "wallprof.".
const (
	KeyService     = "service.name"
	KeyHost        = "host.name"
	KeyPID         = "process.pid"
	KeyExeName     = "process.executable.name"
	KeyExePath     = "process.executable.path"
	KeyBuildIDGNU  = "process.executable.build_id.gnu"
	KeyBuildIDGo   = "process.executable.build_id.go"
	KeyCommandLine = "process.command_line"
	KeyContainerID = "container.id"
	KeyCgroup      = "wallprof.cgroup"
	KeyThreadID    = "thread.id"
	KeyThreadName  = "thread.name"
	KeyState       = "wallprof.state"
	KeySeq         = "wallprof.window.seq"
	KeyRecording   = "wallprof.recording.start"
	KeyNotes       = "wallprof.notes"
)
