package escapes

import (
	"fmt"
	"path"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
)

// Format names the JSON schema of a Report.
const Format = "wallprof.escapes/v1"

// Report is the ranked allocation sites of a profile, each with its reasons.
type Report struct {
	Format       string `json:"format"`
	Sample       Sample `json:"sample"`
	Dir          string `json:"dir"`
	TotalBytes   int64  `json:"total_bytes"`
	TotalObjects int64  `json:"total_objects"`
	Sites        []Site `json:"sites"` // the top ones, most first
}

// Site is one line of code that allocates. For a line in the analysed
// packages, File is relative to the build directory (without diagnostics,
// to the module's root when it can be told, or else the path in the
// profile); for an allocation with no caller there (runtime start-up, say),
// it is the path in the profile and User is false.
type Site struct {
	Rank    int      `json:"rank"`
	File    string   `json:"file"`
	Line    int      `json:"line"`
	Func    string   `json:"func"`
	Bytes   int64    `json:"bytes"`
	Objects int64    `json:"objects"`
	Percent float64  `json:"percent"` // of the total for the ranking sample
	User    bool     `json:"user"`
	InLoop  bool     `json:"in_loop,omitempty"`
	Reasons []string `json:"reasons"`

	direct  bool             // some allocations happen on the line itself
	caller  string           // for a library site: its first caller in another package
	callees map[string]int64 // library functions called from the line, by volume
	leaf    map[string]string
	allocs  map[string]int64 // for allocations on the line itself: the runtime allocator, by volume
}

// Options configure Join.
type Options struct {
	Dir    string // the build directory, absolute; the diagnostics' paths are relative to it
	Sample Sample // what ranks the sites
	Top    int    // how many sites to keep; 0 keeps all
	// Build is the program's build information (debug/buildinfo), when
	// known. It says which packages are the program's own when there are
	// no diagnostics (see Join).
	Build *debug.BuildInfo
}

// Join ranks the allocation sites of stacks and explains each with the
// diagnostics on its line. A stack's site is its first frame (from the
// leaf) in a file the compiler reported on, that is, in the analysed
// packages; when frames below it are library code, the site says which
// library function allocates and that it is called from there.
//
// Without diagnostics (no sources, or the analysis failed), the analysed
// packages are the program's own: package main and the packages of its
// main module (opt.Build), or, when that is unknown, every package outside
// the standard library. The sites and their ranking are then the same as
// with the diagnostics of the module's ./...; only the reasons lack the
// compiler's word.
func Join(stacks []Stack, diags []Diagnostic, opt Options) Report {
	rep := Report{Format: Format, Sample: opt.Sample, Dir: opt.Dir}
	m := newMatcher(opt.Dir, diags)
	m.own = newOwnCode(opt.Build)
	sites := map[string]*Site{}
	for _, st := range stacks {
		rep.TotalBytes += st.Bytes
		rep.TotalObjects += st.Objects
		if len(st.Frames) > 0 {
			m.add(sites, st, opt.Sample)
		}
	}
	list := rank(sites, opt.Sample)
	if opt.Top > 0 && len(list) > opt.Top {
		list = list[:opt.Top]
	}
	total := rep.TotalBytes
	if opt.Sample.ByObjects() {
		total = rep.TotalObjects
	}
	loops := newLoopFinder(opt.Dir)
	for i, s := range list {
		s.Rank = i + 1
		if total > 0 {
			s.Percent = 100 * float64(siteWeight(s, opt.Sample)) / float64(total)
		}
		if s.User && m.analysed() {
			s.InLoop = loops.inLoop(s.File, s.Line)
		}
		s.Reasons = m.reasons(s)
		rep.Sites = append(rep.Sites, *s)
	}
	return rep
}

