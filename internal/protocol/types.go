package protocol

// Type is the value of a message's "messageType".
type Type string

// Message types. The first six are protocol 1 (the original RingChat
// client); the rest exist only in protocol 2, and a protocol-1
// connection never receives them.
const (
	TypeLogin       Type = "LOGIN"
	TypeJoinGroup   Type = "JOIN_GROUP"
	TypeLeaveGroup  Type = "LEAVE_GROUP"
	TypeChatMessage Type = "CHAT_MESSAGE"
	TypeError       Type = "ERROR"
	TypeAlive       Type = "ALIVE"

	TypeStored      Type = "STORED"       // a message is stored (receipt)
	TypeAck         Type = "ACK"          // the client has these messages
	TypeAckUpTo     Type = "ACK_UPTO"     // the client has what it was handed up to a sequence (FeatureCumulativeAck)
	TypeWho         Type = "WHO"          // the users online
	TypeGroups      Type = "GROUPS"       // the groups
	TypeHistory     Type = "HISTORY"      // a conversation's earlier messages
	TypeRegister    Type = "REGISTER"     // make an account
	TypeSetPassword Type = "SET_PASSWORD" // set the logged-in user's password
	TypeInvite      Type = "INVITE"       // let a user join an invite-only group
	TypeAway        Type = "AWAY"         // set or tell an away message
	TypeWhois       Type = "WHOIS"        // where a user is logged in
	TypeNames       Type = "NAMES"        // a group's members
	TypeRead        Type = "READ"         // messages read up to a sequence
	TypeTyping      Type = "TYPING"       // someone is writing
	TypeNotice      Type = "NOTICE"       // the node's word about itself (FeatureFailover)
)

// Protocol versions (LOGIN's "version"; absent is 1).
const (
	V1 = 1
	V2 = 2
)

// Features a protocol-2 LOGIN may ask for ("features"): what the session
// receives beyond the answers to its requests. A node ignores the names
// it does not know, so a client may name features a node does not have
// yet; the LOGIN answer names those granted that change it.
const (
	FeatureAway   = "away"   // AWAY of a user this session writes to
	FeatureRead   = "read"   // READ: a recipient has read this session's messages
	FeatureTyping = "typing" // TYPING: someone is writing to this session's user
	// FeatureFailover: what a client needs to move to another node when
	// this one cannot serve it. The LOGIN answer lists the ring's nodes
	// ("nodes"), an ALIVE with an id is answered, and NOTICE tells at
	// once when the node cannot reach the store or is out of the ring
	// (and when it serves again).
	FeatureFailover = "failover"
	// FeatureLimits: the LOGIN answer says the largest message the node
	// takes ("maxMessageBytes"), for a client to refuse a longer one
	// before sending it.
	FeatureLimits = "limits"
	// FeatureCumulativeAck: the session may acknowledge with ACK_UPTO,
	// "everything delivered to me on this connection up to this
	// sequence", instead of naming each message in ACK. The LOGIN answer
	// names it when granted.
	FeatureCumulativeAck = "cumulative-ack"
)

// Limits of the protocol (docs/PROTOCOL.md, "Limits").
const (
	MaxNameRunes    = 32       // user and group names
	MaxContentBytes = 4 << 10  // a message's text ("messageContent")
	MaxLineBytes    = 64 << 10 // one line from a client, without its newline
	MaxPassword     = 256      // bytes of a password
	MaxRequestID    = 64       // bytes of a protocol-2 request id
	MaxAckIDs       = 1000     // message ids in one ACK
	MaxHistory      = 100      // messages in one HISTORY answer
	MaxFeatures     = 16       // features one LOGIN names
)

// Time layouts.
const (
	// TimeLayout is the layout of "sentAt" (the original client's format,
	// in the node's local time).
	TimeLayout = "Jan 2, 2006, 3:04:05 PM"
	// StampLayout is the layout of protocol 2's "time", "since" and
	// "awaySince": RFC 3339 in UTC with milliseconds.
	StampLayout = "2006-01-02T15:04:05.000Z07:00"
)
