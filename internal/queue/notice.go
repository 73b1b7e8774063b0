package queue

// runs on: Notify on connection goroutines (guarded by q.mu: q.notices);
// Visit and passNotices on the visit goroutine.

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/token"
)

// READ and TYPING notices are not messages and never touch the store in
// a visit: a notice rides in the token's hint for one lap, and the node
// where its user is logged in (with the feature asked for at LOGIN) hands
// it over. Notices are best effort (a lost token loses them; a READ's mark
// stays in the store, and HISTORY gives it).

// Notice is one READ or TYPING notice in the token's hint:
// {"o":1,"u":17,"k":"r","f":"bob","s":4711,"h":63}.
type Notice struct {
	Origin int64  `json:"o"` // the node that added it: it drops it a lap later
	User   int64  `json:"u"` // the user it is for
	Kind   string `json:"k"` // NoticeRead or NoticeTyping
	From   string `json:"f"` // the user it is from
	Seq    int64  `json:"s,omitempty"`
	// Hops left: a notice whose origin never sees it again (the node
	// died, or the token came from elsewhere) is dropped after
	// noticeHops visits.
	Hops int `json:"h"`
}

// Kinds of notices.
const (
	NoticeRead   = "r"
	NoticeTyping = "t"
)

// Bounds of notices: in the token (past it, a node adds none), added by one
// visit, and waiting at a node for the token (past it, new ones are
// dropped: they are hints, not messages).
const (
	maxHintNotices  = 64
	noticesPerVisit = 16
	maxOutNotices   = 64
	noticeHops      = 64 // a lap of any ring up to 64 nodes
)

// valid reports whether a notice from the token can be handed over.
func (n Notice) valid() bool {
	return n.User > 0 && n.Origin > 0 && n.Seq >= 0 && (n.Kind == NoticeRead || n.Kind == NoticeTyping) && validName(n.From)
}

// validName reports whether name is a well-formed user name (as the chat
// service's CheckName has it): not empty, at most protocol.MaxNameRunes,
// printable, no space at either end.
func validName(name string) bool {
	if name == "" || utf8.RuneCountInString(name) > protocol.MaxNameRunes || !utf8.ValidString(name) || strings.TrimSpace(name) != name {
		return false
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// Notify queues a notice (its User, Kind, From and Seq) for the next
// visit.
func (q *Queue) Notify(n Notice) {
	n.Origin, n.Hops = q.cfg.NodeID, noticeHops
	q.mu.Lock()
	if len(q.notices) < maxOutNotices {
		q.notices = append(q.notices, n)
	}
	q.mu.Unlock()
	q.want()
}

// passNotices hands over the token's notices for users logged in here,
// drops this node's own (they have gone round), and adds this node's
// queued ones. It returns the notices the token carries on, and whether
// it added any (then the token goes round at once).
func (q *Queue) passNotices(in []Notice) ([]Notice, bool) {
	self := q.cfg.NodeID
	var out []Notice
	q.mu.Lock()
	var ready map[int64]Sink
	if len(in) > 0 {
		ready = q.sessions.Ready()
	}
	for _, n := range in[:min(len(in), maxHintNotices)] {
		n.Hops = min(n.Hops, noticeHops) - 1
		if !n.valid() || n.Origin == self {
			continue
		}
		sess := ready[n.User]
		if sess == nil {
			if n.Hops > 0 {
				out = append(out, n)
			}
			continue
		}
		sess.Notice(n)
	}
	take := min(len(q.notices), noticesPerVisit, max(0, maxHintNotices-len(out)))
	out = append(out, q.notices[:take]...)
	q.notices = slices.Delete(q.notices, 0, take)
	more := len(q.notices) > 0
	q.mu.Unlock()
	if more {
		q.want()
	}
	return out, take > 0
}

// Fenced runs fn in one store transaction fenced by the visiting token's
// stamp: if a newer token (or another copy of this one) has written, fn does
// not run and the error wraps store.ErrFenced. (An alias, so that Visit is
// the node runtime's node.Section as it is.)
type Fenced = func(fn func(store.Tx) error) error

// Visit is the queue's critical section, run at every token visit (the
// node runtime's section): the token's notices are passed on around the
// visit's work (visitStore). It returns the token's new App data and
// whether it did work.
func (q *Queue) Visit(ctx context.Context, tok token.Token, fenced Fenced) (json.RawMessage, bool, error) {
	h, herr := decodeHint(tok.App)
	notices, added := q.passNotices(h.N)
	app, worked, err := q.visitStore(ctx, tok, h, herr, fenced)
	if len(notices) == 0 && (herr != nil || len(h.N) == 0) {
		return app, worked, err
	}
	out, derr := decodeHint(app)
	if derr != nil {
		return app, worked, err
	}
	out.N = notices
	return out.encode(), worked || added, err
}
