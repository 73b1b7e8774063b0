// Package status builds the ring status report that `ringnode status`
// prints: ring order from the store's successor pointers, the coordinator and
// its epoch, and who is online where.
package status

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/store"
)

// ErrNotMigrated is returned for a store whose schema was never applied.
var ErrNotMigrated = errors.New("status: store has no schema (run `ringnode migrate` first)")

// Report is the status of the ring as the store records it.
type Report struct {
	Store         string       `json:"store"`
	SchemaVersion int64        `json:"schema_version"`
	Coordinator   *Coordinator `json:"coordinator"`
	Epoch         int64        `json:"epoch"`
	Ring          []int64      `json:"ring"`
	RingProblems  []string     `json:"ring_problems"`
	Nodes         []NodeReport `json:"nodes"`
	OnlineUsers   int          `json:"online_users"`
}

// Coordinator names the coordinator node.
type Coordinator struct {
	Node  int64 `json:"node"`
	Epoch int64 `json:"epoch"`
}

// NodeReport is one node of the report. Successor is null when not in the ring.
type NodeReport struct {
	ID               int64    `json:"id"`
	Host             string   `json:"host"`
	CoordinationPort int      `json:"coordination_port"`
	ClientPort       int      `json:"client_port"`
	InRing           bool     `json:"in_ring"`
	Successor        *int64   `json:"successor"`
	Coordinator      bool     `json:"coordinator"`
	Online           []string `json:"online"`
	// Answers: the node's client port took a connection just now (null
	// when not probed). The store's rows say what the ring was; this says
	// which processes run.
	Answers *bool `json:"answers"`
	// DBServer is the database server the node recorded using (empty
	// until it records one; an SQLite store has none).
	DBServer string `json:"db_server"`
	// Health is what the node last said of itself (empty: it serves),
	// HealthAgeMS how long ago on the store's clock (-1: never).
	Health      string `json:"health"`
	HealthAgeMS int64  `json:"health_age_ms"`
}

// healthStale is how long a node in the ring may go without reporting
// its health (it reports every 2 s) before status names it: stopped, or
// cut off from the store.
const healthStale = 10 * time.Second

// healthProblems are the problems the nodes' own reports show: what a
// node says is wrong with it (a fresh report), and a node of the ring
// that stopped reporting. A node that never reported (an older binary)
// says nothing.
func healthProblems(nodes []store.NodeRow) []string {
	var out []string
	for _, n := range nodes {
		switch {
		case n.HealthAge < 0:
		case n.HealthAge > healthStale && n.InRing():
			out = append(out, fmt.Sprintf("node %d has not reported for %s (stopped, or cut off from the store)", n.ID, n.HealthAge.Round(time.Second)))
		case n.HealthAge <= healthStale && n.Health != "":
			out = append(out, fmt.Sprintf("node %d: %s (%s ago)", n.ID, n.Health, n.HealthAge.Round(time.Second)))
		}
	}
	return out
}

// Probe asks every node of the report whether it answers: a TCP
// connection to its client port within timeout, all nodes at once.
func (r *Report) Probe(ctx context.Context, timeout time.Duration) {
	var wg sync.WaitGroup
	for i := range r.Nodes {
		n := &r.Nodes[i]
		wg.Go(func() {
			d := net.Dialer{Timeout: timeout}
			c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(n.Host, strconv.Itoa(n.ClientPort)))
			ok := err == nil
			if ok {
				c.Close()
			}
			n.Answers = &ok
		})
	}
	wg.Wait()
}

// Collect reads the report from the store.
func Collect(ctx context.Context, st store.Store, storeName string) (Report, error) {
	applied, err := store.AppliedMigrations(ctx, st)
	if err != nil {
		return Report{}, err
	}
	if len(applied) == 0 {
		return Report{}, ErrNotMigrated
	}
	r := Report{Store: storeName, SchemaVersion: applied[len(applied)-1], RingProblems: []string{}, Ring: []int64{}, Nodes: []NodeReport{}}
	nodes, err := st.Nodes(ctx)
	if err != nil {
		return Report{}, err
	}
	coord, err := st.Coordinator(ctx)
	if err != nil {
		return Report{}, err
	}
	r.Epoch = coord.Epoch
	if coord.NodeID != 0 {
		r.Coordinator = &Coordinator{Node: coord.NodeID, Epoch: coord.Epoch}
	}
	online, err := st.Online(ctx)
	if err != nil {
		return Report{}, err
	}
	r.OnlineUsers = len(online)
	byNode := map[int64][]string{}
	for _, p := range online {
		byNode[p.NodeID] = append(byNode[p.NodeID], p.UserName)
	}
	succ := store.Successors(nodes)
	for _, n := range nodes {
		r.Nodes = append(r.Nodes, nodeReport(n, coord.NodeID, byNode[n.ID]))
		delete(byNode, n.ID)
	}
	if order, problems := ring.Order(succ); order != nil {
		r.Ring, r.RingProblems = order, append(r.RingProblems, problems...)
	}
	r.RingProblems = append(r.RingProblems, healthProblems(nodes)...)
	for node, users := range byNode {
		r.RingProblems = append(r.RingProblems, fmt.Sprintf("users %v are online at node %d, which is not in the node table", users, node))
	}
	if r.Coordinator != nil && len(succ) > 0 {
		if _, ok := succ[r.Coordinator.Node]; !ok {
			r.RingProblems = append(r.RingProblems, fmt.Sprintf("coordinator node %d is not in the ring", r.Coordinator.Node))
		}
	}
	return r, nil
}