// add charges a stack to its site: its first frame in the analysed
// packages, or its leaf when it has none.
func (m *matcher) add(sites map[string]*Site, st Stack, smp Sample) {
	k, rel := -1, ""
	for i, f := range st.Frames {
		if r, ok := m.user(f.File, f.Func); ok {
			k, rel = i, r
			break
		}
	}
	var s *Site
	switch {
	case k < 0:
		f := st.Frames[0]
		s = site(sites, f.File, f.Line, f.Func, false)
		if s.caller == "" {
			s.caller = outsideCaller(st.Frames)
		}
	case k == 0:
		s = site(sites, rel, st.Frames[0].Line, st.Frames[0].Func, true)
		s.direct = true
		if st.Alloc != "" {
			s.allocs[st.Alloc] += weight(st, smp)
		}
	default:
		s = site(sites, rel, st.Frames[k].Line, st.Frames[k].Func, true)
		callee := st.Frames[k-1].Func
		s.callees[callee] += weight(st, smp)
		if leaf := st.Frames[0].Func; leaf != callee {
			s.leaf[callee] = leaf
		}
	}
	s.Bytes += st.Bytes
	s.Objects += st.Objects
}

// rank orders the sites most first, then by place.
func rank(sites map[string]*Site, smp Sample) []*Site {
	list := make([]*Site, 0, len(sites))
	for _, s := range sites {
		list = append(list, s)
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if wa, wb := siteWeight(a, smp), siteWeight(b, smp); wa != wb {
			return wa > wb
		}
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	})
	return list
}

func site(sites map[string]*Site, file string, line int, fn string, user bool) *Site {
	key := fmt.Sprintf("%s:%d", file, line)
	s := sites[key]
	if s == nil {
		s = &Site{File: file, Line: line, Func: fn, User: user, callees: map[string]int64{}, leaf: map[string]string{}, allocs: map[string]int64{}}
		sites[key] = s
	}
	return s
}

func weight(st Stack, s Sample) int64 {
	if s.ByObjects() {
		return st.Objects
	}
	return st.Bytes
}

func siteWeight(st *Site, s Sample) int64 {
	if s.ByObjects() {
		return st.Objects
	}
	return st.Bytes
}

// matcher maps profile paths to the diagnostics' files.
type matcher struct {
	dir   string
	files map[string]bool         // diagnostic files, relative to dir
	byPos map[string][]Diagnostic // "file:line" → allocating diagnostics
	own   ownCode                 // the program's own code, without diagnostics
}

// analysed reports whether there are diagnostics to match: without them,
// the program's own code is told by its package (ownCode).
func (m *matcher) analysed() bool { return len(m.files) > 0 }

func newMatcher(dir string, diags []Diagnostic) *matcher {
	m := &matcher{dir: dir, files: map[string]bool{}, byPos: map[string][]Diagnostic{}}
	for _, d := range diags {
		if filepath.IsAbs(d.File) {
			continue // generic instantiations from GOROOT and other modules
		}
		m.files[d.File] = true
		if d.Allocates() {
			key := fmt.Sprintf("%s:%d", d.File, d.Line)
			m.byPos[key] = append(m.byPos[key], d)
		}
	}
	return m
}

// user returns the diagnostics' name for a profile's file path: the path
// relative to dir when it is inside it, or else the longest diagnostic file
// that is a suffix of it (a binary built elsewhere or with -trimpath). A
// function of the standard library is never matched by suffix: the
// analysed package's server.go is not net/http's.
func (m *matcher) user(file, fn string) (string, bool) {
	if file == "" {
		return "", false
	}
	if !m.analysed() {
		return m.own.rel(file, fn)
	}
	if m.dir != "" && filepath.IsAbs(file) {
		if rel, err := filepath.Rel(m.dir, file); err == nil && m.files[filepath.ToSlash(rel)] {
			return filepath.ToSlash(rel), true
		}
	}
	if IsStdFunc(fn) {
		return "", false
	}
	best := ""
	for f := range m.files {
		if (file == f || strings.HasSuffix(file, "/"+f)) && len(f) > len(best) {
			best = f
		}
	}
	return best, best != ""
}

// IsStdFunc reports whether the function fn belongs to the standard library: its import
// path's first element has no dot, and it is not package main.
func IsStdFunc(fn string) bool {
	if fn == "" || strings.HasPrefix(fn, "main.") || strings.HasPrefix(fn, "command-line-arguments.") {
		return false
	}
	first, _, _ := strings.Cut(fn, "/")
	if !strings.Contains(fn, "/") {
		first, _, _ = strings.Cut(fn, ".")
		return first != ""
	}
	return !strings.Contains(first, ".")
}

