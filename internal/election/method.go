package election

import (
	"fmt"
	"strings"
)

// Method names an election algorithm.
type Method string

// The algorithms a node can be started with.
const (
	Ring         Method = "ring"
	ChangRoberts Method = "chang-roberts"
	Bully        Method = "bully"
	Lease        Method = "lease"
)

// Default is the method used when none is given.
const Default = ChangRoberts

// Methods lists every method, for help texts.
var Methods = []Method{Ring, ChangRoberts, Bully, Lease}

// ParseMethod accepts our names and the original system's (RING_BASED,
// CHANG_ROBERTS, BULLY), in any case, with '-' or '_'.
func ParseMethod(s string) (Method, error) {
	norm := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
	switch norm {
	case "ring", "ring-based":
		return Ring, nil
	case "chang-roberts", "changroberts", "cr":
		return ChangRoberts, nil
	case "bully":
		return Bully, nil
	case "lease", "mutex":
		return Lease, nil
	}
	return "", fmt.Errorf("election: unknown method %q (want ring, chang-roberts, bully or lease)", s)
}
