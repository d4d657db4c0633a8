package escapes

import (
	"regexp"
	"strings"
)

// step is one "from EXPR (WHY) at POS" line of an explanation.
type step struct{ expr, why string }

var stepRE = regexp.MustCompile(`^from (.*) \(([^()]*(?:\[[^\]]*\])?)\)(?: at .*)?$`)

func steps(flow []string) []step {
	var out []step
	for _, l := range flow {
		if m := stepRE.FindStringSubmatch(l); m != nil {
			out = append(out, step{expr: m[1], why: m[2]})
		}
	}
	return out
}

// Reason is the diagnostic in words, with the cause found in its
// explanation when there is one: "moved to heap: c (captured by a
// closure)", "n escapes to heap: passed to interface parameter in call to
// fmt.Sprintf". Without an explanation it is the message itself.
func (d Diagnostic) Reason() string {
	why := d.cause()
	switch {
	case why == "":
		return d.Message
	case d.Kind() == KindMoved:
		return d.Message + " (" + why + ")"
	default:
		return d.Message + ": " + why
	}
}

// cause reads the explanation for the most telling step.
func (d Diagnostic) cause() string {
	if i := strings.Index(d.Message, " escapes to heap: "); i >= 0 {
		return "" // older compilers give the reason in the message itself
	}
	st := steps(d.Flow)
	iface := false
	for _, s := range st {
		switch {
		case s.why == "captured by a closure":
			return "captured by a closure"
		case s.why == "interface-converted":
			iface = true
		case s.why == "slice-literal-element" && s.expr == "... argument":
			iface = true // a variadic ...any argument
		}
	}
	for _, s := range st {
		switch {
		case s.why == "call parameter" || strings.HasPrefix(s.why, "passed to call"):
			fn := callee(s.expr)
			switch {
			case fn == "append":
				return "appended to a slice that outlives the call"
			case iface:
				return "passed to interface parameter in call to " + fn
			case fn != "":
				return "passed to call to " + fn + " (the parameter leaks)"
			}
		case s.why == "return":
			what := "returned"
			if d.Kind() == KindMoved && strings.HasPrefix(d.Flow0(), "flow: ~r") && strings.Contains(d.Flow0(), "← &") {
				what = "its address is returned"
			}
			if d.Func != "" {
				return what + " from " + d.Func
			}
			return what
		case s.why == "assign" && strings.Contains(s.expr, " = "):
			return "assigned to " + strings.TrimSpace(s.expr[:strings.Index(s.expr, " = ")])
		case strings.HasPrefix(s.why, "non-constant size"), strings.HasPrefix(s.why, "too large"):
			return s.why
		}
	}
	if iface {
		return "converted to an interface"
	}
	return ""
}

// Flow0 is the first line of the explanation, or "".
func (d Diagnostic) Flow0() string {
	if len(d.Flow) == 0 {
		return ""
	}
	return d.Flow[0]
}

// callee is the function called by a call expression as printed by the
// compiler: "fmt.Sprintf" for `fmt.Sprintf("item %d", ... argument...)`.
func callee(expr string) string {
	i := strings.Index(expr, "(")
	if i <= 0 {
		return ""
	}
	// Method values print as "(*T).M(...)" or "x.M(...)"; keep the name part.
	name := strings.TrimSpace(expr[:i])
	if strings.ContainsAny(name, " =") {
		return ""
	}
	return name
}
