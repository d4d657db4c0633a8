package gt

import "testing"

var sink uint64

func BenchmarkSum(b *testing.B) {
	data := make([]byte, 4096)
	for i := range data {
		data[i] = byte(i)
	}
	for b.Loop() {
		sink = Sum(data)
	}
}
