package chat

import (
	"fmt"
	"testing"
	"time"
)

// TestThrottle: the address throttle's delays start once the free
// failures are used up (the next attempt after the last free one waits)
// and double up to the bound; quiet keys are forgotten; the table never
// holds more than MaxKeys keys.
func TestThrottle(t *testing.T) {
	cfg := ThrottleConfig{Free: 2, AddressFree: 2, Base: time.Second, Max: 4 * time.Second, Forget: time.Minute, MaxKeys: 3}
	th := newThrottle(cfg)
	t0 := time.Unix(1000, 0)
	k := addressKey("10.0.0.9:4444")
	var got []time.Duration
	for range 6 {
		th.fail(t0, k, cfg.AddressFree)
		got = append(got, th.wait(t0, k))
	}
	if fmt.Sprint(got) != "[0s 1s 2s 4s 4s 4s]" {
		t.Errorf("delays after each failure = %v", got)
	}
	if d := th.wait(t0.Add(3*time.Second), k, addressKey("10.0.0.1:5555")); d != time.Second {
		t.Errorf("wait 3 s later = %v, want 1s", d)
	}
	// The address key ignores the port.
	th.fail(t0, addressKey("10.0.0.1:1"), 1)
	if d := th.wait(t0, addressKey("10.0.0.1:2")); d != time.Second {
		t.Errorf("same host, other port: %v", d)
	}
	// A failure long after the last one starts afresh.
	later := t0.Add(2 * time.Minute)
	th.fail(later, addressKey("10.0.0.1:1"), 1)
	if d := th.wait(later, addressKey("10.0.0.1:1")); d != time.Second {
		t.Errorf("after a quiet spell: %v, want the first delay again", d)
	}
	// Bounded: many keys never grow the table past MaxKeys; the newest stay.
	for i := range 100 {
		th.fail(later.Add(time.Duration(i)*time.Millisecond), addressKey(fmt.Sprint("10.1.0.", i)), 1)
	}
	if n := th.len(); n != cfg.MaxKeys {
		t.Errorf("%d keys tracked, want %d", n, cfg.MaxKeys)
	}
	if d := th.wait(later.Add(100*time.Millisecond), addressKey("10.1.0.99")); d <= 0 {
		t.Error("the newest key was dropped")
	}
}
