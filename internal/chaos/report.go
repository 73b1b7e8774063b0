package chaos

import (
	"fmt"
	"io"
	"strings"
)

// Write prints the report: the figures, then every check with its
// details, then the verdict with the seed to replay.
func (r *Report) Write(w io.Writer) error {
	var b strings.Builder
	b.WriteString("\n== ringchaos report ==\n")
	for _, f := range r.Figures {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	b.WriteString("\n== checks ==\n")
	for _, c := range r.Checks {
		mark := "PASS"
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "%s  %s\n", mark, c.Name)
		for _, d := range c.Detail {
			fmt.Fprintf(&b, "        %s\n", d)
		}
	}
	if r.OK() {
		fmt.Fprintf(&b, "\nALL CHECKS PASSED (seed %d)\n", r.Seed)
	} else {
		fmt.Fprintf(&b, "\nCHECKS FAILED (seed %d). Replay: %s\n", r.Seed, r.Replay)
		if r.Dir != "" {
			fmt.Fprintf(&b, "Node logs and the database are kept in %s\n", r.Dir)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
