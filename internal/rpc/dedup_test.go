package rpc

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
