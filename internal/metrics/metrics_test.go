package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ringchat/ringchat/internal/chat"
	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/node"
	"github.com/ringchat/ringchat/internal/queue"
	"github.com/ringchat/ringchat/internal/ring"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	return getHost(t, h, "127.0.0.1:9100", path)
}

func getHost(t *testing.T, h http.Handler, host, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Host = host
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func TestMetricsAndHealth(t *testing.T) {
	m := New(3)
	st := node.Status{ID: 3, Phase: ring.PhaseInRing, Coordinator: 5, Epoch: 7,
		Stats: node.Stats{TokenVisits: 42, TokensSent: 41, Regenerations: 2, TokensStale: 1, FramesBad: 4,
			TokensForged: 5, NotPredecessor: 3, OffLink: 8},
		Elections: election.Counters{Started: 1, Won: 1, Sent: map[election.Method]uint64{election.Bully: 9}}}
	m.SetSources(Sources{
		Node: func(context.Context) (node.Status, bool) { return st, true },
		Chat: func() chat.Stats {
			return chat.Stats{Clients: 12, Sessions: 10, Stats: queue.Stats{Stored: 100, Delivered: 99}}
		},
		Drops: func() map[string]uint64 { return map[string]uint64{"bad-mac": 6, "replay": 2} },
	})
	m.Rotation.Observe(0.2)
	m.Hop.Observe(0.0003)
	m.Delivery.Observe(0.015)
	h := m.Handler()
	code, body := get(t, h, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`ringchat_token_visits_total{node="3"} 42`,
		`ringchat_token_hops_total{node="3"} 41`,
		`ringchat_token_regenerations_total{node="3"} 2`,
		`ringchat_tokens_stale_total{node="3"} 1`,
		`ringchat_frames_rejected_total{node="3",reason="bad-mac"} 6`,
		`ringchat_frames_rejected_total{node="3",reason="replay"} 2`,
		`ringchat_frames_rejected_total{node="3",reason="unusable"} 4`,
		`ringchat_frames_rejected_total{node="3",reason="forged_token"} 5`,
		`ringchat_frames_rejected_total{node="3",reason="not_predecessor"} 3`,
		`ringchat_frames_rejected_total{node="3",reason="off_link"} 8`,
		`ringchat_election_messages_sent_total{method="bully",node="3"} 9`,
		`ringchat_elections_won_total{node="3"} 1`,
		`ringchat_clients_connected{node="3"} 12`,
		`ringchat_messages_stored_total{node="3"} 100`,
		`ringchat_messages_delivered_total{node="3"} 99`,
		`ringchat_coordinator_epoch{node="3"} 7`,
		`ringchat_token_rotation_seconds_count{node="3"} 1`,
		`ringchat_token_hop_seconds_count{node="3"} 1`,
		`ringchat_delivery_latency_seconds_bucket{node="3",le="0.016"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	code, body = get(t, h, "/healthz")
	var hl Health
	if code != http.StatusOK || json.Unmarshal([]byte(body), &hl) != nil || !hl.OK || hl.Coordinator != 5 {
		t.Errorf("/healthz in ring: %d %s", code, body)
	}
	st.Phase = ring.PhaseJoining
	if code, body = get(t, h, "/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not in the ring") {
		t.Errorf("/healthz joining: %d %s", code, body)
	}
	st.Phase, st.Coordinator = ring.PhaseInRing, 0
	if code, _ = get(t, h, "/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz without coordinator: %d", code)
	}
}

// pprof is served only when asked for; the command line it shows can hold
// secrets.
func TestPprofOnlyWhenEnabled(t *testing.T) {
	m := New(1)
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline"} {
		if code, _ := get(t, m.Handler(), path); code != http.StatusNotFound {
			t.Errorf("%s without Pprof: %d, want 404", path, code)
		}
	}
	m.Pprof = true
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline"} {
		if code, _ := get(t, m.Handler(), path); code != http.StatusOK {
			t.Errorf("%s with Pprof: %d, want 200", path, code)
		}
	}
}

// A request for another host name (a DNS-rebinding page in the operator's
// browser) is refused with the reason; loopback names are served.
func TestNonLoopbackHostRefused(t *testing.T) {
	m := New(1)
	m.Pprof = true
	h := m.Handler()
	for _, host := range []string{"evil.example", "evil.example:9100", "10.0.0.1:9100", "0.0.0.0:9100", ""} {
		for _, path := range []string{"/metrics", "/healthz", "/debug/pprof/cmdline"} {
			code, body := getHost(t, h, host, path)
			if code != http.StatusForbidden || !strings.Contains(body, "not a loopback address") {
				t.Errorf("Host %q %s: %d %q, want 403 with the reason", host, path, code, body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:9100", "127.0.0.1", "localhost:9100", "LOCALHOST", "[::1]:9100", "127.0.0.5:1"} {
		if code, _ := getHost(t, h, host, "/metrics"); code != http.StatusOK {
			t.Errorf("Host %q: %d, want 200", host, code)
		}
	}
}

func TestNodeNotRunning(t *testing.T) {
	m := New(1)
	m.SetSources(Sources{Node: func(context.Context) (node.Status, bool) { return node.Status{}, false }})
	h := m.Handler()
	if code, body := get(t, h, "/metrics"); code != http.StatusOK || strings.Contains(body, "ringchat_token_visits_total") {
		t.Errorf("/metrics of a stopped node: %d, has node figures: %v", code, strings.Contains(body, "ringchat_token_visits_total"))
	}
	if code, _ := get(t, h, "/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz of a stopped node: %d", code)
	}
}

func TestCheckAddr(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:9100", "localhost:0", "[::1]:9", "127.0.0.2:80"} {
		if err := CheckAddr(ok); err != nil {
			t.Errorf("CheckAddr(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"0.0.0.0:9100", ":9100", "10.1.2.3:80", "example.com:80", "127.0.0.1"} {
		err := CheckAddr(bad)
		if err == nil {
			t.Errorf("CheckAddr(%q) accepted", bad)
		}
		if strings.Contains(bad, ":") && bad != "127.0.0.1" && !errors.Is(err, ErrNotLoopback) {
			t.Errorf("CheckAddr(%q) = %v, want ErrNotLoopback", bad, err)
		}
	}
}

func TestServeStops(t *testing.T) {
	m := New(1)
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}
}
