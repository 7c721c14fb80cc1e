package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"hash"
	"strconv"
	"sync"
	"sync/atomic"
)

// Secrets are prepared once, not per delivery. Verify takes the secrets as strings (that is what
// the configuration holds), but decoding a whsec_ secret and keying an HMAC cost allocations that
// the receiver's hot path should not pay for every event. So each scheme keeps a small keyring:
// a copy-on-write map from the secret string to its prepared key, read with one atomic load and
// one map lookup (no lock, no allocation). A prepared key holds the decoded key bytes and a
// sync.Pool of keyed HMAC states, so verifying costs no allocation once warm, and concurrent
// Verify calls never share a hash state.
//
// Why a cache rather than an exported prepared-keys type: the Scheme interface stays the one the
// receiver and the CLI use (plain strings from configuration), and rotating a secret is just
// passing a different list. The ring is bounded (maxKeys): secrets come from configuration, never
// from requests, so it only fills if a caller invents secrets; then it starts over.

// maxKeys bounds a keyring. Rotation needs two or three secrets per scheme instance.
const maxKeys = 32

// keyring prepares and caches the keys of one scheme instance.
type keyring struct {
	scheme string
	decode func(secret string) ([]byte, error)
	sep    string // what follows each signed field before the body: "." for most schemes
	keys   atomic.Pointer[map[string]*key]
	mu     sync.Mutex // serialises writers of keys
}

// key is one prepared secret, or the reason it is unusable.
type key struct {
	err  error // an *InvalidError without the index; see keyring.check
	sep  string
	pool sync.Pool
}

// macState is one keyed HMAC-SHA256 with its scratch space, reused through key.pool.
type macState struct {
	h       hash.Hash
	scratch []byte // the signed prefix (id, timestamp, separators) before the body
	sum     [sha256.Size]byte
}

func newKeyring(scheme string, decode func(string) ([]byte, error)) *keyring {
	r := &keyring{scheme: scheme, decode: decode, sep: "."}
	m := map[string]*key{}
	r.keys.Store(&m)
	return r
}

// get returns the prepared key for secret, preparing it on first use.
func (r *keyring) get(secret string) *key {
	if k, ok := (*r.keys.Load())[secret]; ok {
		return k
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.keys.Load()
	if k, ok := old[secret]; ok {
		return k
	}
	k := r.prepare(secret)
	next := make(map[string]*key, len(old)+1)
	if len(old) < maxKeys {
		for s, v := range old {
			next[s] = v
		}
	}
	next[secret] = k
	r.keys.Store(&next)
	return k
}

func (r *keyring) prepare(secret string) *key {
	if secret == "" {
		return &key{err: &InvalidError{Scheme: r.scheme, Reason: "the secret is empty"}}
	}
	raw, err := r.decode(secret)
	if err != nil {
		return &key{err: &InvalidError{Scheme: r.scheme, Reason: err.Error()}}
	}
	if len(raw) == 0 {
		return &key{err: &InvalidError{Scheme: r.scheme, Reason: "the secret decodes to no bytes"}}
	}
	k := &key{sep: r.sep}
	k.pool.New = func() any { return &macState{h: hmac.New(sha256.New, raw)} }
	return k
}

// check returns an *InvalidError naming the first unusable secret, or nil. Every secret must be
// usable: a typo in the secret being rotated in must fail loudly at once, not silently never
// match once the old secret is retired.
func (r *keyring) check(secrets []string) error {
	if len(secrets) == 0 {
		return &InvalidError{Scheme: r.scheme, Field: "secrets", Reason: "no secret given"}
	}
	for i, s := range secrets {
		if k := r.get(s); k.err != nil {
			e := *k.err.(*InvalidError)
			e.Field = "secrets[" + strconv.Itoa(i) + "]"
			return &e
		}
	}
	return nil
}

// mac sets out to HMAC-SHA256(key, f1 sep f2 sep ... body): each field is followed by the
// ring's separator (a full stop for Standard Webhooks and Stripe, a colon for Slack and Paddle,
// nothing for Twitch).
// The fields are copied into the pooled scratch buffer so that nothing escapes to the heap.
func (k *key) mac(out *[sha256.Size]byte, body []byte, fields ...string) {
	st := k.pool.Get().(*macState)
	st.h.Reset()
	if len(fields) > 0 {
		st.scratch = st.scratch[:0]
		for _, f := range fields {
			st.scratch = append(st.scratch, f...)
			st.scratch = append(st.scratch, k.sep...)
		}
		st.h.Write(st.scratch)
	}
	st.h.Write(body)
	st.h.Sum(st.sum[:0])
	*out = st.sum
	k.pool.Put(st)
}

// signatures holds the candidate signatures parsed from one header, decoded, on the stack.
type signatures struct {
	sig [maxSignatures][sha256.Size]byte
	n   int
}

// maxSignatures bounds the signatures read from one header: a rotation sends two, Stripe's test
// mode adds a v0 (not kept). More is hostile, and is refused as malformed.
const maxSignatures = 8

// matches reports, in constant time over the candidates, whether sum equals any of them.
func (s *signatures) matches(sum *[sha256.Size]byte) bool {
	eq := 0
	for i := 0; i < s.n; i++ {
		eq |= subtle.ConstantTimeCompare(sum[:], s.sig[i][:])
	}
	return eq == 1
}

// anySecret reports whether one of secrets (all already checked) signed fields and body with one
// of the candidate signatures.
func (r *keyring) anySecret(secrets []string, sigs *signatures, body []byte, fields ...string) bool {
	var sum [sha256.Size]byte
	for _, s := range secrets {
		r.get(s).mac(&sum, body, fields...)
		if sigs.matches(&sum) {
			return true
		}
	}
	return false
}

// sign computes the MAC of fields and body with secret, for Sign.
func (r *keyring) sign(secret string, body []byte, fields ...string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	k := r.get(secret)
	if k.err != nil {
		e := *k.err.(*InvalidError)
		e.Field = "secret"
		return sum, &e
	}
	k.mac(&sum, body, fields...)
	return sum, nil
}

// rawSecret is the decoding of schemes whose secret is used as the key bytes as written
// (Stripe, GitHub, Shopify, generic).
func rawSecret(s string) ([]byte, error) { return []byte(s), nil }
