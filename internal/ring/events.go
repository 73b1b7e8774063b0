package ring

// Event names a Note: what happened at a node, as its runtime logs and
// counts it.
type Event string

// The events of Notes.
const (
	EventCoordinator             Event = "coordinator"              // this node took office as coordinator
	EventCoordinatorDeposed      Event = "coordinator-deposed"      // this node is coordinator no more
	EventCoordinatorFailed       Event = "coordinator-failed"       // the successor that failed is the coordinator the store names
	EventCoordinatorOrphaned     Event = "coordinator-orphaned"     // the store names this node coordinator, from an earlier run that crashed
	EventCoordinatorOutside      Event = "coordinator-outside"      // the store names a coordinator its ring does not hold (it left, its hand-off lost): the role is taken once its lease ran out
	EventCoordinatorUnresponsive Event = "coordinator-unresponsive" // the coordinator keeps not answering: this node claims the role
	EventElection                Event = "election"                 // an election finished (Note.Election says how)
	EventElectionWon             Event = "election-won"             // this node won an election
	EventEpochLowered            Event = "epoch-lowered"            // this node went back to the store's lower epoch (its own was never confirmed)
	EventEpochRefused            Event = "epoch-refused"            // a message of an epoch the store does not confirm was dropped
	EventEpochUnconfirmed        Event = "epoch-unconfirmed"        // a message of a newer epoch waits until the store confirms it
	EventHandoff                 Event = "handoff"                  // the coordinator hands its role to the node named
	EventHandoffDeclined         Event = "handoff-declined"         // a troubled coordinator's HANDOFF came to a node troubled too: not taken
	EventJoined                  Event = "joined"                   // this node joined the ring
	EventTroubled                Event = "store-troubled"           // this node's store link is troubled: it defers the coordinator role to others
	EventTroubleOver             Event = "store-trouble-over"       // no longer troubled: it challenges a lower coordinator again after TroubleHoldTicks
	EventLeaseLost               Event = "lease-lost"               // the coordinator's store lease ran out
	EventLeaveDeadline           Event = "leave-deadline"           // leaving took too long: the node left anyway
	EventLeaveUnanswered         Event = "leave-unanswered"         // a leave got no answer from the coordinator in its tries
	EventLeft                    Event = "left"                     // this node left the ring
	EventMisdirected             Event = "misdirected"              // a datagram for another node arrived here (dropped)
	EventNotInStoreRing          Event = "not-in-store-ring"        // this node is in the ring, the store's ring lacks it
	EventOffLink                 Event = "off-link"                 // a message came by another link than its sender's (dropped)
	EventPredecessorSilent       Event = "predecessor-silent"       // the inbound link was silent too long
	EventRejoin                  Event = "rejoin"                   // a node asked to join again
	EventSplicedOut              Event = "spliced-out"              // the coordinator took this node out of the ring
	EventReporterMoved           Event = "reporter-moved"           // the coordinator placed a node again that reported its successor failed, its own links failing with others too (peer: the node)
	EventStaleCommand            Event = "stale-command"            // a coordinator command of an old epoch was ignored
	EventStaleResult             Event = "stale-result"             // a ring change finished after this node was deposed (the new coordinator tells the nodes)
	EventStoreFailed             Event = "store-failed"             // a store operation failed
	EventSuccessorFailed         Event = "successor-failed"         // the successor stopped answering
	EventSuccessorWatchdog       Event = "successor-watchdog"       // the successor link stayed down too long: linked again
	EventTokenDropped            Event = "token-dropped"            // a held token was discarded (superseded, stale, reset)
	EventTokenForged             Event = "token-forged"             // a token of a generation the store never issued was discarded
	EventTokenUnchecked          Event = "token-unchecked"          // the store could not confirm a token's generation: passed on without a visit
	EventAssignRefused           Event = "assign-refused"           // a SUCCESSOR the store's ring does not confirm was dropped
	EventNotPredecessor          Event = "not-predecessor"          // a token came on the link of a node the store's ring does not name as predecessor: refused (UNLINK)
	EventTokenUnjudged           Event = "token-unjudged"           // a token waiting for the store's word (on its sender, or on its generation) was dropped unjudged (its link closed, a later one replaced it, or the node reset): never taken; a real sender sends it again
	EventTokenFenced             Event = "token-fenced"             // the store refused a critical section: a newer token exists
	EventTokenRegenerated        Event = "token-regenerated"        // the coordinator made a new token generation
)
