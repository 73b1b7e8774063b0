package chaos

// Network faults on one machine, made real with nf_tables (docs/RELIABILITY.md,
// "Network faults"; /work/shared/ENGINEERING.md, "Network faults and a lab on
// one machine").
//
// Every node listens on a loopback alias of its own (127.0.0.10+ID: the
// whole 127/8 is local, and a listener bound to one alias is distinct) and
// runs under a group id of its own, so that a packet's sender is known by
// the socket that sent it (meta skgid) and its receiver by its address (a
// node's alias, or the store's address and port). A table of the run's own,
// inet ringchaos_<pid>, has two chains:
//
//   - marking, on the output hook: the first packet of every connection a node
//     opens (TCP, or a UDP flow) labels the connection with a conntrack mark
//     that names its two ends, tag<<16 | from<<8 | to (the store is 0). Every
//     later packet of the connection, the replies included, carries the mark;
//     the direction (original or reply) says which end sent it.
//   - faults, on the prerouting hook: the fault's rules, by mark and
//     direction. A drop there happens after loopback, as on a wire: a drop at
//     the output hook would hand EPERM back to a UDP sendto, which no real
//     network does.
//
// Only packets of the run's own node processes are marked, so the rules
// touch nothing else on the machine (clients, the harness, other tests, a
// MariaDB server shared with them). The table is deleted on the way out,
// on failure and on SIGINT/SIGTERM.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// StoreEnd is the store's end of a link (node ids start at 1).
const StoreEnd int64 = 0

// Link is the packets one end sends to another: From's packets to To.
type Link struct{ From, To int64 }

// NetFault is what the network drops: every packet on Drop, or with
// LossPct (1-99) that share of them, at random.
type NetFault struct {
	Drop    []Link
	LossPct int
	// Down are lab hosts whose link goes down (labnet.go; lab runs only).
	Down []int64
}

// Both returns the links a↔b, both ways.
func Both(a, b int64) []Link { return []Link{{a, b}, {b, a}} }

// netLayout is a lab's addresses, group ids and marks: everything the
// rules are made of (pure, so that the rules can be tested as text).
type netLayout struct {
	Table   string  // nft table name, in family inet
	Tag     uint32  // the run's tag, the ct mark's upper 16 bits (1..0xffff)
	GIDBase uint32  // node ID runs with group GIDBase+ID
	Nodes   []int64 // node ids, ascending (1..254)
	// Stores are the store's addresses (IPv4:port), several for Galera.
	Stores []string
	// Lab, if set, puts the nodes on lab hosts (labnet.go): addresses,
	// processes and rules are the lab's.
	Lab *LabNet
}

// addr is node id's address.
func (l netLayout) addr(id int64) string {
	if l.Lab != nil {
		return l.Lab.Addr(id)
	}
	return NodeAddr(id)
}

// newLayout is the layout of a run in process pid.
func newLayout(pid int, nodes []int64, stores []string) netLayout {
	return netLayout{
		Table:   fmt.Sprintf("ringchaos_%d", pid),
		Tag:     uint32(pid%0xfffe) + 1,
		GIDBase: 2_000_000_000 + uint32(pid%1_000_000)*256, // far from any real group, distinct per run
		Nodes:   slices.Sorted(slices.Values(nodes)),
		Stores:  stores,
	}
}

// NodeAddr is node id's loopback alias with the network faults on.
func NodeAddr(id int64) string { return fmt.Sprintf("127.0.0.%d", 10+id) }

// GID is the group id node id runs under.
func (l netLayout) GID(id int64) uint32 { return l.GIDBase + uint32(id) }

// mark is the conntrack mark of a connection from end from to end to.
func (l netLayout) mark(from, to int64) uint32 { return l.Tag<<16 | uint32(from)<<8 | uint32(to) }

