/*
 * token.pml: a Promela model of ringchat's token protocol, checked with
 * Spin 6.5 (models/check.sh runs it; docs/ARCHITECTURE.md "Model check"
 * says what it covers and what it leaves out).
 *
 * What stands for what:
 *
 *   Node(i)          one ringnode: its token state machine
 *                    (internal/token/machine.go: Receive, accept, hold,
 *                    ask, Checked, CheckFailed, VisitDone, VisitFenced, Ack,
 *                    forward, Generated, Confirm/raiseMinGen), the ring
 *                    machine's link rules for TOKEN (internal/ring/step.go:
 *                    Step, onItsLink, checkPred/settleToken) and the
 *                    node runtime's visit worker and store calls
 *                    (internal/node/node.go visitWorker/runSections/
 *                    readFence, internal/node/exec.go execOp).
 *   fg, fs, fh       the store's token_fence row: generation, seq, holder
 *                    (internal/store/sqlstore.go Fence, NewGeneration,
 *                    Fenced). The row's generation is the last one
 *                    NewGeneration issued: there is no other counter.
 *   scoord           the coordinator the store names (ClaimCoordinator's
 *                    compare-and-set; NewGeneration refuses anyone else).
 *   tok_*[j]         the TCP link pred(j) -> j carrying TOKEN (one frame in
 *                    flight: the sender keeps the token until TOKEN_ACK).
 *   ack_*[i]         the same link's TOKEN_ACK back to i.
 *   fz_*[j]          a TOKEN the adversary injected towards node j, on a
 *                    link opened with the cluster key in the name of j's
 *                    predecessor (fz_from 0) or of another node (1).
 *   Env()            the faults and the adversary: forged TOKENs, a frame
 *                    lost, a node crash (restart with a fresh machine), a
 *                    coordinator takeover (ClaimCoordinator by another
 *                    node). A failed store read, a premature regeneration
 *                    (a ring slower than the loss bound) and a visit that
 *                    runs no section (a node without clients) are chosen
 *                    by the nodes, within the same budgets. Every kind has
 *                    a budget and Env may stay silent from any point on,
 *                    so every run ends with the adversary silent: the
 *                    liveness check's assumption. Liveness is checked
 *                    without fairness, which implies it under weak fairness.
 *
 * The design of issue 27 modelled (and what stands for it):
 *   (a) a stamp counts as the newest seen only once the store confirmed
 *       its generation to the node: receive/hold/checked (Receive, hold,
 *       ask, Checked, CheckFailed; OpReadFence), known[] and the
 *       invariant last_g <= known <= fg;
 *   (b) a TOKEN only on the link of the predecessor the store's ring
 *       names: the forged frame in another node's name is refused (the
 *       ring is fixed here, so the real predecessor never changes);
 *   (c) the coordinator's new generation wins: generated (Generated).
 * Not modelled: the token's proof under its generation's secret (Prove,
 * proven): the adversary here may make any stamp of an issued generation,
 * as if it read the secret.
 *
 * Stamps. A stamp is (generation, seq). Generations are small integers:
 * 1..GMAX are the ones the store can issue, MAXG = GMAX+1 stands for
 * 2^63-1 (above anything the store will issue). Sequence numbers grow
 * without bound in the code; here only their order matters (every rule
 * compares stamps; the only arithmetic is seq+1 at a hop), so after every
 * step the seqs of each generation are renumbered 0..k-1 keeping their
 * order (normalize). A hop's seq+1 then either equals the next value in
 * the system or falls strictly between: the model takes both (a sound
 * over-approximation, since it does not know the gaps). A forged seq may
 * take any place among the existing ones: below, equal, between, above.
 *
 * OLD_BEHAVIOUR switches off the design that fixes issue 27's breaks 1
 * and 2 and models the code before it: Receive records any newer stamp as
 * the newest seen, Generated is ignored unless newer than that, a refused
 * visit sets the newest seen back to the store's fence, and a TOKEN is
 * taken from any authenticated link. check.sh expects Spin to find break 1
 * there.
 */

#ifndef N
#define N 3
#endif
#ifndef GMAX
#define GMAX 9          /* generations the store may issue in one run */
#endif
#ifndef REGEN_PER_FAULT
#define REGEN_PER_FAULT 2  /* regenerations one fault may cost (1 fails: see ARCHITECTURE.md) */
#endif
#define MAXG (GMAX+1)   /* stands for 2^63-1: above anything issued */
#define FAULT credit = credit + REGEN_PER_FAULT
#define SMAX 14         /* bound on the renumbered seqs of one generation */

/* The environment's budgets: how many of each fault a run may have.
   init picks one of several budget sets (the state space is their
   union): the default sets keep a check to seconds; -DDEEP adds larger
   ones and unbounded member checks (minutes); -DONLY=k checks set k
   only. */

