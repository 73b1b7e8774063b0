// Package metrics serves a node's metrics in the Prometheus text format,
// its health and (with ringnode run --pprof only) pprof on one loopback
// HTTP listener (ringnode run --metrics-addr). Requests whose Host is not a
// loopback address are refused, so that a web page the operator visits
// cannot reach the listener through DNS rebinding.
//
// Counters are read from the node, the chat server and the transport at
// scrape time (they keep their own totals); the three histograms (token
// rotation, hop and delivery latency) are observed as events happen.
package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ringchat/ringchat/internal/chat"
	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/node"
	"github.com/ringchat/ringchat/internal/ring"
)

// Sources are where the scrape-time figures come from; any may be nil.
type Sources struct {
	Node  func(ctx context.Context) (node.Status, bool)
	Chat  func() chat.Stats
	Drops func() map[string]uint64 // frames the transport dropped, by reason
}

// Metrics holds a node's registry and the histograms its parts observe.
type Metrics struct {
	reg *prometheus.Registry
	src Sources

	// Rotation observes the seconds between two token visits at the node.
	Rotation prometheus.Histogram
	// Hop observes a forwarded token's send-to-acknowledgement seconds.
	Hop prometheus.Histogram
	// Delivery observes the seconds from a message's acceptance at its
	// sender's node to its hand-over to a recipient's connection.
	Delivery prometheus.Histogram

	// Pprof serves /debug/pprof/ as well; set it before Handler or Serve.
	// Off by default: profiles and the command line are for tuning.
	Pprof bool
}

// New builds the registry for node id. Set Sources before serving.
func New(id int64) *Metrics {
	constLabels := prometheus.Labels{"node": fmt.Sprint(id)}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		Rotation: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ringchat_token_rotation_seconds", Help: "Time between two token visits at this node.",
			ConstLabels: constLabels, Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		Hop: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ringchat_token_hop_seconds", Help: "Forwarded token: send to TOKEN_ACK.",
			ConstLabels: constLabels, Buckets: prometheus.ExponentialBuckets(0.00005, 2, 14),
		}),
		Delivery: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ringchat_delivery_latency_seconds", Help: "Message accepted at the sender's node to handed to the recipient's connection.",
			ConstLabels: constLabels, Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
	}
	c := &collector{m: m, descs: map[string]*prometheus.Desc{}, types: map[string]prometheus.ValueType{}}
	for _, d := range defs {
		c.descs[d.name] = prometheus.NewDesc(d.name, d.help, d.labels, constLabels)
		c.types[d.name] = d.typ
	}
	m.reg.MustRegister(m.Rotation, m.Hop, m.Delivery, c)
	return m
}

// SetSources sets where the scrape-time figures come from.
func (m *Metrics) SetSources(s Sources) { m.src = s }

// Registry is the registry (for tests and embedding).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

type collector struct {
	m     *Metrics
	descs map[string]*prometheus.Desc
	types map[string]prometheus.ValueType
}

type metricDef struct {
	name, help string
	typ        prometheus.ValueType
	labels     []string
}

