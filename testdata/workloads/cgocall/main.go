// cgocall: a Go program that spends its CPU time in C code built without
// frame pointers, called through cgo (runtime.cgocall, runtime.asmcgocall),
// for the unwinder's test across the cgo boundary
// (TestRecordCgoUnwinds). Usage: cgocall SECONDS
package main

/*
#cgo CFLAGS: -O2 -fomit-frame-pointer
#include <stdint.h>
__attribute__((noinline)) static uint64_t c_leaf(uint64_t n)
{
	uint64_t a = 1;
	for (uint64_t i = 0; i < n; i++)
		a = a * 6364136223846793005ULL + i;
	return a;
}
__attribute__((noinline)) uint64_t c_spin(uint64_t n) { return c_leaf(n) ^ 7; }
*/
import "C"

import (
	"os"
	"strconv"
	"time"
)

var sink uint64

//go:noinline
func goCaller() { sink += uint64(C.c_spin(2000000)) }

func main() {
	secs, _ := strconv.Atoi(os.Args[1])
	end := time.Now().Add(time.Duration(secs) * time.Second)
	for time.Now().Before(end) {
		goCaller()
	}
}