/* token.Machine phases (phaseIdling is folded into VISITING: a quiet
   token's rest is a delay, and delays are free here). */
#define NONE     0
#define VISITING 1
#define SENDING  2
#define BLOCKED  3

#define SUCC(x) (((x) + 1) % N)
#define PRED(x) (((x) + N - 1) % N)
#define NEWER(g1, s1, g2, s2) ((g1) > (g2) || ((g1) == (g2) && (s1) > (s2)))

/* ---- node state (token.Machine, per node) ---- */
byte last_g[N], last_s[N];   /* m.last: newest stamp seen */
byte held_g[N], held_s[N];   /* m.held (gen 0: none) */
byte phase[N];               /* m.phase */
byte known[N];               /* m.known: newest generation the store confirmed */
byte ming[N];                /* m.minGen: older generations are stale */
byte chk_g[N], chk_s[N];     /* m.checking: a token held back while the store is asked */
bit  chkout[N];              /* m.checkOut: the fence read is out */
byte chkans[N];              /* the generation that read returned */
byte ask_g[N], ask_s[N];     /* m.asked: the token that read was asked about (0: none out) */
bit  vstarted[N];            /* the held token's Visit was handed to the worker */
byte vs_g[N], vs_s[N];       /* the visit worker's token (gen 0: idle) */
byte vleft[N];               /* fenced sections left in that visit */
bit  iscoord[N];             /* this node acts as coordinator */
byte regp[N];                /* 0, 1: NewGeneration asked, 2: result not yet handled */
byte rg_g[N], rg_s[N];       /* NewGeneration's result (the new token's stamp) */

/* ---- links ---- */
byte tok_g[N], tok_s[N];     /* TOKEN in flight pred(j) -> j */
byte ack_g[N], ack_s[N];     /* TOKEN_ACK in flight succ(i) -> i */
byte fz_g[N], fz_s[N];       /* a forged TOKEN in flight to j */
bit  fz_from[N];             /* 0: in the predecessor's name, 1: another node's */

/* ---- the store ---- */
byte fg, fs, fh;             /* token_fence (generation, seq, holder) */
byte scoord;                 /* coordinator row */

/* ---- budgets and ghosts ---- */
byte forges, losses, crashes, premature, takeovers, readfails;
byte idles;                  /* visits that run no fenced section (a node without clients) */
#ifndef CHECKS
#define CHECKS 0
#endif
byte checks = CHECKS;        /* member checks (OpCheckMember) in a run */
byte credit = 1;             /* ghost: regenerations the faults so far allow */
bit  closed[N];              /* ghost: this node's visit, part committed, was overtaken by another's commit */

/* scratch for normalize and friends: only used inside d_step */
hidden byte hg, hv, hj, hk;

c_code {
/* The work on seqs, in C (it runs after every step): hg, hv and hk are
   its arguments and result. */
extern void (*Uerror)(char *);   /* pan's error report, declared further down in pan.c */
#define C_STAMPS(OP) \
	for (j = 0; j < N; j++) { \
		OP(now.last_g[j], now.last_s[j]); OP(now.held_g[j], now.held_s[j]); \
		OP(now.chk_g[j], now.chk_s[j]); OP(now.ask_g[j], now.ask_s[j]); \
		OP(now.vs_g[j], now.vs_s[j]); \
		OP(now.rg_g[j], now.rg_s[j]); OP(now.tok_g[j], now.tok_s[j]); \
		OP(now.ack_g[j], now.ack_s[j]); OP(now.fz_g[j], now.fz_s[j]); \
	} \
	OP(now.fg, now.fs)
#define C_MARK(G, S) if ((G) > 0) { \
		if ((S) >= SMAX || (G) > MAXG) Uerror("model bound: more seqs than SMAX or a generation above MAXG"); \
		msk[G] |= 1u << (S); }
