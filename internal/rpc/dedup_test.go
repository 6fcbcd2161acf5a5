package rpc

import (
	"context"
	"log/slog"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDedupCache(t *testing.T) {
	r1, r2 := &Reply{MsgID: "m1"}, &Reply{MsgID: "m2"}
	type op struct {
		put   bool // put id (with reply), else get id
		id    string
		reply *Reply
		// for a get:
		dup  bool
		want *Reply
	}
	cases := []struct {
		name string
		size int
		ops  []op
	}{
		{"unknown id is not a duplicate", 4, []op{
			{id: "a", dup: false},
		}},
		{"a finished call is a duplicate with its reply", 4, []op{
			{put: true, id: "a", reply: r1},
			{id: "a", dup: true, want: r1},
			{id: "b", dup: false},
		}},
		{"a finished cast is a duplicate without reply", 4, []op{
			{put: true, id: "a"},
			{id: "a", dup: true, want: nil},
		}},
		{"the same id finished again keeps the last reply", 4, []op{
			{put: true, id: "a", reply: r1},
			{put: true, id: "a", reply: r2},
			{id: "a", dup: true, want: r2},
		}},
		{"messages without id are never duplicates", 4, []op{
			{put: true, id: "", reply: r1},
			{id: "", dup: false},
		}},
		{"the least recently seen id is evicted", 2, []op{
			{put: true, id: "a", reply: r1},
			{put: true, id: "b", reply: r2},
			{put: true, id: "c"},
			{id: "a", dup: false},
			{id: "b", dup: true, want: r2},
			{id: "c", dup: true},
		}},
		{"a lookup makes an id recent again", 2, []op{
			{put: true, id: "a", reply: r1},
			{put: true, id: "b", reply: r2},
			{id: "a", dup: true, want: r1},
			{put: true, id: "c"},
			{id: "b", dup: false},
			{id: "a", dup: true, want: r1},
		}},
		{"re-finishing an id makes it recent again", 2, []op{
			{put: true, id: "a"},
			{put: true, id: "b"},
			{put: true, id: "a", reply: r1},
			{put: true, id: "c"},
			{id: "b", dup: false},
			{id: "a", dup: true, want: r1},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newDedupCache(c.size)
			for i, o := range c.ops {
				if o.put {
					d.put(o.id, o.reply)
					continue
				}
				got, dup := d.get(o.id)
				assert.Equal(t, o.dup, dup, "op %d: get(%q) duplicate", i, o.id)
				assert.Same(t, o.want, got, "op %d: get(%q) reply", i, o.id)
			}
		})
	}
}

// TestServerRunsACastOncePerUniqueID drives deliveries through the server's intake, scheduler
// and dispatch without a broker: a copy of a finished cast (same _unique_id) is acknowledged
// without running the handler again, unless the id has been forgotten.
func TestServerRunsACastOncePerUniqueID(t *testing.T) {
	cases := []struct {
		name      string
		dedupSize int
		ids       []string
		runs      int
		outcomes  []string
	}{
		{"a copy is not run again", 8, []string{"a", "a"}, 1, []string{OutcomeOK, OutcomeDuplicate}},
		{"different ids all run", 8, []string{"a", "b"}, 2, []string{OutcomeOK, OutcomeOK}},
		{"messages without id always run", 8, []string{"", ""}, 2, []string{OutcomeOK, OutcomeOK}},
		{"a forgotten id runs again", 1, []string{"a", "b", "a"}, 3, []string{OutcomeOK, OutcomeOK, OutcomeOK}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var outcomes []string
			s, err := NewServer(Options{
				Hosts: []Host{{Hostname: "broker.invalid", Port: 5672}}, Exchange: "magnum", Topic: "magnum-conductor",
				ServerID: "test", DedupSize: c.dedupSize, Logger: slog.New(slog.DiscardHandler),
				Observe: func(o Observation) { outcomes = append(outcomes, o.Outcome) },
			})
			require.NoError(t, err)
			runs := 0
			s.Register("cluster_delete", func(context.Context, *Request) (any, error) {
				runs++
				return nil, nil
			})
			s.handlerCtx, s.cancelHandler = context.WithCancel(context.Background())
			defer s.cancelHandler()
			s.sched = newScheduler(func(t *task) string { return t.key })
			defer s.sched.stop()
			sess := &session{dead: make(chan struct{})}

			for _, id := range c.ids {
				body := `{"method": "cluster_delete", "args": {"uuid": "c1"}`
				if id != "" {
					body += `, "_unique_id": "` + id + `"`
				}
				s.accept(sess, "magnum-conductor", amqp.Delivery{Body: []byte(body + "}")})
				tk, ok := s.sched.next()
				require.True(t, ok)
				_, again := s.process(tk)
				require.False(t, again)
				s.sched.done(tk)
			}
			assert.Equal(t, c.runs, runs, "handler runs")
			assert.Equal(t, c.outcomes, outcomes)
			st := s.Stats()
			assert.Equal(t, int64(len(c.ids)-c.runs), st.Duplicates)
			assert.Zero(t, st.InFlight, "every delivery is settled")
		})
	}
}
