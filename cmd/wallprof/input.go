package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/convert"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

// The one reader of the viewing commands (report, flame, diff, view): a
// profile is a file, "-" for stdin, or the URL of a pprof endpoint
// (http://host:6060/debug/pprof/profile?seconds=10), in pprof or any
// format 'wallprof convert' reads (perf script, pt-pmp, eu-stack, gdb,
// collapsed stacks), detected from its content.

// fetchTimeout bounds a profile's download beyond the seconds the server
// is asked to record (?seconds=N).
const fetchTimeout = 30 * time.Second

// input is a profile as read: the model, and the pprof bytes when the
// input was pprof (for the pprof web UI, which takes them as they are).
type input struct {
	p     *profile.Profile
	pprof []byte
}

// isURL reports whether a profile argument is a URL to fetch.
func isURL(arg string) bool {
	return strings.HasPrefix(arg, "http://") || strings.HasPrefix(arg, "https://")
}

// readProfileArg reads the profile arg names. Its errors are sentences
// that name the input.
func readProfileArg(ctx context.Context, arg string) (*input, error) {
	var data []byte
	var err error
	switch {
	case isURL(arg):
		data, err = fetchURL(ctx, arg)
	default:
		data, err = readInput(arg)
	}
	if err != nil {
		return nil, err
	}
	name := inputName(arg)
	format, ok := convert.Detect(data)
	if !ok || format == convert.Pprof {
		// Not recognised: pprof's reader says why it is not a profile.
		p, err := present.ReadProfile(bytes.NewReader(data))
		var fe *present.FormatError
		if errors.As(err, &fe) {
			fe.Name = name
			if !ok {
				return nil, fmt.Errorf("%v; it is not perf script, pt-pmp, eu-stack, gdb or collapsed output either", fe)
			}
			return nil, fe
		} else if err != nil {
			return nil, fmt.Errorf("cannot read %s: %v", name, err)
		}
		return &input{p: p, pprof: data}, nil
	}
	r, err := convert.Import(data, format, convert.Options{})
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %v", name, format, err)
	}
	return &input{p: r.Profile}, nil
}

// fetchURL downloads a profile from a pprof endpoint. The timeout
// covers the seconds the server is asked to record (?seconds=N) and 30 s
// more.
func fetchURL(ctx context.Context, rawURL string) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL: %v", rawURL, err)
	}
	timeout := fetchTimeout
	if s, err := strconv.ParseFloat(u.Query().Get("seconds"), 64); err == nil && s > 0 {
		timeout += time.Duration(s * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL: %v", rawURL, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("fetch %s: no profile after %s", rawURL, timeout)
		}
		return nil, fmt.Errorf("fetch %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, fmt.Errorf("fetch %s: %s: %s", rawURL, resp.Status, strings.TrimSpace(string(msg)))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, present.MaxProfileSize+1))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %v", rawURL, err)
	}
	if len(data) > present.MaxProfileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", rawURL, present.MaxProfileSize)
	}
	return data, nil
}

// readProfileFor reads a profile argument for command cmd, printing the
// one sentence that says what is wrong when it cannot.
func readProfileFor(cmd, arg string, stderr io.Writer) (*profile.Profile, error) {
	in, err := readInputFor(cmd, arg, stderr)
	if err != nil {
		return nil, err
	}
	return in.p, nil
}

func readInputFor(cmd, arg string, stderr io.Writer) (*input, error) {
	in, err := readProfileArg(context.Background(), arg)
	if err != nil {
		fmt.Fprintf(stderr, "wallprof %s: %s.\n", cmd, strings.TrimSuffix(err.Error(), "."))
		return nil, err
	}
	return in, nil
}

// stdinTwice says whether more than one argument reads stdin.
func stdinTwice(args []string) bool {
	n := 0
	for _, a := range args {
		if a == "-" {
			n++
		}
	}
	return n > 1
}
