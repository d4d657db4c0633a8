package symbolize

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const kallsymsText = `0000000000000000 A fixed_percpu_data
ffffffff81000000 T _stext
ffffffff81000000 T _text
ffffffff81001000 t __pfx_finish_task_switch.isra.0
ffffffff81001010 t finish_task_switch.isra.0
ffffffff81001200 T schedule
ffffffff81002000 D some_data
ffffffff82000000 T _etext
ffffffff83000000 T _einittext
ffffffffc0001000 t __pfx_nft_do_chain	[nf_tables]
ffffffffc0001010 t nft_do_chain	[nf_tables]
ffffffffc0008000 t bpf_prog_02a5488b24ad0212_on_resume	[bpf]
`

func TestParseKallsyms(t *testing.T) {
	k, err := parseKallsyms(strings.NewReader(kallsymsText))
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[uint64]string{
		0xffffffff81001010: "finish_task_switch.isra.0",
		0xffffffff81001008: "_text", // __pfx_ padding is skipped
		0xffffffff810011ff: "finish_task_switch.isra.0",
		0xffffffff81001300: "schedule",
		0xffffffffc0001020: "nft_do_chain [nf_tables]",
		0xffffffffc0008010: "bpf_prog_02a5488b24ad0212_on_resume [bpf]",
		// Past the image's text, before any module: not _einittext's.
		0xffffffffa0000010: "[unknown kernel]",
		0xffffffff83000010: "[unknown kernel]",
		0x1000:             "[kernel]+0x1000",
	} {
		if got := k.Resolve(addr).Function; got != want {
			t.Errorf("Resolve(%#x) = %q, want %q", addr, got, want)
		}
	}
	m := k.KernelMapping()
	if !m.Kernel || m.Start != 0xffffffff81000000 || m.Limit != 0xffffffff82000000 {
		t.Errorf("kernel mapping %+v", m)
	}
	hidden := "0000000000000000 T _stext\n0000000000000000 T schedule\n"
	if _, err := parseKallsyms(strings.NewReader(hidden)); !errors.Is(err, ErrKernelSymbolsHidden) {
		t.Errorf("hidden symbols: err = %v", err)
	}
}

func TestLoadKernel(t *testing.T) {
	k, err := LoadKernel()
	if errors.Is(err, ErrKernelSymbolsHidden) {
		requires(t, false, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	// Kernel text symbols resolve to themselves (or an alias at the same address).
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := map[uint64]map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) != 3 || !strings.Contains("tTwW", fl[1]) || strings.HasPrefix(fl[2], "__pfx_") {
			continue
		}
		addr, _ := strconv.ParseUint(fl[0], 16, 64)
		if names[addr] == nil {
			names[addr] = map[string]bool{}
		}
		names[addr][fl[2]] = true
	}
	for addr, set := range names {
		if got := k.Resolve(addr).Function; !set[got] {
			t.Fatalf("Resolve(%#x) = %q, want one of %v", addr, got, set)
		}
	}
	if got := k.Resolve(mustAddr(t, "schedule")).Function; got != "schedule" {
		t.Errorf("Resolve(schedule) = %q", got)
	}
	if k.KernelMapping().BuildID == "" {
		t.Logf("no kernel build ID (/sys/kernel/notes unreadable)")
	}
}

func mustAddr(t *testing.T, name string) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[2] == name {
			a, _ := strconv.ParseUint(f[0], 16, 64)
			return a
		}
	}
	t.Fatalf("no kernel symbol %s", name)
	return 0
}

// TestParseKallsymsAsFields: the parser, which splits lines without
// allocating, reads this machine's /proc/kallsyms as splitting each line
// into fields does.
func TestParseKallsymsAsFields(t *testing.T) {
	data, err := os.ReadFile("/proc/kallsyms")
	if err != nil || len(data) == 0 {
		requires(t, false, "no /proc/kallsyms")
	}
	k, err := parseKallsyms(bytes.NewReader(data))
	if err != nil {
		requires(t, false, "kernel symbols hidden (kptr_restrict, or not root)")
	}
	type sym struct {
		addr uint64
		name string
	}
	var want []sym
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || (f[1] != "t" && f[1] != "T" && f[1] != "w" && f[1] != "W") || strings.HasPrefix(f[2], "__pfx_") {
			continue
		}
		addr, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			continue
		}
		name := f[2]
		if len(f) > 3 {
			name += " " + f[3]
		}
		want = append(want, sym{addr, name})
	}
	sort.SliceStable(want, func(i, j int) bool { return want[i].addr < want[j].addr })
	if len(k.syms) != len(want) {
		t.Fatalf("%d symbols, want %d", len(k.syms), len(want))
	}
	for i, w := range want {
		if k.syms[i].addr != w.addr || k.name(i) != w.name {
			t.Fatalf("symbol %d: %#x %q, want %#x %q", i, k.syms[i].addr, k.name(i), w.addr, w.name)
		}
	}
}