// nodeReport is the report of the node of row n, with the coordinator
// coord and the users online there.
func nodeReport(n store.NodeRow, coord int64, online []string) NodeReport {
	rn := NodeReport{ID: n.ID, Host: n.Host, CoordinationPort: n.CoordPort, ClientPort: n.ClientPort,
		InRing: n.InRing(), Coordinator: n.ID == coord, Online: online, DBServer: n.DBServer,
		Health: n.Health, HealthAgeMS: -1}
	if n.HealthAge >= 0 {
		rn.HealthAgeMS = n.HealthAge.Milliseconds()
	}
	if rn.Online == nil {
		rn.Online = []string{}
	}
	if n.InRing() {
		s := n.Successor
		rn.Successor = &s
	}
	return rn
}

// answering counts the nodes that answered a probe, and reports whether
// there was one.
func (r Report) answering() (n int, probed bool) {
	for _, x := range r.Nodes {
		if x.Answers != nil {
			probed = true
			if *x.Answers {
				n++
			}
		}
	}
	return n, probed
}

// WriteText prints the report for people: a summary, a blank line and a
// table of the nodes.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	r.writeSummary(&b)
	b.WriteString("\n")
	r.writeNodeTable(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeSummary writes the lines on the store, the coordinator, the ring
// and its problems, the users online and (after a probe) the nodes that
// answer.
func (r Report) writeSummary(b *strings.Builder) {
	fmt.Fprintf(b, "store:        %s (schema %d)\n", r.Store, r.SchemaVersion)
	if r.Coordinator != nil {
		fmt.Fprintf(b, "coordinator:  node %d (epoch %d)\n", r.Coordinator.Node, r.Coordinator.Epoch)
	} else {
		fmt.Fprintf(b, "coordinator:  none (last epoch %d)\n", r.Epoch)
	}
	b.WriteString(r.ringLine())
	for _, p := range r.RingProblems {
		fmt.Fprintf(b, "problem:      %s\n", p)
	}
	fmt.Fprintf(b, "online users: %d\n", r.OnlineUsers)
	if answering, probed := r.answering(); probed {
		fmt.Fprintf(b, "answering:    %d of %d nodes", answering, len(r.Nodes))
		if answering == 0 && len(r.Nodes) > 0 {
			b.WriteString(" (no node runs: the rows above are the ring as it was last recorded)")
		}
		b.WriteString("\n")
	}
}

// ringLine is the summary's ring line: the ring order (back to its start
// when it closes without problems) and how many nodes are in it.
func (r Report) ringLine() string {
	if len(r.Ring) == 0 {
		return fmt.Sprintf("ring:         not formed (0 of %d nodes)\n", len(r.Nodes))
	}
	inRing := 0
	for _, n := range r.Nodes {
		if n.InRing {
			inRing++
		}
	}
	parts := make([]string, 0, len(r.Ring)+1)
	for _, id := range r.Ring {
		parts = append(parts, strconv.FormatInt(id, 10))
	}
	if len(r.RingProblems) == 0 {
		parts = append(parts, parts[0])
	}
	return fmt.Sprintf("ring:         %s (%d of %d nodes)\n", strings.Join(parts, " -> "), inRing, len(r.Nodes))
}

// writeNodeTable writes the table of the nodes, one row each.
func (r Report) writeNodeTable(b *strings.Builder) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	// The database server column only where nodes recorded one (MariaDB).
	servers := slices.ContainsFunc(r.Nodes, func(n NodeReport) bool { return n.DBServer != "" })
	dbHead := ""
	if servers {
		dbHead = "DB SERVER\t"
	}
	fmt.Fprintln(tw, "NODE\tHOST\tCOORD\tCLIENT\tANSWERS\tIN RING\tSUCCESSOR\tROLE\t"+dbHead+"ONLINE")
	for _, n := range r.Nodes {
		answers := "-"
		if n.Answers != nil {
			answers = map[bool]string{true: "yes", false: "no"}[*n.Answers]
		}
		in, succ, role, online := "no", "-", "-", "-"
		if n.InRing {
			in, succ = "yes", strconv.FormatInt(*n.Successor, 10)
		}
		if n.Coordinator {
			role = "coordinator"
		}
		if len(n.Online) > 0 {
			online = strings.Join(n.Online, ", ")
		}
		db := ""
		if servers {
			db = cmp.Or(n.DBServer, "-") + "\t"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s%s\n", n.ID, n.Host, n.CoordinationPort, n.ClientPort, answers, in, succ, role, db, online)
	}
	tw.Flush()
}
