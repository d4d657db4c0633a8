package symbolize

import (
	"testing"
	"time"
)

// BenchmarkOpenAndResolveLibc measures a cold open of libc (with its
// separate debug file when installed) and the first and later lookups.
func BenchmarkOpenAndResolveLibc(b *testing.B) {
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	for i := 0; i < b.N; i++ {
		c := NewCache()
		o, err := c.openFile(libc, libc)
		if err != nil {
			b.Skip(err)
		}
		start := time.Now()
		syms := o.symbols().syms
		first := time.Now()
		for j := 0; j < len(syms); j += len(syms) / 200 {
			o.frames(syms[j].lo + 1)
		}
		b.ReportMetric(float64(first.Sub(start).Milliseconds()), "symtab-ms")
		b.ReportMetric(float64(time.Since(first).Milliseconds()), "200-lookups-ms")
		c.Close()
	}
}
