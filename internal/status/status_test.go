package status

import (
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/nodelist"
	"github.com/ringchat/ringchat/internal/store"
)

func TestWriteText(t *testing.T) {
	two, yes, no := int64(2), true, false
	one := int64(1)
	for _, c := range []struct {
		name string
		r    Report
		want string
	}{
		{"ring of two, probed", Report{
			Store: "sqlite:ring.db", SchemaVersion: 3, Coordinator: &Coordinator{Node: 2, Epoch: 7}, Epoch: 7,
			Ring: []int64{1, 2}, OnlineUsers: 2,
			Nodes: []NodeReport{
				{ID: 1, Host: "127.0.0.1", CoordinationPort: 5001, ClientPort: 8001, InRing: true, Successor: &two,
					Online: []string{"alice", "bob"}, Answers: &yes},
				{ID: 2, Host: "127.0.0.1", CoordinationPort: 5002, ClientPort: 8002, InRing: true, Successor: &one,
					Coordinator: true, Online: []string{}, Answers: &yes},
				{ID: 3, Host: "example.org", CoordinationPort: 5003, ClientPort: 8003, Online: []string{}, Answers: &no},
			},
		}, `store:        sqlite:ring.db (schema 3)
coordinator:  node 2 (epoch 7)
ring:         1 -> 2 -> 1 (2 of 3 nodes)
online users: 2
answering:    2 of 3 nodes

NODE  HOST         COORD  CLIENT  ANSWERS  IN RING  SUCCESSOR  ROLE         ONLINE
1     127.0.0.1    5001   8001    yes      yes      2          -            alice, bob
2     127.0.0.1    5002   8002    yes      yes      1          coordinator  -
3     example.org  5003   8003    no       no       -          -            -
`},
		{"no ring, nobody answers", Report{
			Store: "sqlite:ring.db", SchemaVersion: 3, Epoch: 4, RingProblems: []string{"node 1 has no successor"},
			Nodes: []NodeReport{{ID: 1, Host: "h", CoordinationPort: 5001, ClientPort: 8001, Online: []string{}, Answers: &no}},
		}, `store:        sqlite:ring.db (schema 3)
coordinator:  none (last epoch 4)
ring:         not formed (0 of 1 nodes)
problem:      node 1 has no successor
online users: 0
answering:    0 of 1 nodes (no node runs: the rows above are the ring as it was last recorded)

NODE  HOST  COORD  CLIENT  ANSWERS  IN RING  SUCCESSOR  ROLE  ONLINE
1     h     5001   8001    no       no       -          -     -
`},
		{"ring with a problem, not probed", Report{
			Store: "mysql", SchemaVersion: 1, Coordinator: &Coordinator{Node: 1, Epoch: 2}, Epoch: 2,
			Ring: []int64{1, 2}, RingProblems: []string{"the ring does not close"},
			Nodes: []NodeReport{{ID: 1, Host: "h", CoordinationPort: 1, ClientPort: 2, InRing: true, Successor: &two, Coordinator: true}},
		}, `store:        mysql (schema 1)
coordinator:  node 1 (epoch 2)
ring:         1 -> 2 (1 of 1 nodes)
problem:      the ring does not close
online users: 0

NODE  HOST  COORD  CLIENT  ANSWERS  IN RING  SUCCESSOR  ROLE         ONLINE
1     h     1      2       -        yes      2          coordinator  -
`},
		{"on a Galera cluster, each node's database server", Report{
			Store: "mysql://root@db1:3306,db2:3306/ringchat", SchemaVersion: 8, Coordinator: &Coordinator{Node: 1, Epoch: 2}, Epoch: 2,
			Ring: []int64{1, 2},
			Nodes: []NodeReport{
				{ID: 1, Host: "h1", CoordinationPort: 1, ClientPort: 2, InRing: true, Successor: &two, Coordinator: true, DBServer: "db1:3306"},
				{ID: 2, Host: "h2", CoordinationPort: 1, ClientPort: 2, InRing: true, Successor: &one, DBServer: "db2:3306"},
				{ID: 3, Host: "h3", CoordinationPort: 1, ClientPort: 2},
			},
		}, `store:        mysql://root@db1:3306,db2:3306/ringchat (schema 8)
coordinator:  node 1 (epoch 2)
ring:         1 -> 2 -> 1 (2 of 3 nodes)
online users: 0

NODE  HOST  COORD  CLIENT  ANSWERS  IN RING  SUCCESSOR  ROLE         DB SERVER  ONLINE
1     h1    1      2       -        yes      2          coordinator  db1:3306   -
2     h2    1      2       -        yes      1          -            db2:3306   -
3     h3    1      2       -        no       -          -            -          -
`},
	} {
		var b strings.Builder
		if err := c.r.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Errorf("%s: got\n%s\nwant\n%s", c.name, b.String(), c.want)
		}
	}
}

// A node's fresh report of trouble, and a node of the ring silent for
// longer than healthStale, are problems; a serving node, an old report of
// trouble from a node out of the ring, and a node that never reported
// (an older binary) are not.
func TestHealthProblems(t *testing.T) {
	row := func(id, succ int64, health string, age time.Duration) store.NodeRow {
		return store.NodeRow{Entry: nodelist.Entry{ID: id}, Successor: succ, Health: health, HealthAge: age}
	}
	got := healthProblems([]store.NodeRow{
		row(1, 2, "", time.Second),
		row(2, 3, "most of its critical sections fail (the store answers, but not its visits)", 1400*time.Millisecond),
		row(3, 5, "", healthStale+time.Second),
		row(4, 0, "not in the ring (joining)", healthStale+time.Second),
		row(5, 1, "", -1),
		row(6, 0, "", healthStale),
	})
	want := []string{
		"node 2: most of its critical sections fail (the store answers, but not its visits) (1s ago)",
		"node 3 has not reported for 11s (stopped, or cut off from the store)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
