package main

import (
	"fmt"
	"os/exec"
	"regexp"
)

// benchLab, when set (--lab), puts node ID of a ring on lab host ID of a
// lab made by scripts/netlab.sh: the node runs in the host's network
// namespace (ip netns exec NAME<ID>) on address SUBNET.ID, and clients and
// the store reach it over the lab's bridge instead of loopback.
var benchLab *labHosts

type labHosts struct {
	name, subnet string
	ip           string // the ip command
}

// labPorts are a lab node's ports, the same on every host (each host is
// a network of its own), away from lab.sh's node list (7001, 8001).
const labCoordPort, labClientPort = 7101, 8101

var labSpecRE = regexp.MustCompile(`^([a-z][a-z0-9]{0,7}):(198\.1[89]\.[0-9]{1,3})$`)

// parseLab parses --lab NAME:SUBNET ("" is no lab).
func parseLab(spec string) (*labHosts, error) {
	if spec == "" {
		return nil, nil
	}
	m := labSpecRE.FindStringSubmatch(spec)
	if m == nil {
		return nil, fmt.Errorf("--lab %q: want NAME:SUBNET as scripts/netlab.sh env prints them, as rclab:198.18.0", spec)
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		return nil, fmt.Errorf("--lab: %w", err)
	}
	return &labHosts{name: m[1], subnet: m[2], ip: ip}, nil
}

func (l *labHosts) host(id int64) string { return fmt.Sprintf("%s.%d", l.subnet, id) }

func (l *labHosts) netns(id int64) string { return fmt.Sprintf("%s%d", l.name, id) }

// wrap returns the program and arguments that run bin args on node id's host.
func (l *labHosts) wrap(id int64, bin string, args []string) (string, []string) {
	return l.ip, append([]string{"netns", "exec", l.netns(id), bin}, args...)
}
