package rtlayout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
)

// ParseWaitReasons returns the wait reason strings of a runtime/runtime2.go
// source file, indexed by waitReason value: the constants of type
// waitReason declared with iota, and their strings in the keyed array
// literal waitReasonStrings.
func ParseWaitReasons(src []byte) ([]string, error) {
	file, err := parser.ParseFile(token.NewFileSet(), "runtime2.go", src, 0)
	if err != nil {
		return nil, fmt.Errorf("parse runtime2.go: %w", err)
	}
	values := waitReasonConsts(file)
	if len(values) == 0 {
		return nil, fmt.Errorf("runtime2.go: no waitReason constants")
	}
	strs, err := waitReasonStrings(file)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(values))
	for name, v := range values {
		for len(out) <= v {
			out = append(out, "")
		}
		s, ok := strs[name]
		if !ok && v != 0 {
			return nil, fmt.Errorf("runtime2.go: waitReasonStrings has no entry for %s", name)
		}
		out[v] = s
	}
	return out, nil
}

// waitReasonConsts maps each constant of the iota block of type waitReason
// to its value.
func waitReasonConsts(file *ast.File) map[string]int {
	for _, decl := range file.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST || len(gd.Specs) == 0 {
			continue
		}
		first, ok := gd.Specs[0].(*ast.ValueSpec)
		if !ok || first.Type == nil {
			continue
		}
		if id, ok := first.Type.(*ast.Ident); !ok || id.Name != "waitReason" {
			continue
		}
		values := make(map[string]int)
		for i, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for _, n := range vs.Names {
				if n.Name != "_" {
					values[n.Name] = i
				}
			}
		}
		return values
	}
	return nil
}

// waitReasonStrings reads the keyed literal of var waitReasonStrings.
func waitReasonStrings(file *ast.File) (map[string]string, error) {
	for _, decl := range file.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if len(vs.Names) != 1 || vs.Names[0].Name != "waitReasonStrings" || len(vs.Values) != 1 {
				continue
			}
			lit, ok := vs.Values[0].(*ast.CompositeLit)
			if !ok {
				return nil, fmt.Errorf("runtime2.go: waitReasonStrings is not a literal")
			}
			strs := make(map[string]string, len(lit.Elts))
			for _, elt := range lit.Elts {
				kv, ok := elt.(*ast.KeyValueExpr)
				if !ok {
					return nil, fmt.Errorf("runtime2.go: waitReasonStrings has an unkeyed element")
				}
				key, ok1 := kv.Key.(*ast.Ident)
				val, ok2 := kv.Value.(*ast.BasicLit)
				if !ok1 || !ok2 || val.Kind != token.STRING {
					return nil, fmt.Errorf("runtime2.go: unexpected element in waitReasonStrings")
				}
				s, err := strconv.Unquote(val.Value)
				if err != nil {
					return nil, fmt.Errorf("runtime2.go: %w", err)
				}
				strs[key.Name] = s
			}
			return strs, nil
		}
	}
	return nil, fmt.Errorf("runtime2.go: no var waitReasonStrings")
}
