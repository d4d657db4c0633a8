package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wallprof/wallprof/internal/groundtruth"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "save the browser test's screenshot to doc/images/flame.png")

// flameProfile builds a small profile whose function names are those of the
// C ground-truth workload, so the same search works on both.
func flameProfile() *profile.Profile {
	exe := &profile.Mapping{ID: 1, Start: 0x400000, Limit: 0x500000, File: "/usr/bin/cgt"}
	var locs []*profile.Location
	loc := func(fn string) *profile.Location {
		l := &profile.Location{ID: uint64(len(locs) + 1), Mapping: exe, Address: 0x400000 + uint64(len(locs))*16,
			Frames: []profile.Frame{{Function: fn}}}
		locs = append(locs, l)
		return l
	}
	start, burner, burn, sleeper, sleep, nanosleep, reader, readp, read := loc("start_thread"), loc("burner_main"),
		loc("burn"), loc("sleeper_main"), loc("do_sleep"), loc("clock_nanosleep"), loc("reader_main"), loc("read_pipe"), loc("read")
	ms := int64(time.Millisecond)
	s := func(state profile.State, v int64, st ...*profile.Location) *profile.Sample {
		return &profile.Sample{Stack: st, PID: 1, TID: 1, Thread: "cgt", State: state, Value: v * ms}
	}
	return &profile.Profile{Duration: 2 * time.Second, Command: "cgt", Mappings: []*profile.Mapping{exe}, Locs: locs,
		Samples: []*profile.Sample{
			s(profile.OnCPU, 900, burn, burner, start),
			s(profile.Runnable, 300, burn, burner, start),
			s(profile.Sleeping, 1500, nanosleep, sleep, sleeper, start),
			s(profile.OnCPU, 20, sleep, sleeper, start),
			s(profile.Sleeping, 1200, read, readp, reader, start),
			s(profile.Runnable, 80, readp, reader, start),
		}}
}

func writeProfileFile(t *testing.T, p *profile.Profile) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.pb.gz")
	var b bytes.Buffer
	if err := present.WritePprof(&b, p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestFlameCommand(t *testing.T) {
	in := writeProfileFile(t, flameProfile())
	dir := t.TempDir()
	html, svg := filepath.Join(dir, "a.html"), filepath.Join(dir, "a.svg")
	if code, _, stderr := runCmd("flame", in, "-o", html, "--title", "T<1>"); code != 0 {
		t.Fatalf("flame exited %d: %s", code, stderr)
	}
	b, _ := os.ReadFile(html)
	if !strings.Contains(string(b), "T\\u003c1\\u003e") || !strings.Contains(string(b), `"weight":"wall"`) {
		t.Error("HTML lacks the title or the weight")
	}
	if code, _, stderr := runCmd("flame", "--svg", "--weight", "offcpu", "-o", svg, in); code != 0 {
		t.Fatalf("flame --svg exited %d: %s", code, stderr)
	}
	b, _ = os.ReadFile(svg)
	if !strings.HasPrefix(string(b), "<?xml") || !strings.Contains(string(b), "weight: off-CPU") {
		t.Error("SVG lacks its header or weight")
	}
	if code, stdout, _ := runCmd("flame", "-o", "-", "--threads", "--focus", "^read", in); code != 0 || !strings.Contains(stdout, "cgt-1/1") || strings.Contains(stdout, "burner_main") {
		t.Errorf("flame -o - --threads --focus ^read: exit %d, output without the thread frame or with unfocused frames", code)
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"flame"}, exitUsage, "give exactly one profile file"},
		{[]string{"flame", "--weight", "heap", in}, exitUsage, `--weight "heap" is not a weight`},
		{[]string{"flame", "--focus", "(", in}, exitUsage, "not a valid regular expression"},
		{[]string{"flame", "--min-width", "100", in}, exitUsage, "out of range"},
		{[]string{"flame", filepath.Join(dir, "missing.pb.gz")}, exitError, "does not exist"},
		{[]string{"flame", html}, exitError, "wallprof flame: "},
		{[]string{"flame", in, "-o", filepath.Join(dir, "no/such/dir.html")}, exitError, "cannot create"},
	} {
		code, _, stderr := runCmd(c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and one line with %q", c.args, code, stderr, c.code, c.msg)
		}
	}
	if code, stdout, stderr := runCmd("flame", "--help"); code != 0 || !strings.Contains(stdout, "Usage: wallprof flame") || stderr != "" {
		t.Errorf("--help: exit %d, %q", code, stderr)
	}
}

// chromium finds the browser, or skips (fails under CI=true).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but chromium is not installed (apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium)")
	return ""
}

