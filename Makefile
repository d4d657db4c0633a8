# The two commands of the README. `make demo` (as root) builds wallprof and
# the demo workload, records the demo and prints the report; `make test` runs
# every test (as root, so the recorder's tests run too).

GO ?= go
CC ?= gcc

.PHONY: demo test wallprof

wallprof:
	CGO_ENABLED=0 $(GO) build -o wallprof ./cmd/wallprof

examples/demo/demo: examples/demo/demo.c
	$(CC) -O1 -g -fno-omit-frame-pointer -pthread -o $@ $<

demo: wallprof examples/demo/demo
	./wallprof record -o demo.pb.gz -- ./examples/demo/demo
	./wallprof report demo.pb.gz

test:
	$(GO) test ./...
