package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// ProveRequest returns the proof a request to the coordinator carries (a
// SUCCESSOR_REQUEST naming a failed successor, or a LEAVE) under
// generation gen's secret: the first 8 bytes, in hex, of
// HMAC-SHA256(secret, "ringchat request" 0x00 kind 0x00 gen from failed
// relay), the integers 8-byte big-endian, relay one byte. It shows that
// the node the request is for read the secret from the store, which a key
// holder alone cannot; it names the request's kind, its node, the
// successor it reports and whether it went through a relay, so that a
// proof seen on one request proves no other.
func ProveRequest(secret string, gen int64, kind string, from, failed int64, relay bool) string {
	mac := hmac.New(sha256.New, []byte(secret))
	b := make([]byte, 0, 17+len(kind)+1+25)
	b = append(b, "ringchat request"...)
	b = append(b, 0)
	b = append(b, kind...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(gen))
	b = binary.BigEndian.AppendUint64(b, uint64(from))
	b = binary.BigEndian.AppendUint64(b, uint64(failed))
	if relay {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	mac.Write(b)
	return hex.EncodeToString(mac.Sum(nil)[:8])
}

// RequestProof returns the confirmed generation and the proof of a
// request under its secret; false before the store confirmed any.
func (m *Machine) RequestProof(kind string, from, failed int64, relay bool) (int64, string, bool) {
	if m.secret == "" {
		return 0, "", false
	}
	return m.known, ProveRequest(m.secret, m.known, kind, from, failed, relay), true
}

// ProvesRequest reports whether proof is the proof of the request under
// the secret of generation gen, the confirmed one or one of the pastGens
// before it (the requester may not have seen the newest token yet).
func (m *Machine) ProvesRequest(gen int64, proof, kind string, from, failed int64, relay bool) bool {
	if gen == 0 || proof == "" {
		return false
	}
	for _, g := range m.Secrets() {
		if g.Gen == gen {
			return hmac.Equal([]byte(proof), []byte(ProveRequest(g.Secret, gen, kind, from, failed, relay)))
		}
	}
	return false
}
