package chat

// runs on: the connections' reader goroutines; awayCache is guarded by its
// own mutex.

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/queue"
	"github.com/ringchat/ringchat/internal/store"
)

// This file holds what a user tells others about themselves: away status
// (AWAY, WHOIS, NAMES, WHO), read markers (READ) and typing (TYPING).
//
// Away status and read markers are the store's: AWAY and READ write them in
// a client transaction, WHOIS, NAMES, WHO and HISTORY read them. READ and
// TYPING also notify the other user at once, through the token: a notice
// rides in the token's hint for one lap, and the node where its user is
// logged in (with the feature asked for at LOGIN) hands it over. Notices
// are best effort (a lost token loses them; a READ's mark stays in the
// store, and HISTORY gives it); they are never stored. The token's part
// is the queue's (internal/queue, notice.go).

// typingEvery is how often a session's TYPING goes on to the ring; those
// sent more often are dropped (a client repeats it every few seconds while
// its user types).
const typingEvery = time.Second

// maxToldAway bounds the away statuses a connection remembers having told.
const maxToldAway = 256

// awayTTL is how long a node trusts its copy of a user's away status when
// telling senders of direct messages: an away message set at another node
// is told to a sender here from a second later on (it costs one store
// read a second per user written to, by senders with FeatureAway only).
const awayTTL = time.Second

// Session features, from LOGIN's "features".
const (
	featAway = 1 << iota
	featRead
	featTyping
	featFailover
	featLimits
	featCumulativeAck
)

func featuresOf(names []string) int {
	f := 0
	for _, n := range names {
		switch n {
		case protocol.FeatureAway:
			f |= featAway
		case protocol.FeatureRead:
			f |= featRead
		case protocol.FeatureTyping:
			f |= featTyping
		case protocol.FeatureFailover:
			f |= featFailover
		case protocol.FeatureLimits:
			f |= featLimits
		case protocol.FeatureCumulativeAck:
			f |= featCumulativeAck
		}
	}
	return f
}

// namesCursor reads NAMES' "after": empty for the first page, else the
// "next" of the page before (a member's user id).
func namesCursor(after string) (int64, *Error) {
	if after == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(after, 10, 64)
	if err != nil || id <= 0 {
		return 0, errorf(protocol.CodeBadRequest, "after must be the \"next\" of an earlier NAMES reply")
	}
	return id, nil
}

// away serves AWAY: sets the user's away message, or clears it.
func (c *conn) away(req Request) {
	s := c.s
	ctx, cancel := s.storeCtx()
	defer cancel()
	var a store.Away
	err := s.st.Update(ctx, func(tx store.Tx) error {
		var err error
		a, err = tx.SetAway(c.sess.userID, req.Content)
		return err
	})
	if c.failed(req.ID, err, nil) {
		return
	}
	s.aways.put(c.sess.name, a)
	r := protocol.AwayV2{MessageType: protocol.TypeAway, Message: a.Message, ID: req.ID}
	if a.Message != "" {
		r.Since = formatTime(a.Since)
	}
	c.sendLine(encode(r))
}

// whois serves WHOIS: where a user is logged in, since when, and their
// away status.
func (c *conn) whois(req Request) {
	ctx, cancel := c.s.storeCtx()
	defer cancel()
	var st store.UserStatus
	var refusal *Error
	err := c.s.st.View(ctx, func(tx store.Tx) error {
		var err error
		st, err = tx.StatusOf(req.Username)
		if errors.Is(err, store.ErrNotFound) {
			refusal = unknown(Recipient{Name: req.Username})
			return nil
		}
		return err
	})
	if c.failed(req.ID, err, refusal) {
		return
	}
	r := protocol.WhoisV2{MessageType: protocol.TypeWhois, Username: st.Name, Online: st.NodeID != 0, Node: st.NodeID, Away: st.Away.Message, ID: req.ID}
	if st.NodeID != 0 {
		r.Since = formatTime(st.Since)
	}
	if st.Away.Message != "" {
		r.AwaySince = formatTime(st.Away.Since)
	}
	c.sendLine(encode(r))
}

// namesPage is NAMES' page size when the request names none.
const namesPage = 200

