package bench

import "fmt"

func formatPct(f float64) string { return fmt.Sprintf("%+.2f%%", f*100) }
