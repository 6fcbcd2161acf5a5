package conductor

import (
	"fmt"
	"strings"
	"time"
)

// stepTimer records how long each step of an apply took, for a debug log line: where an
// operation's time goes (issue 16's cast → Cluster latency) without a profiler.
type stepTimer struct {
	last  time.Time
	steps []string
}

func newStepTimer() *stepTimer { return &stepTimer{last: time.Now()} }

// mark ends the step named name (it began at the previous mark).
func (s *stepTimer) mark(name string) {
	now := time.Now()
	s.steps = append(s.steps, fmt.Sprintf("%s=%.1fms", name, float64(now.Sub(s.last).Microseconds())/1000))
	s.last = now
}

// String is the steps in order, e.g. "rows=1.2ms render=0.4ms".
func (s *stepTimer) String() string { return strings.Join(s.steps, " ") }
