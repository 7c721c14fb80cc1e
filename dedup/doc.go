// Package dedup turns at-least-once webhook delivery into exactly-once processing.
//
// A Store claims the provider's event id with a conditional DynamoDB write that also carries
// the event's local effect records and its outbox of external effects (intents), so a crash can
// never separate the claim from what it stands for. Exactly one delivery of an event id is
// Accepted; every other delivery of the same id, concurrent or weeks later, is a Duplicate
// until the claim expires.
//
// One round trip per delivery: a plan without effect records is a single conditional PutItem
// of the claim (which holds the outbox); a plan with effect records is one TransactWriteItems
// of [claim, effects...]. The claim item is the outbox: its stream INSERT carries every intent,
// so the outbox worker never depends on sibling records of the same transaction.
//
// The pieces, each in one place:
//   - the claim condition and the write it guards: request.go (claimCondition), commit.go;
//   - how a cancelled transaction is read, reason by reason: cancel.go;
//   - how long claims live and why: retention.go;
//   - the DynamoDB limits checked before any call: limits.go.
package dedup