// names serves NAMES: one page of a group's members (by user id), with
// where each is logged in and their away status. An invite-only group's
// members are listed to its members only.
func (c *conn) names(req Request) {
	limit := req.Limit
	switch {
	case limit == 0:
		limit = namesPage
	case limit > store.MaxMembersPage:
		limit = store.MaxMembersPage
	}
	after, _ := namesCursor(req.After) // checked by Decode
	ctx, cancel := c.s.storeCtx()
	defer cancel()
	var page []store.Member
	var refusal *Error
	err := c.s.st.View(ctx, func(tx store.Tx) error {
		g, err := tx.GroupByName(req.Group)
		if errors.Is(err, store.ErrNotFound) {
			refusal = unknown(Recipient{Name: req.Group, Group: true})
			return nil
		}
		if err != nil {
			return err
		}
		if g.InviteOnly {
			member, err := tx.IsMember(g.ID, c.sess.userID)
			if err != nil {
				return err
			}
			if !member {
				refusal = errorf(protocol.CodeNotMember, "group %s is invite-only: only its members see who is in it", quote(req.Group))
				return nil
			}
		}
		page, err = tx.GroupMembersPage(g.ID, after, limit+1)
		return err
	})
	if c.failed(req.ID, err, refusal) {
		return
	}
	r := protocol.NamesV2{MessageType: protocol.TypeNames, Group: req.Group, Members: make([]protocol.Member, 0, len(page)), ID: req.ID}
	size := 0
	for i, m := range page {
		size += len(m.Name) + len(m.Away.Message) + 60
		if i == limit || size > maxReplyBytes {
			r.Truncated, r.Next = true, strconv.FormatInt(page[i-1].UserID, 10)
			break
		}
		r.Members = append(r.Members, protocol.Member{Username: m.Name, Node: m.NodeID, Away: m.Away.Message})
	}
	c.sendLine(encode(r))
}

// read serves READ: the user has read the other user's messages up to a
// sequence. The mark is the store's (it only moves forward, never past the
// newest message); when it moves, the other user is told.
func (c *conn) read(req Request) {
	s := c.s
	ctx, cancel := s.storeCtx()
	defer cancel()
	var peer, mark int64
	var moved bool
	var refusal *Error
	err := s.st.Update(ctx, func(tx store.Tx) error {
		var err error
		peer, refusal, err = s.lookup(tx, req.To)
		if err != nil || refusal != nil {
			return err
		}
		mark, moved, err = tx.MarkRead(c.sess.userID, peer, req.Seq)
		return err
	})
	if c.failed(req.ID, err, refusal) {
		return
	}
	if moved {
		s.q.Notify(queue.Notice{User: peer, Kind: queue.NoticeRead, From: c.sess.name, Seq: mark})
	}
}

// typing serves TYPING: the other user is told, at most once a second per
// session; nothing is stored.
func (c *conn) typing(req Request) {
	s := c.s
	now := time.Now()
	if now.Sub(c.lastTyping) < typingEvery {
		return
	}
	c.lastTyping = now
	peer, ok := s.names.get(req.To)
	if !ok {
		ctx, cancel := s.storeCtx()
		defer cancel()
		var refusal *Error
		err := s.st.View(ctx, func(tx store.Tx) error {
			var err error
			peer, refusal, err = s.lookup(tx, req.To)
			return err
		})
		if c.failed(req.ID, err, refusal) {
			return
		}
	}
	s.q.Notify(queue.Notice{User: peer, Kind: queue.NoticeTyping, From: c.sess.name})
}

// tellAway sends a protocol-2 sender that asked for it (FeatureAway) the
// away status of the user it writes to, once per status and connection.
func (c *conn) tellAway(to Recipient) {
	s := c.s
	a, ok := s.aways.get(to.Name, time.Now())
	if !ok {
		ctx, cancel := s.storeCtx()
		defer cancel()
		err := s.st.View(ctx, func(tx store.Tx) error {
			u, err := tx.UserByName(to.Name)
			a = u.Away
			return err
		})
		if err != nil {
			return // unknown or unreadable: the message's own answer says so
		}
		s.aways.put(to.Name, a)
	}
	key := to.Name + "\x00" + a.Message
	if a.Message == "" || c.toldAway[key] {
		return
	}
	if c.toldAway == nil || len(c.toldAway) >= maxToldAway {
		c.toldAway = map[string]bool{}
	}
	c.toldAway[key] = true
	c.sendLine(encode(protocol.AwayV2{MessageType: protocol.TypeAway, Username: to.Name, Message: a.Message, Since: formatTime(a.Since)}))
}

// awayCache holds users' away status for awayTTL, bounded.
type awayCache struct {
	mu sync.Mutex
	m  map[string]awayEntry
}

type awayEntry struct {
	a  store.Away
	at time.Time
}

func (ac *awayCache) get(name string, now time.Time) (store.Away, bool) {
	ac.mu.Lock()
	defer ac.mu.Unlock()
	e, ok := ac.m[name]
	if !ok || now.Sub(e.at) > awayTTL {
		return store.Away{}, false
	}
	return e.a, true
}

func (ac *awayCache) put(name string, a store.Away) {
	ac.mu.Lock()
	defer ac.mu.Unlock()
	if ac.m == nil || len(ac.m) >= nameCacheMax {
		ac.m = map[string]awayEntry{}
	}
	ac.m[name] = awayEntry{a, time.Now()}
}
