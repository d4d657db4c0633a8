// Command app is a small program with known allocation sites, for the
// escapes tests: it writes an allocation profile to the file named by its
// first argument.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
)

type point struct{ x, y int }

// newPoint returns a pointer to a local: moved to heap.
func newPoint(x, y int) *point {
	p := point{x, y}
	return &p
}

// label passes an int to fmt.Sprintf: it escapes via the interface.
func label(n int) string {
	return fmt.Sprintf("item %d", n)
}

// counter returns a closure that captures a variable.
func counter() func() int {
	c := 0
	return func() int {
		c++
		return c
	}
}

// buffer makes a slice whose size is not a constant.
func buffer(n int) []byte {
	return make([]byte, n)
}

// search lower-cases every document in a loop: the hotspot.
func search(docs []string, term string) int {
	hits := 0
	for _, d := range docs {
		if strings.Contains(strings.ToLower(d), term) {
			hits++
		}
	}
	return hits
}

var sink []any

func main() {
	runtime.MemProfileRate = 1
	docs := make([]string, 200)
	for i := range docs {
		docs[i] = strings.Repeat("Lorem Ipsum Dolor Sit Amet ", 8)
	}
	hits := 0
	for range 200 {
		hits += search(docs, "dolor")
	}
	next := counter()
	for i := range 10 {
		sink = append(sink, newPoint(i, i), label(i), buffer(i+64), next())
	}
	fmt.Println("hits", hits, len(sink))
	if len(os.Args) > 1 {
		f, err := os.Create(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		runtime.GC()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		f.Close()
	}
}
