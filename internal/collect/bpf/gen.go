// Package bpf holds wallprof's eBPF program (wallprof.bpf.c) and the Go
// bindings and object that bpf2go generates from it. The generated files are
// committed so that building wallprof never needs clang; `go generate` (with
// clang and libbpf-dev installed) rebuilds them, and a test checks that the
// committed object matches the source.
package bpf

//go:generate go tool bpf2go -go-package bpf -target amd64 -type sample_event -type exit_event -type tail_event -type tstate -type tgid_set -type thread_snap -type unw_row -type unw_file -type unw_proc -type unw_map Wallprof src/wallprof.bpf.c -- -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror -mcpu=v3