// browserProfile records the C ground-truth workload when this machine can,
// else writes a profile built in code.
func browserProfile(t *testing.T) string {
	if preflight() != "" && os.Getenv("CI") != "true" {
		t.Log("cannot record here; using a profile built in code")
		return writeProfileFile(t, flameProfile())
	}
	requireRecording(t)
	cgt := groundtruth.Build(t, "cgt")
	out := filepath.Join(t.TempDir(), "cgt.pb.gz")
	code, stderr := wallprof(t, "record", "-F", "499", "-o", out, "--", cgt, "--truth", filepath.Join(t.TempDir(), "truth.json"))
	if code != 0 {
		t.Fatalf("wallprof record exited %d:\n%s", code, stderr)
	}
	return out
}

// matchShare is the share of wall time in stacks with a function matching
// re, computed from the samples.
func matchShare(p *profile.Profile, re *regexp.Regexp) float64 {
	var hit, all int64
	for _, s := range p.Samples {
		all += s.Value
	stack:
		for _, l := range s.Stack {
			for _, f := range l.Frames {
				if re.MatchString(f.Function) {
					hit += s.Value
					break stack
				}
			}
		}
	}
	return float64(hit) / float64(all)
}

type drawnFrame struct {
	Name     string  `json:"name"`
	Depth    int     `json:"depth"`
	X        float64 `json:"x"`
	Y        float64 `json:"y"`
	W        float64 `json:"w"`
	H        float64 `json:"h"`
	Ancestor bool    `json:"ancestor"`
}

func TestFlameBrowser(t *testing.T) {
	prof := browserProfile(t)
	page := filepath.Join(t.TempDir(), "flame.html")
	if code, stderr := wallprof(t, "flame", prof, "-o", page, "--title", "wallprof flame: the C ground-truth workload (testdata/workloads/cgt)"); code != 0 {
		t.Fatalf("wallprof flame exited %d: %s", code, stderr)
	}
	p := readProfile(t, prof)
	const search = `^(do_sleep|read_pipe)$`
	want := matchShare(p, regexp.MustCompile(search))
	if want == 0 {
		t.Fatalf("no sample matches %s", search)
	}

	br := newBrowser(t, 1280, 720)
	bctx := br.ctx

	url := "file://" + page
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("load "+url, chromedp.Do(bctx, chromedp.Navigate(url), chromedp.WaitVisible("#canvas")))
	_, err := chromedp.Run(bctx, chromedp.Poll[chromedp.Void](`window.wallprofFlame !== undefined`))
	must("wait for the page's script", err)
	frames, err := chromedp.Run(bctx, chromedp.Evaluate[[]drawnFrame](`window.wallprofFlame.frames()`))
	must("frames", err)
	width, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`window.wallprofFlame.width()`))
	must("width", err)
	box, err := chromedp.Run(bctx, chromedp.Evaluate[[]float64](`(function(){var b=document.getElementById("canvas").getBoundingClientRect(); return [b.left, b.top];})()`))
	must("canvas position", err)
	if len(frames) < 3 || width < 500 {
		t.Fatalf("page drew %d frames on a canvas %.0f px wide", len(frames), width)
	}

	// Search: the share shown must be the one computed from the samples.
	must("search", chromedp.Do(bctx, chromedp.Focus("#search"), chromedp.KeyEvent(search), chromedp.KeyEvent("\r")))
	_, err = chromedp.Run(bctx, chromedp.Poll[chromedp.Void](`window.wallprofFlame.matchShare() !== null`))
	must("wait for the match", err)
	share, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`window.wallprofFlame.matchShare()`))
	must("match share", err)
	matchText, err := chromedp.Run(bctx, chromedp.Text("#match"))
	must("match text", err)
	if math.Abs(share-want) > 1e-4 {
		t.Errorf("page says %s matched %.4f%% of wall time; the samples say %.4f%%", search, 100*share, 100*want)
	}
	// The line shows the page's share to two decimals: within the 0.01
	// point the share may differ by (above), plus the rounding.
	if m := regexp.MustCompile(`([0-9.]+)%`).FindStringSubmatch(matchText); m == nil {
		t.Errorf("match line %q shows no share", matchText)
	} else if shown, _ := strconv.ParseFloat(m[1], 64); math.Abs(shown-100*share) > 0.0051 || math.Abs(shown-100*want) > 0.0151 {
		t.Errorf("match line %q does not show %.2f%%", matchText, 100*want)
	}
	t.Logf("search %s: %s", search, matchText)

	// Hover a wide frame for the tooltip, then save the screenshot.
	target := pickFrame(frames, width)
	if target == nil {
		t.Fatal("no frame narrower than the page to click")
	}
	// A deep profile makes a tall page: bring the frame into the viewport.
	_, err = chromedp.Run(bctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`window.scrollTo(0, %f)`, box[1]+target.Y-300)))
	must("scroll", err)
	box, err = chromedp.Run(bctx, chromedp.Evaluate[[]float64](`(function(){var b=document.getElementById("canvas").getBoundingClientRect(); return [b.left, b.top];})()`))
	must("canvas position after scrolling", err)
	cx, cy := box[0]+target.X+target.W/2, box[1]+target.Y+target.H/2
	must("hover", chromedp.Do(bctx, chromedp.MouseEvent("mouseMoved", cx, cy)))
	_, err = chromedp.Run(bctx, chromedp.Poll[chromedp.Void](`!document.getElementById("tip").hidden`, chromedp.WithPollingTimeout(10*time.Second)))
	must(fmt.Sprintf("tooltip at (%.0f, %.0f) over %q", cx, cy, target.Name), err)
	tip, err := chromedp.Run(bctx, chromedp.Text("#tip"))
	must("tooltip", err)
	for _, w := range []string{target.Name, "wall", "on-CPU", "runnable", "blocked"} {
		if !strings.Contains(tip, w) {
			t.Errorf("tooltip lacks %q: %q", w, tip)
		}
	}
	png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
	must("screenshot", err)
	shot := filepath.Join(t.TempDir(), "flame.png")
	if *updateScreenshot {
		shot = filepath.Join("..", "..", "doc", "images", "flame.png")
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)

	// Click: the frame must then span the whole width.
	must("click", chromedp.Do(bctx, chromedp.MouseClickXY(cx, cy)))
	frames, err = chromedp.Run(bctx, chromedp.Evaluate[[]drawnFrame](`window.wallprofFlame.frames()`))
	must("frames after the click", err)
	zoomed, err := chromedp.Run(bctx, chromedp.Evaluate[string](`window.wallprofFlame.zoomed()`))
	must("zoomed frame", err)
	// The zoomed graph may be taller or shorter, and a scroll bar come or
	// go: the canvas's width is the one it has now.
	width, err = chromedp.Run(bctx, chromedp.Evaluate[float64](`window.wallprofFlame.width()`))
	must("width after the click", err)
	if zoomed != target.Name {
		t.Errorf("clicked %q but the page zoomed to %q", target.Name, zoomed)
	}
	found := false
	for _, f := range frames {
		if f.Name == target.Name && f.Depth == target.Depth && !f.Ancestor {
			found = true
			if f.X > 0.5 || math.Abs(f.W-width) > 0.5 {
				t.Errorf("after the click %q spans x=%.1f..%.1f of %.0f px", f.Name, f.X, f.X+f.W, width)
			}
		}
	}
	if !found {
		t.Errorf("after the click %q is not drawn", target.Name)
	}
	t.Logf("clicked %q (%.0f of %.0f px): it now spans the width", target.Name, target.W, width)

	// The switches work without errors too.
	must("switches", chromedp.Do(bctx, chromedp.Click("#orient"), chromedp.Click(`button[data-weight="offcpu"]`),
		chromedp.Click(`button[data-weight="cpu"]`), chromedp.Click("#reset")))

	// No request besides the page itself.
	resources, err := chromedp.Run(bctx, chromedp.Evaluate[int](`performance.getEntriesByType("resource").length`))
	must("resources", err)
	if resources != 0 {
		t.Errorf("the page loaded %d resources", resources)
	}

	// A probe checks that console messages do reach the test.
	br.checkNoErrors(t)
}

