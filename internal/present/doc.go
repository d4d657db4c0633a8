// Package present turns a wallprof profile (package profile) into the
// formats people read and other tools consume, and reads profiles back.
//
// Contract:
//   - WritePprof writes a gzipped pprof protobuf that `go tool pprof` opens,
//     with three sample types (wall, cpu and offcpu, all nanoseconds, wall
//     the default) and per-sample labels pid, tid, thread and state. What
//     pprof has no field for (thread totals, lost events, cost, notes,
//     command) is kept in versioned "wallprof:v1" comments (see comments.go)
//     so that ReadProfile(WritePprof(p)) gives p back.
//   - ReadProfile reads any pprof profile; a foreign one (a Go CPU profile,
//     say) is mapped onto the model with a note saying what is unknown.
//     Invalid input is an error of type *FormatError, never a panic.
//   - WriteCollapsed writes FlameGraph/inferno "folded" stacks.
//   - WriteReport writes the text (or JSON) report of `wallprof report`.
//
// All output is deterministic: the same profile gives the same bytes.
// Names (functions, threads) are never truncated.
package present
