// Command mutate checks that every fence and condition expression in dedup/ and outbox/ is
// guarded by a test that fails without it. For each mutation below it edits one file (removes
// or weakens the condition), runs the tests named for it, records whether they failed, and puts
// the file back. It prints the table docs/design.md keeps. A kill counts only when a test that
// passed on the unmutated tree fails under the mutation, and fails again when re-run: on a
// loaded machine a test can fail for its load alone.
//
//	go run ./internal/mutate          (the emulator up: make up; AWS_ENDPOINT_URL set as make test sets it)
//	go run ./internal/mutate -only 'sweeper lock'   (the mutations whose guard contains the text)
//
// A mutation that no test kills exits 1.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"time"
)

type mutation struct {
	guard    string // what the condition is for
	file     string
	from, to string // the edit: from must occur exactly once
	pkg, run string // the tests that must fail
}

var mutations = []mutation{
	{"claim: a live claim refuses a second claim", "dedup/request.go",
		`const claimCondition = "attribute_not_exists(pk) OR expires_at < :now"`, `const claimCondition = "attribute_not_exists(pk) OR expires_at < :now OR :now = :now"`,
		"./dedup", "TestCommitAcceptsTheFirstDeliveryAndRefusesTheRetry|TestConcurrentDoubles"},
	{"claim: it lives a retention from its event's time when that is ahead of its receipt", "dedup/request.go",
		`if ev.OccurredAt.After(now) {`, `if false {`,
		"./dedup", "TestAClaimLivesARetentionFromItsEventsTimeWhenThatIsAhead"},
	{"effects: a value DynamoDB would refuse (with the claim) is refused first, named", "dedup/request.go",
		`return nil, nil, nil, 0, &InvalidError{Field: what() + "." + k, Reason: why}`, `_ = why`,
		"./dedup", "TestEveryLimitIsRefusedBeforeAnyCall"},
	{"claim: an expired claim is admitted again", "dedup/request.go",
		`const claimCondition = "attribute_not_exists(pk) OR expires_at < :now"`, `const claimCondition = "attribute_not_exists(pk)"`,
		"./dedup", "TestExpiredClaimsAreReadmittedAndLiveOnesAreNot"},
	{"body guard: a body claimed under another id refuses the claim", "dedup/request.go",
		`req.guard = bodyGuard(s.tablePtr, ev, pk, guarded, t.expiresAt, req.nowVals)`, `req.guard = bodyGuard(s.tablePtr, ev, pk, guarded, t.expiresAt, req.nowVals); req.guard.ConditionExpression = aws.String("attribute_not_exists(pk) OR expires_at < :now OR :now = :now")`,
		"./dedup", "TestASignedBodyUnderAForgedIDRunsNothing"},
	{"body guard: it expires with its claim", "dedup/request.go",
		`req.guard = bodyGuard(s.tablePtr, ev, pk, guarded, t.expiresAt, req.nowVals)`, `req.guard = bodyGuard(s.tablePtr, ev, pk, guarded, t.expiresAt, req.nowVals); req.guard.ConditionExpression = aws.String("attribute_not_exists(pk) OR :now = :now AND :now < :now")`,
		"./dedup", "TestABodyGuardExpiresWithItsClaim"},
	{"effect IfAbsent: the business backstop", "dedup/request.go",
		`var absentCondition = aws.String("attribute_not_exists(pk)")`, `var absentCondition = aws.String("attribute_not_exists(pk) OR attribute_exists(pk)")`,
		"./dedup", "TestAnIfAbsentEffectOnAnExistingItemIsAbsorbed"},
	{"backfill: an existing claim is left alone", "dedup/store.go",
		`res, err := s.put(ctx, req)`, `in := req.putInput(s.tablePtr)
	in.ConditionExpression, in.ExpressionAttributeValues = nil, nil
	_, err = s.api.PutItem(ctx, in)
	res := Result{Outcome: OutcomeAccepted}`,
		"./dedup", "TestBackfilledEventsAreDuplicatesUntilTheirRetentionEnds"},
	{"limit: a slot is taken only while free or its holder's lease has ended", "outbox/limits.go",
		`ConditionExpression:       aws.String("attribute_not_exists(#until) OR #until < :now OR #holder = :me"),`, `ConditionExpression:       aws.String("attribute_not_exists(#until) OR #until < :now OR #holder = :me OR :now = :now"),`,
		"./outbox", "TestMaxInFlightHoldsAcrossWorkers"},
	{"limit: a rate window admits its quota and no more", "outbox/limits.go",
		`ConditionExpression:       aws.String("attribute_not_exists(#calls) OR #calls < :quota"),`, `ConditionExpression:       aws.String("attribute_not_exists(#calls) OR #calls < :quota OR :one = :one"),`,
		"./outbox", "TestRateHoldsAcrossWorkers"},
	{"limit: a call held back after its lease gives the lease back", "dedup/transitions.go",
		`c.conditional(l.Claim.PK, "SET intents.#n.#st = :pending, intents.#n.attempts_base`, `c.conditional(l.Claim.PK, "SET intents.#n.#st = intents.#n.#st, intents.#n.attempts_base`,
		"./outbox", "TestACallTheRateHoldsAfterItsLeaseIsGivenBack"},
	{"give back: a given-back lease keeps its attempt count (a fence is never reused)", "dedup/transitions.go",
		`c.conditional(l.Claim.PK, "SET intents.#n.#st = :pending, intents.#n.attempts_base`, `c.conditional(l.Claim.PK, "SET intents.#n.#st = :pending, intents.#n.attempts = intents.#n.attempts - :one, intents.#n.attempts_base`,
		"./dedup", "TestAGivenBackLeaseKeepsItsFence"},
	{"give back: a stranded lease is never given back", "dedup/transitions.go",
		`	if l.Stranded {
		return ErrStranded`, `	if false {
		return ErrStranded`,
		"./dedup", "TestAStrandedLeaseIsNeverGivenBack"},
	{"give back: a stranded lease makes no call and is parked at once", "outbox/turn.go",
		`if !l.noCall() && !slotEnds.IsZero() && l.ends.After(slotEnds) {`, `if !slotEnds.IsZero() && l.ends.After(slotEnds) {`,
		"./outbox", "TestAStrandedLeaseIsNeverGivenBack"},
	{"give back: a lease whose answer was lost is given back if it landed", "dedup/transitions.go",
		`if gerr := c.giveBackUntil(ctx, &Lease{Intent: intent, Claim: claim, owner: owner}, sent.Add(o.For)); gerr != nil {`, `if gerr := c.giveBackUntil(ctx, &Lease{Intent: intent, Claim: claim, owner: "not ours"}, sent.Add(o.For)); gerr != nil {`,
		"./dedup", "TestALeaseWhoseAnswerIsLostIsGivenBack"},
	{"give back: a lost lease's give-back is sent again through a short failure while the lease lasts", "dedup/transitions.go",
		`if err == nil || !errors.Is(classify("give back", err), ErrUnavailable) || !time.Now().Add(wait).Before(until) {`, `if true {`,
		"./dedup", "TestALostLeasesGiveBackIsSentAgainThroughAShortDynamoDBFailure"},
	{"give back: a lease whose call was not made is given back through a short failure while it lasts", "outbox/turn.go",
		`return w.record(ctx, l, func() error { return w.claims.GiveBack(context.WithoutCancel(ctx), l.Lease) })`, `return w.claims.GiveBack(context.WithoutCancel(ctx), l.Lease)`,
		"./outbox", "TestALeaseWhoseCallWasNotMadeIsGivenBackThroughAShortDynamoDBFailure"},
	{"give back: only the lease's own, by its owner", "dedup/transitions.go",
		`"commit_token = :commit AND intents.#n.#st = :running AND intents.#n.lease_owner = :owner",`, `"commit_token = :commit AND intents.#n.#st = :running AND :owner = :owner",`,
		"./dedup", "TestALeaseWhoseAnswerIsLostIsGivenBack"},
	{"budget: a lease past the budget (attempts that recorded nothing) parks without a call", "outbox/turn.go",
		`over := !dl.Stranded && dl.Claim.Intents[name].Spent() > w.cfg.MaxAttempts`, `over := false && dl.Claim.Intents[name].Spent() > w.cfg.MaxAttempts`,
		"./outbox", "TestAnIntentWhoseWorkersStopMidCallIsParkedWhenItsBudgetIsSpent"},
	{"record: a write that failed for a reason that passes is sent again while the lease lasts", "outbox/turn.go",
		`if err == nil || !time.Now().Add(wait).Before(endBy(ctx, l.ends.Add(w.cfg.Margin), 0)) || !transient(err) {`, `if true {`,
		"./outbox", "TestAKnownOutcomeIsRecordedThroughAShortDynamoDBFailure"},
	{"record: the margin kept back from the call is the record's", "outbox/turn.go",
		`endBy(ctx, l.ends.Add(w.cfg.Margin), 0)`, `endBy(ctx, l.ends, 0)`,
		"./outbox", "TestAKnownOutcomeIsRecordedThroughAShortDynamoDBFailure"},
	{"retry: never due at or after its claim's expiry (parked instead)", "outbox/turn.go",
		`if expires := time.Unix(l.Claim.ExpiresAt, 0); !next.Before(expires) {`, `if expires := time.Unix(l.Claim.ExpiresAt, 0); next.Before(expires) && false {`,
		"./outbox", "TestAFailureWhoseRetryWouldOutliveItsClaimIsParked"},
	{"retry: its backoff counts the attempts spent since the budget was renewed", "outbox/turn.go",
		`next = w.cfg.Now().Add(w.cfg.Backoff(l.Claim.Intents[l.Intent].Spent()))`, `next = w.cfg.Now().Add(w.cfg.Backoff(l.Attempt))`,
		"./outbox", "TestABackoffCountsTheAttemptsSpentSinceTheBudgetWasRenewed"},
	{"limit: an AWS call cut off before any answer keeps its slot", "outbox/turn.go",
		`if code := answerStatus(err); code != 0 {`, `if code := answerStatus(err); true {`,
		"./outbox/targets", "TestATimedOutStandardStartKeepsItsMaxInFlightSlot"},
	{"limit: a gateway's timeout keeps the slot of a call its backend may still run", "outbox/turn.go",
		`		return intermediaryGaveUp(code)`, `		return false`,
		"./outbox", "TestAGatewaysTimeoutKeepsTheSlotOfACallItsBackendStillRuns"},
	{"limit: a call that may still be running keeps its slot", "outbox/turn.go",
		`keepSlot = mayStillRun(execErr)`, `keepSlot = mayStillRun(execErr) && false`,
		"./outbox", "TestMaxInFlightHoldsWhenCallsOutlastTheirTimeout|TestRandomizedSchedulesKeepBothPromises$"},
	{"limit: a slot is held for the lease from when it is taken", "outbox/limits.go",
		`holdUntil := l.now().Add(hold)`, `holdUntil := l.now().Add(hold + maxHold)`,
		"./outbox", "TestAStoppedWorkersSlotIsFreeOnceItsLeaseHasEnded"},
	{"limit: a forfeited rate turn is asked again only while the deadline allows", "outbox/limits.go",
		`			if time.Now().After(deadline) {
				return &heldError{target: target, wait: window,`, `			if false && time.Now().After(deadline) {
				return &heldError{target: target, wait: window,`,
		"./outbox", "TestACallWhoseRateTurnComesTooLateIsHandedBackNotCutShort"},
	{"trace: a failed call is described by its URL's scheme and host", "outbox/trace.go",
		`part, desc = te, "POST "+shownURL(te.URL)+": "+Unanswered(te.Err)`, `part, desc = te, "POST "+te.URL+": "+Unanswered(te.Err)`,
		"./outbox", "TestNoFormOfWebhookURLOrAnswerPutsItsSecretInASpan|TestAFailedCallToAnyFormOfWebhookURLNeverRecordsItsPathOrPassword"},
	{"trace: an answer is described by its code, never the downstream's reason phrase", "outbox/trace.go",
		`		if text := http.StatusText(se.StatusCode); text != "" {`, `		if text := se.Status; text != "" {`,
		"./outbox", "TestNoFormOfWebhookURLOrAnswerPutsItsSecretInASpan|TestADownstreamsStatusLineNeverPutsTheURLsPathInASpan"},
	{"trace: a call without a readable answer is described by the kind of failure, never net/http's quote of it", "outbox/trace.go",
		`	return "an answer that is not HTTP, or an HTTP failure (its text is not shown: it may quote the answer)"`, `	return err.Error()`,
		"./outbox", "TestAMalformedAnswerNeverPutsTheDownstreamsWordsInASpan|TestNoFormOfWebhookURLOrAnswerPutsItsSecretInASpan"},
	{"trace: a function's error answer never reaches a span", "outbox/targets/executors.go",
		`	return fmt.Sprintf("Lambda Invoke %s: function error %s", e.function, e.kind)`, `	return e.Error()`,
		"./outbox/targets", "TestAFunctionsErrorAnswerNeverReachesASpan"},
	{"lease: only the claim incarnation the record came from", "dedup/transitions.go",
		`cond := "commit_token = :commit AND (" + pending`, `cond := ":commit = :commit AND (" + pending`,
		"./outbox", "TestAStaleRecordOfAnEarlierIncarnationRunsNothing"},
	{"lease: a pending intent not before its backoff", "dedup/transitions.go",
		`(attribute_not_exists(intents.#n.next_attempt_at) OR intents.#n.next_attempt_at <= :now)`, `(attribute_not_exists(intents.#n.next_attempt_at) OR :now = :now)`,
		"./outbox", "TestAReplayedRecordDoesNotRunARetryBeforeItsBackoff"},
	{"lease: a running intent only once its lease expired", "dedup/transitions.go",
		`(intents.#n.#st = :running AND intents.#n.lease_until < :now)`, `(intents.#n.#st = :running)`,
		"./outbox", "TestACrashAfterTheDownstreamCallIsAbsorbedByTheIdempotencyKey|TestTwoWorkersRacing"},
	{"lease: an at-most-once intent only while pending", "dedup/transitions.go",
		`cond = "commit_token = :commit AND " + pending`, `cond = cond + ""`,
		"./outbox", "TestAnAtMostOnceIntentWhoseWorkerStoppedMidCallIsParkedNotSentAgain|TestRandomizedSchedulesKeepBothPromises$"},
	{"batch: one id twice in a batch is one event", "dedup/batch.go",
		`if _, seen := first[key]; !seen {`, `if true {`,
		"./dedup", "TestOneIDTwiceInABatchIsOneEvent"},
	{"fence: the attempt leased", "dedup/transitions.go",
		`intents.#n.#st = :running AND intents.#n.attempts = :attempt"`, `intents.#n.#st = :running AND :attempt = :attempt"`,
		"./outbox", "TestAWorkerWhoseLeaseExpiredMidCallChangesNothing"},
	{"fence: the claim incarnation leased", "dedup/transitions.go",
		`const fence = "commit_token = :commit AND`, `const fence = ":commit = :commit AND`,
		"./outbox", "TestAnOlderIncarnationsWorkerCannotFinishTheNewOne"},
	{"finish: the worker recognises its own finish after a lost answer", "dedup/transitions.go",
		`return in.Status == status && l.ours(h) && (status != IntentParked || in.LastError == Truncate(why))`, `return in.Status == status && false`,
		"./outbox", "TestALostFinishAnswerStillTakesTheClaimOutOfTheIndex"},
	{"finish: a park writes its own reason, even none", "dedup/transitions.go",
		`if why != "" || status == IntentParked {`, `if why != "" {`,
		"./dedup", "TestAParkWithoutAReasonKeepsNoEarlierOneAndRecognisesItsOwnWrite"},
	{"truncate: the text as stored", "dedup/transitions.go",
		`		s = string([]rune(s)) // each invalid byte`, `		// each invalid byte`,
		"./dedup", "TestEveryTransitionRecognisesItsOwnWriteAfterALostAnswer"},
	{"retry: the worker recognises its own retry after a lost answer", "dedup/transitions.go",
		`return in.Attempts >= l.Attempt && in.NextAttemptAt == next.UnixMilli() && in.LastError == Truncate(why) && h.CommitToken == l.Claim.CommitToken`, `return in.Attempts < 0`,
		"./outbox", "TestALostRetryAnswerIsTheWorkersOwn"},
	{"finish: the last intent takes the claim out of the due index", "dedup/transitions.go",
		`moves := placed && (p.shard != from || IsParkedShard(from));`, `moves := placed && (p.shard != from || IsParkedShard(from)) && false;`,
		"./outbox", "TestStreamRecordsAndClaimWritesPerEvent"},
	{"finish: the claim moves in the index only if the other intents still make its place right", "dedup/transitions.go",
		`		cond += p.use(names)
		set, remove = c.place(`, `		p.conds = nil; cond += p.use(names)
		set, remove = c.place(`,
		"./dedup", "TestAFinishFromAStaleReadNeverHidesAReDrivenIntent"},
	{"settle: a claim with nothing open leaves the due index", "dedup/transitions.go",
		`	if p.shard == claim.PendingShard {`, `	if true {`,
		"./outbox", "TestAFinishedClaimLeftInTheIndexLeavesItWhoeverNoticesIt"},
	{"settle: only as long as the other intents still make its place right", "dedup/transitions.go",
		`	cond := "commit_token = :commit" + p.use(names)`, `	p.conds = nil; cond := "commit_token = :commit" + p.use(names)`,
		"./outbox", "TestASettleNeverHidesAReDrivenIntent"},
	{"redrive: only a parked intent", "dedup/transitions.go",
		`cond := "intents.#n.#st = :parked AND intents.#n.attempts = :attempts"`, `cond := "intents.#n.attempts = :attempts AND :parked = :parked"`,
		"./dedup", "TestAnOperatorsActionIsConditionalOnTheStateShown"},
	{"redrive: only at the attempt the operator was shown", "dedup/transitions.go",
		`cond := "intents.#n.#st = :parked AND intents.#n.attempts = :attempts"`, `cond := "intents.#n.#st = :parked AND :attempts = :attempts"`,
		"./dedup", "TestAnOperatorsActionIsConditionalOnTheStateShown"},
	{"redrive: only the claim incarnation the operator was shown", "dedup/transitions.go",
		`cond += " AND " + attrCommitToken + " = :commit"`, `cond += " AND :commit = :commit"`,
		"./dedup", "TestAnOperatorsActionIsConditionalOnTheStateShown"},
	{"redrive: its own write after a lost answer, by its nonce", "dedup/transitions.go",
		`return h.Intents[intent].RedriveID == nonce`, `return h.Intents[intent].Status == IntentPending`,
		"./outbox", "TestARedriveTellsItsOwnLostWriteFromAnothersInTheSameMillisecond"},
	{"history: a write that rewrites it keeps a late attempt's entry written since it was read", "dedup/transitions.go",
		`	return "intents.#n.history = :seen_history"`, `	return "attribute_exists(intents.#n.history) OR attribute_not_exists(intents.#n.history) OR :seen_history = :seen_history"`,
		"./dedup", "TestALateAttemptsEntryIsAddedOnceAndKeptByAnOperatorsAction"},
	{"late: an attempt whose lease was taken over is in the history", "dedup/transitions.go",
		`	a.Late = true`, `	return`,
		"./dedup", "TestAnAttemptWhoseLeaseWasTakenOverIsInTheHistory"},
	{"resume: only the pause the operator was shown", "outbox/limits.go",
		`return "#t.#id = :id", map`, `return "attribute_exists(#t) OR :id = :id", map`,
		"./outbox", "TestAResumeOfAPauseShownLiftsThatPauseOnly"},
	{"pause: a pause made while a limit holds an intent is seen before its lease", "outbox/turn.go",
		`// it (pauseRead), so that no call is leased more than about a second after Pause returned.
	if paused, err := w.limits.paused(ctx, target); paused || err != nil {`, `// it (pauseRead), so that no call is leased more than about a second after Pause returned.
	if paused, err := false, error(nil); paused || err != nil {`,
		"./outbox", "TestAPauseMadeWhileALimitHoldsAnIntentIsSeenBeforeItsLease"},
	{"pause: a pause confirmed for a target not paused replaces no pause made since", "outbox/limits.go",
		`return "attribute_not_exists(#t)", nil, nil`, `return "attribute_not_exists(#t) OR attribute_exists(#t)", nil, nil`,
		"./outbox", "TestAPauseOfTheStateShownReplacesNoPauseMadeSince"},
	{"sweeper lock: one run at a time", "outbox/limits.go",
		`ConditionExpression:       aws.String("attribute_not_exists(#until) OR #until < :now OR #holder = :me"),`, `ConditionExpression:       aws.String("attribute_not_exists(#until) OR :now = :now OR #holder = :me"),`,
		"./outbox", "TestTwoSweepsNeverRunAtOnce"},
	{"held item: a take whose answer was lost is its taker's on the retry", "outbox/limits.go",
		`ConditionExpression:       aws.String("attribute_not_exists(#until) OR #until < :now OR #holder = :me"),`, `ConditionExpression:       aws.String("attribute_not_exists(#until) OR #until < :now"),`,
		"./outbox", "TestASlotWhoseTakeLostItsAnswerIsTheWorkersOwnOnTheRetry"},
	{"claim read: only a source an event can have (no '#' to shift the key)", "dedup/read.go",
		`if err := ValidateSourceName("source", source); err != nil {`, `if err := ValidateSourceName("source", "shop"); err != nil {`,
		"./dedup", "TestGetClaimRefusesASourceOrIdNoEventCanHave"},
	{"sweeper lock: it lasts the run's deadline (the path Lambda takes)", "outbox/sweeper.go",
		`		until = now.Add(time.Until(d))`, `		until = now.Add(0 * time.Until(d))`,
		"./outbox", "TestTwoSweepsNeverRunAtOnce"},
	{"batch: a chunk within 4 MB, application tables' puts counted", "dedup/batch.go",
		`bytes+reqs[i].bytes > MaxTransactionBytes`, `bytes+reqs[i].bytes > 4*MaxTransactionBytes`,
		"./dedup", "TestABatchChunkStaysWithinEveryTransactionLimit"},
	{"batch: a body guard counted in its event's actions", "dedup/batch.go",
		`	if r.guard != nil {
		n++
	}`, `	if r.guard != nil {
		n += 0
	}`,
		"./dedup", "TestABatchChunkStaysWithinEveryTransactionLimit"},
	{"batch: conflicts retried ConflictRetries times, then unavailable", "dedup/commit.go",
		`if attempt > s.cfg.ConflictRetries {`, `if attempt > s.cfg.ConflictRetries+1 {`,
		"./dedup", "TestABatchUnderTransactionConflictRetriesAndThenGivesUp"},
	{"batch: one item however its key or table is written", "dedup/request.go",
		`		return "N" + canonicalNumber(v.Value)`, `		return "N" + v.Value`,
		"./dedup", "TestOneItemIsOneItemHoweverItsKeyIsWritten"},
	{"config: the claims table refused as an application table by ARN", "dedup/store.go",
		`	if strings.HasPrefix(s, "arn:") {`, `	if strings.HasPrefix(s, "no arn:") {`,
		"./dedup", "TestTheClaimsTableIsRefusedAsAnApplicationTableUnderEveryName"},
	{"claim: room for the worker's longest bookkeeping (a done's sent next to a last error)", "dedup/claim.go",
		`const IntentBookkeepingBytes = 3658`, `const IntentBookkeepingBytes = 1408`,
		"./outbox", "TestTheLargestClaimCommitAcceptsHasRoomForEveryBookkeepingWrite"},
	{"classify: a service's own throttling error is not sent (retried, at most once too)", "outbox/targets/targets.go",
		`if throttled || throttleCodes[code] || status == http.StatusTooManyRequests {`, `if throttled || status == http.StatusTooManyRequests && false {`,
		"./outbox/targets", "TestEveryServicesThrottlingIsNotSent|TestTheAWSFailureMatrix"},
	{"classify: an AWS transport failure is not sent only when nothing of the request was written", "outbox/targets/targets.go",
		`		return writes.NotSentUnlessWritten(err)`, `		return outbox.NotSent(err)`,
		"./outbox/targets", "TestTheAWSFailureMatrix|TestAResetAfterTheRequestWasWrittenIsNeverNotSent"},
	{"at most once: an AWS call is sent without the SDK's retries", "outbox/targets/executors.go",
		`opts := oneSend(t, func(o *sqs.Options) { o.RetryMaxAttempts = 1 })`, `opts := oneSend(t, func(o *sqs.Options) { o.RetryMaxAttempts = 3 })`,
		"./outbox/targets", "TestTheAWSFailureMatrix|TestEveryAWSExecutorSendsAnAtMostOnceCallOnce"},
	{"classify: only a standard workflow makes a failure that may have been sent safe to retry", "outbox/targets/executors.go",
		`if !express && !outbox.IsPermanent(err) && !outbox.IsNotSent(err) {`, `if !outbox.IsPermanent(err) && !outbox.IsNotSent(err) {`,
		"./outbox/targets", "TestTheAWSFailureMatrix|TestAnExpressStateMachineIsKnownAndTreatedAsOneWithoutIdempotency"},
}

