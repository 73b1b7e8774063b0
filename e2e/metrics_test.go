package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/ringchat/ringchat/internal/testutil"
)

// TestMetrics: three nodes with --metrics-addr; each reports healthy once
// in the ring, its metrics show the token moving, and junk sent to its
// coordination port shows up as rejected frames.
func TestMetrics(t *testing.T) {
	dsn := testutil.MySQLDSN(t)
	ids := []int64{1, 2, 3}
	r := testutil.NewRing(t, ringnodeBin, dsn, ids...)
	r.Extra = []string{"--mutex-probe"}
	addr := map[int64]string{}
	for _, id := range ids {
		addr[id] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		r.Start(id, "--metrics-addr", addr[id])
	}
	fetch := func(id int64, path string) (int, string) {
		resp, err := http.Get("http://" + addr[id] + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	value := func(body, metric string) float64 {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric) + `(?:\{[^}]*\})? (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			return -1
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	for _, id := range ids {
		testutil.Eventually(t, within, fmt.Sprintf("node %d healthy", id), func() bool {
			code, _ := fetch(id, "/healthz")
			return code == http.StatusOK
		})
	}
	testutil.Eventually(t, within, "token hops and rotations in the metrics", func() bool {
		_, body := fetch(1, "/metrics")
		return value(body, "ringchat_token_hops_total") > 0 && value(body, "ringchat_token_rotation_seconds_count") > 0 &&
			value(body, "ringchat_token_hop_seconds_count") > 0
	})
	// A forged datagram to node 2's coordination port is dropped and counted.
	conn, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", r.Ports[2][0]))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte(`{"h":{"t":"TOKEN","src":1,"ep":1,"ts":1,"n":"00","p":{}},"mac":"00"}` + "\n"))
	testutil.Eventually(t, within, "the forged frame counted", func() bool {
		_, body := fetch(2, "/metrics")
		return regexp.MustCompile(`(?m)^ringchat_frames_rejected_total\{node="2",reason="[^"]+"\} [1-9]`).MatchString(body)
	})
	// After SIGKILL of node 3 its endpoint is gone; the others stay healthy.
	r.Kill(3)
	testutil.Eventually(t, within, "nodes 1 and 2 healthy after node 3 died", func() bool {
		c1, _ := fetch(1, "/healthz")
		c2, _ := fetch(2, "/healthz")
		return c1 == http.StatusOK && c2 == http.StatusOK
	})
}
