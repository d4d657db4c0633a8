# The two commands of the README. `make demo` (as root) builds wallprof and
# the demo workload, records the demo and prints the report; `make test` runs
# every test (as root, so the recorder's tests run too).

GO ?= go
CC ?= gcc

.PHONY: demo test fuzz-smoke wallprof

wallprof:
	CGO_ENABLED=0 $(GO) build -o wallprof ./cmd/wallprof

examples/demo/demo: examples/demo/demo.c
	$(CC) -O1 -g -fno-omit-frame-pointer -pthread -o $@ $<

demo: wallprof examples/demo/demo
	./wallprof record -o demo.pb.gz -- ./examples/demo/demo
	./wallprof report demo.pb.gz

# One package at a time: the accuracy tests compare recorded time with what
# the workloads measure themselves, and the packages that build programs with
# several Go toolchains would otherwise compete with them for the 2 CPUs.
# cmd/wallprof's tests record for minutes (the agent's against a real
# Collector alone take 80 s): past go test's default 10 min per package.
test:
	$(GO) test -p 1 -timeout 30m ./...
	@# The other accountings against the ground truth as well (where the
	@# kernel has sched_exit_tp and schedstat the run above checked record's
	@# default, the walk): at each thread's resumption, which top and the
	@# agent use, and at each switch, which kernels before 6.16 or without
	@# schedstat get.
	WALLPROF_ACCOUNTING=resume $(GO) test -count=1 -run '^(TestRecordCGroundTruth|TestRecordCBursts|TestRecordGoProgram|TestRecordAttachTargetExits|TestRecordFollowsChildren|TestRecordSamplesAtFrequency|TestRecordThreadChurn)$$' ./cmd/wallprof
	@# The walk's first pass from a BPF timer (WALLPROF_WALK_TIMER=1, not
	@# the default yet: doc/walk-timer.md), on all but the bursts, where it
	@# is not as exact yet.
	WALLPROF_WALK_TIMER=1 $(GO) test -count=1 -run '^(TestRecordCGroundTruth|TestRecordGoProgram|TestRecordAttachTargetExits|TestRecordFollowsChildren|TestRecordSamplesAtFrequency|TestRecordThreadChurn|TestRecordUnwindsWithoutFramePointers)$$' ./cmd/wallprof
	WALLPROF_RESUME=0 $(GO) test -count=1 -run '^(TestRecordCGroundTruth|TestRecordCBursts|TestRecordGoProgram|TestRecordAttachTargetExits|TestRecordFollowsChildren|TestRecordSamplesAtFrequency)$$' ./cmd/wallprof
	cd examples/searchserver && $(GO) test ./...
	$(MAKE) fuzz-smoke

# A short run of every fuzz target over the parsers of untrusted input. The
# budget is a count of executions, not a duration: with a duration, Go 1.26's
# fuzz coordinator can fail a target with a bare "context deadline exceeded"
# when the time runs out (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 50000x
fuzz-smoke:
	$(GO) test -run '^$$' -fuzz '^FuzzReadProfile$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/present
	$(GO) test -run '^$$' -fuzz '^FuzzParseCFI$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/symbolize
	$(GO) test -run '^$$' -fuzz '^FuzzJitdump$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/symbolize
	$(GO) test -run '^$$' -fuzz '^FuzzPerfMap$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/symbolize
	$(GO) test -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/symbolize/gopclntab
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/collect
	$(GO) test -run '^$$' -fuzz '^FuzzPerfScript$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/convert
	$(GO) test -run '^$$' -fuzz '^FuzzPtPmp$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/convert
	$(GO) test -run '^$$' -fuzz '^FuzzEuStack$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/convert
	$(GO) test -run '^$$' -fuzz '^FuzzGdb$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/convert
	$(GO) test -run '^$$' -fuzz '^FuzzCollapsed$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/convert
	$(GO) test -run '^$$' -fuzz '^FuzzDetect$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/convert
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/goruntime/gctrace
	$(GO) test -run '^$$' -fuzz '^FuzzParseDiagnostics$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/goruntime/escapes
	$(GO) test -run '^$$' -fuzz '^FuzzSnapshot$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/goruntime/goroutines
	$(GO) test -run '^$$' -fuzz '^FuzzBenchParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/bench
