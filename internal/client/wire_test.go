package client

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ringchat/ringchat/internal/protocol"
)

// The shapes of DESIGN.md's "Chat" table, byte for byte.
var designShapes = []struct {
	name string
	ev   Event
	json string
}{
	{"login", Login{Username: "alice"}, `{"messageType":"LOGIN","username":"alice"}`},
	{"join", JoinGroup{Group: "g1"}, `{"messageType":"JOIN_GROUP","group":"g1"}`},
	{"leave", LeaveGroup{Group: "g1"}, `{"messageType":"LEAVE_GROUP","group":"g1"}`},
	{"chat to user", ChatMessage{From: "alice", To: ToUser("bob"), Content: "hi", SentAt: "Apr 25, 2019, 4:55:53 PM"},
		`{"messageType":"CHAT_MESSAGE","fromName":"alice","toUsername":"bob","messageContent":"hi","sentAt":"Apr 25, 2019, 4:55:53 PM"}`},
	{"chat to group", ChatMessage{From: "alice", To: ToGroup("g1"), Content: "hi", SentAt: "Apr 25, 2019, 4:55:53 PM"},
		`{"messageType":"CHAT_MESSAGE","fromName":"alice","toGroup":"g1","messageContent":"hi","sentAt":"Apr 25, 2019, 4:55:53 PM"}`},
	{"error", ErrorMessage{Message: "username taken"}, `{"messageType":"ERROR","errorMessage":"username taken"}`},
	{"alive", Alive{}, `{"messageType":"ALIVE"}`},
}