// pickFrame picks the widest frame under the root that is narrower than
// 90% of the page, so that zooming into it changes something.
func pickFrame(frames []drawnFrame, width float64) *drawnFrame {
	var best *drawnFrame
	for i := range frames {
		f := &frames[i]
		if f.Depth == 0 || f.Ancestor || f.W > 0.9*width || f.W < 20 {
			continue
		}
		if best == nil || f.W > best.W {
			best = f
		}
	}
	return best
}

// TestFlameGoProgramOpensOnGoroutines: a Go program's profile is drawn as
// its goroutines unless the thread view is asked for, as the run report
// and report --goroutines show it.
func TestFlameGoProgramOpensOnGoroutines(t *testing.T) {
	requireRecording(t)
	bin := groundtruth.BuildGo(t, groundtruth.WorkloadDir(t, "gogt"), false, "")
	dir := t.TempDir()
	prof := filepath.Join(dir, "go.pb.gz")
	if code, out := wallprof(t, "record", "-q", "-o", prof, "--", bin, "--duration", "1s"); code != 0 {
		t.Fatalf("record exited %d:\n%s", code, out)
	}
	for _, c := range []struct {
		args   []string
		title  string
		stderr string
	}{
		{nil, "Goroutines of", "drawing its goroutines"},
		{[]string{"--goroutines=false"}, "", ""},
	} {
		html := filepath.Join(dir, "f.html")
		code, out := wallprof(t, append([]string{"flame", prof, "-o", html}, c.args...)...)
		if code != 0 {
			t.Fatalf("flame %v exited %d:\n%s", c.args, code, out)
		}
		page, _ := os.ReadFile(html)
		gor := strings.Contains(string(page), "Goroutines of")
		if gor != (c.title != "") || !strings.Contains(out, c.stderr) {
			t.Errorf("flame %v: goroutine view %v, stderr %q", c.args, gor, out)
		}
	}
}
