// Package bpf holds the eBPF programs of wallprof latency (latency.bpf.c)
// and the Go bindings and object that bpf2go generates from them. The
// generated files are committed so that building wallprof never needs
// clang; `go generate` (with clang and libbpf-dev installed) rebuilds them,
// and a test checks that the committed object matches the source.
package bpf

//go:generate go tool bpf2go -go-package bpf -target amd64 -type fstat -type gkey -type gentry -type split -type stopped_call -type cpu_sample Latency src/latency.bpf.c -- -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror -mcpu=v3
