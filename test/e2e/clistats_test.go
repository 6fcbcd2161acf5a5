package e2e

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The package counts its runs of the `openstack` CLI per command (`coe cluster show`, `token issue`…)
// and prints them when it ends: each run costs about two seconds of CPU on the 2-core machine (Python's
// start and a Keystone login), so the count is the first thing to read when the e2e stage slows down.

type cliStat struct {
	runs int
	wall time.Duration
}

var cliStats = struct {
	sync.Mutex
	byCommand map[string]*cliStat
}{byCommand: map[string]*cliStat{}}

// cliCommand is the command part of a CLI run's arguments: the leading words before the first
// option or argument that is not a command word (`coe cluster show <uuid> -f json` → `coe cluster show`).
func cliCommand(args []string) string {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") || len(words) == 3 || strings.ContainsAny(a, "0123456789=/.") {
			break
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

func countCLI(args []string, took time.Duration) {
	cliStats.Lock()
	defer cliStats.Unlock()
	cmd := cliCommand(args)
	s := cliStats.byCommand[cmd]
	if s == nil {
		s = &cliStat{}
		cliStats.byCommand[cmd] = s
	}
	s.runs++
	s.wall += took
}

// cliSummary is one CLI RUNS line for the totals and one per command, the most run first.
func cliSummary() string {
	cliStats.Lock()
	defer cliStats.Unlock()
	cmds := make([]string, 0, len(cliStats.byCommand))
	total := cliStat{}
	for c, s := range cliStats.byCommand {
		cmds = append(cmds, c)
		total.runs += s.runs
		total.wall += s.wall
	}
	sort.Slice(cmds, func(i, j int) bool {
		a, b := cliStats.byCommand[cmds[i]], cliStats.byCommand[cmds[j]]
		return a.runs > b.runs || a.runs == b.runs && cmds[i] < cmds[j]
	})
	var b strings.Builder
	fmt.Fprintf(&b, "CLI RUNS: %d openstack commands, %.0fs of wall time\n", total.runs, total.wall.Seconds())
	for _, c := range cmds {
		s := cliStats.byCommand[c]
		fmt.Fprintf(&b, "CLI RUNS: %5d %7.0fs  %s\n", s.runs, s.wall.Seconds(), c)
	}
	return b.String()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if len(cliStats.byCommand) > 0 {
		fmt.Fprint(os.Stdout, cliSummary())
	}
	os.Exit(code)
}
