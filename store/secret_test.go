package store_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

func TestHashSecretRoundTrip(t *testing.T) {
	t.Parallel()
	h := model.HashSecret("correct horse")
	if got, want := strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$"), true; got != want {
		t.Fatalf("hash %q: not in the expected argon2id PHC form", h)
	}
	if got, want := model.IsSecretHash(h), true; got != want {
		t.Fatalf("IsSecretHash: got %v, want %v", got, want)
	}
	if got, want := model.VerifySecret("correct horse", h), true; got != want {
		t.Fatalf("verify right secret: got %v, want %v", got, want)
	}
	for _, wrong := range []string{"", "correct horse ", "Correct horse", "correct"} {
		if model.VerifySecret(wrong, h) {
			t.Fatalf("verify %q: got true, want false", wrong)
		}
	}
	if h2 := model.HashSecret("correct horse"); h2 == h {
		t.Fatalf("two hashes of one secret are equal (no salt): %s", h)
	}
	t.Run("changed key bytes do not verify", func(t *testing.T) {
		parts := strings.Split(h, "$")
		key, err := base64.RawStdEncoding.DecodeString(parts[5])
		if err != nil {
			t.Fatal(err)
		}
		key[0] ^= 1
		parts[5] = base64.RawStdEncoding.EncodeToString(key)
		tampered := strings.Join(parts, "$")
		if !model.IsSecretHash(tampered) {
			t.Fatalf("tampered hash %s is not well-formed", tampered)
		}
		if model.VerifySecret("correct horse", tampered) {
			t.Fatalf("tampered hash %s verified", tampered)
		}
	})
	t.Run("empty secret hashes and verifies", func(t *testing.T) {
		h := model.HashSecret("")
		if !model.VerifySecret("", h) || model.VerifySecret("x", h) {
			t.Fatalf("empty secret hash %s does not verify exactly the empty secret", h)
		}
	})
}

// sha256Hash builds the reference application's $sha256$<salt hex>$<digest hex> form.
func sha256Hash(salt []byte, secret string) string {
	sum := sha256.Sum256(append(append([]byte{}, salt...), secret...))
	return "$sha256$" + hex.EncodeToString(salt) + "$" + hex.EncodeToString(sum[:])
}

func TestVerifySHA256Form(t *testing.T) {
	t.Parallel()
	salt := []byte("0123456789abcdef")
	h := sha256Hash(salt, "legacy-secret")
	if got, want := model.IsSecretHash(h), true; got != want {
		t.Fatalf("IsSecretHash(%s): got %v, want %v", h, got, want)
	}
	if got, want := model.VerifySecret("legacy-secret", h), true; got != want {
		t.Fatalf("verify right secret: got %v, want %v", got, want)
	}
	if got, want := model.VerifySecret("legacy-secreT", h), false; got != want {
		t.Fatalf("verify wrong secret: got %v, want %v", got, want)
	}
	t.Run("digest is over the salt then the secret", func(t *testing.T) {
		sum := sha256.Sum256([]byte("legacy-secret" + string(salt)))
		swapped := "$sha256$" + hex.EncodeToString(salt) + "$" + hex.EncodeToString(sum[:])
		if model.VerifySecret("legacy-secret", swapped) {
			t.Fatalf("verify with secret-then-salt digest: got true, want false")
		}
	})
	t.Run("uppercase hex verifies", func(t *testing.T) {
		upper := "$sha256$" + strings.ToUpper(h[len("$sha256$"):])
		if got, want := model.VerifySecret("legacy-secret", upper), true; got != want {
			t.Fatalf("verify uppercase hex: got %v, want %v", got, want)
		}
	})
}