var defs = []metricDef{
	{"ringchat_token_visits_total", "Token visits (holds) at this node.", prometheus.CounterValue, nil},
	{"ringchat_token_hops_total", "Tokens forwarded by this node.", prometheus.CounterValue, nil},
	{"ringchat_token_regenerations_total", "Token generations this node created as coordinator.", prometheus.CounterValue, nil},
	{"ringchat_tokens_stale_total", "Stale or duplicate tokens refused on arrival.", prometheus.CounterValue, nil},
	{"ringchat_tokens_dropped_total", "Held tokens discarded (superseded or reset).", prometheus.CounterValue, nil},
	{"ringchat_tokens_fenced_total", "Critical sections the store refused (a newer token exists).", prometheus.CounterValue, nil},
	{"ringchat_store_failures_total", "Ring store operations that failed and were retried.", prometheus.CounterValue, nil},
	{"ringchat_critical_sections_failed_total", "Token visits whose critical section failed (store unavailable; fenced ones not counted).", prometheus.CounterValue, nil},
	{"ringchat_successor_failures_total", "Successors found failed.", prometheus.CounterValue, nil},
	{"ringchat_frames_rejected_total", "Node-to-node frames dropped unread, by reason.", prometheus.CounterValue, []string{"reason"}},
	{"ringchat_elections_started_total", "Elections this node started.", prometheus.CounterValue, nil},
	{"ringchat_elections_won_total", "Elections this node won.", prometheus.CounterValue, nil},
	{"ringchat_elections_restarted_total", "Elections restarted after a timeout.", prometheus.CounterValue, nil},
	{"ringchat_election_messages_sent_total", "Election messages sent, by method.", prometheus.CounterValue, []string{"method"}},
	{"ringchat_election_messages_received_total", "Election messages received, by method.", prometheus.CounterValue, []string{"method"}},
	{"ringchat_in_ring", "1 if the node is in the ring.", prometheus.GaugeValue, nil},
	{"ringchat_is_coordinator", "1 if the node is the coordinator.", prometheus.GaugeValue, nil},
	{"ringchat_coordinator_epoch", "The coordinator epoch the node knows.", prometheus.GaugeValue, nil},
	{"ringchat_clients_connected", "Chat client connections open.", prometheus.GaugeValue, nil},
	{"ringchat_users_logged_in", "Users logged in at this node.", prometheus.GaugeValue, nil},
	{"ringchat_messages_accepted_total", "Messages accepted from this node's clients.", prometheus.CounterValue, nil},
	{"ringchat_messages_stored_total", "Messages stored by this node's token visits.", prometheus.CounterValue, nil},
	{"ringchat_messages_delivered_total", "Deliveries handed to this node's clients.", prometheus.CounterValue, nil},
	{"ringchat_client_connections_dropped_total", "Client connections closed for bad behaviour.", prometheus.CounterValue, nil},
	{"ringchat_outbox_messages", "Messages waiting here for the token.", prometheus.GaugeValue, nil},
	{"ringchat_visits_failed_total", "Token visits whose store transaction failed (nothing committed; the next does less).", prometheus.CounterValue, nil},
	{"ringchat_work_poisoned_total", "Pieces of work set aside after failing alone (a message, a user's fetch).", prometheus.CounterValue, nil},
	{"ringchat_fetches_cut_total", "Fetches stopped at their share of a visit's budget (the rest of the visit committed).", prometheus.CounterValue, nil},
	{"ringchat_messages_pruned_total", "Messages past the retention pruned by this node.", prometheus.CounterValue, nil},
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *collector) emit(ch chan<- prometheus.Metric, name string, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(c.descs[name], c.types[name], v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	src := c.m.src
	if src.Node != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, ok := src.Node(ctx)
		cancel()
		if ok {
			s := st.Stats
			c.emit(ch, "ringchat_token_visits_total", float64(s.TokenVisits))
			c.emit(ch, "ringchat_token_hops_total", float64(s.TokensSent))
			c.emit(ch, "ringchat_token_regenerations_total", float64(s.Regenerations))
			c.emit(ch, "ringchat_tokens_stale_total", float64(s.TokensStale))
			c.emit(ch, "ringchat_tokens_dropped_total", float64(s.TokensDropped))
			c.emit(ch, "ringchat_tokens_fenced_total", float64(s.TokensFenced))
			c.emit(ch, "ringchat_store_failures_total", float64(s.StoreFailures))
			c.emit(ch, "ringchat_critical_sections_failed_total", float64(s.SectionFailures))
			c.emit(ch, "ringchat_successor_failures_total", float64(s.SuccessorFails))
			c.emit(ch, "ringchat_frames_rejected_total", float64(s.FramesBad), "unusable")
			c.emit(ch, "ringchat_frames_rejected_total", float64(s.TokensForged), "forged_token")
			c.emit(ch, "ringchat_frames_rejected_total", float64(s.NotPredecessor), "not_predecessor")
			c.emit(ch, "ringchat_frames_rejected_total", float64(s.TokensUnjudged), "unjudged_token")
			c.emit(ch, "ringchat_frames_rejected_total", float64(s.OffLink), "off_link")
			e := st.Elections
			c.emit(ch, "ringchat_elections_started_total", float64(e.Started))
			c.emit(ch, "ringchat_elections_won_total", float64(e.Won))
			c.emit(ch, "ringchat_elections_restarted_total", float64(e.Restarts))
			for _, meth := range election.Methods {
				c.emit(ch, "ringchat_election_messages_sent_total", float64(e.Sent[meth]), string(meth))
				c.emit(ch, "ringchat_election_messages_received_total", float64(e.Received[meth]), string(meth))
			}
			c.emit(ch, "ringchat_in_ring", b2f(st.Phase == ring.PhaseInRing))
			c.emit(ch, "ringchat_is_coordinator", b2f(st.IsCoord))
			c.emit(ch, "ringchat_coordinator_epoch", float64(st.Epoch))
		}
	}
	if src.Drops != nil {
		for reason, k := range src.Drops() {
			c.emit(ch, "ringchat_frames_rejected_total", float64(k), reason)
		}
	}
	if src.Chat != nil {
		s := src.Chat()
		c.emit(ch, "ringchat_clients_connected", float64(s.Clients))
		c.emit(ch, "ringchat_users_logged_in", float64(s.Sessions))
		c.emit(ch, "ringchat_messages_accepted_total", float64(s.Queued))
		c.emit(ch, "ringchat_messages_stored_total", float64(s.Stored))
		c.emit(ch, "ringchat_messages_delivered_total", float64(s.Delivered))
		c.emit(ch, "ringchat_client_connections_dropped_total", float64(s.Dropped))
		c.emit(ch, "ringchat_outbox_messages", float64(s.OutboxLen))
		c.emit(ch, "ringchat_visits_failed_total", float64(s.FailedVisits))
		c.emit(ch, "ringchat_work_poisoned_total", float64(s.Poisoned))
		c.emit(ch, "ringchat_fetches_cut_total", float64(s.FetchesCut))
		c.emit(ch, "ringchat_messages_pruned_total", float64(s.Pruned))
	}
}

