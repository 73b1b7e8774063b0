package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"sync/atomic"
)

// GenSecret is a generation the store confirmed to a node, with its secret.
type GenSecret struct {
	Gen    int64
	Secret string
}

// Secrets returns the confirmed generation's secret and those of the
// pastGens generations confirmed before it, newest first: the secrets a
// link proof may be made under. Empty before the store confirmed any.
func (m *Machine) Secrets() []GenSecret {
	if m.secret == "" {
		return nil
	}
	out := []GenSecret{{m.known, m.secret}}
	for _, p := range m.past {
		if p.secret != "" {
			out = append(out, GenSecret{p.gen, p.secret})
		}
	}
	return out
}

// Confirmed returns the newest generation the store confirmed to this
// node and its secret (empty before any): Secrets changes only with it.
func (m *Machine) Confirmed() (int64, string) { return m.known, m.secret }

// ProveHello returns the proof a HELLO from node from to node to carries
// under generation gen's secret: the first 8 bytes, in hex, of
// HMAC-SHA256(secret, "ringchat hello" 0x00 gen from to), each an 8-byte
// big-endian integer. Like a PING's link proof it shows the dialer read
// the secret from the store, which a key holder alone cannot; it names
// both ends, so that a proof seen on one link proves no other.
func ProveHello(secret string, gen, from, to int64) string {
	mac := hmac.New(sha256.New, []byte(secret))
	b := make([]byte, 0, 15+24)
	b = append(b, "ringchat hello"...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(gen))
	b = binary.BigEndian.AppendUint64(b, uint64(from))
	b = binary.BigEndian.AppendUint64(b, uint64(to))
	mac.Write(b)
	return hex.EncodeToString(mac.Sum(nil)[:8])
}

// Keys holds the secrets a node's ring loop last confirmed, for the
// goroutines of its transport, which prove the HELLOs it sends and check
// those it receives. The ring loop publishes (Publish); the transport's
// goroutines only read. Safe for concurrent use.
type Keys struct {
	p atomic.Pointer[[]GenSecret]
}

// Publish replaces the secrets (as Machine.Secrets gives them, newest
// first). It reports whether they changed.
func (k *Keys) Publish(s []GenSecret) bool {
	if old := k.p.Load(); old != nil && slices.Equal(*old, s) {
		return false
	}
	c := slices.Clone(s)
	k.p.Store(&c)
	return true
}

// HelloProof is a HELLO's proof under one generation's secret.
type HelloProof struct {
	Gen   int64  `json:"gen"`
	Proof string `json:"proof"`
}

// HelloProofs returns the proofs for a HELLO from node from to node to,
// one under each secret published, newest first (none before any was):
// the node it dials may not have read the newest generation yet, and
// knows one of the older.
func (k *Keys) HelloProofs(from, to int64) []HelloProof {
	s := k.p.Load()
	if s == nil {
		return nil
	}
	out := make([]HelloProof, len(*s))
	for i, g := range *s {
		out[i] = HelloProof{g.Gen, ProveHello(g.Secret, g.Gen, from, to)}
	}
	return out
}

// ProvesHello reports whether proof is the proof of a HELLO from node
// from to node to under the secret of generation gen, one of those
// published.
func (k *Keys) ProvesHello(from, to, gen int64, proof string) bool {
	s := k.p.Load()
	if s == nil || gen == 0 || proof == "" {
		return false
	}
	for _, g := range *s {
		if g.Gen == gen {
			return hmac.Equal([]byte(proof), []byte(ProveHello(g.Secret, gen, from, to)))
		}
	}
	return false
}
