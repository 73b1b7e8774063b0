// Package chat is a node's client port: newline-delimited JSON compatible
// with the original RingChat client (protocol 1) and protocol 2 (message
// ids, STORED receipts, ACKs, passwords, WHO, GROUPS, HISTORY), documented
// in docs/PROTOCOL.md.
//
// Each connection has one reader goroutine (decode, check, answer) and one
// writer goroutine draining a bounded queue to the socket; nothing else
// ever waits on a client. Messages accepted from clients go to the
// node's message queue (internal/queue, built by New over the server's
// sessions and reached as Server.Queue), whose Visit the node runs at
// every token visit: it stores them, fetches what is pending for the users
// logged in here and applies acknowledgements, all in one transaction
// fenced by the token's stamp; only after it committed does it hand
// receipts, deliveries and notices to the sessions (sink.go), which put
// them on the connections' queues.
package chat