// Health is the body of /healthz.
type Health struct {
	OK          bool   `json:"ok"`
	Phase       string `json:"phase"`
	Coordinator int64  `json:"coordinator"`
	Epoch       int64  `json:"epoch"`
	Reason      string `json:"reason,omitempty"`
}

func (m *Metrics) health(ctx context.Context) Health {
	if m.src.Node == nil {
		return Health{Reason: "no node"}
	}
	st, ok := m.src.Node(ctx)
	if !ok {
		return Health{Reason: "node not running"}
	}
	h := Health{Phase: st.Phase.String(), Coordinator: st.Coordinator, Epoch: st.Epoch}
	switch {
	case st.Phase != ring.PhaseInRing:
		h.Reason = "not in the ring"
	case st.Coordinator == 0:
		h.Reason = "no coordinator known"
	default:
		h.OK = true
	}
	return h
}

// Handler serves /metrics, /healthz (200 when the node is in the ring and
// knows a coordinator, else 503; JSON body) and, if m.Pprof, /debug/pprof/.
// A request whose Host header is not a loopback address gets 403.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		h := m.health(ctx)
		w.Header().Set("Content-Type", "application/json")
		if !h.OK {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(h)
	})
	if m.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("metrics: Host %q is not a loopback address; ask for 127.0.0.1, [::1] or localhost", r.Host),
				http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a request's Host (host or host:port) names
// a loopback address.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ErrNotLoopback is returned for a metrics address that is not loopback.
var ErrNotLoopback = errors.New("metrics: the address must be a loopback one (127.0.0.1, ::1 or localhost)")

// CheckAddr accepts host:port addresses on a loopback host only: metrics
// and pprof are for the machine's operator, never the network.
func CheckAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics: %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%w: %q", ErrNotLoopback, addr)
	}
	return nil
}

// Listen binds addr (checked by CheckAddr).
func Listen(addr string) (net.Listener, error) {
	if err := CheckAddr(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Serve serves the handler on ln until ctx ends, then shuts the server
// down and returns.
func (m *Metrics) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-done
	return err
}