// reasons explains a site in readable sentences.
func (m *matcher) reasons(s *Site) []string {
	var out []string
	if !s.User {
		r := fmt.Sprintf("%s allocates outside the analysed packages (library code, or packages not named)", shortFunc(s.Func))
		if s.caller != "" {
			r += "; called from " + s.caller
		}
		return []string{r}
	}
	loop := ""
	if s.InLoop {
		loop = " (inside a loop)"
	}
	if s.direct {
		ds := m.byPos[fmt.Sprintf("%s:%d", s.File, s.Line)]
		sort.SliceStable(ds, func(i, j int) bool { return ds[i].Col < ds[j].Col })
		seen := map[string]bool{}
		for _, d := range ds {
			r := d.Reason()
			if !seen[r] {
				seen[r] = true
				out = append(out, r+loop)
			}
		}
		if len(ds) == 0 {
			out = append(out, runtimeReason(top(s.allocs), m.analysed())+loop)
		}
	}
	callees := make([]string, 0, len(s.callees))
	for c := range s.callees {
		callees = append(callees, c)
	}
	sort.Slice(callees, func(i, j int) bool {
		if s.callees[callees[i]] != s.callees[callees[j]] {
			return s.callees[callees[i]] > s.callees[callees[j]]
		}
		return callees[i] < callees[j]
	})
	for _, c := range callees {
		out = append(out, fmt.Sprintf("%s%s; called from %s:%d (%s)", calleeReason(c, s.leaf[c]), loop, filepath.Base(s.File), s.Line, funcName(s.Func)))
	}
	return out
}

// top returns the key with the largest value ("" for none).
func top(m map[string]int64) string {
	best := ""
	for k, v := range m {
		if best == "" || v > m[best] || v == m[best] && k < best {
			best = k
		}
	}
	return best
}

// runtimeReason explains an allocation on a line the compiler said nothing
// about (or, when analysed is false, was not asked about), from the runtime
// function that made it: appends and conversions allocate without an
// escape diagnostic.
func runtimeReason(fn string, analysed bool) string {
	short := strings.TrimPrefix(fn, "runtime.")
	switch {
	case !analysed && fn == "":
		return "allocates here (no escape analysis was run)"
	case fn == "":
		return "allocates here, but the compiler reported no escape on this line (is the profile from this source?)"
	case short == "growslice":
		return "append grows the slice (runtime.growslice); the compiler reports no escape for that"
	case strings.HasPrefix(short, "concatstring"):
		return "string concatenation allocates its result (" + fn + ")"
	case short == "slicebytetostring":
		return "converting a []byte to a string copies it (runtime.slicebytetostring)"
	case short == "stringtoslicebyte" || short == "stringtoslicerune" || short == "slicerunetostring":
		return "converting between string and slice copies it (" + fn + ")"
	case strings.HasPrefix(short, "convT"):
		return "converting a value to an interface allocates (" + fn + ")"
	case strings.HasPrefix(short, "mapassign") || strings.HasPrefix(short, "makemap"):
		return "the map allocates as it grows (" + fn + ")"
	}
	if !analysed {
		return "allocates here (" + fn + "; no escape analysis was run)"
	}
	return "allocates here (" + fn + "), but the compiler reported no escape on this line"
}

// funcName is a function's name without its package: "search" for
// "main.search", "(*T).M" for "example.com/p.(*T).M".
func funcName(fn string) string {
	short := shortFunc(fn)
	if i := strings.Index(short, "."); i >= 0 {
		return short[i+1:]
	}
	return short
}

// calleeReason says how a library function allocates.
func calleeReason(fn, leaf string) string {
	short := shortFunc(fn)
	if resultAllocators[short] {
		return short + " allocates its result"
	}
	if leaf != "" {
		return fmt.Sprintf("%s allocates (in %s)", short, shortFunc(leaf))
	}
	return short + " allocates"
}

