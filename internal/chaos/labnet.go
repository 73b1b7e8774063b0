package chaos

// Network faults on the lab hosts of scripts/netlab.sh (make chaos
// NET=lab, ringchaos --net --lab NAME:SUBNET): node ID runs in lab host
// ID's network namespace (ip netns exec NAME<ID>) on SUBNET.ID, and the
// store is the lab's, on the bridge (SUBNET.254). Every packet between
// two hosts, or between a host and the store, crosses the bridge NAMEbr,
// so the faults are rules of a bridge-family table of the run's own,
// ringchaos_<pid>, by address: its prerouting chain sees every frame a
// host sends into the bridge (to another host or to the store), its
// output chain every frame the store's side sends out to a host. A rule
// "ip saddr A ip daddr B drop" drops A's packets to B, on any connection,
// whoever opened it; the store is its address and port (the clients, on
// this machine, share its address and are never cut). A host that drops off the network altogether
// (net-host-down) is "ip link set NAMEv<ID> down": the bridge's end of
// its cable.

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strings"
)

// NetHostDown takes a lab host off the network: the bridge's end of its
// link goes down (ip link set DEV down), then up again. Lab runs only.
const NetHostDown Kind = "net-host-down"

// LabKinds are the network faults only a lab run makes.
var LabKinds = []Kind{NetHostDown}

// LabNet is a lab of scripts/netlab.sh.
type LabNet struct {
	Name   string // NETLAB_NAME: namespaces NAME<ID>, links NAMEv<ID>
	Subnet string // NETLAB_SUBNET: host ID is SUBNET.ID, the store SUBNET.254
}

var labSpecRE = regexp.MustCompile(`^([a-z][a-z0-9]{0,7}):(198\.1[89]\.[0-9]{1,3})$`)

// ParseLab parses NAME:SUBNET, as rclab:198.18.0.
func ParseLab(spec string) (*LabNet, error) {
	m := labSpecRE.FindStringSubmatch(spec)
	if m == nil {
		return nil, fmt.Errorf("lab %q: want NAME:SUBNET as scripts/netlab.sh env prints them, as rclab:198.18.0", spec)
	}
	return &LabNet{Name: m[1], Subnet: m[2]}, nil
}

// lab is the lab of c.Lab (nil without one), checked to have a host for
// every node.
func (c Config) lab() (*LabNet, error) {
	if c.Lab == "" {
		return nil, nil
	}
	l, err := ParseLab(c.Lab)
	if err != nil {
		return nil, err
	}
	return l, l.check(c.Nodes)
}

// labOn says where the lab run's nodes and faults are, and adds the lab's
// own faults to the network faults of kinds.
func (r *runner) labOn(kinds *[]Kind, lay netLayout) {
	r.note("network faults ON, on lab hosts %s-%d (netns %s1-%d): nft table bridge %s on the bridge; store at %s",
		lay.Lab.Addr(1), len(lay.Nodes), lay.Lab.Name, len(lay.Nodes), lay.Table, strings.Join(lay.Stores, ", "))
	for _, k := range LabKinds {
		if !slices.Contains(*kinds, k) && slices.ContainsFunc(*kinds, func(x Kind) bool { return slices.Contains(NetKinds, x) }) {
			*kinds = append(*kinds, k)
		}
	}
}

// Addr is node id's host address.
func (l *LabNet) Addr(id int64) string { return fmt.Sprintf("%s.%d", l.Subnet, id) }

func (l *LabNet) netns(id int64) string { return fmt.Sprintf("%s%d", l.Name, id) }

func (l *LabNet) veth(id int64) string { return fmt.Sprintf("%sv%d", l.Name, id) }

// check says why the lab cannot run n nodes ("" when it can).
func (l *LabNet) check(n int) error {
	for id := int64(1); id <= int64(n); id++ {
		if err := exec.Command("ip", "netns", "exec", l.netns(id), "true").Run(); err != nil {
			return fmt.Errorf("lab host %d (netns %s): %v: run scripts/netlab.sh up (NETLAB_NAME=%s NETLAB_SUBNET=%s NETLAB_HOSTS>=%d)",
				id, l.netns(id), err, l.Name, l.Subnet, n)
		}
	}
	return nil
}

// wrap returns the program and arguments that run bin with args on node
// id's lab host (ip netns exec replaces itself with bin: the pid is the
// node's).
func (l *LabNet) wrap(id int64, bin string, args []string) (string, []string) {
	return "ip", append([]string{"netns", "exec", l.netns(id), bin}, args...)
}

// links sets the bridge's end of each node's link down for the nodes in
// down, up for the others.
func (l *LabNet) links(nodes, down []int64) error {
	if l == nil {
		return nil
	}
	var errs []error
	for _, id := range nodes {
		state := "up"
		for _, d := range down {
			if d == id {
				state = "down"
			}
		}
		if out, err := exec.Command("ip", "link", "set", l.veth(id), state).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip link set %s %s: %v: %s", l.veth(id), state, err, strings.TrimSpace(string(out))))
		}
	}
	return errors.Join(errs...)
}

// family is the nft family of the run's table.
func (l netLayout) family() string {
	if l.Lab != nil {
		return "bridge"
	}
	return "inet"
}

// labEnds are the matches of a link's end, as sender (src) and as
// receiver (dst): a node's host address; the store's address and port (the
// clients of this machine share the store's address: they are not cut).
func (l netLayout) labEnds(id int64, src bool) []string {
	if id != StoreEnd {
		if src {
			return []string{"ip saddr " + l.Lab.Addr(id)}
		}
		return []string{"ip daddr " + l.Lab.Addr(id)}
	}
	var out []string
	for _, s := range l.Stores {
		host, port, _ := net.SplitHostPort(s)
		if src {
			out = append(out, fmt.Sprintf("ip saddr %s tcp sport %s", host, port))
		} else {
			out = append(out, fmt.Sprintf("ip daddr %s tcp dport %s", host, port))
		}
	}
	return out
}

// labSetupScript creates the bridge table with empty chains.
func (l netLayout) labSetupScript() string {
	var b strings.Builder
	fmt.Fprintf(&b, "add table bridge %s\ndelete table bridge %s\n", l.Table, l.Table)
	fmt.Fprintf(&b, "table bridge %s {\n", l.Table)
	b.WriteString("\tchain faults {\n\t\ttype filter hook prerouting priority -150; policy accept;\n\t}\n")
	b.WriteString("\tchain faults_out {\n\t\ttype filter hook output priority -150; policy accept;\n\t}\n}\n")
	return b.String()
}

// labFaultScript replaces both chains' rules with those of f, by address.
func (l netLayout) labFaultScript(f NetFault) string {
	var b strings.Builder
	fmt.Fprintf(&b, "flush chain bridge %s faults\nflush chain bridge %s faults_out\n", l.Table, l.Table)
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
		chain := "faults"
		if k.From == StoreEnd {
			chain = "faults_out" // the store's packets leave from this machine
		}
		for _, from := range l.labEnds(k.From, true) {
			for _, to := range l.labEnds(k.To, false) {
				fmt.Fprintf(&b, "add rule bridge %s %s %s %s %scounter drop\n", l.Table, chain, from, to, loss)
			}
		}
	}
	return b.String()
}

func (l netLayout) labHealScript() string {
	return fmt.Sprintf("flush chain bridge %s faults\nflush chain bridge %s faults_out\n", l.Table, l.Table)
}