#define C_REMAP(G, S) if ((G) > 0) (S) = map[G][S]
static void renumber(void) {
	unsigned msk[MAXG + 1] = {0};
	unsigned char map[MAXG + 1][SMAX];
	int j, g, v, r;
	C_STAMPS(C_MARK);
	for (g = 1; g <= MAXG; g++)
		for (v = 0, r = 0; v < SMAX; v++)
			if (msk[g] & (1u << v))
				map[g][v] = r++;
	C_STAMPS(C_REMAP);
	for (j = 0; j < N; j++)
		if (now.phase[j] != VISITING)
			now.vstarted[j] = 0;   /* dead outside a visit */
}
/* hk := one more than the largest seq of generation hg (0: none). */
#define C_COUNT(G, S) if ((G) == hg && (S) + 1 > hk) hk = (S) + 1
static void count_seqs_c(void) {
	int j;
	hk = 0;
	C_STAMPS(C_COUNT);
}
/* hk := the least seq of generation hg above hv (0: none). */
#define C_NEXT(G, S) if ((G) == hg && (S) > hv && (S) < hk) hk = (S)
static void next_seq_c(void) {
	int j;
	hk = SMAX;
	C_STAMPS(C_NEXT);
	if (hk == SMAX)
		hk = 0;
}
/* Make room: every seq of generation hg from hv up goes up by one. */
#define C_SHIFT(G, S) if ((G) == hg && (S) >= hv) (S)++
static void shift_up_c(void) {
	int j;
	C_STAMPS(C_SHIFT);
}
}

inline normalize() {
	d_step { c_code { renumber(); }; check_invariants() }
}

/* Invariants that hold in every state. */
inline check_invariants() {
	hj = 0;
	do
	:: hj < N ->
#ifdef OLD_BEHAVIOUR
		/* Break 1's cause: the newest stamp a node saw is of a generation
		   the store issued. */
		assert(last_g[hj] <= fg);
#else
		/* Design (a): a node records a stamp as the newest seen only if
		   the store confirmed its generation to that node, and the store
		   confirms only what it issued. */
		assert(last_g[hj] <= known[hj] && known[hj] <= fg);
#endif
		hj++
	:: else -> break
	od;
	hj = 0;
}

/* hk := how many distinct seqs generation hg has (they are 0..hk-1). */
inline count_seqs(g) {
	d_step { hg = g; c_code { count_seqs_c(); }; c = hk; hg = 0; hk = 0 }
}

/* Place a new seq of generation g anywhere among the existing ones:
   equal to one of them, or below, between or above them. Sets out. */
inline any_seq(g, out) {
	count_seqs(g);
	p = 0;
	do
	:: p < 2 * c -> p++
	:: break
	od;
	if
	:: p % 2 == 1 -> out = p / 2
	:: else -> d_step { hg = g; hv = p / 2; c_code { shift_up_c(); }; hg = 0; hv = 0 }; out = p / 2
	fi;
	c = 0; p = 0
}

/* ---- token.Machine ---- */

inline drop(x) {
	held_g[x] = 0; held_s[x] = 0; phase[x] = NONE
}

/* take: hold t and hand its Visit to the worker (visitWorker), which
   starts it now if it is free (start_visit), or after the visit it runs. */
inline take(x, g, s) {
	held_g[x] = g; held_s[x] = s; phase[x] = VISITING; vstarted[x] = 0;
	if
	:: vs_g[x] == 0 -> start_visit(x)
	:: else -> skip
	fi
}

/* accept: record t as the newest seen and take it (a held token, passed
   on or superseded, is replaced). */
inline accept(x, g, s) {
	last_g[x] = g; last_s[x] = s;
	take(x, g, s)
}

/* raiseMinGen: tokens older than g are stale from now on. */
inline raise_min_gen(x, g) {
	if
	:: g > ming[x] ->
		ming[x] = g;
		if
		:: held_g[x] > 0 && held_g[x] < g -> drop(x)
		:: else -> skip
		fi;
		if
		:: chk_g[x] > 0 && chk_g[x] < g -> chk_g[x] = 0; chk_s[x] = 0
		:: else -> skip
		fi
	:: else -> skip
	fi
}

/* Confirm (SetMinGen before the design): the store named generation g. */
inline confirm(x, g) {
#ifndef OLD_BEHAVIOUR
	if
	:: g > known[x] -> known[x] = g
	:: else -> skip
	fi;
#endif
	raise_min_gen(x, g)
}

/* TOKEN_ACK back to the sender (an injected frame's ack goes back on the
   adversary's link: lost to the model). Its Stale flag is not modelled:
   Ack drops the token either way (stale: dropped; not: delivered). */
inline send_ack(x, g, s, honest) {
	if
	:: honest -> ack_g[PRED(x)] = g; ack_s[PRED(x)] = s
	:: else -> skip
	fi
}

/* ask: OpReadFence about the held-back token, unless one is out (the
   read's answer is the store's generation when it ran: now, or when it is
   handled). It remembers which token it asked about (m.asked; the model
   forgets it once answered: it is read only while a question is out). */
inline ask(x) {
	if
	:: !chkout[x] ->
		chkout[x] = 1; chkans[x] = fg; ask_g[x] = chk_g[x]; ask_s[x] = chk_s[x];
		printf("MSC: n%d asks the store about %d/%d (now at %d)\n", x, chk_g[x], chk_s[x], fg)
	:: else -> skip
	fi
}

