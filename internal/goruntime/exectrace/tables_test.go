package exectrace

import "testing"

// TestReasonTable checks the interning of wait reasons: "" (waiting since
// before the trace) is reason 0 in category "unknown", the same reason is
// the same index whether the string is the parser's or a copy, and each
// reason has its category.
func TestReasonTable(t *testing.T) {
	rs := newReasonTable()
	if rs.names[0] != "" || rs.cats[rs.cat[0]] != "unknown" {
		t.Fatalf("reason 0 is %q in %q, want \"\" in unknown", rs.names[0], rs.cats[rs.cat[0]])
	}
	if id := rs.id(""); id != 0 {
		t.Fatalf(`id("") = %d, want 0`, id)
	}
	for _, r := range []string{"sleep", "chan receive", "sleep", "chan send", "select"} {
		id := rs.id(r)
		if rs.names[id] != r || rs.id(string([]byte(r))) != id {
			t.Fatalf("id(%q) = %d, which names %q", r, id, rs.names[id])
		}
		if got, want := rs.cats[rs.cat[id]], blockCategory(r); got != want {
			t.Errorf("category of %q = %q, want %q", r, got, want)
		}
	}
	if rs.cats[rs.syscallC] != "syscall" {
		t.Errorf("syscall category is %q", rs.cats[rs.syscallC])
	}
}
