// Package protocol declares the client protocol once: the newline-delimited
// JSON that a chat client and a node's client port exchange, in both
// versions (protocol 1, the original RingChat client's, and protocol 2,
// ours). It holds the message types, the codes of ERROR and NOTICE, the
// features a protocol-2 LOGIN may ask for, the limits and time layouts of
// the wire, and the JSON shapes of the messages, one struct per shape with
// its fields in the order they are written.
//
// docs/PROTOCOL.md describes the same messages for people; a test here
// checks that the two name the same types, codes and features. The node
// (internal/chat), the client library (internal/client), its fake server
// (internal/client/clienttest) and ringchat's JSON output encode and
// decode through these declarations, so that they cannot drift apart.
//
// The package holds declarations only: deciding what a line means (which
// fields a type needs, what is refused) stays with the node and the
// client. It imports nothing but the standard library.
package protocol