func main() {
	only := flag.String("only", "", "run only the mutations whose guard contains this text")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if os.Getenv("AWS_ENDPOINT_URL") == "" {
		fmt.Fprintln(os.Stderr, "mutate: AWS_ENDPOINT_URL is not set: start the emulator (make up) and export it as make test does")
		os.Exit(2)
	}
	fmt.Println("| condition | file | killed by |")
	fmt.Println("|---|---|---|")
	survived := 0
	for _, m := range mutations {
		if !strings.Contains(m.guard, *only) {
			continue
		}
		killedBy, err := try(ctx, m)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mutate:", err)
			os.Exit(2)
		}
		verdict := "`" + strings.Join(killedBy, "`, `") + "`"
		if len(killedBy) == 0 {
			verdict = "**SURVIVED**: no test fails without it"
			survived++
		}
		fmt.Printf("| %s | `%s` | %s |\n", m.guard, m.file, verdict)
	}
	if survived > 0 {
		os.Exit(1)
	}
}

// try runs m's tests on the unmutated tree, applies m, runs them again and restores the file,
// whatever happens. It returns the tests that killed m: those that passed unmutated and failed
// under the mutation twice (a run and its re-run), so that a test failing under the machine's
// load alone is not counted as a kill.
func try(ctx context.Context, m mutation) (killedBy []string, err error) {
	orig, err := os.ReadFile(m.file)
	if err != nil {
		return nil, err
	}
	if n := bytes.Count(orig, []byte(m.from)); n != 1 {
		return nil, fmt.Errorf("%s: the mutation's text occurs %d times (want once): %q", m.file, n, m.from)
	}
	baseline, err := runTests(ctx, m.pkg, m.run)
	if err != nil {
		return nil, fmt.Errorf("%s: unmutated: %w", m.guard, err)
	}
	if len(baseline) > 0 { // once more: load alone fails some tests
		if baseline, err = runTests(ctx, m.pkg, exact(baseline)); err != nil {
			return nil, fmt.Errorf("%s: unmutated: %w", m.guard, err)
		}
	}
	if err := os.WriteFile(m.file, bytes.Replace(orig, []byte(m.from), []byte(m.to), 1), 0o644); err != nil {
		return nil, err
	}
	defer os.WriteFile(m.file, orig, 0o644)
	first, err := runTests(ctx, m.pkg, m.run)
	if err != nil {
		return nil, fmt.Errorf("%s: mutated: %w", m.guard, err)
	}
	var second []string
	if len(first) > 0 {
		if second, err = runTests(ctx, m.pkg, exact(first)); err != nil {
			return nil, fmt.Errorf("%s: mutated, re-run: %w", m.guard, err)
		}
	}
	return judge(baseline, first, second), nil
}

