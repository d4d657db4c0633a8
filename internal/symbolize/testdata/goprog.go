// Go test program for package symbolize.
package main

import (
	"fmt"
	"os"
	"time"
)

//go:noinline
func spin(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * i
	}
	return s
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "sleep" {
		fmt.Println("ready")
		time.Sleep(time.Hour)
	}
	fmt.Println(spin(len(os.Args)))
}
