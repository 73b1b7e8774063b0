// Package chat is the client port server: newline-delimited JSON compatible
// with the original RingChat client (protocol v1) and protocol v2, with
// delivery batched under the token in one fenced store transaction per visit
// (store.Store.Fenced).
package chat
