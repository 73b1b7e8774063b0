// Package chat is a node's client port: newline-delimited JSON compatible
// with the original RingChat client (protocol 1) and protocol 2 (message
// ids, STORED receipts, ACKs, passwords, WHO, GROUPS, HISTORY), documented
// in docs/PROTOCOL.md.
//
// Each connection has one reader goroutine (decode, check, answer) and one
// writer goroutine draining a bounded queue to the socket; nothing else
// ever waits on a client. Messages accepted from clients wait in the
// node's outbox. The service's critical section (Server.Section, run by
// the node at every token visit) stores them, fetches what is pending for
// the users logged in here and applies acknowledgements, all in one
// transaction fenced by the token's stamp; only after it committed do
// receipts and deliveries go to the connections' queues. The token's App
// data names the nodes that have deliveries waiting, so a node with
// nothing to do does not touch the store.
package chat