/* hold: keep a token of an unconfirmed generation while the store is
   asked; of two, the lower generation (of one generation, the newer)
   stays. */
inline hold(x, g, s) {
	if
	:: chk_g[x] > 0 && (chk_g[x] < g || (chk_g[x] == g && !NEWER(g, s, chk_g[x], chk_s[x]))) ->
		printf("MSC: n%d discards %d/%d: it holds %d/%d back already\n", x, g, s, chk_g[x], chk_s[x])
	:: else ->
		printf("MSC: n%d holds %d/%d back\n", x, g, s);
		chk_g[x] = g; chk_s[x] = s
	fi;
	ask(x)
}

/* Receive (token.Machine.Receive). */
inline receive(x, g, s, honest) {
#ifdef OLD_BEHAVIOUR
	if
	:: g < ming[x] || !NEWER(g, s, last_g[x], last_s[x]) ->
		printf("MSC: n%d refuses %d/%d as stale\n", x, g, s);
		send_ack(x, g, s, honest)
	:: else ->
		printf("MSC: n%d takes %d/%d\n", x, g, s);
		send_ack(x, g, s, honest);
		accept(x, g, s)
	fi
#else
	if
	:: g < ming[x] || (g <= known[x] && !NEWER(g, s, last_g[x], last_s[x])) ->
		printf("MSC: n%d refuses %d/%d as stale\n", x, g, s);
		send_ack(x, g, s, honest)
	:: else ->
		send_ack(x, g, s, honest);
		if
		:: g > known[x] -> hold(x, g, s)
		:: else -> printf("MSC: n%d takes %d/%d\n", x, g, s); accept(x, g, s)
		fi
	fi
#endif
}

/* forward: pass the held token on with seq+1 (sent now, or blocked until
   the link takes a frame). The new seq equals the next existing one or
   falls strictly below it (see the header). */
inline forward(x) {
	/* c := the next seq of its generation above the held one (0: none) */
	d_step { hg = held_g[x]; hv = held_s[x]; c_code { next_seq_c(); }; c = hk; hk = 0; hg = 0; hv = 0 };
	if
	:: c == 0 -> held_s[x] = held_s[x] + 1       /* the newest seq of its generation */
	:: c > 0 -> held_s[x] = c                    /* equal to the next one */
	:: c > 0 ->                                  /* strictly below it */
		if
		:: c == held_s[x] + 1 -> d_step { hg = held_g[x]; hv = c; c_code { shift_up_c(); }; hg = 0; hv = 0 }
		:: else -> skip
		fi;
		held_s[x] = held_s[x] + 1
	fi;
	c = 0;
	assert(held_s[x] < SMAX);
	send_or_block(x)
}

inline send_or_block(x) {
	if
	:: tok_g[SUCC(x)] == 0 ->
		printf("MSC: n%d sends %d/%d\n", x, held_g[x], held_s[x]);
		tok_g[SUCC(x)] = held_g[x]; tok_s[SUCC(x)] = held_s[x]; phase[x] = SENDING
	:: else -> phase[x] = BLOCKED
	fi
}

/* visitWorker starts the held token's visit: two fenced sections, or
   none (a node without clients: IDLES of those, which end at once). */
inline start_visit(x) {
	vstarted[x] = 1;
	if
	:: vs_g[x] = held_g[x]; vs_s[x] = held_s[x]; vleft[x] = 2
	:: idles > 0 ->
		idles--;
		printf("MSC: n%d visits %d/%d without the store\n", x, held_g[x], held_s[x]);
		forward(x)                       /* VisitDone: the token goes on */
	fi
}

/* VisitDone: a visit of the held token ended: pass it on. */
inline visit_done(x, g, s) {
	if
	:: phase[x] == VISITING && held_g[x] == g && held_s[x] == s -> forward(x)
	:: else -> skip                      /* a superseded visit */
	fi
}

/* VisitFenced: the store refused the visit of (g,s); the fence read after
   the refusal is (cg, cs). */
inline visit_fenced(x, g, s, cg, cs) {
	if
	:: held_g[x] == g && held_s[x] == s ->
		printf("MSC: n%d: visit %d/%d fenced (store %d/%d), token dropped\n", x, g, s, cg, cs);
#ifdef OLD_BEHAVIOUR
		if
		:: g > cg ->
			drop(x);
			if
			:: !NEWER(cg, cs, last_g[x], last_s[x]) -> last_g[x] = cg; last_s[x] = cs
			:: else -> skip
			fi
		:: else ->
			if
			:: g == MAXG -> drop(x)
			:: else -> raise_min_gen(x, g + 1)
			fi
		fi
#else
		raise_min_gen(x, cg);
		if
		:: g > cg -> held_g[x] = 0; held_s[x] = 0; phase[x] = NONE
		:: else ->
			if
			:: g > known[x] -> drop(x)
			:: g <= known[x] && g == MAXG -> drop(x)
			:: else -> raise_min_gen(x, g + 1)
			fi
		fi
#endif
	:: else -> skip
	fi
}

