// Package groundtruth builds and runs the ground-truth workloads under
// testdata/workloads and reads the truth they write, so that accuracy tests
// can compare a wall-clock profile with what the workload measured itself.
//
// # Workloads
//
//   - cgt (testdata/workloads/cgt/cgt.c): C with pthreads, built with
//     gcc -O1 -g -fno-omit-frame-pointer -pthread. Threads burner (burn_cpu),
//     sleeper (do_sleep: 1 ms nanosleeps), reader (read_pipe) fed by writer
//     (feed_pipe), waiter (wait_cond, ~0.5 s), then contend (contend) and 3
//     spinner (spin) threads competing for the CPUs after stage_wait.
//     Options --truth, --scale, --start-delay MS, --late-threads (thread
//     late runs late_burn), --exit-after MS. The schedule is in cgt.c.
//     With --bursts SECONDS it runs instead phases shorter than a sampling
//     period at the default rate, repeated: server threads (serve_compute,
//     3 ms of CPU; serve_sleep, 5 ms; serve_wait, a 2 ms pipe round trip
//     to a feeder thread, feed_replies) and three crowd threads (crowd_wait
//     until --crowd-after SECONDS, half by default, then crowd_burst, 2 ms
//     of CPU, and crowd_nap, 1 ms); each phase is summed over its
//     repetitions and measured from inside its function.
//   - gogt (testdata/workloads/gogt, own module): goroutine groups
//     main.compute, main.sleeper, main.chanWaiter, main.chanFeeder,
//     main.pipeReader, main.pipeWriter, main.mutexContender. Options
//     --truth, --scale, --duration, --bursts. With --bursts (bursts.go)
//     it runs instead goroutines whose phases are all shorter than the
//     default sampling period, with more of them runnable than there are
//     CPUs: 3 main.burstHandler goroutines loop over main.burstCompute
//     (3 ms of CPU), main.burstSleep (time.Sleep 5 ms), main.burstChan (a
//     channel receive answered after 2 ms by main.burstFeeder) and
//     main.burstPipe (a pipe read, netpoller IO wait, answered after 2 ms
//     by main.burstWriter); 4 main.crowd goroutines loop over
//     main.crowdCompute (2 ms of CPU) and main.crowdSleep (time.Sleep 1 ms).
//   - pingpong, cpubound: benchmark workloads (bench/); they write no truth
//     but print a "name: key=value ..." line on stderr.
//
// # Truth file
//
// A workload given --truth FILE (or the environment variable
// WALLPROF_TRUTH=FILE) writes, when it ends, one JSON object:
//
//	{
//	  "workload": "cgt",          // which workload wrote it
//	  "mode": "bursts",           // gogt --bursts only; absent otherwise
//	  "pid": 123,                 // process id (tgid)
//	  "scale": 1,                 // the --scale factor
//	  "nproc": 2,                 // CPUs online
//	  "start_ns": 1000, "end_ns": 3000,  // CLOCK_MONOTONIC, process run
//	  "partial": false,           // true: written by --exit-after just before _exit(0)
//	  "threads": [                // C workloads: one entry per worker thread
//	    {"tid": 124, "name": "burner",    // tid and comm (pthread_setname_np)
//	     "start_ns": 1001, "end_ns": 2001, // CLOCK_MONOTONIC, thread lifetime
//	     "phases": {
//	       "burn_cpu": {"wall_ns": 999, "cpu_ns": 998, "run_delay_ns": 1}
//	     }}
//	  ],
//	  "process": {"wall_ns": .., "cpu_ns": .., "run_delay_ns": ..}, // Go workload only
//	  "groups": [                 // Go workload: one entry per goroutine group
//	    {"name": "compute", "function": "main.compute", "count": 2,
//	     "wall_ns": 2000,         // summed over the group's goroutines
//	     "phases": {"main.compute": {"wall_ns": 2000}}},
//	    {"name": "crowd", "function": "main.crowd", "count": 4, "wall_ns": 4000,
//	     "phases": {"main.crowdCompute": {"wall_ns": 2500, "cpu_ns": 1500},
//	                "main.crowdSleep": {"wall_ns": 1490}}}
//	  ]
//	}
//
// A phase's name is the name of the function that runs it (a C symbol, or
// a Go function name as it appears in stacks), so a test can find it in a
// profile. For a phase:
//   - wall_ns is CLOCK_MONOTONIC after minus before the phase;
//   - cpu_ns is CLOCK_THREAD_CPUTIME_ID after minus before (on-CPU time);
//   - run_delay_ns is the second field of /proc/thread-self/schedstat
//     (time spent runnable, waiting on a run queue) after minus before;
//   - lock_wait_ns (main.mutexContender only) is time spent in Mutex.Lock.
//
// The wall interval encloses the other two measurements, so on-CPU +
// runnable ≤ wall, and wall minus both is the time the thread was blocked.
// In the Go workload CPU and run delay are per process: goroutines migrate
// between threads. In a partial truth, threads still running have end_ns
// set to the time of the exit and only completed phases are listed.
//
// A Go group's phases are the functions its goroutines run in turn (by
// default one, the group's function; with --bursts several, whose wall
// times add up to the group's but for the loop between them). A --bursts
// phase begins when the clock is read right before its function is called
// and ends when the function reads it as its last act. The compute phases
// of --bursts also have cpu_ns, the CPU time the goroutine used in them:
// it runs them locked to its thread (runtime.LockOSThread) and reads the
// thread's CPU clock right before and after, outside the phase, so that no
// phase makes a system call other than to wait.
package groundtruth
