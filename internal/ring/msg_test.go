package ring

import (
	"encoding/json"
	"testing"

	"github.com/ringchat/ringchat/internal/token"
)

func TestMsgRoundTrip(t *testing.T) {
	msgs := []Msg{
		{Type: MsgJoin},
		{Type: MsgSuccessor, Succ: 4, Ver: 9},
		{Type: MsgSuccessorRequest, Failed: 3},
		{Type: MsgToken, Token: &token.Token{Stamp: token.Stamp{Gen: 2, Seq: 40}, Busy: 3, Coord: 5, Epoch: 7}},
		{Type: MsgTokenAck, Stamp: &token.Stamp{Gen: 2, Seq: 40}, Stale: true},
		{Type: MsgWake},
	}
	for _, m := range msgs {
		p, err := m.Payload()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseMsg(string(m.Type), 3, 7, p, ViaUDP)
		if err != nil {
			t.Fatalf("%s: %v", m.Type, err)
		}
		m.From, m.Epoch, m.Via = 3, 7, ViaUDP
		if got.String() != m.String() {
			t.Errorf("round trip: got %s, want %s", got, m)
		}
	}
}

func TestParseMsgRefuses(t *testing.T) {
	for _, c := range []struct{ typ, payload string }{
		{"NOPE", ``},
		{"TOKEN", ``},
		{"TOKEN_ACK", `{}`},
		{"SUCCESSOR", `{"succ":0}`},
		{"SUCCESSOR_REQUEST", `{"failed":-1}`},
		{"JOIN", `{"succ":"x"}`},
	} {
		if _, err := ParseMsg(c.typ, 1, 1, json.RawMessage(c.payload), ViaUDP); err == nil {
			t.Errorf("ParseMsg(%s, %s) accepted", c.typ, c.payload)
		}
	}
}

// FuzzParseMsg: no payload makes ParseMsg panic, and what it accepts can
// be acted on (a TOKEN has a token, ids are not negative).
func FuzzParseMsg(f *testing.F) {
	f.Add("TOKEN", []byte(`{"token":{"gen":1,"seq":2}}`))
	f.Add("TOKEN_ACK", []byte(`{"stamp":{"gen":1,"seq":2},"stale":true}`))
	f.Add("SUCCESSOR", []byte(`{"succ":3,"ver":1}`))
	f.Add("JOIN", []byte(``))
	f.Add("WAKE", []byte(`null`))
	f.Fuzz(func(t *testing.T, typ string, payload []byte) {
		m, err := ParseMsg(typ, 1, 0, payload, ViaPred)
		if err != nil {
			return
		}
		if (m.Type == MsgToken && m.Token == nil) || (m.Type == MsgTokenAck && m.Stamp == nil) ||
			m.Succ < 0 || m.Ver < 0 || m.Failed < 0 {
			t.Fatalf("accepted an unusable message %+v from %q", m, payload)
		}
	})
}