func TestMalformedHashesNeverVerify(t *testing.T) {
	t.Parallel()
	good := model.HashSecret("s")
	parts := strings.Split(good, "$") // "", argon2id, v=19, params, salt, key
	argon := func(v, params, salt, key string) string {
		return strings.Join([]string{"", "argon2id", v, params, salt, key}, "$")
	}
	salt := []byte("saltsalt")
	sha := sha256Hash(salt, "s")
	tests := []struct{ name, hash string }{
		{"empty", ""},
		{"plain text equal to the secret", "s"},
		{"truncated argon2id", good[:len(good)-10]},
		{"argon2 version 18", argon("v=18", parts[3], parts[4], parts[5])},
		{"argon2i", strings.Replace(good, "$argon2id$", "$argon2i$", 1)},
		{"zero memory", argon("v=19", "m=0,t=2,p=1", parts[4], parts[5])},
		{"memory above 1 GiB", argon("v=19", "m=2097152,t=2,p=1", parts[4], parts[5])},
		{"too many passes", argon("v=19", "m=19456,t=17,p=1", parts[4], parts[5])},
		{"memory above 64 MiB", argon("v=19", "m=65537,t=2,p=1", parts[4], parts[5])},
		{"more than 4 passes", argon("v=19", "m=19456,t=5,p=1", parts[4], parts[5])},
		{"more than 4 lanes", argon("v=19", "m=19456,t=2,p=5", parts[4], parts[5])},
		{"unknown parameter", argon("v=19", "m=19456,t=2,x=1", parts[4], parts[5])},
		{"short salt", argon("v=19", parts[3], "c2FsdA", parts[5])},
		{"salt not base64", argon("v=19", parts[3], "!!!!!!!!!!!!", parts[5])},
		{"short key", argon("v=19", parts[3], parts[4], "c2hvcnQ")},
		{"extra field", good + "$x"},
		{"sha256 without digest", "$sha256$" + hex.EncodeToString(salt)},
		{"sha256 with short digest", sha[:len(sha)-2]},
		{"sha256 with non-hex salt", "$sha256$zz" + sha[len("$sha256$")+2:]},
		{"sha256 with an extra field", sha + "$00"},
		{"sha256 without leading $", sha[1:]},
		{"unknown scheme", "$md5$" + sha[len("$sha256$"):]},
	}
	for _, tt := range tests {
		t.Run(tt.name+" does not verify", func(t *testing.T) {
			if model.IsSecretHash(tt.hash) {
				t.Fatalf("IsSecretHash(%q): got true, want false", tt.hash)
			}
			if model.VerifySecret("s", tt.hash) {
				t.Fatalf("VerifySecret(s, %q): got true, want false", tt.hash)
			}
		})
	}
}

// allocated returns the bytes allocated in this process while fn runs.
var allocated = testkit.Allocated

const argonBytes = 19 << 20

// Serial: it counts the process's allocations, which parallel tests would add to.
func TestVerifySecretCached(t *testing.T) {
	db := newTestDB(t)
	h1 := model.HashSecret("key-secret")
	var ok bool
	if n := allocated(func() { ok = db.VerifySecretCached("k1", "key-secret", h1) }); n < argonBytes || !ok {
		t.Fatalf("first verification: ok=%v after %d bytes, want true after a full argon2id run", ok, n)
	}
	t.Run("second verification is a cache hit", func(t *testing.T) {
		if n := allocated(func() { ok = db.VerifySecretCached("k1", "key-secret", h1) }); n >= 1<<20 || !ok {
			t.Fatalf("second verification: ok=%v after %d bytes, want true from the cache", ok, n)
		}
	})
	t.Run("another name misses the cache", func(t *testing.T) {
		if n := allocated(func() { ok = db.VerifySecretCached("k2", "key-secret", h1) }); n < argonBytes || !ok {
			t.Fatalf("verification under another name: ok=%v after %d bytes, want a full run", ok, n)
		}
	})
	t.Run("wrong secret fails and is not cached", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			if n := allocated(func() { ok = db.VerifySecretCached("k1", "guess", h1) }); n < argonBytes || ok {
				t.Fatalf("wrong secret, try %d: ok=%v after %d bytes, want false after a full run", i+1, ok, n)
			}
		}
	})
	t.Run("changed stored hash misses the cache", func(t *testing.T) {
		h2 := model.HashSecret("rotated")
		if db.VerifySecretCached("k1", "key-secret", h2) {
			t.Fatalf("old secret against the new hash: got true, want false")
		}
		if !db.VerifySecretCached("k1", "rotated", h2) {
			t.Fatalf("new secret against the new hash: got false, want true")
		}
		h3 := model.HashSecret("key-secret")
		if n := allocated(func() { ok = db.VerifySecretCached("k1", "key-secret", h3) }); n < argonBytes || !ok {
			t.Fatalf("same secret, new hash: ok=%v after %d bytes, want true after a full run", ok, n)
		}
	})
	t.Run("empty stored hash never verifies", func(t *testing.T) {
		if db.VerifySecretCached("k1", "", "") || db.VerifySecretCached("k1", "key-secret", "") {
			t.Fatal("empty stored hash verified")
		}
	})
	t.Run("sha256 form is cached too", func(t *testing.T) {
		h := sha256Hash([]byte("pepper"), "old")
		if !db.VerifySecretCached("k3", "old", h) || !db.VerifySecretCached("k3", "old", h) {
			t.Fatal("sha256 hash did not verify")
		}
		if db.VerifySecretCached("k3", "new", h) {
			t.Fatal("wrong secret verified against a cached sha256 hash")
		}
	})
}

