// cshared: a Go library (-buildmode=c-shared) whose exported GoSpin a C
// program (main.c, built without frame pointers) calls in a loop, for the
// unwinder's test across the cgo boundary from C into Go
// (TestRecordCSharedUnwinds).
package main

import "C"

var sink uint64

//go:noinline
func goLeaf(n int) uint64 {
	a := uint64(1)
	for i := 0; i < n; i++ {
		a = a*6364136223846793005 + uint64(i)
	}
	return a
}

//export GoSpin
func GoSpin(n C.int) C.ulonglong { return C.ulonglong(goLeaf(int(n)) ^ 7) }

func main() {}
