package chat

// runs on: the visit goroutine (the queue calls these after a visit's
// commit, and Ready and Session while it collects a visit's work). They
// read the session table under s.mu and write to connections' queues,
// never waiting on a socket.

import (
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/queue"
	"github.com/ringchat/ringchat/internal/store"
)

// sessionTable is the server's sessions as the queue sees them
// (queue.Sessions).
type sessionTable Server

var (
	_ queue.Sessions = (*sessionTable)(nil)
	_ queue.Sink     = (*session)(nil)
)

// Ready returns the sessions visits deliver to now.
func (t *sessionTable) Ready() map[int64]queue.Sink {
	s := (*Server)(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	ready := make(map[int64]queue.Sink, len(s.sessions))
	for id, sess := range s.sessions {
		if sess.ready {
			ready[id] = sess
		}
	}
	return ready
}

// Session returns the user's session here, if any, and whether it is
// ready.
func (t *sessionTable) Session(user int64) (queue.Sink, bool) {
	s := (*Server)(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[user]
	if sess == nil {
		return nil, false
	}
	return sess, sess.ready
}

// Deliver notes the rows of protocol-2 deliveries in their sessions (for
// their ACKs, which may come back at once), then queues every delivery to
// its connection, each message encoded once per protocol (and per member
// for a protocol-1 group line). It returns the rows of sessions that are
// gone.
func (t *sessionTable) Deliver(ds []queue.Delivery) []store.RecipientSeq {
	s := (*Server)(t)
	s.noteUnacked(ds)
	type key struct {
		seq, user int64 // user: a protocol-1 group line names its member
		version   int
	}
	lines := map[key][]byte{}
	var lost []store.RecipientSeq
	for _, d := range ds {
		sess := d.To.(*session)
		v := sess.version
		k := key{seq: d.D.Seq, version: v}
		if v < protocol.V2 && d.D.ToGroup != "" {
			k.user = d.D.RecipientID
		}
		line, ok := lines[k]
		if !ok {
			line = encodeDelivery(d.D, v)
			lines[k] = line
		}
		it := outItem{line: line}
		if o := s.cfg.DeliveryLatency; o != nil {
			o.Observe(time.Since(d.D.SentAt).Seconds())
		}
		if v < protocol.V2 {
			it.ack = d.D.Row()
		}
		if !sess.c.send(it) {
			lost = append(lost, d.D.Row())
		}
	}
	return lost
}

// noteUnacked notes the rows of protocol-2 deliveries in their sessions
// (at most maxUnacked each), for their ACKs, in the order they are
// queued to the connections, with the highest sequence handed before
// each (for ACK_UPTO). It runs before they are queued: an ACK may come
// back at once.
func (s *Server) noteUnacked(ds []queue.Delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range ds {
		sess := d.To.(*session)
		if sess.version < protocol.V2 {
			continue
		}
		if sess.unacked == nil {
			sess.unacked = map[string]openDelivery{}
		}
		if len(sess.unacked) < maxUnacked {
			// The row, with its group: an ACK of a group message
			// moves the member's cursor.
			sess.unacked[d.D.ID] = openDelivery{row: d.D.Row(), after: sess.handedMax}
		}
		sess.handedMax = max(sess.handedMax, d.D.Seq)
	}
}

func encodeDelivery(d store.Delivery, version int) []byte {
	if version >= protocol.V2 {
		return encode(chatV2Of(d.Message))
	}
	to := d.ToUser
	if d.ToGroup != "" {
		to = d.Recipient // the original named the member it delivered a group message to
	}
	return encode(protocol.ChatV1{MessageType: protocol.TypeChatMessage, FromName: d.Sender, ToUsername: to, ToGroup: d.ToGroup,
		MessageContent: d.Content, SentAt: formatSentAt(d.SentAt)})
}

// Version is the session's protocol.
func (sess *session) Version() int { return sess.version }

// Room is how many deliveries the connection's queue takes now.
func (sess *session) Room() int { return sess.c.room() }

// Starve notes that a visit left deliveries behind for lack of room: the
// writer asks for a fetch when it has room.
func (sess *session) Starve() { sess.starved.Store(true) }

// Receipt answers the sender of a message a visit stored or refused:
// STORED for a protocol-2 message, the refusal of one that could not be
// stored (its recipient unknown, or set aside); a stored protocol-1
// message has no receipt.
func (sess *session) Receipt(r queue.Receipt) {
	m := r.Msg
	var e *Error
	switch {
	case r.SetAside:
		e = notStored(m)
	case r.Unknown:
		e = unknown(recipientOf(m.To))
		if m.Version >= protocol.V2 {
			e.ID = m.ID
		}
	case m.Version >= protocol.V2:
		sess.c.sendLine(encode(protocol.StoredV2{MessageType: protocol.TypeStored, ID: m.ID, Seq: r.Seq, Time: formatTime(r.SentAt)}))
		return
	default:
		return
	}
	sess.c.sendLine(encodeError(m.Version, e))
}

// Notice hands over a READ or TYPING notice if the session asked for its
// kind at LOGIN.
func (sess *session) Notice(n queue.Notice) {
	if !sess.wants(n.Kind) {
		return
	}
	kind := protocol.TypeRead
	if n.Kind == queue.NoticeTyping {
		kind = protocol.TypeTyping
	}
	sess.c.sendLine(encode(protocol.UserNoticeV2{MessageType: kind, Username: n.From, Seq: n.Seq}))
}

// wants reports whether the session asked for notices of this kind.
func (sess *session) wants(kind string) bool {
	switch kind {
	case queue.NoticeRead:
		return sess.features&featRead != 0
	case queue.NoticeTyping:
		return sess.features&featTyping != 0
	}
	return false
}

// recipientOf is a queued message's recipient as the chat service names it.
func recipientOf(to queue.Recipient) Recipient { return Recipient{Name: to.Name, Group: to.Group} }

// notStoredText is how much of a protocol-1 message's text its refusal
// quotes (the sender's client has no id to match it by).
const notStoredText = 80

// notStored is the refusal of a message set aside: the store refuses it
// (a data error, again and again, while it takes other work). Protocol 2
// names the message by its id; protocol 1, which has no ids, by its
// recipient and its text.
func notStored(m *queue.Message) *Error {
	const why = "could not be stored: the store refuses it while it stores other messages; not delivered"
	to := recipientOf(m.To)
	if m.Version >= protocol.V2 {
		e := errorf(protocol.CodeNotStored, "message %s to %s %s", m.ID, to, why)
		e.ID = m.ID
		return e
	}
	text := m.Content
	if r := []rune(text); len(r) > notStoredText {
		text = string(r[:notStoredText]) + "…"
	}
	return errorf(protocol.CodeNotStored, "message %q to %s %s", text, to, why)
}