func TestPasswordsAndKeySecretsAreHashedOnLoad(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	legacy := sha256Hash([]byte("abc"), "old-secret")
	entries := parse(t, `
- {classname: _user, login: jdoe, password: "pa55 word"}
- {classname: _apikey, keyname: k1}
`)
	entries[1].Set("secret", legacy)
	res, err := db.Load(t.Context(), entries, store.LoadOptions{})
	if err != nil || res.Errors != 0 {
		t.Fatalf("load: %v %s", err, messages(res))
	}
	pw, _ := instance(t, db, "_user", "jdoe").Data["password"].(string)
	if !strings.HasPrefix(pw, "$argon2id$") || !model.VerifySecret("pa55 word", pw) {
		t.Fatalf("stored password %q is not an argon2id hash of the given password", pw)
	}
	if got, want := instance(t, db, "_apikey", "k1").Data["secret"], any(legacy); got != want {
		t.Fatalf("stored key secret: got %v, want the given hash %v", got, want)
	}
	raw := queryString(t, db, "SELECT data FROM instances WHERE classname = '_user' AND keyname = 'jdoe'")
	if strings.Contains(raw, "pa55") {
		t.Fatalf("instances row holds the plain password: %s", raw)
	}
}

// TestHeavyHashRefusedAtLoad: a stored hash with KDF parameters beyond the service's
// bounds is refused at load with a clear error that does not quote it; nothing is
// written, and it is not hashed as if it were a plain secret.
func TestHeavyHashRefusedAtLoad(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	parts := strings.Split(model.HashSecret("x"), "$")
	heavy := strings.Join([]string{"", "argon2id", "v=19", "m=1048576,t=16,p=1", parts[4], parts[5]}, "$")
	entries := parse(t, "- {classname: _user, login: heavy}\n- {classname: _apikey, keyname: heavykey}\n")
	entries[0].Set("password", heavy)
	entries[1].Set("secret", heavy)
	res, err := db.Load(t.Context(), entries, store.LoadOptions{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if got, want := counts(res), "created=0 updated=0 unchanged=0 deleted=0 enabled=0 disabled=0 skipped=0 errors=2"; got != want {
		t.Fatalf("counts: got %s, want %s", got, want)
	}
	msgs := messages(res)
	if !strings.Contains(msgs, "an argon2id hash must have version 19, m <= 65536 (KiB), t <= 4") || strings.Contains(msgs, parts[5]) {
		t.Fatalf("messages do not name the bound, or quote the hash: %s", msgs)
	}
	absent(t, db, "_user", "heavy")
	absent(t, db, "_apikey", "heavykey")
}

// TestCheckCredentialRefusalCostsTheSame: a correct secret on a credential that may not
// be used (disabled, expired, filtered) costs a full derivation, like a wrong secret,
// even right after the same secret was verified and cached.
//
// Serial: it counts the process's allocations, which parallel tests would add to.
func TestCheckCredentialRefusalCostsTheSame(t *testing.T) {
	db := newTestDB(t)
	h := model.HashSecret("right")
	if ok, err := db.CheckCredential("k", "right", h, true); !ok || err != nil {
		t.Fatal("usable credential with the right secret refused")
	}
	var ok bool
	for _, tt := range []struct {
		name, secret string
	}{{"right secret", "right"}, {"wrong secret", "wrong"}} {
		if n := allocated(func() { ok, _ = db.CheckCredential("k", tt.secret, h, false) }); ok || n < argonBytes {
			t.Fatalf("%s on an unusable credential: ok=%v after %d bytes, want false after a full run", tt.name, ok, n)
		}
	}
	// A legacy hash refused for being unusable pays the argon2id run too.
	legacy := sha256Hash([]byte("salt"), "right")
	if n := allocated(func() { ok, _ = db.CheckCredential("k2", "right", legacy, false) }); ok || n < argonBytes {
		t.Fatalf("right secret on an unusable legacy credential: ok=%v after %d bytes", ok, n)
	}
}
