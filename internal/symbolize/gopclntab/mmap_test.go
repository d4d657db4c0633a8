package gopclntab

import (
	"debug/elf"
	"os"
	"reflect"
	"testing"
)

// TestOpenFileMaps: a Table opened with its file maps .gopclntab (and the
// sections it keeps) instead of reading them, and answers every lookup as
// the Table that read them does; a second open of the same file reuses the
// mapping.
func TestOpenFileMaps(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	f, err := elf.NewFile(file)
	if err != nil {
		t.Fatal(err)
	}
	read, err := Open(f)
	if err != nil {
		t.Fatal(err)
	}
	mappedTab, err := OpenFile(f, file)
	if err != nil {
		t.Fatal(err)
	}
	sec := f.Section(".gopclntab")
	b, key, ok := mapSection(file, sec)
	if !ok || &b[0] != &mappedTab.data[0] {
		t.Fatalf("the Table's .gopclntab is not the file's mapping (mapped %v)", ok)
	}
	unmapSection(key)
	if len(mappedTab.data) != len(read.data) || string(mappedTab.data[:64]) != string(read.data[:64]) {
		t.Fatal("the mapped .gopclntab differs from the one read")
	}
	text := f.Section(".text")
	n := 0
	for pc := text.Addr; pc < text.Addr+text.Size; pc += 97 {
		if a, b := read.Lookup(pc), mappedTab.Lookup(pc); !reflect.DeepEqual(a, b) {
			t.Fatalf("Lookup(%#x): read %v, mapped %v", pc, a, b)
		}
		n++
	}
	if n < 1000 {
		t.Fatalf("only %d lookups", n)
	}
	again, err := OpenFile(f, file)
	if err != nil || &again.data[0] != &mappedTab.data[0] {
		t.Fatalf("a second open did not reuse the mapping (err %v)", err)
	}
	// Closed, the first Table gives its mappings back; the second one's
	// are still there, and the last Close unmaps them.
	k := mapKey{}
	for _, m := range again.maps {
		if mapped[m] != nil && &mapped[m].b[0] == &again.data[0] {
			k = m
		}
	}
	held := 0 // the first Table's references to it
	for _, m := range mappedTab.maps {
		if m == k {
			held++
		}
	}
	before := mapped[k].refs
	mappedTab.Close()
	if mapped[k] == nil || mapped[k].refs != before-held || held == 0 {
		t.Fatalf("closing one of two Tables left the .gopclntab mapping with %d references, want %d", mapped[k].refs, before-held)
	}
	if fn := again.Lookup(text.Addr + 64); len(fn) == 0 {
		t.Fatal("the second Table no longer resolves")
	}
	again.Close()
	if _, ok := mapped[k]; ok {
		t.Fatal("the last Close did not unmap the .gopclntab")
	}
}
