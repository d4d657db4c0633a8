package convert

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// detectLines is how many non-empty lines Detect looks at.
const detectLines = 400

// Detect guesses the format of data from its content: gzip or binary data
// is pprof; text is scored line by line against each text format's
// distinctive lines (perf script event headers and callchain lines, gdb
// "Thread ... (LWP" headers and "#N 0x... in" frames, eu-stack "PID N -
// process"/"TID N:" headers and frames, pt-pmp "COUNT a,b" lines, collapsed
// "a;b COUNT" lines), and the best score wins. It reports false when no
// format fits.
func Detect(data []byte) (Format, bool) {
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		return Pprof, true
	}
	head := data[:min(len(data), 4096)]
	if len(head) > 0 && (!utf8.Valid(trimRune(head)) || bytes.ContainsFunc(head, func(r rune) bool {
		return r < 0x20 && r != '\n' && r != '\r' && r != '\t'
	})) {
		return Pprof, true
	}
	var score [6]int // indexed like Formats: Pprof, Perf, GDB, EuStack, PtPmp, Collapsed
	lr := &lineReader{data: data}
	for n := 0; n < detectLines; {
		line, ok := lr.next()
		if !ok {
			break
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		n++
		scoreLine(&score, line)
	}
	best, bestScore := -1, 0
	for i, s := range score {
		if s > bestScore {
			best, bestScore = i, s
		}
	}
	if best < 0 {
		return "", false
	}
	return Formats[best], true
}

// trimRune drops a multi-byte character cut at the end of b.
func trimRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		r, size := utf8.DecodeLastRune(b)
		if r != utf8.RuneError || size != 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

// scoreLine adds what line says about the format. Headers, which only one
// format has, count more than frames.
func scoreLine(score *[6]int, line string) {
	const perf, gdb, eu, ptpmp, collapsed = 1, 2, 3, 4, 5
	t := strings.TrimSpace(line)
	indented := line[0] == ' ' || line[0] == '\t'
	switch {
	case strings.HasPrefix(t, "Thread ") && (strings.Contains(t, "(LWP ") || strings.Contains(t, "(Thread ")):
		score[gdb] += 3
	case strings.HasPrefix(t, "PID ") && (strings.HasSuffix(t, " - process") || strings.HasSuffix(t, " - thread")):
		score[eu] += 3
	case strings.HasPrefix(t, "TID ") && strings.HasSuffix(t, ":"):
		score[eu] += 2
	case strings.HasPrefix(t, "#"):
		if _, ok := parseGDBFrame(t); ok && (strings.Contains(t, " in ") || strings.HasSuffix(t, ")") || strings.Contains(t, ") at ") || strings.Contains(t, ") from ")) {
			score[gdb]++
		} else if _, ok := parseEuFrame(t); ok {
			score[eu]++
		}
	case indented:
		if _, ok := parsePerfFrame(t); ok && strings.HasSuffix(t, ")") {
			score[perf]++
		} else if _, ok := parsePerfHeader(t); ok {
			score[perf] += 3 // perf script -F right-aligns the command name
		} else if _, _, ok := parsePtPmpLine(t); ok && !strings.Contains(t, ";") {
			score[ptpmp]++
		} else if _, _, ok := parseCollapsedLine(t); ok {
			score[collapsed]++
		}
	default:
		if _, ok := parsePerfHeader(line); ok {
			score[perf] += 3
			return
		}
		_, _, p := parsePtPmpLine(t)
		p = p && !strings.Contains(t, ";")
		_, _, c := parseCollapsedLine(t)
		switch {
		case p && !c:
			score[ptpmp]++
		case c && !p:
			score[collapsed]++
		}
	}
}
