package testutil

import (
	"fmt"
	"os"
	"slices"
	"time"
)

// Percentile is the p-th percentile (0..1) of d, nearest rank; 0 for none.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}

// Millis is d in milliseconds, with microseconds as the fraction.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// AppendBenchTable adds a row to the file MCB_BENCH_TABLE names, from which `make bench` prints its
// closing table (deploy/local/bench.sh): figure, bridge, peer, goal, tab-separated. Without the
// variable it does nothing.
func AppendBenchTable(figure, bridge, peer, goal string) {
	path := os.Getenv("MCB_BENCH_TABLE")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Printf("# MCB_BENCH_TABLE: %v\n", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s\t%s\t%s\t%s\n", figure, bridge, peer, goal)
}