/* Ack: TOKEN_ACK for the token passed on. */
inline got_ack(x) {
	if
	:: held_g[x] == ack_g[x] && held_s[x] == ack_s[x] && (phase[x] == SENDING || phase[x] == BLOCKED) ->
		printf("MSC: n%d: ack %d/%d\n", x, ack_g[x], ack_s[x]);
		drop(x)                          /* acknowledged, or stale: either way it is gone */
	:: else -> skip
	fi;
	ack_g[x] = 0; ack_s[x] = 0
}

/* Checked: the fence read answered generation a. A token that came after
   the question (not the one asked about) and of a generation above the
   answer is not judged: it is asked about again (the rate limit is a
   delay, free here). */
inline checked(x, a) {
	chkout[x] = 0;
	confirm(x, a);
	if
	:: chk_g[x] > 0 && (chk_g[x] != ask_g[x] || chk_s[x] != ask_s[x]) && chk_g[x] > known[x] ->
		printf("MSC: n%d: store at %d, asks again: %d/%d came after the question\n", x, a, chk_g[x], chk_s[x]);
		ask(x)
	:: else -> ask_g[x] = 0; ask_s[x] = 0
	fi;
	if
	:: chk_g[x] > 0 && !chkout[x] ->
		g = chk_g[x]; s = chk_s[x]; chk_g[x] = 0; chk_s[x] = 0;
		if
		:: g > known[x] -> printf("MSC: n%d: store at %d, drops %d/%d as forged\n", x, a, g, s)
		:: g <= known[x] && (g < ming[x] || !NEWER(g, s, last_g[x], last_s[x])) -> skip
		:: else -> printf("MSC: n%d: store at %d, takes %d/%d\n", x, a, g, s); accept(x, g, s)
		fi;
		g = 0; s = 0
	:: else -> skip
	fi
}

/* CheckFailed: the store could not be read: the held-back token goes on
   as it came, neither recorded nor visited. */
inline check_failed(x) {
	chkout[x] = 0; ask_g[x] = 0; ask_s[x] = 0;
	if
	:: chk_g[x] > 0 && held_g[x] == 0 ->
		printf("MSC: n%d: store read failed, passes %d/%d on\n", x, chk_g[x], chk_s[x]);
		held_g[x] = chk_g[x]; held_s[x] = chk_s[x];
		send_or_block(x)
	:: else -> skip
	fi;
	chk_g[x] = 0; chk_s[x] = 0
}

/* Generated: the coordinator's new generation, just issued by the store. */
inline generated(x) {
	g = rg_g[x]; s = rg_s[x]; rg_g[x] = 0; rg_s[x] = 0; regp[x] = 0;
#ifdef OLD_BEHAVIOUR
	raise_min_gen(x, g);
	if
	:: NEWER(g, s, last_g[x], last_s[x]) -> printf("MSC: n%d takes its new %d/%d\n", x, g, s); accept(x, g, s)
	:: else -> printf("MSC: n%d ignores its new %d/%d (has seen %d/%d)\n", x, g, s, last_g[x], last_s[x])
	fi;
#else
	/* Design (c): it wins over anything this node saw. */
	if
	:: g < ming[x] -> skip               /* a newer generation is known: late */
	:: else ->
		if
		:: chk_g[x] > 0 && chk_g[x] <= g -> chk_g[x] = 0; chk_s[x] = 0
		:: else -> skip
		fi;
		confirm(x, g);
		printf("MSC: n%d takes its new %d/%d\n", x, g, s);
		accept(x, g, s)
	fi;
#endif
	g = 0; s = 0
}

/* A fenced section (store.Fenced): the UPDATE's WHERE clause. The stamp
   is taken if it is of the row's generation and newer than its seq (or
   the same stamp and holder: the sections of one visit), or the store has
   issued nothing yet and the generation is below maxUnissuedGen. */
#define FENCE_OK(g, s, x) \
	((g == fg && (s > fs || (s == fs && fh == x))) || (fg == 0 && g >= 1 && g < MAXG))

/* The "no token anywhere" condition: the coordinator's loss bound passed.
   (Regenerating earlier is the PREMATURE fault.) */
