package exectrace

import (
	"os"
	"testing"
)

// BenchmarkAnalyzeFile analyses the trace named by $WALLPROF_TRACE (for
// profiling the analysis on a large trace; bench/trace.sh measures it).
func BenchmarkAnalyzeFile(b *testing.B) {
	path := os.Getenv("WALLPROF_TRACE")
	if path == "" {
		b.Skip("set WALLPROF_TRACE to a trace file")
	}
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		fi, _ := f.Stat()
		b.SetBytes(fi.Size())
		if _, err := Analyze(f, Options{}); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
