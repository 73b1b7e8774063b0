package chaos

import (
	"strings"
	"testing"
)

func TestParseLab(t *testing.T) {
	l, err := ParseLab("rclab:198.18.0")
	if err != nil || l.Name != "rclab" || l.Subnet != "198.18.0" || l.Addr(3) != "198.18.0.3" {
		t.Fatalf("ParseLab: %+v, %v", l, err)
	}
	for _, bad := range []string{"", "rclab", "rclab:10.0.0", "RC:198.18.0", "toolongname:198.18.0", "rclab:198.18.0.1"} {
		if _, err := ParseLab(bad); err == nil {
			t.Errorf("ParseLab(%q) accepted", bad)
		}
	}
}

// On lab hosts the faults are address rules in a bridge table: a host's
// packets in its prerouting chain, the store's (sent from this machine)
// in the output chain.
func TestLabRules(t *testing.T) {
	lay := newLayout(1234, []int64{1, 2, 3}, []string{"198.18.0.254:3307"})
	lay.Lab = &LabNet{Name: "rclab", Subnet: "198.18.0"}
	if got := lay.addr(2); got != "198.18.0.2" {
		t.Errorf("addr(2) = %s", got)
	}
	setup := lay.labSetupScript()
	for _, want := range []string{"table bridge ringchaos_1234 {", "hook prerouting", "hook output"} {
		if !strings.Contains(setup, want) {
			t.Errorf("setup script lacks %q:\n%s", want, setup)
		}
	}
	got := lay.faultScript(NetFault{Drop: append(Both(1, 2), Both(3, StoreEnd)...), LossPct: 5})
	want := `flush chain bridge ringchaos_1234 faults
flush chain bridge ringchaos_1234 faults_out
add rule bridge ringchaos_1234 faults ip saddr 198.18.0.1 ip daddr 198.18.0.2 numgen random mod 100 < 5 counter drop
add rule bridge ringchaos_1234 faults ip saddr 198.18.0.2 ip daddr 198.18.0.1 numgen random mod 100 < 5 counter drop
add rule bridge ringchaos_1234 faults ip saddr 198.18.0.3 ip daddr 198.18.0.254 tcp dport 3307 numgen random mod 100 < 5 counter drop
add rule bridge ringchaos_1234 faults_out ip saddr 198.18.0.254 tcp sport 3307 ip daddr 198.18.0.3 numgen random mod 100 < 5 counter drop
`
	if got != want {
		t.Errorf("fault script:\n%s\nwant:\n%s", got, want)
	}
	if h := lay.healScript(); h != "flush chain bridge ringchaos_1234 faults\nflush chain bridge ringchaos_1234 faults_out\n" {
		t.Errorf("heal script %q", h)
	}
	if lay.family() != "bridge" {
		t.Errorf("family %s", lay.family())
	}
	var none *LabNet
	if err := none.links([]int64{1}, []int64{1}); err != nil {
		t.Errorf("links on no lab: %v", err)
	}
}