#define NO_TOKEN \
	(phase[0] == NONE && chk_g[0] == 0 && tok_g[0] == 0 && fz_g[0] == 0 && regp[0] != 2 && \
	 phase[1] == NONE && chk_g[1] == 0 && tok_g[1] == 0 && fz_g[1] == 0 && regp[1] != 2 && \
	 phase[2] == NONE && chk_g[2] == 0 && tok_g[2] == 0 && fz_g[2] == 0 && regp[2] != 2 MORE_NO_TOKEN)
#if N == 4
#define MORE_NO_TOKEN && phase[3] == NONE && chk_g[3] == 0 && tok_g[3] == 0 && fz_g[3] == 0 && regp[3] != 2
#else
#define MORE_NO_TOKEN
#endif

#ifdef DEEP
#define DEEP_CHECKS || 1
#else
#define DEEP_CHECKS
#endif

/* The model's generations end at GMAX: a coordinator that would need
   more (break 1, once the regeneration bound's assertion is ignored with
   pan -A) stops, and the liveness check reports the ring stopped. */
#define GEN_LEFT && fg < GMAX

proctype Node(byte i) {
	byte g, s, c, p;
end:
	do
	/* Step(TOKEN) on the predecessor's link -> token.Machine.Receive; the
	   ack is sent before anything else. */
	:: atomic {
		tok_g[i] > 0 && ack_g[PRED(i)] == 0 ->
		g = tok_g[i]; s = tok_s[i]; tok_g[i] = 0; tok_s[i] = 0;
		receive(i, g, s, 1);
		g = 0; s = 0;
		normalize()
	}
	/* A forged TOKEN. Design (b) (ring/step.go checkPred, settleToken):
	   taken only on the link of the predecessor the store's ring names;
	   one in another node's name is refused with UNLINK. */
	:: atomic {
		fz_g[i] > 0 ->
		g = fz_g[i]; s = fz_s[i]; fz_g[i] = 0; fz_s[i] = 0;
#ifdef OLD_BEHAVIOUR
		receive(i, g, s, 0);
#else
		if
		:: fz_from[i] == 0 -> receive(i, g, s, 0)
		:: else -> skip
		fi;
#endif
		fz_from[i] = 0; g = 0; s = 0;
		normalize()
	}
	/* OpCheckMember, every 10 s and when a TOKEN comes on another
	   node's link (ring/machine.go checkDone): Confirm the store's
	   generation. Enabled when it changes something; a run has CHECKS
	   of them (unbounded with -DDEEP). */
	:: atomic {
		(known[i] < fg || ming[i] < fg) && (checks > 0 DEEP_CHECKS) ->
		if
		:: checks > 0 -> checks--
		:: else -> skip
		fi;
		printf("MSC: n%d: member check, store at %d\n", i, fg);
		confirm(i, fg);
		normalize()
	}
	/* Step(TOKEN_ACK) -> token.Machine.Ack */
	:: atomic { ack_g[i] > 0 -> got_ack(i); normalize() }
#ifndef OLD_BEHAVIOUR
	/* StoreDone(OpReadFence): Checked, or CheckFailed when the read
	   failed. The read ran when it was asked or just now. */
	:: atomic {
		chkout[i] ->
		if
		:: checked(i, chkans[i])
		:: chkans[i] != fg -> checked(i, fg)
		:: readfails > 0 -> readfails--; FAULT; check_failed(i)
		fi;
		if
		:: !chkout[i] -> chkans[i] = 0
		:: else -> skip                  /* asked again: the new read's answer */
		fi;
		normalize()
	}
#endif
	/* visitWorker: the worker is free and a Visit waits. */
	:: atomic {
		phase[i] == VISITING && !vstarted[i] && vs_g[i] == 0 ->
		start_visit(i);
		normalize()
	}
	/* runSections: one fenced section (store.Fenced). Refused: the fence
	   is read (readFence) and VisitFenced reported. */
	:: atomic {
		vleft[i] > 0 ->
		if
		:: FENCE_OK(vs_g[i], vs_s[i], i) ->
			/* Safety: the fence never goes backwards, and no critical
			   section runs under a generation the store did not issue. */
			assert(vs_g[i] > fg || (vs_g[i] == fg && vs_s[i] >= fs));
			assert(fg > 0);             /* never the clause for a store that issued nothing */
			/* Safety: the committed sections of two visits never
			   interleave (no two critical sections overlap). */
			c = 0;
			do
			:: c < N ->
				if
				:: c != i && vleft[c] == 1 -> closed[c] = 1   /* c's visit has committed one section of two */
				:: else -> skip
				fi;
				c++
			:: else -> break
			od;
			c = 0;
			assert(!closed[i]);
			printf("MSC: n%d commits a section with %d/%d\n", i, vs_g[i], vs_s[i]);
			fg = vs_g[i]; fs = vs_s[i]; fh = i;
			vleft[i]--;
			if
			:: vleft[i] == 0 ->
				g = vs_g[i]; s = vs_s[i];
				vs_g[i] = 0; vs_s[i] = 0; closed[i] = 0;
				visit_done(i, g, s);
				g = 0; s = 0
			:: else -> skip
			fi
		:: else ->
			g = vs_g[i]; s = vs_s[i];
			vs_g[i] = 0; vs_s[i] = 0; vleft[i] = 0; closed[i] = 0;
			visit_fenced(i, g, s, fg, fs);
			g = 0; s = 0
		fi;
		normalize()
	}
	/* LinkUp: a blocked token is sent when the link takes a frame. */
	:: atomic { phase[i] == BLOCKED && tok_g[SUCC(i)] == 0 -> send_or_block(i); normalize() }
	/* Tick: no TOKEN_ACK in time. Timing is abstracted: this fires only
	   once the frame or its ack is really gone; the successor is then
	   repaired (here: the same node, restarted or reached again) and the
	   token sent again. */
	:: atomic {
		phase[i] == SENDING && tok_g[SUCC(i)] == 0 && ack_g[i] == 0 ->
		printf("MSC: n%d: no ack, sends again\n", i);
		phase[i] = BLOCKED
	}
	/* Tick at the coordinator: the loss bound passed without the token
	   (abstracted as: no token anywhere), or a premature regeneration. */
	/* It asks the store (OpRegenerate: store.NewGeneration, refused to a
	   deposed coordinator, which then steps down). */
	:: atomic {
		iscoord[i] && regp[i] == 0 && held_g[i] == 0 && (NO_TOKEN || premature > 0) GEN_LEFT ->
		if
		:: NO_TOKEN -> printf("MSC: n%d: token lost, regenerates\n", i)
		:: !NO_TOKEN && premature > 0 -> premature--; FAULT; printf("MSC: n%d regenerates early (fault)\n", i)
		fi;
		if
		:: scoord == i ->
			/* Regenerations are bounded: one to start, at most
			   REGEN_PER_FAULT per fault. Break 1 makes the coordinator
			   regenerate without end. */
			assert(credit > 0);
			credit--;
			g = fg + 1; fg = 0; fs = 0;  /* (atomic: nobody sees the row between) */
			any_seq(g, s);              /* seq 0: its place among forged seqs of that generation */
			fg = g; fs = s; fh = i; g = 0; s = 0;
			printf("MSC: store issues generation %d to n%d\n", fg, i);
			rg_g[i] = fg; rg_s[i] = fs; regp[i] = 2
		:: else ->
			printf("MSC: store refuses a generation to deposed n%d\n", i);
			iscoord[i] = 0; regp[i] = 0
		fi;
		normalize()
	}
	/* StoreDone(OpRegenerate) -> token.Machine.Generated */
	:: atomic { regp[i] == 2 -> generated(i); normalize() }
	od
}

