// Command gctraceprog allocates steadily so that GODEBUG=gctrace=1 prints a
// few dozen collections, and writes its own progress lines to stderr between
// them, as a real server's log would. It is run only to capture the logs in
// ../*.log; see ../README.
package main

import (
	"fmt"
	"os"
	"runtime"
	"time"
)

var sink [][]byte

func main() {
	keep := make([][]byte, 0, 4096)
	for round := 0; round < 6; round++ {
		for i := 0; i < 40000; i++ {
			b := make([]byte, 1024+i%4096)
			if i%16 == 0 {
				keep = append(keep, b) // live heap that grows, then is dropped
			}
			sink = append(sink[:0], b)
		}
		fmt.Fprintf(os.Stderr, "round %d done, keeping %d buffers\n", round, len(keep))
		if round == 3 {
			keep = keep[:0]
			runtime.GC() // a forced collection
			fmt.Println("forced a collection")
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Println("done")
}
