// Package token is the token's state machine: acknowledgement before any
// work, generation and sequence stamps, discarding stale and duplicate
// tokens, regeneration by the coordinator after a loss bound, and the fence
// (store.Fence) every critical section on the message queue carries.
package token
