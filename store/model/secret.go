package model

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// kdfSlots bounds concurrent argon2id derivations (two per CPU).
var kdfSlots = make(chan struct{}, 2*runtime.NumCPU())

// argon2id parameters: the OWASP baseline (19 MiB, 2 passes, 1 lane).
const (
	argonMemory  = 19 * 1024
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// HashSecret hashes a secret or password with argon2id and returns the PHC string.
func HashSecret(secret string) string {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	kdfSlots <- struct{}{}
	key := argon2.IDKey([]byte(secret), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	<-kdfSlots
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime,
		argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// The bounds of argon2id parameters a stored hash may have (about 0.3 s and 64 MiB
// per verification): a hash beyond them never verifies and is refused at load.
const (
	MaxArgonMemory  = 64 * 1024 // KiB
	MaxArgonTime    = 4
	MaxArgonThreads = 4
)

// checkHashText refuses text that is written as an argon2id hash ("$argon2id$...") but
// is not one this store verifies, so it is neither stored as a hash that never
// verifies nor hashed as if it were a plain secret. The message never quotes the text.
func checkHashText(text string) error {
	if !strings.HasPrefix(text, "$argon2id$") {
		return nil
	}
	if _, ok := parseArgon(text); ok {
		return nil
	}
	return Errorf(EInvalid, "an argon2id hash must have version 19, m <= %d (KiB), t <= %d, p <= %d, "+
		"a salt of 8 bytes or more and a key of 16 to 64 bytes", MaxArgonMemory, MaxArgonTime, MaxArgonThreads)
}

type argonHash struct {
	memory  uint32
	time    uint32
	threads uint8
	salt    []byte
	key     []byte
}

func parseArgon(s string) (argonHash, bool) {
	var h argonHash
	parts := strings.Split(s, "$")
	// "", "argon2id", "v=19", "m=..,t=..,p=..", salt, key
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != "v=19" {
		return h, false
	}
	for _, kv := range strings.Split(parts[3], ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return h, false
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			return h, false
		}
		switch k {
		case "m":
			h.memory = uint32(n)
		case "t":
			h.time = uint32(n)
		case "p":
			if n > 255 {
				return h, false
			}
			h.threads = uint8(n)
		default:
			return h, false
		}
	}
	// Refuse parameters that would let a stored hash exhaust the machine: a login
	// against it would run that derivation.
	if h.memory == 0 || h.memory > MaxArgonMemory || h.time == 0 || h.time > MaxArgonTime ||
		h.threads == 0 || h.threads > MaxArgonThreads {
		return h, false
	}
	var err error
	b64 := base64.RawStdEncoding
	if h.salt, err = b64.DecodeString(parts[4]); err != nil || len(h.salt) < 8 {
		return h, false
	}
	if h.key, err = b64.DecodeString(parts[5]); err != nil || len(h.key) < 16 || len(h.key) > 64 {
		return h, false
	}
	return h, true
}

func parseSHA256(s string) (salt, digest []byte, ok bool) {
	parts := strings.Split(s, "$")
	if len(parts) != 4 || parts[0] != "" || parts[1] != "sha256" {
		return nil, nil, false
	}
	salt, err := hex.DecodeString(parts[2])
	if err != nil {
		return nil, nil, false
	}
	digest, err = hex.DecodeString(parts[3])
	if err != nil || len(digest) != sha256.Size {
		return nil, nil, false
	}
	return salt, digest, true
}

// IsSecretHash reports whether s is a hash string this store can verify
// (argon2id PHC form or the reference application's $sha256$salt$digest form).
func IsSecretHash(s string) bool {
	if _, ok := parseArgon(s); ok {
		return true
	}
	_, _, ok := parseSHA256(s)
	return ok
}

// VerifySecret reports whether secret matches the stored hash, in constant time.
// An empty or unparsable hash never matches.
func VerifySecret(secret, stored string) bool {
	if h, ok := parseArgon(stored); ok {
		// Each derivation takes its memory parameter (19 MiB here): bound how many run at
		// once, so a burst of wrong passwords queues instead of exhausting memory.
		kdfSlots <- struct{}{}
		key := argon2.IDKey([]byte(secret), h.salt, h.time, h.memory, h.threads, uint32(len(h.key)))
		<-kdfSlots
		return subtle.ConstantTimeCompare(key, h.key) == 1
	}
	if salt, digest, ok := parseSHA256(stored); ok {
		sum := sha256.New()
		sum.Write(salt)
		sum.Write([]byte(secret))
		return subtle.ConstantTimeCompare(sum.Sum(nil), digest) == 1
	}
	return false
}

// IsArgonHash reports whether stored parses as an argon2id hash this store verifies.
func IsArgonHash(stored string) bool {
	_, ok := parseArgon(stored)
	return ok
}

// SaltedHash is the argon2id key of secret under salt (the parameters HashSecret
// uses), base64: two processes that share the salt compute the same text for the same
// secret, so they can compare secrets (settings across nodes) without storing them,
// and the text costs as much to reverse as a stored password hash.
func SaltedHash(secret string, salt []byte) string {
	kdfSlots <- struct{}{}
	key := argon2.IDKey([]byte(secret), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	<-kdfSlots
	return base64.RawStdEncoding.EncodeToString(key)
}

// SecretEncrypted is the dataformat_ext of a secret field whose values are stored
// sealed (AES-256-GCM with a key kept outside the database) instead of hashed: a
// secret the service must use again (a webhook's signing key), which a hash cannot give
// back. Its values are masked and write-only like every secret.
const SecretEncrypted = "encrypted"

// SealedPrefix starts the stored text of an encrypted secret: the version of the
// sealing, then base64(nonce || ciphertext).
const SealedPrefix = "enc:v1:"

// MaxEncryptedSecret bounds the plain text of an encrypted secret, in bytes.
const MaxEncryptedSecret = 1024

// IsEncryptedSecret reports whether f is a secret field whose values are sealed.
func (f *Field) IsEncryptedSecret() bool {
	return f != nil && f.Dataformat == "secret" && f.DataformatExt == SecretEncrypted
}
