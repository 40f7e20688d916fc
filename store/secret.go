package store

import (
	"crypto/sha256"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"dataservice/store/model"
)

// dummyHash is verified against when there is no stored hash, so an unknown key
// costs the same work as a wrong secret.
var dummyHash = sync.OnceValue(func() string { return model.HashSecret("dataservice-dummy") })

// VerifySecretCached is CheckCredential for a credential that is otherwise usable; a
// check not made (ErrCredentialBusy) is false.
func (db *DB) VerifySecretCached(name, secret, stored string) bool {
	ok, _ := db.CheckCredential(name, secret, stored, true)
	return ok
}

// ErrCredentialBusy is CheckCredential's answer when too many checks are waiting: the
// credential was not checked, so it is neither right nor wrong (callers answer "busy,
// retry", and do not count it as a refusal).
var ErrCredentialBusy = errors.New("too many credential checks waiting")

// guessSlots bound the derivations of credentials not verified before (unknown keys,
// wrong secrets, first logins, refused keys): at most half the CPUs, so callers whose
// credentials are in the cache keep the other half during a burst of bogus ones.
var guessSlots = make(chan struct{}, max(1, runtime.NumCPU()/2))

// guessWaiting counts callers waiting for a guess slot. Beyond maxGuessWaiting a
// credential that is not in the cache is not checked (ErrCredentialBusy): the answer
// does not depend on the secret, and a burst cannot pile up goroutines and memory.
var guessWaiting atomic.Int64

const maxGuessWaiting = 64

// CredentialChecksWaiting is how many credential checks wait for a derivation slot
// (tests fill the queue with it; past 64 a check is not made).
func CredentialChecksWaiting() int { return int(guessWaiting.Load()) }

// SetDerivationHook makes f run before each derivation of a credential that is not in
// the verified-secret cache (an unknown or refused key, a wrong secret, a first use),
// with the credential's name ("apikey:NAME", "user:LOGIN") and its derivation slot
// held; nil removes it. Tests hold derivations with it, so a burst of bogus
// credentials occupies every slot for as long as the test needs, not for as long as
// the machine takes to derive.
func (db *DB) SetDerivationHook(f func(name string)) {
	if f == nil {
		db.derivationHook.Store(nil)
		return
	}
	db.derivationHook.Store(&f)
}

// CheckCredential reports whether secret is the credential name's secret (stored is
// its stored hash) and the credential may be used (usable: it exists, is enabled, not
// expired, the client address passes its filter). Successful checks are cached in
// memory, keyed by a hash of (name, secret, stored hash): a change of the stored hash
// misses the cache. Every refusal costs one full argon2id derivation, whatever the
// secret: a correct secret on a disabled, expired, filtered or unknown credential costs
// what a wrong one costs, so timing does not tell a right secret. When more than
// maxGuessWaiting checks already wait for a derivation slot, a credential that is not
// in the cache is not checked: false with ErrCredentialBusy.
func (db *DB) CheckCredential(name, secret, stored string, usable bool) (bool, error) {
	usable = usable && stored != ""
	var k string
	if usable {
		sum := sha256.New()
		for _, p := range []string{name, secret, stored} {
			sum.Write([]byte(strconv.Itoa(len(p))))
			sum.Write([]byte{0})
			sum.Write([]byte(p))
		}
		k = string(sum.Sum(nil))
		if _, ok := db.verify.Load(k); ok {
			return true, nil
		}
	}
	if guessWaiting.Add(1) > maxGuessWaiting {
		guessWaiting.Add(-1)
		return false, ErrCredentialBusy
	}
	guessSlots <- struct{}{}
	guessWaiting.Add(-1)
	defer func() { <-guessSlots }()
	if h := db.derivationHook.Load(); h != nil {
		(*h)(name)
	}
	if !usable {
		model.VerifySecret(secret, dummyHash())
		return false, nil
	}
	if !model.VerifySecret(secret, stored) {
		if !model.IsArgonHash(stored) {
			// A legacy $sha256$ (or unparsable) hash fails in microseconds: pay the
			// argon2id run an unknown key pays, so a refusal's cost does not tell an
			// existing key or login from an unknown one.
			model.VerifySecret(secret, dummyHash())
		}
		return false, nil
	}
	db.verify.Store(k, struct{}{})
	return true, nil
}