// validate reports a layout the rules cannot express.
func (l netLayout) validate() error {
	for _, id := range l.Nodes {
		if id < 1 || id > 240 {
			return fmt.Errorf("node id %d: network faults need ids 1..240 (alias 127.0.0.10+id)", id)
		}
	}
	if len(l.Stores) == 0 {
		return errors.New("no store address to cut nodes from")
	}
	for _, s := range l.Stores {
		host, port, err := net.SplitHostPort(s)
		ip := net.ParseIP(host)
		if err != nil || ip == nil || ip.To4() == nil {
			return fmt.Errorf("store address %q: want IPv4:port (a socket or a host name cannot be cut)", s)
		}
		if _, err := strconv.Atoi(port); err != nil {
			return fmt.Errorf("store address %q: bad port", s)
		}
	}
	return nil
}

// setupScript creates the table (replacing a stale one of the same name,
// left by a killed run whose pid this run reuses) with its mark rules and
// an empty faults chain.
func (l netLayout) setupScript() string {
	if l.Lab != nil {
		return l.labSetupScript()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "add table inet %s\ndelete table inet %s\n", l.Table, l.Table)
	fmt.Fprintf(&b, "table inet %s {\n", l.Table)
	b.WriteString("\tchain marking {\n\t\ttype filter hook output priority -150; policy accept;\n")
	for _, from := range l.Nodes {
		for _, to := range l.Nodes {
			if to != from {
				fmt.Fprintf(&b, "\t\tct state new meta skgid %d ip daddr %s ct mark set 0x%08x\n", l.GID(from), NodeAddr(to), l.mark(from, to))
			}
		}
		for _, s := range l.Stores {
			host, port, _ := net.SplitHostPort(s)
			fmt.Fprintf(&b, "\t\tct state new meta skgid %d ip daddr %s tcp dport %s ct mark set 0x%08x\n", l.GID(from), host, port, l.mark(from, StoreEnd))
		}
	}
	b.WriteString("\t}\n")
	b.WriteString("\tchain faults {\n\t\ttype filter hook prerouting priority -150; policy accept;\n\t}\n}\n")
	return b.String()
}

// faultScript replaces the faults chain's rules with those of f, in one
// transaction. A link From→To drops From's packets on the connections
// From opened to To (original direction) and on those To opened to From
// (reply direction). The store opens no connections.
func (l netLayout) faultScript(f NetFault) string {
	if l.Lab != nil {
		return l.labFaultScript(f)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "flush chain inet %s faults\n", l.Table)
	loss := ""
	if f.LossPct > 0 {
		loss = fmt.Sprintf("numgen random mod 100 < %d ", f.LossPct)
	}
	seen := map[Link]bool{}
	for _, k := range f.Drop {
		if seen[k] || k.From == k.To {
			continue
		}
		seen[k] = true
		if k.From != StoreEnd {
			fmt.Fprintf(&b, "add rule inet %s faults ct mark 0x%08x ct direction original %scounter drop\n", l.Table, l.mark(k.From, k.To), loss)
		}
		if k.To != StoreEnd {
			fmt.Fprintf(&b, "add rule inet %s faults ct mark 0x%08x ct direction reply %scounter drop\n", l.Table, l.mark(k.To, k.From), loss)
		}
	}
	return b.String()
}

// healScript removes every fault rule.
func (l netLayout) healScript() string {
	if l.Lab != nil {
		return l.labHealScript()
	}
	return fmt.Sprintf("flush chain inet %s faults\n", l.Table)
}

// netLab is the nf_tables table of a run.
type netLab struct {
	layout netLayout

	mu      sync.Mutex
	closed  bool
	dropped int64 // packets dropped by rules already flushed
	stopSig func()
}

// NetUsable says why network faults cannot be made here ("" when they
// can, as far as can be told without making a table).
func NetUsable() string { return nftUsable() }

func nftUsable() string {
	if _, err := exec.LookPath("nft"); err != nil {
		return "nft is not installed (apt-get install -y nftables)"
	}
	if os.Geteuid() != 0 {
		return "not root: nft needs CAP_NET_ADMIN"
	}
	return ""
}