#define LOSABLE(x) (tok_g[x] > 0 || ack_g[x] > 0)
#if N == 4
#define MORE_LOSABLE || LOSABLE(3)
#define MORE_FZ || fz_g[3] == 0
#else
#define MORE_LOSABLE
#define MORE_FZ
#endif

/* The environment: the adversary and the faults. */
active proctype Env() {
	byte j, g, s, c, p;
end:
	do
	/* A TOKEN forged by a key holder, to any node, in its predecessor's
	   name or another's, at the store's generation, the one before, the
	   one after, or the largest, with any seq. */
	:: atomic {
		forges > 0 && (fz_g[0] == 0 || fz_g[1] == 0 || fz_g[2] == 0 MORE_FZ) ->
		forges--; FAULT;
		if :: fz_g[0] == 0 -> j = 0 :: fz_g[1] == 0 -> j = 1 :: fz_g[2] == 0 -> j = 2
#if N == 4
		   :: fz_g[3] == 0 -> j = 3
#endif
		fi;
		if
		:: fg > 0 -> g = fg
		:: g = fg + 1
		:: g = MAXG
		:: fz_from[j] = 1; g = MAXG      /* in another node's name (refused before its stamp is read) */
		fi;
		if
		:: fz_from[j] == 0 -> any_seq(g, s)
		:: else -> skip
		fi;
		fz_g[j] = g; fz_s[j] = s;
		printf("MSC: adversary: TOKEN %d/%d to n%d (other name: %d)\n", g, s, j, fz_from[j]);
		j = 0; g = 0; s = 0;
		normalize()
	}
	/* A TOKEN or a TOKEN_ACK lost. */
	:: atomic {
		losses > 0 && (LOSABLE(0) || LOSABLE(1) || LOSABLE(2) MORE_LOSABLE) ->
		losses--; FAULT;
		if :: LOSABLE(0) -> j = 0 :: LOSABLE(1) -> j = 1 :: LOSABLE(2) -> j = 2
#if N == 4
		   :: LOSABLE(3) -> j = 3
#endif
		fi;
		if
		:: tok_g[j] > 0 -> printf("MSC: TOKEN %d/%d to n%d lost\n", tok_g[j], tok_s[j], j); tok_g[j] = 0; tok_s[j] = 0
		:: ack_g[j] > 0 -> printf("MSC: TOKEN_ACK to n%d lost\n", j); ack_g[j] = 0; ack_s[j] = 0
		fi;
		j = 0;
		normalize()
	}
	/* A node crashes and comes back with a fresh machine: its token, the
	   held-back one, its visit and its newest stamp are gone. A
	   coordinator that comes back claims again and reads the fence
	   (claimDone: SetMinGen / Confirm of the store's generation). */
	:: atomic {
		crashes > 0 ->
		crashes--; FAULT;
		if :: j = 0 :: j = 1 :: j = 2
#if N == 4
		   :: j = 3
#endif
		fi;
		printf("MSC: n%d crashes and restarts\n", j);
		held_g[j] = 0; held_s[j] = 0; phase[j] = NONE;
		chk_g[j] = 0; chk_s[j] = 0; chkout[j] = 0; chkans[j] = 0; ask_g[j] = 0; ask_s[j] = 0;
		vs_g[j] = 0; vs_s[j] = 0; vleft[j] = 0; vstarted[j] = 0; closed[j] = 0;
		last_g[j] = 0; last_s[j] = 0; known[j] = 0; ming[j] = 0;
		regp[j] = 0; rg_g[j] = 0; rg_s[j] = 0;
		if
		:: scoord == j -> iscoord[j] = 1; confirm(j, fg)
		:: else -> iscoord[j] = 0
		fi;
		j = 0;
		normalize()
	}
	/* Another node claims the coordinator role (an election, or a node
	   that found the coordinator unresponsive); the old one acts on until
	   the store refuses it. */
	:: atomic {
		takeovers > 0 ->
		takeovers--; FAULT;
		if :: scoord != 0 -> j = 0 :: scoord != 1 -> j = 1 :: scoord != 2 -> j = 2
#if N == 4
		   :: scoord != 3 -> j = 3
#endif
		fi;
		printf("MSC: n%d claims the coordinator role\n", j);
		scoord = j; iscoord[j] = 1; confirm(j, fg);
		j = 0;
		normalize()
	}
	od   /* (it may stay silent from any point on: the liveness check runs without fairness) */
}

