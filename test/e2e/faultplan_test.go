package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rotating plan of the fault matrix: every fault and every operation in each run, each operation
// once, the pinned one in the apiserver's round, and the cells differ from seed to seed.
func TestMatrixPlan(t *testing.T) {
	ops := []string{"create", pinnedToApiserverRound, "resize", "cp resize", "ng create", "ng delete", "upgrade", "delete"}
	faults := []string{"apiserver killed 40 s", "MariaDB restarted", "RabbitMQ restarted", "Keystone stopped 30 s", "bridges SIGKILLed"}

	full := matrixPlan(ops, faults, 1, true)
	require.Len(t, full, len(faults))
	for _, round := range full {
		require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, round)
	}

	seen := map[string]bool{}
	for seed := int64(0); seed < 50; seed++ {
		plan := matrixPlan(ops, faults, seed, false)
		require.Len(t, plan, len(faults))
		count := make([]int, len(ops))
		var cells []string
		for r, round := range plan {
			require.NotEmpty(t, round, "seed %d: round %d (%s) has no operation", seed, r, faults[r])
			for _, i := range round {
				count[i]++
				cells = append(cells, ops[i]+"×"+faults[r])
				if ops[i] == pinnedToApiserverRound {
					require.True(t, strings.HasPrefix(faults[r], "apiserver"), "seed %d: %s in round %q", seed, ops[i], faults[r])
				}
			}
		}
		for i, n := range count {
			require.Equal(t, 1, n, "seed %d: %s runs %d times", seed, ops[i], n)
		}
		require.Equal(t, plan, matrixPlan(ops, faults, seed, false), "the plan is a function of the seed")
		for _, c := range cells {
			seen[c] = true
		}
	}
	// Over 50 seeds every cell but the pinned operation's other faults comes up.
	require.Len(t, seen, (len(ops)-1)*len(faults)+1)

	// Fewer operations than faults: still every operation once, no panic.
	small := matrixPlan(ops[:2], faults, 7, false)
	total := 0
	for _, round := range small {
		total += len(round)
	}
	require.Equal(t, 2, total)
}
