package escapes

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText prints the report as a ranked table, each site followed by its
// reasons.
func WriteText(w io.Writer, r Report) error {
	by := "bytes"
	if r.Sample.ByObjects() {
		by = "objects"
	}
	if _, err := fmt.Fprintf(w, "Allocation sites by %s (%s) in %s: %s in %d objects\n\n",
		by, r.Sample, r.Dir, FormatBytes(r.TotalBytes), r.TotalObjects); err != nil {
		return err
	}
	if len(r.Sites) == 0 {
		_, err := fmt.Fprintln(w, "No allocations in the profile.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "#\tbytes\t%%\tobjects\t  location\n")
	for _, s := range r.Sites {
		fmt.Fprintf(tw, "%d\t%s\t%.1f%%\t%d\t  %s:%d %s\n", s.Rank, FormatBytes(s.Bytes), s.Percent, s.Objects, s.File, s.Line, shortFunc(s.Func))
		for _, reason := range s.Reasons {
			fmt.Fprintf(tw, "\t\t\t\t      %s\n", reason)
		}
	}
	return tw.Flush()
}

// WriteJSON writes the report as indented JSON (schema Format).
func WriteJSON(w io.Writer, r Report) error {
	if r.Sites == nil {
		r.Sites = []Site{}
	}
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// FormatBytes prints a byte count with a binary unit: "512B", "8.6MiB".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	v, u := float64(n)/unit, 0
	for v >= unit && u < 4 {
		v /= unit
		u++
	}
	return fmt.Sprintf("%.1f%ciB", v, "KMGTP"[u])
}