// resultAllocators are standard functions that return newly allocated
// memory: their callers cannot avoid the allocation but by not calling them
// (or by calling an appending or writing variant).
var resultAllocators = map[string]bool{
	"strings.ToLower": true, "strings.ToUpper": true, "strings.ToTitle": true, "strings.Title": true,
	"strings.Repeat": true, "strings.Replace": true, "strings.ReplaceAll": true, "strings.Map": true,
	"strings.Split": true, "strings.SplitN": true, "strings.SplitAfter": true, "strings.Fields": true,
	"strings.FieldsFunc": true, "strings.Join": true, "strings.Clone": true, "strings.(*Builder).String": true,
	"bytes.ToLower": true, "bytes.ToUpper": true, "bytes.Repeat": true, "bytes.Replace": true,
	"bytes.ReplaceAll": true, "bytes.Split": true, "bytes.Fields": true, "bytes.Join": true, "bytes.Clone": true,
	"fmt.Sprintf": true, "fmt.Sprint": true, "fmt.Sprintln": true, "fmt.Errorf": true, "fmt.Appendf": true,
	"strconv.Itoa": true, "strconv.FormatInt": true, "strconv.FormatUint": true, "strconv.FormatFloat": true,
	"strconv.Quote": true, "errors.New": true, "io.ReadAll": true, "os.ReadFile": true,
	"json.Marshal": true, "json.MarshalIndent": true, "regexp.(*Regexp).FindAllString": true,
	"regexp.(*Regexp).FindStringSubmatch": true, "regexp.(*Regexp).ReplaceAllString": true,
	"slices.Clone": true, "maps.Clone": true,
}

// outsideCaller names the first frame up the stack in another package than
// the leaf's (and not the runtime's): "main.search (/src/app/main.go:45)".
func outsideCaller(fs []Frame) string {
	leaf := pkgOf(fs[0].Func)
	for _, f := range fs[1:] {
		if p := pkgOf(f.Func); p != leaf && p != "runtime" && f.Func != "" {
			return fmt.Sprintf("%s (%s:%d)", shortFunc(f.Func), f.File, f.Line)
		}
	}
	return ""
}

// pkgOf is the package path of a function name: "strings" for
// "strings.(*Builder).grow", "example.com/a/b" for "example.com/a/b.F".
func pkgOf(fn string) string {
	slash := strings.LastIndex(fn, "/")
	if i := strings.Index(fn[slash+1:], "."); i >= 0 {
		return fn[:slash+1+i]
	}
	return fn
}

// ownCode tells the program's own functions from library code when there
// are no diagnostics to tell them by: package main and the packages of the
// main module, from the program's build information; without it, every
// package outside the standard library.
type ownCode struct {
	module  string // the main module's path ("" when unknown)
	mainPkg string // package main's import path ("example.com/app/cmd/srv")
}

func newOwnCode(bi *debug.BuildInfo) ownCode {
	if bi == nil {
		return ownCode{}
	}
	return ownCode{module: bi.Main.Path, mainPkg: bi.Path}
}

// rel returns the file of fn relative to its module's root, as the
// diagnostics of the module's ./... would name it ("index.go",
// "internal/search/rank.go"), when fn is the program's own; the path in the
// profile when the root cannot be told.
func (o ownCode) rel(file, fn string) (string, bool) {
	pkg := pkgOf(fn)
	switch {
	case o.module == "":
		return file, fn != "" && !IsStdFunc(fn)
	case pkg == "main" || pkg == "command-line-arguments":
		pkg = o.mainPkg
	case pkg == o.module || strings.HasPrefix(pkg, o.module+"/"):
	default:
		return "", false // the standard library, or a dependency
	}
	// The package's directory is the module's root plus the package's
	// path below the module path.
	sub, ok := strings.CutPrefix(pkg, o.module)
	if !ok || sub != "" && !strings.HasPrefix(sub, "/") {
		return file, true
	}
	root, ok := strings.CutSuffix(path.Dir(file), sub)
	if !ok || root == "" || root == "." {
		return file, true
	}
	return strings.TrimPrefix(file, root+"/"), true
}
