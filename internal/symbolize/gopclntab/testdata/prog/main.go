// Command prog is a test subject for package gopclntab: it contains an
// inlined function, a //go:noinline function, a pointer-receiver method, a
// closure and (in generic.go) a generic function. It runs briefly and exits.
package main

import (
	"fmt"
	"os"
)

type server struct{ hits int }

// handle is a method on a pointer receiver.
//
//go:noinline
func (s *server) handle(n int) int {
	s.hits += n * 7
	return s.hits
}

// scale is small enough to be inlined into hotLoop.
func scale(x int) int {
	return x*3 + 1
}

// hotLoop calls scale from a loop; scale is inlined here.
//
//go:noinline
func hotLoop(n int) int {
	sum := 0
	for i := 0; i < n; i++ {
		sum ^= scale(i)
	}
	return sum
}

// makeCounter returns a closure.
//
//go:noinline
func makeCounter() func() int {
	c := 0
	return func() int {
		c += 3
		return c
	}
}

// extra is filled by files that need newer toolchains.
var extra []func() int

func main() {
	s := &server{}
	count := makeCounter()
	total := hotLoop(len(os.Args)*1000) + s.handle(len(os.Args)) + count() + count()
	for _, f := range extra {
		total += f()
	}
	fmt.Println(total)
}
