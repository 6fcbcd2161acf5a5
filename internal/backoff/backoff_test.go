package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWaitsDoubleUpToMax(t *testing.T) {
	cases := map[string]struct {
		policy Policy
		want   []time.Duration
	}{
		"capped":                {Policy{Initial: 250 * time.Millisecond, Max: 4 * time.Second}, []time.Duration{250, 500, 1000, 2000, 4000, 4000, 4000}},
		"no cap":                {Policy{Initial: time.Second}, []time.Duration{1000, 2000, 4000, 8000, 16000, 32000, 64000}},
		"initial above the cap": {Policy{Initial: 3 * time.Second, Max: time.Second}, []time.Duration{3000, 1000, 1000}},
		"fixed":                 {Policy{Initial: 10 * time.Second, Fixed: true}, []time.Duration{10000, 10000, 10000}},
	}
	for name, c := range cases {
		b := c.policy.backoff()
		for i, want := range c.want {
			if got := b.Step(); got != want*time.Millisecond {
				t.Errorf("%s: wait %d is %s, want %s", name, i+1, got, want*time.Millisecond)
			}
		}
	}
	b := Policy{Initial: time.Second}.backoff()
	for range 200 {
		if d := b.Step(); d <= 0 {
			t.Fatalf("an uncapped wait overflowed: %s", d)
		}
	}
}

var errTransient = errors.New("transient")

func transient(err error) bool { return errors.Is(err, errTransient) }

// counting is an op that fails with err until it has been called fail times.
func counting(fail int, err error, calls *[]int) func(int) error {
	return func(attempt int) error {
		*calls = append(*calls, attempt)
		if len(*calls) <= fail {
			return err
		}
		return nil
	}
}

func TestDoRetriesUntilSuccess(t *testing.T) {
	var calls []int
	start := time.Now()
	err := Policy{Initial: 5 * time.Millisecond, Max: 10 * time.Millisecond}.Do(context.Background(), transient, counting(3, errTransient, &calls))
	if err != nil || len(calls) != 4 || calls[0] != 1 || calls[3] != 4 {
		t.Fatalf("err %v, attempts %v", err, calls)
	}
	if elapsed := time.Since(start); elapsed < 25*time.Millisecond {
		t.Errorf("waited %s, want at least 5+10+10 ms", elapsed)
	}
}

func TestDoStopsAtAnErrorItMayNotRetry(t *testing.T) {
	var calls []int
	final := errors.New("constraint violated")
	err := Policy{Initial: time.Millisecond}.Do(context.Background(), transient, counting(5, final, &calls))
	if !errors.Is(err, final) || len(calls) != 1 {
		t.Errorf("err %v after %d attempts", err, len(calls))
	}
}

func TestDoGivesUpAfterMaxAttempts(t *testing.T) {
	var calls []int
	err := Policy{Initial: time.Millisecond, MaxAttempts: 3}.Do(context.Background(), transient, counting(100, errTransient, &calls))
	if !errors.Is(err, errTransient) || len(calls) != 3 {
		t.Errorf("err %v after %d attempts", err, len(calls))
	}
	calls = nil
	_ = Policy{Initial: time.Millisecond, MaxAttempts: 1}.Do(context.Background(), transient, counting(100, errTransient, &calls))
	if len(calls) != 1 {
		t.Errorf("one attempt in all, got %d", len(calls))
	}
}

func TestNoRetriesWithoutAnInitialWait(t *testing.T) {
	var calls []int
	_ = Policy{}.Do(context.Background(), transient, counting(100, errTransient, &calls))
	if len(calls) != 1 {
		t.Errorf("got %d attempts", len(calls))
	}
}

// The budget ends the retries at once when the next wait would outlast it.
func TestBudget(t *testing.T) {
	var calls []int
	start := time.Now()
	err := Policy{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond, Budget: 300 * time.Millisecond}.
		Do(context.Background(), transient, counting(1000, errTransient, &calls))
	elapsed := time.Since(start)
	// Waits of 20, 40, 80 and 100 ms end at 240 ms; the next would end at 340, past the budget.
	if !errors.Is(err, errTransient) || len(calls) != 5 {
		t.Errorf("err %v after %d attempts", err, len(calls))
	}
	if elapsed > 300*time.Millisecond {
		t.Errorf("took %s", elapsed)
	}
}

// The context's deadline bounds the retries like the budget; a cancelled context ends them, and
// Do still returns the operation's error.
func TestContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var calls []int
	start := time.Now()
	// Waits of 20 and 40 ms end at 60 ms; the next (80 ms) would end past the deadline.
	err := Policy{Initial: 20 * time.Millisecond, Budget: time.Minute}.Do(ctx, transient, counting(1000, errTransient, &calls))
	if !errors.Is(err, errTransient) || len(calls) != 3 || time.Since(start) > 100*time.Millisecond {
		t.Errorf("err %v after %d attempts in %s", err, len(calls), time.Since(start))
	}

	ctx, cancel = context.WithCancel(context.Background())
	calls = nil
	op := func(attempt int) error {
		calls = append(calls, attempt)
		if attempt == 2 {
			cancel()
		}
		return errTransient
	}
	err = Policy{Initial: time.Millisecond}.Do(ctx, transient, op)
	if !errors.Is(err, errTransient) || len(calls) != 2 {
		t.Errorf("err %v after %d attempts", err, len(calls))
	}
}

func TestAttemptsCountAndElapsed(t *testing.T) {
	a := Policy{Initial: 5 * time.Millisecond}.Start(context.Background())
	if a.Count() != 1 {
		t.Fatalf("count %d", a.Count())
	}
	first, second := a.Wait(context.Background()), a.Wait(context.Background())
	if !first || !second || a.Count() != 3 {
		t.Fatalf("count %d", a.Count())
	}
	if a.Elapsed() < 15*time.Millisecond {
		t.Errorf("elapsed %s", a.Elapsed())
	}
}