/* budget(forged TOKENs, lost frames, crashes, early regenerations,
   takeovers, failed store reads, visits without the store) */
#define budget(f, l, c, p, t, r, i) \
	forges = f; losses = l; crashes = c; premature = p; takeovers = t; readfails = r; idles = i

init {
	atomic {
		if
#if !defined(ONLY) || ONLY == 1
		:: budget(1, 0, 0, 0, 0, 1, 1)   /* a forged token, a failed store read */
#endif
#if !defined(ONLY) || ONLY == 2
		:: budget(1, 0, 1, 0, 0, 0, 1)   /* a forged token, a crash */
#endif
#if !defined(ONLY) || ONLY == 3
		:: budget(1, 0, 0, 0, 1, 0, 0)   /* a forged token, a takeover */
#endif
#if !defined(ONLY) || ONLY == 4
		:: budget(0, 1, 1, 1, 0, 0, 1)   /* a lost frame, a crash, an early regeneration */
#endif
#ifdef DEEP
#if !defined(ONLY) || ONLY == 5
		:: budget(2, 0, 0, 0, 0, 0, 1)   /* two forged tokens */
#endif
#if !defined(ONLY) || ONLY == 6
		:: budget(1, 0, 0, 1, 0, 0, 1)   /* a forged token, an early regeneration */
#endif
#if !defined(ONLY) || ONLY == 7
		:: budget(0, 1, 1, 1, 1, 0, 1)   /* every fault but forgery */
#endif
#endif
		fi;
		scoord = 0; iscoord[0] = 1;
		run Node(0); run Node(1); run Node(2)
#if N == 4
		; run Node(3)
#endif
	}
}

/* Liveness: every node runs a committed critical section again and again
   (fh is the fence's holder: the node of the last committed section; the
   coordinator's finitely many NewGeneration calls set it too). */
#if N == 4
ltl live { [](<>(fh == 0)) && [](<>(fh == 1)) && [](<>(fh == 2)) && [](<>(fh == 3)) }
#else
ltl live { [](<>(fh == 0)) && [](<>(fh == 1)) && [](<>(fh == 2)) }
#endif
