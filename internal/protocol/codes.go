package protocol

// Code is a stable code of a protocol-2 ERROR ("code") or of a NOTICE.
// Codes never change meaning; clients may switch on them.
type Code string

// Codes of ERROR.
const (
	CodeBadJSON        Code = "BAD_JSON"      // the line is not a JSON object
	CodeUnknownType    Code = "UNKNOWN_TYPE"  // messageType missing or not known (to this protocol version)
	CodeBadRequest     Code = "BAD_REQUEST"   // a field is missing or malformed
	CodeBadName        Code = "BAD_NAME"      // empty, too long or unprintable user or group name
	CodeTooLong        Code = "TOO_LONG"      // messageContent over 4 KiB
	CodeLineTooLong    Code = "LINE_TOO_LONG" // a line over 64 KiB (the connection closes)
	CodeNotLoggedIn    Code = "NOT_LOGGED_IN" // a command before LOGIN
	CodeLoggedIn       Code = "ALREADY_LOGGED_IN"
	CodeUserOnline     Code = "USER_ONLINE" // the user is logged in on another connection
	CodePasswordNeeded Code = "PASSWORD_REQUIRED"
	CodeBadPassword    Code = "BAD_PASSWORD"
	CodePasswordNotSet Code = "PASSWORD_NOT_SET" // a password for a name that has none: set one from a session, or by the operator
	CodeNoAccount      Code = "NO_ACCOUNT"       // password mode: the name has no account (REGISTER it)
	CodeNameTaken      Code = "NAME_TAKEN"       // REGISTER of a name in use
	CodeThrottled      Code = "LOGIN_THROTTLED"  // too many failed logins for the name or from the address: wait
	CodeNotInvited     Code = "NOT_INVITED"      // JOIN_GROUP of an invite-only group without an invitation
	CodeUnknownUser    Code = "UNKNOWN_USER"
	CodeUnknownGroup   Code = "UNKNOWN_GROUP"
	CodeNotMember      Code = "NOT_MEMBER"
	CodeRateLimited    Code = "RATE_LIMITED" // the line was dropped: slow down
	CodeFlood          Code = "FLOOD"        // too many lines over the rate (the connection closes)
	CodeIdle           Code = "IDLE_TIMEOUT" // nothing received for too long (the connection closes)
	CodeServerFull     Code = "SERVER_FULL"  // too many clients (the connection closes)
	// CodeTooManyConns refuses a connection from an address that already
	// has the most a node takes from one address (the connection closes).
	CodeTooManyConns Code = "TOO_MANY_CONNECTIONS"
	CodeSlowConsumer Code = "SLOW_CONSUMER"
	CodeBusy         Code = "BUSY"        // the node's queue is full: send again later
	CodeUnavailable  Code = "UNAVAILABLE" // the store failed: try again
	CodeNotStored    Code = "NOT_STORED"  // the store refuses this message itself (it works for others): not delivered, do not send it again as it is
	CodeShutdown     Code = "SHUTTING_DOWN"
)

// Codes of NOTICE (FeatureFailover): the node's word about itself.
const (
	NoticeStoreUnreachable Code = "STORE_UNREACHABLE" // the node cannot reach the store
	NoticeOutOfRing        Code = "OUT_OF_RING"       // the node is not in the ring
	NoticeNodeOK           Code = "NODE_OK"           // the node serves again
)
