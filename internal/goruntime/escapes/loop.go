package escapes

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
)

// loopFinder tells whether a source line is inside a for or range loop of
// its function, reading each file once. Unreadable files have no loops.
type loopFinder struct {
	dir   string
	files map[string][][2]int // file → line spans of loop bodies
}

func newLoopFinder(dir string) *loopFinder {
	return &loopFinder{dir: dir, files: map[string][][2]int{}}
}

func (l *loopFinder) inLoop(file string, line int) bool {
	spans, ok := l.files[file]
	if !ok {
		spans = loopSpans(filepath.Join(l.dir, filepath.FromSlash(file)))
		l.files[file] = spans
	}
	for _, s := range spans {
		if s[0] <= line && line <= s[1] {
			return true
		}
	}
	return false
}

// loopSpans lists the lines of every for and range statement, header
// included.
func loopSpans(path string) [][2]int {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil
	}
	var spans [][2]int
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ForStmt, *ast.RangeStmt:
			spans = append(spans, [2]int{fset.Position(n.Pos()).Line, fset.Position(n.End()).Line})
		}
		return true
	})
	return spans
}
