package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"hash"
	"maps"
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
	hash   func() hash.Hash
	size   int // the digest's length: sha256.Size, or sha1.Size for the SHA-1 schemes
	keys   cache[*key]
}

// cache is a bounded copy-on-write map from configured strings to what they prepare into,
// read with one atomic load and one map lookup (no lock, no allocation).
type cache[V any] struct {
	m  atomic.Pointer[map[string]V]
	mu sync.Mutex // serialises writers of m
}

// get returns what s prepared into, preparing it on first use.
func (c *cache[V]) get(s string, prepare func(string) V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[s]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[string]V
	if m := c.m.Load(); m != nil {
		old = *m
	}
	if v, ok := old[s]; ok {
		return v
	}
	v := prepare(s)
	next := make(map[string]V, len(old)+1)
	if len(old) < maxKeys {
		maps.Copy(next, old)
	}
	next[s] = v
	c.m.Store(&next)
	return v
}

// key is one prepared secret, or the reason it is unusable.
type key struct {
	err  error // an *InvalidError without the index; see keyring.check
	sep  string
	size int
	pool sync.Pool
}

// macState is one keyed HMAC with its scratch space, reused through key.pool.
type macState struct {
	h       hash.Hash
	scratch []byte // the signed prefix (id, timestamp, separators) before the body
	sum     [sha256.Size]byte
}

func newKeyring(scheme string, decode func(string) ([]byte, error)) *keyring {
	return &keyring{scheme: scheme, decode: decode, sep: ".", hash: sha256.New, size: sha256.Size}
}

// get returns the prepared key for secret, preparing it on first use.
func (r *keyring) get(secret string) *key { return r.keys.get(secret, r.prepare) }

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
	k := &key{sep: r.sep, size: r.size}
	k.pool.New = func() any { return &macState{h: hmac.New(r.hash, raw)} }
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

// mac sets out to HMAC(key, f1 sep f2 sep ... body), its first size bytes (the rest zero): each field is followed by the
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
	*out = st.sum // a SHA-1 sum leaves the tail zero
	k.pool.Put(st)
}

// signatures holds the candidate signatures parsed from one header, decoded, on the stack; a
// SHA-1 digest fills the first sha1.Size bytes of its slot.
type signatures struct {
	sig [maxSignatures][sha256.Size]byte
	n   int
}

// maxSignatures bounds the signatures read from one header: a rotation sends two, Stripe's test
// mode adds a v0 (not kept). More is hostile, and is refused as malformed.
const maxSignatures = 8

// matches reports, in constant time over the candidates, whether the first size bytes of sum
// equal any of them.
func (s *signatures) matches(sum *[sha256.Size]byte, size int) bool {
	eq := 0
	for i := 0; i < s.n; i++ {
		eq |= subtle.ConstantTimeCompare(sum[:size], s.sig[i][:size])
	}
	return eq == 1
}

// anySecret reports whether one of secrets (all already checked) signed fields and body with one
// of the candidate signatures.
func (r *keyring) anySecret(secrets []string, sigs *signatures, body []byte, fields ...string) bool {
	var sum [sha256.Size]byte
	for _, s := range secrets {
		r.get(s).mac(&sum, body, fields...)
		if sigs.matches(&sum, r.size) {
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