// judge names the tests that kill a mutation: failed in the mutated run and its re-run, and
// not failing on the unmutated tree (a test that fails without the mutation proves nothing).
func judge(baseline, first, second []string) []string {
	var killed []string
	for _, t := range first {
		if slices.Contains(second, t) && !slices.Contains(baseline, t) {
			killed = append(killed, t)
		}
	}
	return killed
}

// runTests runs pkg's tests matching run and returns the top-level tests that failed. A run
// that did not build, or failed with no test failing, is an error.
func runTests(ctx context.Context, pkg, run string) ([]string, error) {
	tctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(tctx, "go", "test", "-count=1", "-run", run, pkg).CombinedOutput()
	failed := failedTests(out)
	if err != nil && len(failed) == 0 {
		return nil, fmt.Errorf("the code did not build or its tests did not run:\n%s", out)
	}
	return failed, nil
}

// failedTests reads the top-level test names of go test's "--- FAIL: " lines.
func failedTests(out []byte) []string {
	var names []string
	for line := range strings.Lines(string(out)) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "--- FAIL: ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, " ")
		name, _, _ = strings.Cut(name, "/")
		if name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// exact is a -run pattern for exactly these top-level tests.
func exact(names []string) string { return "^(" + strings.Join(names, "|") + ")$" }
