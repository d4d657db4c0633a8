package collect

import (
	"errors"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
)

// A kernel feature the recorder needs, and how to probe it.
type kernelFeature struct {
	name  string // what to tell the user, with the Linux version that brought it
	probe func() error
}

// recorderFeatures are probed before recording, so that a kernel without
// one of them gets a sentence naming it rather than a verifier log.
var recorderFeatures = []kernelFeature{
	{"BPF ring buffers (BPF_MAP_TYPE_RINGBUF, Linux 5.8)", func() error { return features.HaveMapType(ebpf.RingBuf) }},
	{"per-CPU array maps (BPF_MAP_TYPE_PERCPU_ARRAY)", func() error { return features.HaveMapType(ebpf.PerCPUArray) }},
	{"BTF-enabled tracepoints (tp_btf programs, Linux 5.5)", func() error { return features.HaveProgramType(ebpf.Tracing) }},
	{"BPF programs on perf events (the on-CPU sampling timer)", func() error { return features.HaveProgramType(ebpf.PerfEvent) }},
	{"kprobe BPF programs", func() error { return features.HaveProgramType(ebpf.Kprobe) }},
	{"the bpf_get_task_stack helper (Linux 5.9)", func() error { return features.HaveProgramHelper(ebpf.Kprobe, asm.FnGetTaskStack) }},
	{"the bpf_task_pt_regs helper (Linux 5.15)", func() error { return features.HaveProgramHelper(ebpf.Kprobe, asm.FnTaskPtRegs) }},
}

// MissingFeatureError says which kernel feature the recorder lacks.
type MissingFeatureError struct {
	Feature string
}

func (e *MissingFeatureError) Error() string {
	return "this kernel lacks " + e.Feature
}

// Unwrap lets errors.Is(err, ebpf.ErrNotSupported) match.
func (e *MissingFeatureError) Unwrap() error { return ebpf.ErrNotSupported }

// CheckFeatures probes the kernel for what recording needs (it needs the
// privileges to load BPF programs). The first feature missing is a
// *MissingFeatureError; a probe that cannot conclude (another error) is
// passed over: loading the programs will say what is wrong.
func CheckFeatures() error {
	return checkFeatures(recorderFeatures)
}

func checkFeatures(fs []kernelFeature) error {
	for _, f := range fs {
		if err := f.probe(); errors.Is(err, ebpf.ErrNotSupported) {
			return &MissingFeatureError{Feature: f.name}
		}
	}
	return nil
}

// String lists the features probed, for documentation and tests.
func featureNames() []string {
	names := make([]string, len(recorderFeatures))
	for i, f := range recorderFeatures {
		names[i] = f.name
	}
	return names
}
