package conductor

import (
	"fmt"
	"strings"
	"time"
)

// stepTimer records how long each step of an apply took, for a debug log line: where an
// operation's time goes (the cast → Cluster latency) without a profiler. Marks only record
// a time; the text is made by String, when the line is logged.
type stepTimer struct {
	last  time.Time
	names []string
	took  []time.Duration
}

func newStepTimer() *stepTimer { return &stepTimer{last: time.Now()} }

// mark ends the step named name (it began at the previous mark).
func (s *stepTimer) mark(name string) {
	now := time.Now()
	s.names, s.took = append(s.names, name), append(s.took, now.Sub(s.last))
	s.last = now
}

// String is the steps in order, e.g. "rows=1.2ms render=0.4ms".
func (s *stepTimer) String() string {
	parts := make([]string, len(s.names))
	for i, name := range s.names {
		parts[i] = fmt.Sprintf("%s=%.1fms", name, float64(s.took[i].Microseconds())/1000)
	}
	return strings.Join(parts, " ")
}