func TestEncodeDesignShapes(t *testing.T) {
	for _, tc := range designShapes {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Encode(tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.json {
				t.Errorf("Encode:\n got %s\nwant %s", got, tc.json)
			}
			back, err := Decode([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.ev, back); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncodeKeepsText(t *testing.T) {
	got, err := Encode(ChatMessage{From: "a", To: ToUser("b"), Content: `<3 & "quotes" ünïcode`, SentAt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"messageType":"CHAT_MESSAGE","fromName":"a","toUsername":"b","messageContent":"<3 & \"quotes\" ünïcode","sentAt":"x"}`
	if string(got) != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestEncodeRejects(t *testing.T) {
	for _, ev := range []Event{Login{}, JoinGroup{}, LeaveGroup{}, ChatMessage{From: "a", Content: "x"},
		Disconnected{Err: ErrServerClosed}, ProtocolError{}} {
		if b, err := Encode(ev); err == nil {
			t.Errorf("Encode(%#v) = %s, want error", ev, b)
		}
	}
}

func TestDecodeChatDestinations(t *testing.T) {
	tests := []struct {
		name, line string
		want       Recipient
	}{
		{"toUsername", `{"messageType":"CHAT_MESSAGE","fromName":"a","toUsername":"bob","messageContent":"hi","sentAt":"Apr 25, 2019, 4:55:53 PM"}`, ToUser("bob")},
		{"toGroup", `{"messageType":"CHAT_MESSAGE","fromName":"a","toGroup":"g1","messageContent":"hi","sentAt":"Apr 25, 2019, 4:55:53 PM"}`, ToGroup("g1")},
		{"group, member named", `{"messageType":"CHAT_MESSAGE","fromName":"a","toUsername":"bob","toGroup":"g1","messageContent":"hi","sentAt":"Apr 25, 2019, 4:55:53 PM"}`, ToGroup("g1")},
		{"old user", `{"sentAt":"Apr 25, 2019, 4:55:53 PM","fromName":"a","toName":"bob","messageContent":"hi","forGroup":false,"messageType":"CHAT_MESSAGE"}`, ToUser("bob")},
		{"old group", `{"sentAt":"Apr 25, 2019, 4:55:53 PM","fromName":"a","toName":"g1","messageContent":"hi","forGroup":true,"messageType":"CHAT_MESSAGE"}`, ToGroup("g1")},
		{"old without forGroup", `{"messageType":"CHAT_MESSAGE","fromName":"a","toName":"bob","messageContent":"hi","sentAt":"Apr 25, 2019, 4:55:53 PM"}`, ToUser("bob")},
		{"unknown fields ignored", `{"messageType":"CHAT_MESSAGE","id":7,"fromName":"a","toUsername":"bob","messageContent":"hi","sentAt":"Apr 25, 2019, 4:55:53 PM","x":{"y":[1]}}`, ToUser("bob")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := Decode([]byte(tc.line))
			if err != nil {
				t.Fatal(err)
			}
			want := ChatMessage{From: "a", To: tc.want, Content: "hi", SentAt: "Apr 25, 2019, 4:55:53 PM"}
			if diff := cmp.Diff(want, ev); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			m := ev.(ChatMessage)
			at, err := m.Time()
			if err != nil || !at.Equal(time.Date(2019, 4, 25, 16, 55, 53, 0, time.Local)) {
				t.Errorf("Time() = %v, %v", at, err)
			}
		})
	}
}

func TestDecodeOldInstantSentAt(t *testing.T) {
	// What the original client wrote (reference, figure 22).
	line := `{"sentAt":{"seconds":1556146749,"nanos":290000000},"fromName":"coolguy","toName":"othercoolguy","messageContent":"hey","forGroup":false,"messageType":"CHAT_MESSAGE"}`
	ev, err := Decode([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Unix(1556146749, 0).Local().Format(protocol.TimeLayout)
	if got := ev.(ChatMessage).SentAt; got != want {
		t.Errorf("SentAt = %q, want %q", got, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		line    string
		want    error
		message string
	}{
		{`{"messageType":"LOGIN","username":"a"`, ErrMalformed, "malformed message: unexpected end of JSON input"},
		{`not json`, ErrMalformed, "malformed message: invalid character"},
		{`[1,2]`, ErrMalformed, "malformed message: json: cannot unmarshal array"},
		{`{"messageType":5}`, ErrMalformed, "malformed message"},
		{`{"messageType":"LOGIN","username":"a"} {}`, ErrMalformed, "malformed message: invalid character '{' after top-level value"},
		{`{"username":"alice"}`, ErrMissingType, "missing messageType"},
		{`null`, ErrMissingType, "missing messageType"},
		{`{"messageType":""}`, ErrMissingType, "missing messageType"},
		{`{"messageType":"HELLO"}`, ErrUnknownType, `unknown messageType "HELLO"`},
		{`{"messageType":"login","username":"a"}`, ErrUnknownType, `unknown messageType "login"`},
		{`{"messageType":"LOGIN"}`, ErrInvalidMessage, "invalid message: LOGIN without username"},
		{`{"messageType":"JOIN_GROUP"}`, ErrInvalidMessage, "invalid message: JOIN_GROUP without group"},
		{`{"messageType":"CHAT_MESSAGE","messageContent":"x"}`, ErrInvalidMessage, "invalid message: CHAT_MESSAGE without"},
		{`{"messageType":"CHAT_MESSAGE","toUsername":"a","sentAt":12}`, ErrMalformed, "sentAt must be a string"},
	}
	for _, tc := range tests {
		ev, err := Decode([]byte(tc.line))
		if !errors.Is(err, tc.want) {
			t.Errorf("Decode(%s) = %#v, %v; want %v", tc.line, ev, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.message) {
			t.Errorf("Decode(%s) error %q does not contain %q", tc.line, err, tc.message)
		}
	}
}

func TestDecodeErrorMessage(t *testing.T) {
	ev, err := Decode([]byte(`{"errorMessage":"username taken","messageType":"ERROR"}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Event(ErrorMessage{Message: "username taken"}), ev); diff != "" {
		t.Error(diff)
	}
}

func FuzzDecode(f *testing.F) {
	for _, tc := range designShapes {
		f.Add([]byte(tc.json))
	}
	for _, s := range []string{
		`{"sentAt":{"seconds":1556146749,"nanos":290000000},"fromName":"coolguy","toName":"x","messageContent":"hey","forGroup":true,"messageType":"CHAT_MESSAGE"}`,
		`{"messageType":"CHAT_MESSAGE","toUsername":"a","toGroup":"b"}`,
		`{"messageType":"HELLO"}`, `null`, `{`, `"x"`, `{"messageType":"LOGIN","username":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := Decode(line)
		if err != nil {
			if ev != nil {
				t.Fatalf("Decode returned both %#v and %v", ev, err)
			}
			return
		}
		// Whatever decodes re-encodes, and decodes to the same event.
		b, err := Encode(ev)
		if err != nil {
			t.Fatalf("Encode(%#v): %v", ev, err)
		}
		back, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(%#v)) = %s: %v", ev, b, err)
		}
		if diff := cmp.Diff(ev, back); diff != "" {
			t.Fatalf("round trip of %s (-first +second):\n%s", line, diff)
		}
	})
}

func TestParseRecipient(t *testing.T) {
	for in, want := range map[string]Recipient{"bob": ToUser("bob"), "#g1": ToGroup("g1"), " #g1 ": ToGroup("g1")} {
		got, err := ParseRecipient(in)
		if err != nil || got != want {
			t.Errorf("ParseRecipient(%q) = %v, %v; want %v", in, got, err, want)
		}
		if again, _ := ParseRecipient(got.String()); again != got {
			t.Errorf("ParseRecipient(%q.String()) = %v", got, again)
		}
	}
	for _, in := range []string{"", "#", "a b", "  "} {
		if got, err := ParseRecipient(in); err == nil {
			t.Errorf("ParseRecipient(%q) = %v, want error", in, got)
		}
	}
}
