//go:build fgprof

package main

// Built with -tags fgprof, the server runs fgprof from startup until SIGTERM:
// this is the "copy of the workload with fgprof built in". fgprof samples
// every goroutine's stack at its fixed 99 Hz with runtime.GoroutineProfile,
// which stops the world for a time that grows with the goroutine count.

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/felixge/fgprof"
)

var fgprofOut = flag.String("fgprof-out", "", "fgprof: write the profile (pprof format) to this file at exit (default: discard)")

func init() {
	var stop func() error
	var f *os.File
	startHooks = append(startHooks, func() {
		var w io.Writer = io.Discard
		if *fgprofOut != "" {
			var err error
			if f, err = os.Create(*fgprofOut); err != nil {
				fmt.Fprintln(os.Stderr, "server: fgprof:", err)
				os.Exit(1)
			}
			w = f
		}
		stop = fgprof.Start(w, fgprof.FormatPprof)
		fmt.Println("fgprof started (99 Hz)")
	})
	stopHooks = append(stopHooks, func() {
		if err := stop(); err != nil {
			fmt.Fprintln(os.Stderr, "server: fgprof:", err)
		}
		if f != nil {
			f.Close()
		}
	})
}