// nft runs an nft script.
func nft(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// openNetLab makes the table of layout l and checks that a loss rule can
// be loaded (conntrack and numgen work); on any failure nothing is left.
// The table goes when Close is called, or on SIGINT or SIGTERM to this
// process (the signal is then raised again for its other handlers).
func openNetLab(l netLayout) (*netLab, error) {
	if why := nftUsable(); why != "" {
		return nil, errors.New(why)
	}
	if err := l.validate(); err != nil {
		return nil, err
	}
	if err := nft(l.setupScript()); err != nil {
		return nil, err
	}
	lab := &netLab{layout: l}
	probe := NetFault{Drop: []Link{{l.Nodes[0], StoreEnd}}, LossPct: 1}
	if err := nft(l.faultScript(probe)); err != nil {
		lab.Close()
		return nil, fmt.Errorf("a loss rule cannot be loaded: %w", err)
	}
	if err := nft(l.healScript()); err != nil {
		lab.Close()
		return nil, err
	}
	lab.stopSig = lab.closeOnSignal()
	return lab, nil
}

// closeOnSignal deletes the table on SIGINT or SIGTERM at once, then
// raises the signal again: the run's own handler (or the default action)
// still sees it.
func (n *netLab) closeOnSignal() func() {
	ch := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-ch:
			n.Close()
			signal.Stop(ch)
			if s, ok := sig.(syscall.Signal); ok {
				_ = syscall.Kill(os.Getpid(), s)
			}
		case <-done:
			signal.Stop(ch)
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// Apply replaces the fault in place with f.
func (n *netLab) Apply(f NetFault) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("chaos: network lab closed")
	}
	n.dropped += n.countLocked()
	if err := nft(n.layout.faultScript(f)); err != nil {
		return err
	}
	return n.layout.Lab.links(n.layout.Nodes, f.Down)
}

// total is the packets the lab dropped so far (rules in place included).
func (n *netLab) total() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return n.dropped
	}
	return n.dropped + n.countLocked()
}

// Heal removes the fault; it returns the packets the lab dropped so far.
func (n *netLab) Heal() (int64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return n.dropped, nil
	}
	n.dropped += n.countLocked()
	return n.dropped, errors.Join(nft(n.layout.healScript()), n.layout.Lab.links(n.layout.Nodes, nil))
}

// countLocked reads the fault rules' counters.
func (n *netLab) countLocked() int64 {
	out, err := exec.Command("nft", "-j", "list", "table", n.layout.family(), n.layout.Table).Output()
	if err != nil {
		return 0
	}
	return countersIn(out)
}

// countersIn sums the packets of every counter in nft's JSON output.
func countersIn(js []byte) int64 {
	var doc struct {
		Nftables []struct {
			Rule *struct {
				Expr []map[string]json.RawMessage `json:"expr"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	if json.Unmarshal(bytes.TrimSpace(js), &doc) != nil {
		return 0
	}
	var sum int64
	for _, it := range doc.Nftables {
		if it.Rule == nil {
			continue
		}
		for _, e := range it.Rule.Expr {
			var c struct {
				Packets int64 `json:"packets"`
			}
			if raw, ok := e["counter"]; ok && json.Unmarshal(raw, &c) == nil {
				sum += c.Packets
			}
		}
	}
	return sum
}

// Close deletes the table (idempotent); it says so, loudly, when it
// cannot.
func (n *netLab) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.closed = true
	if n.stopSig != nil {
		go n.stopSig() // not under n.mu: the signal path calls Close
	}
	if err := errors.Join(nft(fmt.Sprintf("delete table %s %s\n", n.layout.family(), n.layout.Table)), n.layout.Lab.links(n.layout.Nodes, nil)); err != nil {
		fmt.Fprintf(os.Stderr, "ringchaos: REMOVE BY HAND: nft delete table %s %s (%v)\n", n.layout.family(), n.layout.Table, err)
	}
}

// tableExists reports whether nft lists table inet name.
func tableExists(name string) bool {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return false
	}
	return slices.Contains(strings.Split(strings.TrimSpace(string(out)), "\n"), "table inet "+name)
}
