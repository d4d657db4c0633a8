// Package convert reads other tools' stack dumps and profiles into
// wallprof's profile model, and writes speedscope JSON.
//
// One file per input format, each with a parse function that turns the
// whole input into a *profile.Profile:
//
//	perf.go       `perf script` output with callchains: sampling events are
//	              on-CPU time, sched:sched_switch events and perf --off-cpu
//	              "offcpu-time" events are off-CPU time
//	ptpmp.go      pt-pmp output: "COUNT frame,frame,..." (leaf first)
//	eustack.go    `eu-stack -p PID` dumps, one or several snapshots
//	gdb.go        gdb `thread apply all bt` dumps, one or several snapshots
//	collapsed.go  folded stacks: "root;...;leaf COUNT"
//	pprof.go      pprof protobuf (gzipped or not), through present.ReadProfile
//
// Contract:
//   - Import never panics, whatever the input. Lines that are not the
//     format are counted in Result.Skipped (with the first one kept), never
//     silently dropped; an input from which nothing at all could be read is
//     an error.
//   - Stacks are leaf first; values are nanoseconds. Inputs with time (perf)
//     keep it; inputs with counts or snapshots weigh each one Options.Period
//     (DefaultPeriod unless set), and the profile's Period says so.
//   - What an input cannot tell (thread states, process IDs, exact thread
//     totals) is written in Profile.Notes, and unknown states are
//     profile.Other, as present.ReadProfile does for foreign pprof files.
//   - The output is deterministic: the same input gives the same profile.
package convert
