// Package election holds the coordinator election algorithms — ring-based,
// Chang–Roberts, bully and a store lease — as pure state machines behind one
// interface (start, handle a message, result). The winner records itself in
// the store with a new epoch by compare-and-set (store.ClaimCoordinator).
package election
